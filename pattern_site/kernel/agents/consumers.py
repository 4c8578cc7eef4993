"""Live presence of the humans looking at a constellation's dashboard.

Thin: take the actor the websocket middleware (``kernel.auth``) put in the
scope - a human, by session - ask the selector whether the user may see the
constellation, then relay.  The constellation's group (``kernel.realtime``)
also carries any ``constellation.event`` another process sends (e.g.
activity), so a page updates without polling.
"""

from typing import Any

from pattern_site.kernel.agents.selectors import constellation_get_for_actor
from pattern_site.kernel.realtime import group_for_constellation
from pattern_site.kernel.rooms import PageRoomConsumer


class PresenceConsumer(PageRoomConsumer):
    """Who is looking at a constellation's pages right now."""

    url_kwarg = "constellation_id"
    check = staticmethod(
        lambda actor, pk: constellation_get_for_actor(actor=actor, constellation_id=pk)
    )
    group_of = staticmethod(group_for_constellation)

    async def room_joined(self) -> None:
        await self._announce("presence.joined")

    async def room_leaving(self) -> None:
        await self._announce("presence.left")

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
                "event": {"type": kind, "user": self.actor.display_name},
            },
        )

    async def constellation_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])
