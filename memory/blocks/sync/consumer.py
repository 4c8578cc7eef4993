"""``/ws/sync/``: the server side of the Loro Syncing Protocol for blocks.

One websocket multiplexes rooms.  A ``%LOR`` room is a memory block (room id
= block id): the join is authorised by ``memory.blocks.permissions``, every
update goes through ``memory.blocks.services.block_update_import`` (validated,
stored with the actor in one transaction) and is acked only after that
commit; the service's broadcast (``memory.blocks.sync.broadcast``) reaches
every peer of the block in any process - this process's directly through
the room hub once the update is accepted, while it is stored (should the
store fail, they are asked to join again), other processes' through the
channel layer after the commit - and changes made through the API or the
dashboard arrive after their commit the same way.  A
``%EPH`` room (same id) relays presence - cursors, selections, names,
colours - between the peers of a block and stores nothing.

Rights hold only while they last: when a service takes one away
(``pattern_site.kernel.rights``), the block's room hub asks each matching socket to
check again, with the credentials it joined with - a socket in the block's
``%EPH`` room alone as well.  A socket that lost its right to the block gets
the protocol's ``RoomError`` (``EVICTED``) for the block's rooms and leaves
them; one left with read access keeps receiving, and its updates are
refused with ``permission_denied``.  The write path decides again as it
stores an update (``memory.blocks.permissions.block_access_now``), so an
update sent before the socket's check refuses all the same.

An agent's socket is a look at the block (``memory.blocks.seen``): the
document sent on joining and each change relayed to it advance the agent's
``BlockSeen`` to that change's version counter, through the batch the reads
use, merged on the event loop (no thread hop per change relayed); only
a batch due at once (full, or tasks run inline) is sent from a thread, so
no frame waits for it.  Human sockets record nothing.

A frame that is not a message of the protocol (a text frame other than
``ping`` included) closes the socket with :data:`CLOSE_PROTOCOL_ERROR`
(4002): WebSocket's own 1002 is reserved to the websocket layer, and Daphne
lets an application close only with 1000 or 3000-4999 (anything else
becomes 1011 after a timeout and a traceback).

History retention (``memory.blocks.services.retention``) keeps each
client's join version (``BlockPeer``): the block's kept history is never
folded past it while the client is connected or seen lately.  A socket
marks its clients seen every ``MEMORY_HISTORY_PEER_REFRESH_SECONDS`` while
it is in a block's room, so a client connected for longer than the peer
hours keeps its version all the same.  A join whose
version is older than the kept history gets ``JoinError`` ``APP_ERROR``
with app code :data:`HISTORY_FOLDED`: the client must start again from a
fresh snapshot (join with an empty version and a new document).  An
update that still builds on folded history refuses (``invalid_update``)
and the client is evicted from the block's rooms, with the same advice:
a ``RoomError`` has no app code, so its message starts with
``history_folded:``.

An agent token the socket authenticated with (on connecting or in a join)
that dies - revoked, rotated away, its agent deactivated - ends the socket:
its rooms get ``RoomError`` (``EVICTED``) and the socket is closed with
``CLOSE_UNAUTHENTICATED``.  The channel layer's revocation brings that at
once where it reaches; ``pattern_site.kernel.agents.watch`` finds it in the
database otherwise (another process, the in-memory layer), within a poll.
A socket that has joined no room ``PATTERN_SYNC_JOIN_TIMEOUT`` seconds
after connecting is closed with ``CLOSE_IDLE``; an actor may hold
``PATTERN_SYNC_SOCKETS_PER_ACTOR`` sockets in one process, and one more is
closed with ``CLOSE_TOO_MANY``.

A join is authorised for the token in its auth bytes, else for the actor
the socket connected as (``scope["actor"]``, put there by
``pattern_site.kernel.auth.websocket_auth``).

Thin: framing is ``memory.blocks.sync.protocol``; decisions are the
permission module's and the services'.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import loro
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from memory.blocks import documents
from memory.blocks.models import MemoryBlock
from memory.blocks.permissions import block_access_for_actor
from memory.blocks.seen import blocks_seen_flush, blocks_seen_received_nowait
from memory.blocks.selectors import block_document_versioned, block_get_for_actor
from memory.blocks.services import block_update_import
from memory.blocks.services.retention import (
    peer_join_lock,
    peer_left,
    peer_record,
    peers_seen,
)
from memory.blocks.sync import protocol as sp
from memory.blocks.sync.broadcast import (
    RoomPeer,
    block_rights_unwatch,
    block_rights_watch,
    block_room_join,
    block_room_leave,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_token_actor,
    agent_token_actor_recheck,
)
from pattern_site.kernel.agents.watch import token_unwatch, token_watch
from pattern_site.kernel.daphne_server import frame_send, frame_writer
from pattern_site.kernel.errors import (
    ApplicationError,
    AuthenticationFailed,
    HistoryFolded,
    InvalidInput,
    LimitExceeded,
    NotFound,
    PermissionDenied,
)
from pattern_site.kernel.realtime import (
    CLOSE_IDLE,
    CLOSE_TOO_MANY,
    CLOSE_UNAUTHENTICATED,
)

logger = logging.getLogger(__name__)

EPHEMERAL_TIMEOUT_MS = 30_000
EPHEMERAL_GROUP_PREFIX = "blockeph."
# How often a socket's channel is read again while the channel layer fails.
LAYER_RETRY_SECONDS = 1.0
# Close code for a frame that is not a protocol message (see module doc).
CLOSE_PROTOCOL_ERROR = 4002
# JoinError app code for a client whose version is older than the block's
# kept history (see module doc).
HISTORY_FOLDED = "history_folded"
# Domain errors of an update, as the protocol's Ack statuses.
UPDATE_ERROR_STATUS: dict[type[ApplicationError], sp.UpdateStatus] = {
    InvalidInput: sp.UpdateStatus.INVALID_UPDATE,
    PermissionDenied: sp.UpdateStatus.PERMISSION_DENIED,
    NotFound: sp.UpdateStatus.PERMISSION_DENIED,
    AuthenticationFailed: sp.UpdateStatus.PERMISSION_DENIED,
    LimitExceeded: sp.UpdateStatus.PAYLOAD_TOO_LARGE,
}


def ephemeral_group(block_id: str) -> str:
    """Channel-layer group of a block's presence room (ASCII, < 100 chars)."""
    return (
        EPHEMERAL_GROUP_PREFIX + hashlib.sha256(str(block_id).encode()).hexdigest()[:40]
    )


