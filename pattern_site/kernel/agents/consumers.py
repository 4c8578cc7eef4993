"""Live presence of the humans looking at a constellation's dashboard.

Thin: authenticate (session), ask the selector whether the user may see the
constellation, then relay.  Group ``constellation.<id>`` also carries any
``constellation.event`` another process sends (e.g. activity), so a page
updates without polling.
"""

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import constellation_get_for_actor
from pattern_site.kernel.errors import NotFound

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


def constellation_group(constellation_id: int) -> str:
    return f"constellation.{constellation_id}"


class PresenceConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        constellation_id = int(self.scope["url_route"]["kwargs"]["constellation_id"])
        try:
            await database_sync_to_async(constellation_get_for_actor)(
                actor=Actor.for_user(user), constellation_id=constellation_id
            )
        except NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = constellation_group(constellation_id)
        self.username = user.get_username()
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
