"""Fan a block's committed Loro updates out to every open editor.

Services schedule :func:`block_broadcast` with ``transaction.on_commit`` after
any change to a block; the sync consumer of each room joins
:func:`block_group` and relays ``block.updates`` messages to its peers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from collections.abc import Awaitable

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "block.updates"


def block_group(block_id: uuid.UUID | str) -> str:
    """The channel-layer group of a block's room (ASCII, under 100 chars)."""
    return f"block.{uuid.UUID(str(block_id)).hex}"


def block_broadcast(
    *, block_id: uuid.UUID | str, updates: list[bytes], origin: str | None
) -> None:
    """Send committed updates to the block's group.

    ``origin`` names the sender (e.g. a consumer's channel name) so it can
    skip its own echo; None for changes made outside any room.

    Cheap in every process: under an ASGI server (a sync view or a
    consumer's database call) the send runs on the server's own loop; an
    in-memory layer nobody in this process listens on is skipped (it cannot
    reach another process); anywhere else (a worker, a script) one
    long-lived loop thread sends, instead of a new thread and loop per call.
    """
    layer = get_channel_layer()
    if layer is None or not updates:
        return
    group = block_group(block_id)
    if isinstance(layer, InMemoryChannelLayer) and not layer.groups.get(group):
        return
    send = layer.group_send(
        group,
        {
            "type": MESSAGE_TYPE,
            "block_id": str(block_id),
            "updates": list(updates),
            "origin": origin,
        },
    )
    if _server_loop() is not None or isinstance(layer, InMemoryChannelLayer):
        async_to_sync(_awaited)(send)
    else:
        _sender_loop().run(send)


async def _awaited(awaitable: Awaitable[None]) -> None:
    await awaitable


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop of the ASGI server that called into this thread."""
    if getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) != os.getpid():
        return None
    return getattr(SyncToAsync.threadlocal, "main_event_loop", None)


class _SenderLoop:
    """One daemon thread running an event loop, for sends from sync code."""

    TIMEOUT = 10.0

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="block-broadcast", daemon=True
        )
        self.thread.start()

    def run(self, awaitable: Awaitable[None]) -> None:
        future = asyncio.run_coroutine_threadsafe(_awaited(awaitable), self.loop)
        future.result(timeout=self.TIMEOUT)


_sender: tuple[int, _SenderLoop] | None = None
_sender_lock = threading.Lock()


def _sender_loop() -> _SenderLoop:
    """This process's sender (a forked child starts its own)."""
    global _sender
    with _sender_lock:
        if _sender is None or _sender[0] != os.getpid():
            _sender = (os.getpid(), _SenderLoop())
        return _sender[1]