def update_error_status(error: ApplicationError) -> sp.UpdateStatus:
    for kind, status in UPDATE_ERROR_STATUS.items():
        if isinstance(error, kind):
            return status
    return sp.UpdateStatus.APP_ERROR


class _RateLimit:
    """Token bucket: ``rate`` updates a second, bursts of twice that."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.tokens = 2 * rate
        self.at = time.monotonic()

    def allow(self) -> bool:
        if self.rate <= 0:
            return True
        now = time.monotonic()
        self.tokens = min(2 * self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


@dataclass
class _Room:
    crdt: sp.CrdtType
    room_id: str
    permission: sp.Permission
    actor: Actor
    # The join's auth bytes: rights are checked again with them.
    auth: bytes = b""
    # The block, and this socket as a peer of its room hub (%EPH: watching
    # the block's rights only); frames are held while its rights are checked.
    block: MemoryBlock | None = None
    peer: RoomPeer | None = None
    # %EPH only: the channel-layer group, and the presence this connection's
    # client published, kept in memory (never stored) so that a peer joining
    # later, in any process, can be sent it.  Entries expire like the
    # clients' own (EPHEMERAL_TIMEOUT_MS).
    group: str | None = None
    presence: loro.EphemeralStore | None = None
    # Loro rooms: the block's version at this socket's last refresh of its
    # join versions, which the next refresh keeps instead (see peers_seen).
    relayed: bytes | None = None


def _resolve_actor(*, actor: Actor | None, auth: bytes) -> Actor:
    """An agent by the API token in the join's auth bytes, else the actor
    the socket connected as (``scope["actor"]``, see ``kernel.auth``); an
    agent's token is checked again, as the socket outlives the check."""
    if auth:
        try:
            raw = auth.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AuthenticationFailed("the auth payload is not a token") from exc
        return agent_token_actor(raw=raw)
    if actor is not None and actor.token_id is not None:
        return agent_token_actor_recheck(actor=actor)
    if actor is not None:
        return actor
    raise AuthenticationFailed("sign in, or send an agent token in the join")


