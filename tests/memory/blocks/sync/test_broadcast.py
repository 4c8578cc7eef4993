"""memory.broadcast: committed updates reach the peers of a block's room, in
this process through its room hub and from other processes through Redis."""

import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from memory.blocks.sync import protocol as sp
from memory.blocks.sync.broadcast import (
    MESSAGE_TYPE,
    RoomPeer,
    block_broadcast,
    block_room_join,
    block_room_leave,
)
from pattern_site.kernel.realtime import group_for_block


class Socket:
    """A peer's socket: the frames sent to it, decoded."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[sp.Message] = asyncio.Queue()

    async def send(self, frame: bytes) -> None:
        self.frames.put_nowait(sp.decode(frame))

    async def updates(self) -> list[bytes]:
        message = await asyncio.wait_for(self.frames.get(), timeout=5)
        assert isinstance(message, sp.DocUpdate)
        return list(message.updates)

    async def nothing_more(self, block_id) -> bool:
        """Nothing but a marker broadcast after everything else: deliveries
        run in order, each to its end (these sockets never suspend), so a
        frame sent before the marker would arrive before it."""
        await _broadcast(block_id, [MARKER], origin=None)
        return await self.updates() == [MARKER]


MARKER = b"marker"


async def _settled(block_id, witness: Socket) -> None:
    """Every broadcast so far has been delivered to every peer: a marker
    sent after them has reached ``witness``, an open peer of the room."""
    await _broadcast(block_id, [MARKER], origin=None)
    assert await witness.updates() == [MARKER]


async def _joined(block_id, origin: str, room_id: str | None = None):
    socket = Socket()
    peer = RoomPeer(room_id or str(block_id), origin, socket.send)
    await block_room_join(block_id=block_id, peer=peer)
    await peer.open()
    return peer, socket


async def _broadcast(block_id, updates: list[bytes], origin: str | None) -> None:
    """As a service does after its commit: from a thread of the server."""
    await sync_to_async(block_broadcast)(
        block_id=block_id, updates=updates, origin=origin
    )


async def test_broadcast_reaches_every_peer_of_the_room_but_its_origin():
    block_id = uuid.uuid4()
    _, alice = await _joined(block_id, "alice")
    _, bob = await _joined(block_id, "bob")
    elsewhere_id = uuid.uuid4()
    _, elsewhere = await _joined(elsewhere_id, "carol")

    await _broadcast(block_id, [b"one", b"two"], origin="alice")

    assert await bob.updates() == [b"one", b"two"]
    assert await alice.nothing_more(block_id)
    assert await elsewhere.nothing_more(elsewhere_id)


async def test_changes_made_outside_any_room_reach_every_peer():
    block_id = uuid.uuid4()
    _, alice = await _joined(block_id, "alice")

    await _broadcast(block_id, [b"from the api"], origin=None)

    assert await alice.updates() == [b"from the api"]


async def test_a_joining_peer_gets_updates_only_once_opened_and_in_order():
    block_id = uuid.uuid4()
    socket = Socket()
    peer = RoomPeer(str(block_id), "late", socket.send)
    await block_room_join(block_id=block_id, peer=peer)
    _, witness = await _joined(block_id, "witness")

    await _broadcast(block_id, [b"first"], origin=None)
    await _broadcast(block_id, [b"second"], origin=None)
    assert await witness.updates() == [b"first"]
    assert await witness.updates() == [b"second"]
    await _settled(block_id, witness)
    assert socket.frames.empty()  # the join's answer is not out yet

    await peer.open()
    assert await socket.updates() == [b"first"]
    assert await socket.updates() == [b"second"]
    assert await socket.updates() == [MARKER]


async def test_frames_carry_the_room_id_as_each_client_named_it():
    block_id = uuid.uuid4()
    _, lower = await _joined(block_id, "lower")
    _, upper = await _joined(block_id, "upper", room_id=str(block_id).upper())

    await _broadcast(block_id, [b"x"], origin=None)

    for socket, room_id in ((lower, str(block_id)), (upper, str(block_id).upper())):
        message = await asyncio.wait_for(socket.frames.get(), timeout=5)
        assert isinstance(message, sp.DocUpdate) and message.room_id == room_id


async def test_peers_are_told_what_they_were_sent_once_every_peer_was_sent_it():
    block_id = uuid.uuid4()
    events: list[tuple[str, str]] = []
    told = asyncio.Event()
    names = ["a", "b", "c"]
    for name in names:

        async def send(frame: bytes, name: str = name) -> None:
            events.append(("sent", name))

        def received(version: int, name: str = name) -> None:
            events.append(("told", f"{name}@{version}"))
            if sum(kind == "told" for kind, _ in events) == len(names):
                told.set()

        peer = RoomPeer(str(block_id), name, send, received=received)
        await block_room_join(block_id=block_id, peer=peer)
        await peer.open()

    await sync_to_async(block_broadcast)(
        block_id=block_id, updates=[b"x"], origin=None, version=7
    )
    await asyncio.wait_for(told.wait(), timeout=5)

    kinds = [kind for kind, _ in events]
    assert kinds == ["sent"] * len(names) + ["told"] * len(names)
    assert sorted(what for kind, what in events if kind == "told") == [
        f"{name}@7" for name in names
    ]


async def test_a_peer_that_left_gets_nothing():
    block_id = uuid.uuid4()
    peer, alice = await _joined(block_id, "alice")
    _, witness = await _joined(block_id, "witness")
    await block_room_leave(block_id=block_id, peer=peer)

    await _broadcast(block_id, [b"gone"], origin=None)

    assert await witness.updates() == [b"gone"]
    await _settled(block_id, witness)
    assert alice.frames.empty()


@pytest.mark.redis
async def test_through_redis_a_peer_gets_each_update_once_and_other_processes_too(
    redis_channel_layer,
):
    block_id = uuid.uuid4()
    peer, alice = await _joined(block_id, "alice")

    # Broadcast here: delivered by the hub, and its echo through Redis skipped.
    await _broadcast(block_id, [b"local"], origin=None)
    assert await alice.updates() == [b"local"]

    # Another process's change arrives through the block's group, after the
    # echo of the local one would have (one channel, in order).
    await get_channel_layer().group_send(
        group_for_block(block_id),
        {
            "type": MESSAGE_TYPE,
            "block_id": str(block_id),
            "updates": [b"remote"],
            "origin": None,
            "process": "another process",
        },
    )
    assert await alice.updates() == [b"remote"]
    await block_room_leave(block_id=block_id, peer=peer)
