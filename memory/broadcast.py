"""Fan a block's committed Loro updates out to every open editor.

Services schedule :func:`block_broadcast` with ``transaction.on_commit`` after
any change to a block.  Delivery has two legs:

- In this process, the sync consumers of a block's room are peers of the room
  hub of their event loop (:func:`block_room_join`).  A broadcast is handed
  to each hub once; the hub encodes the frames once and sends them to every
  peer's socket itself - no channel-layer message, task wake-up or dispatch
  per peer.
- Other processes get one ``block.updates`` message on :func:`block_group`.
  When the channel layer reaches other processes (Redis), a hub joins the
  group of each block it has peers for, with one channel per hub, and relays
  what arrives to its peers; it skips its own process's messages, which the
  first leg delivered.  An in-memory layer reaches no other process: the
  message is sent only if something else joined the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer

from memory import sync_protocol as sp

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "block.updates"
# How long a hub waits before listening again after its channel layer failed.
RECEIVE_RETRY_SECONDS = 1.0


def block_group(block_id: uuid.UUID | str) -> str:
    """The channel-layer group of a block's room (ASCII, under 100 chars)."""
    return f"block.{_key(block_id)}"


@dataclass(eq=False)
class RoomPeer:
    """One socket in a block's room.

    ``room_id`` is the room as its client named it (frames carry it);
    ``origin`` marks the updates the socket sent itself, which it is not sent
    back; ``send`` writes one frame.  Frames are held until :meth:`open`, so
    nothing reaches the client before the join's answer and backfill.
    """

    room_id: str
    origin: str
    send: Callable[[bytes], Awaitable[None]]
    held: list[bytes] | None = field(default_factory=list)

    async def open(self) -> None:
        """Send what was held since the join, then send as updates come."""
        while self.held:
            frames, self.held = self.held, []
            for frame in frames:
                await self.send(frame)
        self.held = None


async def block_room_join(*, block_id: uuid.UUID | str, peer: RoomPeer) -> None:
    """Add ``peer`` to the block's room in this process; from now on every
    committed change of the block reaches it (held until ``peer.open()``)."""
    await _RoomHub.current().join(_key(block_id), peer)


async def block_room_leave(*, block_id: uuid.UUID | str, peer: RoomPeer) -> None:
    await _RoomHub.current().leave(_key(block_id), peer)


def block_broadcast(
    *, block_id: uuid.UUID | str, updates: list[bytes], origin: str | None
) -> None:
    """Send committed updates to every peer of the block, in any process.

    ``origin`` names the sender (e.g. a consumer's channel name) so it can
    skip its own echo; None for changes made outside any room.

    Cheap in every process: local peers are reached through their hubs'
    loops without waiting; the channel-layer send runs on the ASGI server's
    own loop when called from a server thread, and anywhere else (a worker,
    a script) on one long-lived loop thread, instead of a new thread and loop
    per call.
    """
    if not updates:
        return
    updates = list(updates)
    key = _key(block_id)
    for hub in _RoomHub.serving(key):
        hub.deliver_threadsafe(key, updates, origin)
    group_send_from_sync(
        block_group(block_id),
        {
            "type": MESSAGE_TYPE,
            "block_id": str(block_id),
            "updates": updates,
            "origin": origin,
            "process": _process_mark(),
        },
    )


def group_send_from_sync(group: str, message: dict[str, Any]) -> None:
    """Send a channel-layer group message from synchronous code, cheaply.

    Skipped when the layer reaches no other process and nothing in this one
    joined the group; run on the ASGI server's loop from a server thread,
    else on one long-lived loop thread (not a new thread and loop per call).
    """
    layer = get_channel_layer()
    if layer is None:
        return
    if not _reaches_other_processes(layer) and not layer.groups.get(group):
        return
    send = layer.group_send(group, message)
    if _server_loop() is not None or isinstance(layer, InMemoryChannelLayer):
        async_to_sync(_awaited)(send)
    else:
        _sender_loop().run(send)


def _key(block_id: uuid.UUID | str) -> str:
    return uuid.UUID(str(block_id)).hex


def _reaches_other_processes(layer: BaseChannelLayer | None) -> bool:
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


_process: tuple[int, str] | None = None


def _process_mark() -> str:
    """This process's id on channel-layer messages (a forked child gets its
    own)."""
    global _process
    if _process is None or _process[0] != os.getpid():
        _process = (os.getpid(), uuid.uuid4().hex)
    return _process[1]