def _join_block(
    *, actor: Actor | None, auth: bytes, block_id: str
) -> tuple[Actor, MemoryBlock, str]:
    actor = _resolve_actor(actor=actor, auth=auth)
    try:
        block = block_get_for_actor(actor=actor, block_id=block_id)
    except (ValueError, TypeError) as exc:  # not a UUID
        raise NotFound(f"no block {block_id!r}") from exc
    return actor, block, block_access_for_actor(actor=actor, block=block)


def _permission(access: str) -> sp.Permission:
    return sp.Permission.READ if access == "read" else sp.Permission.WRITE


_EMPTY_VERSION = loro.VersionVector().encode()


def _backfill(
    *, block: MemoryBlock, client_version: bytes, socket: str
) -> tuple[bytes, bytes, int] | None:
    """The server's version, what a client at ``client_version`` lacks and
    the block's version counter that holds; None when the client's version
    cannot be read.  ``HistoryFolded`` when the client's version is older
    than the start of the block's held history: it must start again from a
    fresh snapshot.  The version the client joined with is recorded
    (``BlockPeer``), so that retention does not fold past it: read, checked
    and recorded under the fold's lock, so that no fold passes it between
    the check and the record."""
    with peer_join_lock(block=block):
        return _backfill_locked(
            block=block, client_version=client_version, socket=socket
        )


def _backfill_locked(
    *, block: MemoryBlock, client_version: bytes, socket: str
) -> tuple[bytes, bytes, int] | None:
    doc, counter = block_document_versioned(block=block)
    server_version = doc.oplog_vv
    client_vv = None
    if client_version:
        try:
            with documents.loro_guard("unreadable version vector"):
                client_vv = loro.VersionVector.decode(client_version)
        except InvalidInput:
            return None
        if doc.is_shallow():
            client_vv = _shallow_start_check(doc, block, client_vv)
    if client_vv is not None:
        missing = doc.export(loro.ExportMode.Updates(from_=client_vv))
    else:
        missing = doc.export(loro.ExportMode.Snapshot())
    # What the client's edits may build on: its own version (edits made
    # before the backfill reaches it); an empty document has none, and
    # builds on what it is sent.
    fresh = client_vv is None or client_vv.encode() == _EMPTY_VERSION
    joined = server_version.encode() if fresh else client_version
    peer_record(block_id=block.pk, socket=socket, version=joined)
    return server_version.encode(), missing, counter


def _shallow_start_check(
    doc: loro.LoroDoc, block: MemoryBlock, client_vv: loro.VersionVector
) -> loro.VersionVector | None:
    """A client's version against a shallow document: None (send it the
    snapshot) for an empty document, whose version is ``0x00``, not empty
    bytes; ``HistoryFolded`` for one older than the document's start."""
    if client_vv.encode() == _EMPTY_VERSION:
        return None
    if not client_vv.includes_vv(doc.frontiers_to_vv(doc.shallow_since_frontiers)):
        raise HistoryFolded(
            f"your copy of block {block.label!r} is older than its kept "
            "history (retention folded the rest): start again from a "
            "fresh snapshot (join with an empty version)",
            extra={"block": block.label},
        )
    return client_vv


async def _peer_left(*, block_id: Any, socket: str) -> None:
    """Record that the socket left the block (best effort: a client not
    marked as gone is kept for the peer hours from its join)."""
    try:
        await database_sync_to_async(peer_left)(block_id=block_id, socket=socket)
    except Exception:
        logger.exception("recording that a client left block %s failed", block_id)


