"""Live indexing progress of one folder, for its dashboard page.

Thin: take the actor the websocket middleware (``kernel.auth``) put in the
scope - a human, by session - ask the selector whether the user may read
the folder, then relay the ``folder.progress`` messages the services
publish to the folder's group after their commits.
"""

from typing import Any

from folders.files.selectors import folder_get_for_actor
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.realtime import group_for_folder
from pattern_site.kernel.rooms import PageRoomConsumer


class FolderProgressConsumer(PageRoomConsumer):
    """A folder page's indexing progress."""

    url_kwarg = "folder_id"

    def room_check(self, actor: Actor, object_id: int) -> None:
        folder_get_for_actor(actor=actor, folder_id=object_id)

    def room_group(self, object_id: int) -> str:
        return group_for_folder(object_id)

    async def folder_progress(self, message: dict[str, Any]) -> None:
        await self.send_json(message)
