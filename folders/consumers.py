"""Live indexing progress of one folder, for its dashboard page.

Thin: take the actor the websocket middleware (``kernel.auth``) put in the
scope - a human, by session - ask the selector whether the user may read
the folder, then relay the ``folder.progress`` messages the services
publish to the folder's group after their commits.
"""

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from folders.files.selectors import folder_get_for_actor
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import NotFound
from pattern_site.kernel.realtime import (
    CLOSE_NOT_FOUND,
    CLOSE_UNAUTHENTICATED,
    group_for_folder,
)


class FolderProgressConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None

    async def connect(self) -> None:
        actor: Actor | None = self.scope.get("actor")
        if actor is None or actor.user is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        folder_id = int(self.scope["url_route"]["kwargs"]["folder_id"])
        try:
            await database_sync_to_async(folder_get_for_actor)(
                actor=actor, folder_id=folder_id
            )
        except NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = group_for_folder(folder_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await self.send_json({"type": "error", "detail": "this socket only listens"})

    async def folder_progress(self, message: dict[str, Any]) -> None:
        await self.send_json(message)
