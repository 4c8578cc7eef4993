"""Channel-layer sends from synchronous code (services, tasks, scripts).

:func:`layer_send` runs one send and waits for it.  Called from a thread of
the ASGI server (a request or a consumer's database call), it runs on the
server's own event loop, where the layer's connections live; with the
in-memory layer too, whose queues belong to that loop.  Anywhere else (a
Celery worker, a script) it runs on one long-lived loop thread per process
instead of a new thread and event loop - and new Redis connections - per
call.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer


def layer_send(layer: BaseChannelLayer, send: Awaitable[None]) -> None:
    """Await ``send`` (a call on ``layer``) from sync code; see module doc."""
    if _server_loop() is not None or isinstance(layer, InMemoryChannelLayer):
        async_to_sync(_awaited)(send)
    else:
        _sender_loop().run(send)


def group_send_from_sync(group: str, message: dict[str, Any]) -> None:
    """Send a channel-layer group message from synchronous code; skipped
    when the layer reaches no other process and nothing here joined."""
    layer = get_channel_layer()
    if layer is None:
        return
    if isinstance(layer, InMemoryChannelLayer) and not layer.groups.get(group):
        return
    layer_send(layer, layer.group_send(group, message))


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
            target=self.loop.run_forever, name="layer-send", daemon=True
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
