"""Live presence of the humans looking at a constellation's dashboard.

Thin: take the actor the websocket middleware (``kernel.auth``) put in the
scope - a human, by session - ask the selector whether the user may see the
constellation, then relay.  The constellation's group (``kernel.realtime``)
also carries any ``constellation.event`` another process sends (e.g.
activity), so a page updates without polling.
"""

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import constellation_get_for_actor
from pattern_site.kernel.errors import NotFound
from pattern_site.kernel.realtime import (
    CLOSE_NOT_FOUND,
    CLOSE_UNAUTHENTICATED,
    group_for_constellation,
)


class PresenceConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None

    async def connect(self) -> None:
        actor: Actor | None = self.scope.get("actor")
        if actor is None or actor.user is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        constellation_id = int(self.scope["url_route"]["kwargs"]["constellation_id"])
        try:
            await database_sync_to_async(constellation_get_for_actor)(
                actor=actor, constellation_id=constellation_id
            )
        except NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = group_for_constellation(constellation_id)
        self.username = actor.display_name
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self._announce("presence.joined")

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self._announce("presence.left")
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "presence.ping":
            await self._announce("presence.here")
        else:
            await self.send_json({"type": "error", "detail": "unknown message type"})

    async def _announce(self, kind: str) -> None:
        assert self.group is not None
        await self.channel_layer.group_send(
            self.group,
            {
                "type": "constellation.event",
                "event": {"type": kind, "user": self.username},
            },
        )

    async def constellation_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])
