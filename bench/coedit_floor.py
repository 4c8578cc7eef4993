"""The floor of co-editing on this stack: Python, Daphne and Channels alone.

An ASGI app for ``bench/coedit.py`` that speaks just enough of the Loro
Syncing Protocol (``memory.blocks.sync.protocol``) for the real
loro-websocket clients: a join is answered at once (write access, an empty
document's version), an update frame is acked at once and its bytes relayed
as they came to the other sockets of the room, kept in memory, its binary
frames written as ours are (``pattern_site.kernel.daphne_server``).  No database,
no document, no checks: what is left of a fan-out's latency is the cost of
the server stack itself, which no work taken off our frame path can go
below.

Served the way ours is, one Daphne process (``pattern_site.processes``):

    python -m daphne -b 127.0.0.1 -p PORT bench.coedit_floor:application
"""

from __future__ import annotations

from typing import Any

import django
from django.conf import settings

if not settings.configured:
    # Channels reads its (absent) channel layers from Django's settings.
    settings.configure(CHANNEL_LAYERS={})
    django.setup()

import loro
from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer

from memory.blocks.sync import protocol as sp
from pattern_site.kernel.daphne_server import (
    frame_send,
    frame_writer,
    with_frame_writers,
)

_EMPTY_VERSION = loro.LoroDoc().oplog_vv.encode()
# The sockets of each room, by (crdt, room id).
_rooms: dict[tuple[str, str], set[FloorConsumer]] = {}


class FloorConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.joined: set[tuple[str, str]] = set()
        self.frame_writer = frame_writer(self.scope)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for key in self.joined:
            _rooms.get(key, set()).discard(self)

    async def dispatch(self, message: dict[str, Any]) -> None:
        # As ours does: no per-message database clean-up (a thread hop).
        await getattr(self, get_handler_name(message))(message)

    async def send_frame(self, frame: bytes) -> None:
        # As ours does: straight to the connection where Daphne allows it.
        await frame_send(self.frame_writer, self.base_send, frame)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        if text_data is not None:
            if text_data == sp.PING:
                await self.send(text_data=sp.PONG)
            return
        frame = bytes_data or b""
        message = sp.decode(frame)
        match message:
            case sp.JoinRequest():
                key = (message.crdt, message.room_id)
                _rooms.setdefault(key, set()).add(self)
                self.joined.add(key)
                await self.send_frame(
                    sp.encode(
                        sp.JoinResponseOk(
                            message.crdt,
                            message.room_id,
                            sp.Permission.WRITE,
                            _EMPTY_VERSION,
                        )
                    )
                )
            case sp.DocUpdate():
                key = (message.crdt, message.room_id)
                await self.send_frame(
                    sp.encode(
                        sp.Ack(
                            message.crdt,
                            message.room_id,
                            message.batch_id,
                            sp.UpdateStatus.OK,
                        )
                    )
                )
                for peer in list(_rooms.get(key, ())):
                    if peer is not self:
                        await peer.send_frame(frame)


application = with_frame_writers(FloorConsumer.as_asgi())