class _RoomHub:
    """The peers of every block room on one event loop (the ASGI server's).

    Peers join and leave on the loop; deliveries come from any thread.
    """

    _hubs: dict[asyncio.AbstractEventLoop, _RoomHub] = {}
    _lock = threading.Lock()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.rooms: dict[str, set[RoomPeer]] = {}
        layer = get_channel_layer()
        self.layer = layer if _reaches_other_processes(layer) else None
        self.channel: str | None = None
        self.listening: set[str] = set()  # blocks whose group self.channel is in
        self.membership = asyncio.Lock()
        self.receiver: asyncio.Task[None] | None = None
        self.deliveries: set[asyncio.Task[None]] = set()

    @classmethod
    def current(cls) -> _RoomHub:
        loop = asyncio.get_running_loop()
        with cls._lock:
            for closed in [other for other in cls._hubs if other.is_closed()]:
                del cls._hubs[closed]  # a finished loop's (tests run one each)
            hub = cls._hubs.get(loop)
            if hub is None:
                hub = cls._hubs[loop] = cls(loop)
            return hub

    @classmethod
    def serving(cls, key: str) -> list[_RoomHub]:
        with cls._lock:
            hubs = list(cls._hubs.values())
        return [hub for hub in hubs if key in hub.rooms and not hub.loop.is_closed()]

    # --- peers (on the loop) ------------------------------------------------

    async def join(self, key: str, peer: RoomPeer) -> None:
        self.rooms.setdefault(key, set()).add(peer)
        await self._listen(key)

    async def leave(self, key: str, peer: RoomPeer) -> None:
        peers = self.rooms.get(key)
        if peers is not None:
            peers.discard(peer)
            if not peers:
                del self.rooms[key]
        await self._listen(key)

    async def deliver(self, key: str, updates: list[bytes], origin: Any) -> None:
        """Send ``updates`` to the block's peers but ``origin``, each distinct
        room id encoded once."""
        frames: dict[str, list[bytes]] = {}
        batch_id = sp.new_batch_id()
        for peer in list(self.rooms.get(key, ())):
            if peer.origin == origin:
                continue
            if peer.room_id not in frames:
                frames[peer.room_id] = sp.doc_update_frames(
                    sp.CrdtType.LORO, peer.room_id, updates, batch_id
                )
            if peer.held is not None:
                peer.held.extend(frames[peer.room_id])
                continue
            try:
                for frame in frames[peer.room_id]:
                    await peer.send(frame)
            except Exception:
                logger.exception("relaying an update of block %s failed", key)

    # --- from any thread ----------------------------------------------------

    def deliver_threadsafe(self, key: str, updates: list[bytes], origin: Any) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self._start_delivery(key, updates, origin)
            return
        with contextlib.suppress(RuntimeError):  # the loop closed in between
            self.loop.call_soon_threadsafe(self._start_delivery, key, updates, origin)

    def _start_delivery(self, key: str, updates: list[bytes], origin: Any) -> None:
        task = self.loop.create_task(self.deliver(key, updates, origin))
        self.deliveries.add(task)  # the loop keeps only weak references
        task.add_done_callback(self.deliveries.discard)

    # --- other processes ----------------------------------------------------

    async def _listen(self, key: str) -> None:
        """Be in the block's group exactly while it has peers here (and the
        layer reaches other processes); receive while in any group."""
        if self.layer is None:
            return
        async with self.membership:
            wanted = key in self.rooms
            if wanted == (key in self.listening):
                return
            if self.channel is None:
                self.channel = await self.layer.new_channel()
            if wanted:
                await self.layer.group_add(block_group(key), self.channel)
                self.listening.add(key)
            else:
                await self.layer.group_discard(block_group(key), self.channel)
                self.listening.discard(key)
            if self.listening and self.receiver is None:
                self.receiver = self.loop.create_task(self._receive())
            elif not self.listening and self.receiver is not None:
                self.receiver.cancel()
                self.receiver = None

    async def _receive(self) -> None:
        assert self.layer is not None and self.channel is not None
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("receiving block updates from other processes")
                await asyncio.sleep(RECEIVE_RETRY_SECONDS)
                continue
            if (
                message.get("type") == MESSAGE_TYPE
                and message.get("process") != _process_mark()
            ):
                await self.deliver(
                    _key(message["block_id"]),
                    list(message["updates"]),
                    message.get("origin"),
                )


# --- sends from sync code ---------------------------------------------------


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
