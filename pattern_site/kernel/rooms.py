"""A page's live room: the one way a dashboard page's socket joins the
channel-layer group of the object it shows.

The websocket authentication middleware put the actor in the scope; a room
admits a person (a session, never a token) who may read the object named in
the URL, and closes with the realtime close codes otherwise.  A consumer says
which URL argument names the object, how to check the person may read it
(raising ``NotFound``), and which group it listens to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import NotFound
from pattern_site.kernel.realtime import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED


class PageRoomConsumer(AsyncJsonWebsocketConsumer):
    # What a room says of itself: the URL route's argument naming the object
    # the page shows, the selector that raises ``NotFound`` unless the actor
    # may read it (``check(actor, object_id)``, sync), and the group it
    # listens to (``group_of(object_id)``).
    url_kwarg: ClassVar[str]
    check: ClassVar[Callable[[Actor, int], object]]
    group_of: ClassVar[Callable[[int], str]]
    group: str | None = None
    actor: Actor

    async def room_joined(self) -> None:
        """What the consumer does once in its group (nothing by default)."""

    async def connect(self) -> None:
        actor: Actor | None = self.scope.get("actor")
        if actor is None or actor.user is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        object_id = int(self.scope["url_route"]["kwargs"][self.url_kwarg])
        try:
            await database_sync_to_async(type(self).check)(actor, object_id)
        except NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.actor = actor
        self.group = type(self).group_of(object_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.room_joined()

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.room_leaving()
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def room_leaving(self) -> None:
        """What the consumer does before it leaves its group."""

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await self.send_json({"type": "error", "detail": "this socket only listens"})
