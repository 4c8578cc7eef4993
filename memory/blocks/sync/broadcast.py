"""Fan a block's committed Loro updates out to every open editor.

Services schedule :func:`block_broadcast` with ``transaction.on_commit`` after
any change to a block; a live edit from a room reaches this process's rooms
earlier, once accepted (:func:`block_relay_here`), and its commit's
broadcast only the other processes.  Delivery has two legs:

- In this process, the sync consumers of a block's room are peers of the room
  hub of their event loop (:func:`block_room_join`); while a room has peers
  its block's document stays cached (``memory.blocks.doc_cache.pin``).  A
  broadcast is handed to each hub once; the hub encodes the frames once and
  sends them to every peer's socket itself - no channel-layer message, task
  wake-up or dispatch per peer.
- Other processes get one ``block.updates`` message on the block's group
  (``pattern_site.kernel.realtime.group_for_block``).
  When the channel layer reaches other processes (Redis), a hub joins the
  group of each block it has peers for, with one channel per hub, and relays
  what arrives to its peers; it skips its own process's messages, which the
  first leg delivered.  An in-memory layer reaches no other process: the
  message is sent only if something else joined the group.

When the layer fails (Redis down), a hub keeps serving its own process's
rooms and tries the layer every second; once it answers, the hub joins its
groups again and asks each of its sockets to rejoin (the protocol's
``RoomError`` ``rejoin_suggested``): a client rejoins with its version and
gets the updates it missed.  A send that fails is logged in one line; the
write it follows is committed all the same.

Rights: while a hub has peers, its channel is also in
``pattern_site.kernel.rights.RIGHTS_GROUP`` (on any layer, the in-memory one
included, so a revocation reaches this process's sockets the same way as
other processes').  A revocation holds the matching peers' frames at once
and asks each peer to check its rights again (``RoomPeer.recheck``); the
peer reopens (sending what was held) or leaves.  A socket in a block's
presence room only is a peer that watches the block's rights
(:func:`block_rights_watch`) and is sent none of its updates.
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

from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer

from memory.blocks import doc_cache
from memory.blocks.sync import protocol as sp
from pattern_site.kernel import rights
from pattern_site.kernel.layer_send import layer_send
from pattern_site.kernel.realtime import block_hex, group_for_block

logger = logging.getLogger(__name__)

MESSAGE_TYPE = "block.updates"
# How often a hub tries its channel layer again after it failed.
RECEIVE_RETRY_SECONDS = 1.0


@dataclass(eq=False)
class RoomPeer:
    """One socket in a block's room.

    ``room_id`` is the room as its client named it (frames carry it);
    ``origin`` marks the updates the socket sent itself, which it is not sent
    back; ``send`` writes one frame.  Frames are held until :meth:`open`, so
    nothing reaches the client before the join's answer and backfill.

    ``agent_id`` is the agent the socket joined as (None: a human);
    ``recheck`` checks the socket's rights again after a revocation, during
    which its frames are held (``suspended``).  ``received`` is told the
    block's version counter once the frames of a change at that version
    went out to the socket (held ones: when they are sent).
    """

    room_id: str
    origin: str
    send: Callable[[bytes], Awaitable[None]]
    held: list[bytes] | None = field(default_factory=list)
    agent_id: int | None = None
    recheck: Callable[[], Awaitable[None]] | None = None
    suspended: bool = False
    received: Callable[[int], None] | None = None
    held_version: int | None = None

    async def open(self) -> None:
        """Send what was held since the join, then send as updates come."""
        while self.held:
            frames, self.held = self.held, []
            for frame in frames:
                await self.send(frame)
        self.held = None
        version, self.held_version = self.held_version, None
        self.sent(version)

    def sent(self, version: int | None) -> None:
        """The frames of a change at ``version`` went out to the socket."""
        if version is not None and self.received is not None:
            self.received(version)


def _peers_sent(peers: list[RoomPeer], version: int) -> None:
    """Tell ``peers`` their frames of the change at ``version`` went out.

    Run as a timer of no delay, from :meth:`_RoomHub.deliver`: asyncio runs
    the timers that are due after the socket writes its poll found ready,
    so this comes after the frames are on their way, not before."""
    for peer in peers:
        try:
            peer.sent(version)
        except Exception:
            logger.exception("recording what a block room's peer was sent")


async def block_room_join(*, block_id: uuid.UUID | str, peer: RoomPeer) -> None:
    """Add ``peer`` to the block's room in this process; from now on every
    committed change of the block reaches it (held until ``peer.open()``)."""
    await _RoomHub.current().join(block_hex(block_id), peer)


async def block_room_leave(*, block_id: uuid.UUID | str, peer: RoomPeer) -> None:
    await _RoomHub.current().leave(block_hex(block_id), peer)


async def block_rights_watch(*, block_id: uuid.UUID | str, peer: RoomPeer) -> None:
    """Have ``peer`` check its rights whenever the block's are revoked,
    without being sent the block's updates (a presence room's socket)."""
    await _RoomHub.current().join(block_hex(block_id), peer, watch_only=True)


async def block_rights_unwatch(*, block_id: uuid.UUID | str, peer: RoomPeer) -> None:
    await _RoomHub.current().leave(block_hex(block_id), peer, watch_only=True)


def block_relay_here(
    *, block_id: uuid.UUID | str, updates: list[bytes], origin: str, version: int
) -> bool:
    """Send a live edit accepted (and about to be stored) to the block's
    rooms in this process now, without waiting for its commit: False when
    no room here has the block open.  The commit's :func:`block_broadcast`
    then reaches the other processes only (``here=False``); should the
    change not be stored after all, :func:`block_rooms_rejoin` makes the
    rooms whole again."""
    key = block_hex(block_id)
    hubs = _RoomHub.serving(key)
    for hub in hubs:
        hub.deliver_threadsafe(key, list(updates), origin, version)
    return bool(hubs)


def block_rooms_rejoin(*, block_id: uuid.UUID | str, text: str) -> None:
    """Ask every socket of the block's rooms in this process, the sender
    included, to join again (``RoomError`` ``rejoin_suggested``, which the
    npm client follows): a change relayed by :func:`block_relay_here` that
    was then not stored is in the clients' documents but not the block's,
    and a rejoin sends the server what the client has that it lacks."""
    key = block_hex(block_id)
    for hub in _RoomHub.serving(key):
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            hub.loop.call_soon_threadsafe(hub.rejoin_start, key, text)


def block_broadcast(
    *,
    block_id: uuid.UUID | str,
    updates: list[bytes],
    origin: str | None,
    version: int | None = None,
    here: bool = True,
) -> None:
    """Send committed updates to every peer of the block, in any process.

    ``origin`` names the sender (e.g. a consumer's channel name) so it can
    skip its own echo; None for changes made outside any room.  ``version``
    is the block's version counter after the change (``RoomPeer.received``).
    ``here=False``: this process's rooms were sent the change already
    (:func:`block_relay_here`).

    Cheap in every process: local peers are reached through their hubs'
    loops without waiting; the channel-layer send runs on the ASGI server's
    own loop when called from a server thread, and anywhere else (a worker,
    a script) on one long-lived loop thread, instead of a new thread and loop
    per call.
    """
    if not updates:
        return
    updates = list(updates)
    key = block_hex(block_id)
    for hub in _RoomHub.serving(key) if here else ():
        hub.deliver_threadsafe(key, updates, origin, version)
    layer = get_channel_layer()
    if layer is None:
        return
    group = group_for_block(block_id)
    if not _reaches_other_processes(layer) and not layer.groups.get(group):
        return
    send = layer.group_send(
        group,
        {
            "type": MESSAGE_TYPE,
            "block_id": str(block_id),
            "updates": updates,
            "origin": origin,
            "version": version,
            "process": _process_mark(),
        },
    )
    try:
        layer_send(layer, send)
    except Exception as exc:
        send.close()  # never awaited when the layer failed before the call
        logger.warning(
            "block %s: other processes not told of a change (%s: %s)",
            key,
            type(exc).__name__,
            exc,
        )


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
        # Peers that are sent no updates, only asked to check their rights.
        self.watchers: dict[str, set[RoomPeer]] = {}
        self.layer = get_channel_layer()
        self.cross = _reaches_other_processes(self.layer)
        self.channel: str | None = None
        self.listening: set[str] = set()  # blocks whose group self.channel is in
        self.rights = False  # whether self.channel is in the rights group
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

    async def join(self, key: str, peer: RoomPeer, *, watch_only: bool = False) -> None:
        rooms = self.watchers if watch_only else self.rooms
        if not watch_only and key not in rooms:
            doc_cache.pin(uuid.UUID(key))  # see doc_cache: an open room's
        rooms.setdefault(key, set()).add(peer)
        await self._listen(key)

    async def leave(
        self, key: str, peer: RoomPeer, *, watch_only: bool = False
    ) -> None:
        rooms = self.watchers if watch_only else self.rooms
        peers = rooms.get(key)
        if peers is not None:
            peers.discard(peer)
            if not peers:
                del rooms[key]
                if not watch_only:
                    doc_cache.unpin(uuid.UUID(key))
        await self._listen(key)

    async def deliver(
        self, key: str, updates: list[bytes], origin: Any, version: int | None = None
    ) -> None:
        """Send ``updates`` (the block at ``version``) to the block's peers
        but ``origin``, each distinct room id encoded once.

        The peers are told what they were sent (``RoomPeer.sent``) only once
        every peer's frames are written: the server writes them to the
        sockets when this step ends, so anything done per peer in between
        would delay every peer's frames."""
        frames: dict[str, list[bytes]] = {}
        batch_id = sp.new_batch_id()
        sent: list[RoomPeer] = []
        for peer in list(self.rooms.get(key, ())):
            if peer.origin == origin:
                continue
            if peer.room_id not in frames:
                frames[peer.room_id] = sp.doc_update_frames(
                    sp.CrdtType.LORO, peer.room_id, updates, batch_id
                )
            if peer.held is not None:
                peer.held.extend(frames[peer.room_id])
                if version is not None:
                    peer.held_version = max(peer.held_version or 0, version)
                continue
            try:
                for frame in frames[peer.room_id]:
                    await peer.send(frame)
            except Exception:
                logger.exception("relaying an update of block %s failed", key)
                continue
            sent.append(peer)
        if version is not None and sent:
            self.loop.call_later(0, _peers_sent, sent, version)

    # --- from any thread ----------------------------------------------------

    def deliver_threadsafe(
        self, key: str, updates: list[bytes], origin: Any, version: int | None
    ) -> None:
        args = (key, updates, origin, version)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self._start_delivery(*args)
            return
        with contextlib.suppress(RuntimeError):  # the loop closed in between
            self.loop.call_soon_threadsafe(self._start_delivery, *args)

    def _start_delivery(
        self, key: str, updates: list[bytes], origin: Any, version: int | None
    ) -> None:
        task = self.loop.create_task(self.deliver(key, updates, origin, version))
        self.deliveries.add(task)  # the loop keeps only weak references
        task.add_done_callback(self.deliveries.discard)

    # --- other processes ----------------------------------------------------

    async def _listen(self, key: str) -> None:
        """Be in the block's group exactly while it has peers here (and the
        layer reaches other processes), in the rights group while any block
        has peers or watchers; receive while in any group."""
        if self.layer is None:
            return
        async with self.membership:
            if self.channel is None:
                self.channel = await self.layer.new_channel()
            # The wanted membership first: if the layer fails, _recover
            # makes it so once the layer is back.
            changes = []
            wanted = self.cross and key in self.rooms
            if wanted and key not in self.listening:
                self.listening.add(key)
                changes.append((self.layer.group_add, group_for_block(key)))
            elif not wanted and key in self.listening:
                self.listening.discard(key)
                changes.append((self.layer.group_discard, group_for_block(key)))
            if bool(self.rooms or self.watchers) != self.rights:
                self.rights = bool(self.rooms or self.watchers)
                change = (
                    self.layer.group_add if self.rights else self.layer.group_discard
                )
                changes.append((change, rights.RIGHTS_GROUP))
            try:
                for change, group in changes:
                    await change(group, self.channel)
            except Exception as exc:
                logger.warning(
                    "the channel layer failed (%s: %s); block room groups are "
                    "joined when it returns",
                    type(exc).__name__,
                    exc,
                )
            if (self.listening or self.rights) and self.receiver is None:
                self.receiver = self.loop.create_task(self._receive())
            elif not (self.listening or self.rights) and self.receiver is not None:
                self.receiver.cancel()
                self.receiver = None

    async def _receive(self) -> None:
        assert self.layer is not None and self.channel is not None
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning(
                    "the channel layer failed (%s: %s); block rooms here miss "
                    "other processes' changes until it returns",
                    type(exc).__name__,
                    exc,
                )
                await self._recover()
                continue
            if (
                message.get("type") == MESSAGE_TYPE
                and message.get("process") != _process_mark()
            ):
                await self.deliver(
                    block_hex(message["block_id"]),
                    list(message["updates"]),
                    message.get("origin"),
                    message.get("version"),
                )
            elif message.get("type") == rights.MESSAGE_TYPE:
                self.revoke(message.get("block_id"), message.get("agent_id"))

    async def _recover(self) -> None:
        """Wait until the layer answers again, rejoin this hub's groups (a
        restarted Redis forgot them), then make up for what was missed:
        every peer is asked to rejoin (its client sends its version and gets
        the updates it lacks) and checks its rights again (a revocation may
        have been lost)."""
        assert self.layer is not None and self.channel is not None
        while True:
            await asyncio.sleep(RECEIVE_RETRY_SECONDS)
            try:
                async with self.membership:
                    for key in self.listening:
                        await self.layer.group_add(group_for_block(key), self.channel)
                    if self.rights:
                        await self.layer.group_add(rights.RIGHTS_GROUP, self.channel)
            except Exception:
                continue
            break
        logger.warning("the channel layer is back; block rooms here resync")
        for key in list(self.rooms):
            await self.rejoin(key, "changes from other servers may have been missed")
        self.revoke(None, None)

    def rejoin_start(self, key: str, text: str) -> None:
        task = self.loop.create_task(self.rejoin(key, text))
        self.deliveries.add(task)  # the loop keeps only weak references
        task.add_done_callback(self.deliveries.discard)

    async def rejoin(self, key: str, text: str) -> None:
        """Ask every peer of the block's room to join again (``text``: why)."""
        for peer in list(self.rooms.get(key, ())):
            frame = sp.encode(
                sp.RoomError(
                    sp.CrdtType.LORO,
                    peer.room_id,
                    sp.RoomErrorCode.REJOIN_SUGGESTED,
                    text,
                )
            )
            if peer.held is not None:
                peer.held.append(frame)
                continue
            try:
                await peer.send(frame)
            except Exception:
                logger.exception("asking a socket of a block room to rejoin")

    def revoke(self, key: str | None, agent_id: int | None) -> None:
        """Hold the frames of the matching peers now, and have each check
        its rights again (concurrently: a database call each)."""
        keys = [key] if key is not None else list({**self.rooms, **self.watchers})
        for room in keys:
            peers = [*self.rooms.get(room, ()), *self.watchers.get(room, ())]
            for peer in peers:
                if peer.recheck is None or agent_id not in (None, peer.agent_id):
                    continue
                if peer.held is None:
                    peer.held, peer.suspended = [], True
                task = self.loop.create_task(peer.recheck())
                self.deliveries.add(task)
                task.add_done_callback(self.deliveries.discard)