class BlockSyncConsumer(AsyncWebsocketConsumer):
    fragment_timeout = sp.FRAGMENT_TIMEOUT_SECONDS

    # Channels sets this to the channel layer's receive for this socket's
    # channel and ends the consumer - closing the socket - if it raises.  A
    # failing layer (Redis down) costs presence, not the socket: wrapped.
    @property
    def channel_receive(self) -> Callable[[], Awaitable[dict[str, Any]]]:
        return self._channel_receive

    @channel_receive.setter
    def channel_receive(self, receive: Callable[[], Awaitable[Any]]) -> None:
        async def receive_while_the_layer_fails() -> dict[str, Any]:
            failing = False  # log an outage once, not every retry
            while True:
                try:
                    return await receive()
                except Exception as exc:
                    if not failing:
                        logger.warning("sync socket: channel layer failed (%s)", exc)
                    failing = True
                    await self._presence_groups_rejoin()

        self._channel_receive = receive_while_the_layer_fails

    async def _presence_groups_rejoin(self) -> None:
        """Wait for the channel layer to answer again and join this socket's
        presence groups again (a restarted Redis forgot them)."""
        while True:
            await asyncio.sleep(LAYER_RETRY_SECONDS)
            try:
                for room in list(self.rooms.values()):
                    if room.group is not None:
                        await self.channel_layer.group_add(
                            room.group, self.channel_name
                        )
            except Exception:
                continue
            return

    async def connect(self) -> None:
        self.rooms: dict[tuple[sp.CrdtType, str], _Room] = {}
        self.frame_writer = frame_writer(self.scope)
        self.fragments = sp.FragmentAssembler(
            timeout=self.fragment_timeout,
            max_total_size=settings.PATTERN_SYNC_MAX_UPDATE_BYTES,
        )
        self._reaper: asyncio.TimerHandle | None = None
        self.rate_limit = _RateLimit(settings.PATTERN_SYNC_RATE_LIMIT)
        # Sends the looks' batch when it was due as this socket added to it.
        self._looks_task: asyncio.Task[None] | None = None
        self._tokens: set[int] = set()  # watched (see module doc)
        self._joined = False
        self._idle: asyncio.TimerHandle | None = None
        # The actor counted against the cap, and where.
        self._counted: tuple[dict[str, int], str] | None = None
        self._ending = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._pins: asyncio.TimerHandle | None = None  # next refresh of them
        await self.accept()
        if not await self._authenticated(self.scope.get("actor")):
            return
        self._idle = asyncio.get_running_loop().call_later(
            settings.PATTERN_SYNC_JOIN_TIMEOUT, self._idle_close
        )

    async def disconnect(self, code: int) -> None:
        self._ending = True
        if self._reaper is not None:
            self._reaper.cancel()
        if getattr(self, "_idle", None) is not None:
            self._idle.cancel()
        if getattr(self, "_pins", None) is not None:
            self._pins.cancel()
        for token_id in getattr(self, "_tokens", ()):
            token_unwatch(token_id=token_id, on_dead=self._token_dead)
        if getattr(self, "_counted", None) is not None:
            counts, key = self._counted
            counts[key] -= 1
            if not counts[key]:
                del counts[key]
        for room in list(getattr(self, "rooms", {}).values()):
            await self._leave(room)
        if getattr(self, "_looks_task", None) is not None:
            await asyncio.shield(self._looks_task)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch without its per-message database clean-up.

        That clean-up is a hop to the one shared sync thread for every frame
        and every channel-layer message, queued behind the database work of
        every socket.  This consumer reaches the database only through
        ``database_sync_to_async``, which closes stale connections itself.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)

    # --- frames ------------------------------------------------------------

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        if text_data is not None:
            if text_data == sp.PING:
                await self.send(text_data=sp.PONG)
            else:
                logger.info("closing a sync socket after a text frame")
                await self.close(code=CLOSE_PROTOCOL_ERROR)
            return
        try:
            message = sp.decode(bytes_data or b"")
        except sp.ProtocolError as exc:
            logger.info(
                "closing a sync socket (%s) after a bad frame: %s",
                CLOSE_PROTOCOL_ERROR,
                exc,
            )
            await self.close(code=CLOSE_PROTOCOL_ERROR)
            return
        if len(bytes_data or b"") > sp.MAX_MESSAGE_SIZE:
            if isinstance(message, sp.DocUpdate):
                await self._ack(
                    message, message.batch_id, sp.UpdateStatus.PAYLOAD_TOO_LARGE
                )
            return
        match message:
            case sp.JoinRequest():
                await self._on_join(message)
            case sp.DocUpdate():
                await self._on_updates(message, message.batch_id, list(message.updates))
            case sp.DocUpdateFragmentHeader():
                await self._on_fragment_header(message)
            case sp.DocUpdateFragment():
                await self._on_fragment(message)
            case sp.Leave():
                room = self.rooms.get((message.crdt, message.room_id))
                if room is not None:
                    await self._leave(room)
            case sp.Ack() if message.status != sp.UpdateStatus.OK:
                logger.info(
                    "a client could not apply %s:%s (%s)",
                    message.crdt,
                    message.room_id,
                    message.status.reason,
                )

    async def _send_message(self, message: sp.Message) -> None:
        await self._send_frame(sp.encode(message))

    async def _send_frame(self, frame: bytes) -> None:
        # Straight to the connection where the server allows it, else to
        # the server (what ``self.send`` comes down to): a relayed change
        # calls this once per socket of the room.
        await frame_send(self.frame_writer, self.base_send, frame)

    async def _ack(
        self, message: Any, batch_id: bytes, status: sp.UpdateStatus
    ) -> None:
        await self._send_message(
            sp.Ack(message.crdt, message.room_id, batch_id, status)
        )

    # --- join / leave --------------------------------------------------------

    async def _on_join(self, message: sp.JoinRequest) -> None:
        key = (message.crdt, message.room_id)
        if key in self.rooms:
            await self._leave(self.rooms[key])
        if message.crdt not in (sp.CrdtType.LORO, sp.CrdtType.LORO_EPHEMERAL):
            await self._join_error(
                message, sp.JoinErrorCode.APP_ERROR, "unsupported CRDT", "unsupported"
            )
            return
        try:
            actor, block, access = await database_sync_to_async(_join_block)(
                actor=self.scope.get("actor"),
                auth=message.auth,
                block_id=message.room_id,
            )
        except AuthenticationFailed as exc:
            await self._join_error(message, sp.JoinErrorCode.AUTH_FAILED, exc.message)
            return
        except ApplicationError as exc:
            await self._join_error(
                message, sp.JoinErrorCode.APP_ERROR, exc.message, exc.code
            )
            return
        if not await self._authenticated(actor):
            return
        self._joined = True
        if message.crdt == sp.CrdtType.LORO_EPHEMERAL:
            await self._join_presence(message, actor, block)
            return
        room, peer = self._room(message, _permission(access), actor, block)
        if peer.agent_id is not None:
            agent_id, block_key = peer.agent_id, str(block.pk)
            peer.received = lambda version: self._received(agent_id, block_key, version)
        # Join the room before computing the backfill, so that an update
        # committed in between is relayed rather than lost (held until the
        # backfill is out).
        await block_room_join(block_id=block.id, peer=peer)
        self.rooms[key] = room
        try:
            backfill = await database_sync_to_async(_backfill)(
                block=block, client_version=message.version, socket=self.channel_name
            )
        except HistoryFolded as exc:
            await self._leave(room)
            await self._join_error(
                message, sp.JoinErrorCode.APP_ERROR, exc.message, HISTORY_FOLDED
            )
            return
        if backfill is None:
            await self._leave(room)
            await self._join_error(
                message, sp.JoinErrorCode.VERSION_UNKNOWN, "unreadable version"
            )
            return
        version, missing, counter = backfill
        await self._send_message(
            sp.JoinResponseOk(message.crdt, message.room_id, room.permission, version)
        )
        await self._send_updates(room, [missing], sp.new_batch_id())
        peer.sent(counter)
        await peer.open()
        self._pins_schedule()

    def _pins_schedule(self) -> None:
        """Refresh this socket's join versions (``BlockPeer``) in the peer
        refresh seconds, unless a refresh is due already."""
        if self._pins is None and not self._ending:
            self._pins = asyncio.get_running_loop().call_later(
                settings.MEMORY_HISTORY_PEER_REFRESH_SECONDS, self._pins_due
            )

    def _pins_due(self) -> None:
        self._pins = None
        self._spawn(self._pins_refresh())

    async def _pins_refresh(self) -> None:
        """Mark this socket's clients of blocks seen now; again later while it
        is in a block's room (a socket in none stops until its next join)."""
        rooms = [
            (room, room.block)
            for room in self.rooms.values()
            if room.crdt == sp.CrdtType.LORO and room.block is not None
        ]
        if not rooms:
            return
        try:
            now = await database_sync_to_async(peers_seen)(
                socket=self.channel_name,
                blocks=[(block, room.relayed) for room, block in rooms],
            )
        except Exception:
            # Tried again at the next refresh, well within the peer hours.
            logger.exception("refreshing a sync socket's join versions failed")
        else:
            for room, block in rooms:
                room.relayed = now.get(block.pk)
        self._pins_schedule()

    def _received(self, agent_id: int, block_id: str, counter: int) -> None:
        """Agent ``agent_id``'s client got block ``block_id`` at version
        counter ``counter``: hand it to the looks' batch (see module doc)."""
        if blocks_seen_received_nowait(looks={(agent_id, block_id): counter}):
            return
        if self._looks_task is None:
            # In a context of its own: a relay may be delivered in a copy of
            # the context of the sync call that committed the change, where
            # asgiref refuses another sync call as a deadlock.
            self._looks_task = asyncio.get_running_loop().create_task(
                self._looks_flush(), context=contextvars.Context()
            )

    async def _looks_flush(self) -> None:
        try:
            await database_sync_to_async(blocks_seen_flush)()
        except Exception:
            # A look not recorded costs a change told twice, never a lost one.
            logger.exception("recording what a sync socket received failed")
        finally:
            self._looks_task = None

    def _room(
        self,
        message: sp.JoinRequest,
        permission: sp.Permission,
        actor: Actor,
        block: MemoryBlock,
    ) -> tuple[_Room, RoomPeer]:
        """A room joined by ``message``, and this socket as its hub peer."""
        peer = RoomPeer(
            message.room_id,
            self.channel_name,
            self._send_frame,
            agent_id=actor.agent.pk if actor.agent is not None else None,
        )
        room = _Room(
            message.crdt, message.room_id, permission, actor, message.auth, block, peer
        )
        peer.recheck = lambda: self._recheck(room)
        return room, peer

    async def _join_presence(
        self, message: sp.JoinRequest, actor: Actor, block: MemoryBlock
    ) -> None:
        # Readers may publish presence too.
        room, peer = self._room(message, sp.Permission.WRITE, actor, block)
        room.group = ephemeral_group(message.room_id)
        room.presence = loro.EphemeralStore(EPHEMERAL_TIMEOUT_MS)
        try:
            await self.channel_layer.group_add(room.group, self.channel_name)
        except Exception as exc:
            logger.warning("presence unavailable: channel layer failed (%s)", exc)
            await self._join_error(
                message, sp.JoinErrorCode.APP_ERROR, "presence is unavailable now"
            )
            return
        await block_rights_watch(block_id=block.id, peer=peer)
        self.rooms[(message.crdt, message.room_id)] = room
        await self._send_message(
            sp.JoinResponseOk(message.crdt, message.room_id, sp.Permission.WRITE)
        )
        await peer.open()
        # Ask the peers (in any process) for the presence their clients hold.
        await self._presence_send(
            room.group,
            {
                "type": "presence.hello",
                "room_id": room.room_id,
                "reply_to": self.channel_name,
            },
        )

    async def _join_error(
        self,
        message: sp.JoinRequest,
        code: sp.JoinErrorCode,
        text: str,
        app_code: str | None = None,
    ) -> None:
        await self._send_message(
            sp.JoinError(message.crdt, message.room_id, code, text, app_code=app_code)
        )

    async def _leave(self, room: _Room) -> None:
        self.rooms.pop((room.crdt, room.room_id), None)
        self.fragments.discard_room(room.crdt, room.room_id)
        if room.peer is not None:
            assert room.block is not None
            leave = block_room_leave if room.presence is None else block_rights_unwatch
            await leave(block_id=room.block.id, peer=room.peer)
            if room.presence is None:
                await _peer_left(block_id=room.block.id, socket=self.channel_name)
        if room.group is not None:
            try:
                await self.channel_layer.group_discard(room.group, self.channel_name)
            except Exception as exc:  # the membership expires by itself
                logger.warning("presence: channel layer failed (%s)", exc)

    async def _recheck(self, room: _Room) -> None:
        """Check the room's rights again (a revocation was announced)."""
        assert room.peer is not None
        try:
            actor, block, access = await database_sync_to_async(_join_block)(
                actor=self.scope.get("actor"), auth=room.auth, block_id=room.room_id
            )
        except AuthenticationFailed as exc:
            await self._revoked(exc.message)
            return
        except ApplicationError as exc:
            await self._evict(room.room_id, exc.message)
            return
        except Exception:
            # Not known to hold: out of the room, and the client is asked
            # to join again (a join checks the rights).
            logger.exception("checking the rights on block %s failed", room.room_id)
            if self.rooms.get((room.crdt, room.room_id)) is room:
                await self._leave(room)
                await self._send_message(
                    sp.RoomError(
                        room.crdt,
                        room.room_id,
                        sp.RoomErrorCode.REJOIN_SUGGESTED,
                        "your rights could not be checked; join again",
                    )
                )
            return
        if self.rooms.get((room.crdt, room.room_id)) is not room:
            return  # left, or joined again, meanwhile
        room.actor, room.block = actor, block
        if room.presence is None:
            room.permission = _permission(access)
        if room.peer.suspended:
            room.peer.suspended = False
            await room.peer.open()

    async def _evict(self, room_id: str, text: str) -> None:
        """Leave the block's rooms, telling the client why."""
        # Both taken at once: the rooms' own rechecks may evict concurrently.
        keys = [
            (crdt, room_id) for crdt in (sp.CrdtType.LORO, sp.CrdtType.LORO_EPHEMERAL)
        ]
        for room in [self.rooms.pop(key) for key in keys if key in self.rooms]:
            await self._leave(room)
            await self._send_message(
                sp.RoomError(room.crdt, room_id, sp.RoomErrorCode.EVICTED, text)
            )

    # --- updates ---------------------------------------------------------------

    async def _on_updates(
        self, message: Any, batch_id: bytes, updates: list[bytes]
    ) -> None:
        room = self.rooms.get((message.crdt, message.room_id))
        if room is None or room.permission != sp.Permission.WRITE:
            await self._ack(message, batch_id, sp.UpdateStatus.PERMISSION_DENIED)
            return
        if not self.rate_limit.allow():
            await self._ack(message, batch_id, sp.UpdateStatus.RATE_LIMITED)
            return
        if room.presence is not None:
            await self._ack(message, batch_id, await self._on_presence(room, updates))
            return
        try:
            await database_sync_to_async(block_update_import)(
                block=room.block,
                actor=room.actor,
                updates=updates,
                origin=self.channel_name,
            )
        except HistoryFolded as exc:
            # Refused for good: out of the room, so that the client starts
            # again from a fresh snapshot rather than resending.
            await self._ack(message, batch_id, sp.UpdateStatus.INVALID_UPDATE)
            await self._evict(room.room_id, f"{HISTORY_FOLDED}: {exc.message}")
            return
        except ApplicationError as exc:
            await self._ack(message, batch_id, update_error_status(exc))
            return
        except Exception:
            logger.exception("storing an update of block %s failed", room.room_id)
            await self._ack(message, batch_id, sp.UpdateStatus.UNKNOWN)
            return
        # Stored and committed: only now does the client hear it is safe.
        await self._ack(message, batch_id, sp.UpdateStatus.OK)

    async def _on_presence(self, room: _Room, updates: list[bytes]) -> sp.UpdateStatus:
        assert room.presence is not None
        try:
            with documents.loro_guard("invalid presence update"):
                for update in updates:
                    if update:
                        room.presence.apply(update)
        except InvalidInput:
            return sp.UpdateStatus.INVALID_UPDATE
        relayed = await self._presence_send(
            room.group,
            {
                "type": "presence.updates",
                "room_id": room.room_id,
                "updates": [update for update in updates if update],
                "origin": self.channel_name,
            },
        )
        return sp.UpdateStatus.OK if relayed else sp.UpdateStatus.APP_ERROR

    async def _presence_send(self, to: str, event: dict[str, Any]) -> bool:
        """Send a presence event to a group (``ephemeral_group``) or one
        channel; False when the channel layer failed (presence is best
        effort)."""
        try:
            if to.startswith(EPHEMERAL_GROUP_PREFIX):
                await self.channel_layer.group_send(to, event)
            else:
                await self.channel_layer.send(to, event)
        except Exception as exc:
            logger.warning("presence not relayed: channel layer failed (%s)", exc)
            return False
        return True

    async def _send_updates(
        self, room: _Room, updates: list[bytes], batch_id: bytes
    ) -> None:
        for frame in sp.doc_update_frames(room.crdt, room.room_id, updates, batch_id):
            await self._send_frame(frame)

    # --- fragments -------------------------------------------------------------

    async def _on_fragment_header(self, message: sp.DocUpdateFragmentHeader) -> None:
        room = self.rooms.get((message.crdt, message.room_id))
        if room is None or room.permission != sp.Permission.WRITE:
            await self._ack(
                message, message.batch_id, sp.UpdateStatus.PERMISSION_DENIED
            )
            return
        try:
            self.fragments.start(message, now=time.monotonic())
        except sp.FragmentError as exc:
            await self._ack(message, message.batch_id, exc.status)
            return
        self._schedule_reaper()

    async def _on_fragment(self, message: sp.DocUpdateFragment) -> None:
        try:
            whole = self.fragments.add(message)
        except sp.FragmentError as exc:
            await self._ack(message, message.batch_id, exc.status)
            return
        if whole is not None:
            await self._on_updates(message, message.batch_id, list(whole))

    def _schedule_reaper(self) -> None:
        deadline = self.fragments.next_deadline()
        if deadline is None:
            return
        if self._reaper is not None:
            self._reaper.cancel()
        loop = asyncio.get_running_loop()
        delay = max(0.0, deadline - time.monotonic())
        self._reaper = loop.call_later(
            delay, lambda: loop.create_task(self._reap_fragments())
        )

    async def _reap_fragments(self) -> None:
        self._reaper = None
        for header in self.fragments.expired(now=time.monotonic()):
            await self._ack(header, header.batch_id, sp.UpdateStatus.FRAGMENT_TIMEOUT)
        self._schedule_reaper()

    # --- channel-layer events --------------------------------------------------

    async def presence_updates(self, event: dict[str, Any]) -> None:
        if event.get("origin") == self.channel_name:
            return
        room = self.rooms.get((sp.CrdtType.LORO_EPHEMERAL, event["room_id"]))
        if room is None:
            return
        frames = sp.doc_update_frames(
            room.crdt, room.room_id, list(event["updates"]), sp.new_batch_id()
        )
        if room.peer is not None and room.peer.held is not None:
            room.peer.held.extend(frames)  # until the join's answer, or a recheck
            return
        for frame in frames:
            await self._send_frame(frame)

    async def presence_hello(self, event: dict[str, Any]) -> None:
        """A peer joined the presence room: send it what our client published."""
        if event["reply_to"] == self.channel_name:
            return
        room = self.rooms.get((sp.CrdtType.LORO_EPHEMERAL, event["room_id"]))
        if room is None or room.presence is None or not room.presence.keys():
            return
        await self._presence_send(
            event["reply_to"],
            {
                "type": "presence.updates",
                "room_id": room.room_id,
                "updates": [room.presence.encode_all()],
                "origin": self.channel_name,
            },
        )

    # --- who holds the socket --------------------------------------------------

    async def _authenticated(self, actor: Actor | None) -> bool:
        """Count ``actor`` against the cap (once per socket) and watch its
        token; False when the socket was closed for being one too many."""
        if actor is None:
            return True
        if self._counted is None:
            counts, key = (
                _open_sockets.setdefault(asyncio.get_running_loop(), {}),
                actor.ref,
            )
            if counts.get(key, 0) >= settings.PATTERN_SYNC_SOCKETS_PER_ACTOR:
                logger.info("closing a sync socket: %s holds too many", key)
                await self._end(CLOSE_TOO_MANY)
                return False
            counts[key] = counts.get(key, 0) + 1
            self._counted = (counts, key)
        if actor.token_id is not None and actor.token_id not in self._tokens:
            self._tokens.add(actor.token_id)
            token_watch(token_id=actor.token_id, on_dead=self._token_dead)
        return True

    def _idle_close(self) -> None:
        self._idle = None
        if not self._joined:
            self._spawn(self._end(CLOSE_IDLE))

    def _token_dead(self, token_id: int) -> None:
        self._tokens.discard(token_id)
        self._spawn(
            self._revoked("the agent token of this connection is no longer valid")
        )

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)  # the loop keeps only weak references
        task.add_done_callback(self._tasks.discard)

    async def _revoked(self, text: str) -> None:
        """The socket's credentials died: out of every room, and closed."""
        if self._ending:
            return  # another room's recheck, or the watcher, got here first
        self._ending = True
        for room in list(self.rooms.values()):
            if self.rooms.get((room.crdt, room.room_id)) is room:
                await self._evict(room.room_id, text)
        await self.close(code=CLOSE_UNAUTHENTICATED)

    async def _end(self, code: int) -> None:
        if not self._ending:
            self._ending = True
            await self.close(code=code)


# Sockets open on each event loop (a server process runs one), by actor
# (``Actor.ref``), for the cap.
_open_sockets: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, int]] = (
    weakref.WeakKeyDictionary()
)
