"""BlockSyncConsumer (/ws/sync/) driven frame by frame with WebsocketCommunicator."""

import asyncio
import secrets
import time

import loro
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from memory.blocks import seen
from memory.blocks.selectors import block_document_load
from memory.blocks.services import (
    block_configure,
    block_create,
    block_operate,
    block_share,
    block_unshare,
)
from memory.blocks.services import change as change_module
from memory.blocks.services import sharing as block_sharing
from memory.blocks.sync import consumer as consumer_module
from memory.blocks.sync import protocol as sp
from memory.blocks.sync.consumer import CLOSE_PROTOCOL_ERROR, BlockSyncConsumer
from memory.blocks.tasks import blocks_seen_record_task
from memory.models import BlockSeen, BlockUpdate, MemoryBlock
from pattern_site.asgi import application
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents import services as agent_services
from pattern_site.kernel.agents.services import agent_token_issue, agent_token_revoke
from pattern_site.kernel.daphne_server import SCOPE_KEY
from pattern_site.kernel.realtime import (
    CLOSE_IDLE,
    CLOSE_TOO_MANY,
    CLOSE_UNAUTHENTICATED,
)
from tests.conftest import READY_SECONDS, daphne, sync_url
from tests.factories import AgentFactory, ConstellationFactory
from tests.wsclient import WebSocket

pytestmark = pytest.mark.django_db(transaction=True)
LOR = sp.CrdtType.LORO
EPH = sp.CrdtType.LORO_EPHEMERAL


def _block(agent, **kwargs):
    kwargs.setdefault("content", "hello")
    return block_create(actor=Actor.system(), label="notes", owner=agent, **kwargs)


def _text(block) -> str:
    return block_document_load(block=block).get_text("content").to_string()


def _stored_updates(block) -> int:
    return BlockUpdate.objects.filter(block=block).count()


# The sockets the test opened through ``Peer.open``.
_opened: list[WebsocketCommunicator] = []


@pytest.fixture(autouse=True)
async def _peers_closed():
    """Each socket a test opened is closed, and its consumer done, before
    the test's rows are deleted: work a consumer still has in a database
    thread after a join (looks, liveness) would otherwise run beside the
    truncation, which PostgreSQL may then find deadlocked with it."""
    yield
    while _opened:
        communicator = _opened.pop()
        if not communicator.future.done():
            await communicator.disconnect(timeout=READY_SECONDS)


class Peer:
    """One websocket speaking the protocol, with a Loro document of its own."""

    def __init__(self, communicator: WebsocketCommunicator, peer_id: int) -> None:
        self.ws = communicator
        self.doc = loro.LoroDoc()
        self.doc.peer_id = peer_id

    @classmethod
    async def open(cls, *, user=None, peer_id=1, app=None, headers=None, writer=None):
        communicator = WebsocketCommunicator(
            app or BlockSyncConsumer.as_asgi(), "/ws/sync/", headers=headers or []
        )
        if writer is not None:
            communicator.scope[SCOPE_KEY] = writer
        if user is not None:
            communicator.scope["actor"] = Actor.for_user(user)
        _opened.append(communicator)
        connected, _ = await communicator.connect()
        assert connected
        return cls(communicator, peer_id)

    async def send(self, message: sp.Message) -> None:
        await self.ws.send_to(bytes_data=sp.encode(message))

    async def receive(self, timeout: float = 5) -> sp.Message:
        return sp.decode(await self.ws.receive_from(timeout=timeout))

    async def join(self, room: str, *, token: str = "", crdt=LOR) -> sp.Message:
        version = self.doc.oplog_vv.encode() if crdt == LOR else b""
        await self.send(sp.JoinRequest(crdt, room, token.encode(), version))
        response = await self.receive()
        if isinstance(response, sp.JoinResponseOk) and crdt == LOR:
            backfill = await self.receive()
            assert isinstance(backfill, sp.DocUpdate)
            self.doc.import_batch(list(backfill.updates))
        return response

    async def edit(
        self, room: str, insert: str = "", *, at: int | None = None, delete: int = 0
    ) -> sp.Ack:
        before = self.doc.oplog_vv
        text = self.doc.get_text("content")
        if delete:
            text.delete(at or 0, delete)
        else:
            text.insert(text.len_unicode if at is None else at, insert)
        self.doc.commit()
        update = self.doc.export(loro.ExportMode.Updates(from_=before))
        batch = sp.new_batch_id()
        await self.send(sp.DocUpdate(LOR, room, (update,), batch))
        ack = await self.receive()
        assert isinstance(ack, sp.Ack) and ack.ref_id == batch
        return ack

    def text(self) -> str:
        return self.doc.get_text("content").to_string()

    async def nothing_more(self) -> bool:
        """Nothing waits for this socket: the server answers frames in order,
        and every update it relays was queued before the sender's ack, so a
        pong to a ping sent now comes first only if nothing else is due."""
        await self.ws.send_to(text_data="ping")
        return await self.ws.receive_from() == "pong"

    async def closed(self) -> int:
        """The code the server closed this socket with (nothing else came)."""
        output = await self.ws.receive_output(timeout=3)
        assert output["type"] == "websocket.close", output
        return int(output["code"])


@pytest.fixture
def block(agent):
    return _block(agent)


async def test_partner_joins_with_session_and_receives_the_document(partner, block):
    peer = await Peer.open(user=partner)
    response = await peer.join(str(block.pk))
    assert response == sp.JoinResponseOk(
        LOR, str(block.pk), sp.Permission.WRITE, response.version
    )
    assert peer.text() == "hello"
    server_doc = await sync_to_async(block_document_load)(block=block)
    assert response.version == server_doc.oplog_vv.encode()


async def test_join_through_the_asgi_stack_uses_the_django_session(partner, block):
    client = Client()
    await sync_to_async(client.force_login)(partner)
    headers = [
        (b"origin", b"http://127.0.0.1"),
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
    ]
    peer = await Peer.open(app=application, headers=headers)
    assert isinstance(await peer.join(str(block.pk)), sp.JoinResponseOk)
    assert peer.text() == "hello"


async def test_agent_joins_with_its_token_in_the_auth_payload(
    agent, agent_token, block
):
    peer = await Peer.open()
    response = await peer.join(str(block.pk), token=agent_token.raw)
    assert response.permission == sp.Permission.WRITE
    assert peer.text() == "hello"


async def test_join_without_credentials_is_auth_failed(block):
    peer = await Peer.open()
    response = await peer.join(str(block.pk))
    assert isinstance(response, sp.JoinError)
    assert response.code == sp.JoinErrorCode.AUTH_FAILED


async def test_join_with_a_wrong_token_is_auth_failed(block):
    peer = await Peer.open()
    response = await peer.join(str(block.pk), token="not-a-token")
    assert response.code == sp.JoinErrorCode.AUTH_FAILED


async def test_another_constellations_agent_cannot_join(block):
    stranger = await sync_to_async(AgentFactory)(
        constellation=await sync_to_async(ConstellationFactory)(name="Other")
    )
    token = await sync_to_async(agent_token_issue)(agent=stranger)
    peer = await Peer.open()
    response = await peer.join(str(block.pk), token=token.raw)
    assert isinstance(response, sp.JoinError)
    assert response.app_code == "not_found"
    # and a room id that is no block at all
    response = await peer.join("not-a-uuid", token=token.raw)
    assert response.app_code == "not_found"


async def test_read_only_joiner_gets_read_and_its_updates_are_refused(
    agent, agent_token
):
    block = await sync_to_async(_block)(agent, permission="read_only")
    peer = await Peer.open()
    response = await peer.join(str(block.pk), token=agent_token.raw)
    assert response.permission == sp.Permission.READ
    ack = await peer.edit(str(block.pk), " world")
    assert ack.status == sp.UpdateStatus.PERMISSION_DENIED
    assert await sync_to_async(_text)(block) == "hello"


async def test_read_only_joiner_still_receives_live_updates(
    partner, agent, agent_token
):
    block = await sync_to_async(_block)(agent, permission="read_only")
    reader = await Peer.open(peer_id=2)
    await reader.join(str(block.pk), token=agent_token.raw)
    writer = await Peer.open(user=partner, peer_id=3)
    await writer.join(str(block.pk))
    assert (await writer.edit(str(block.pk), "!")).status == sp.UpdateStatus.OK
    relayed = await reader.receive()
    reader.doc.import_batch(list(relayed.updates))
    assert reader.text() == "hello!"


async def test_update_is_stored_with_the_actor_before_the_ack(
    agent, agent_token, block
):
    peer = await Peer.open()
    await peer.join(str(block.pk), token=agent_token.raw)
    count = await sync_to_async(_stored_updates)(block)
    ack = await peer.edit(str(block.pk), " world")
    assert ack.status == sp.UpdateStatus.OK
    # The ack arrived, so the update is committed: visible to a fresh read.
    assert await sync_to_async(_text)(block) == "hello world"
    assert await sync_to_async(_stored_updates)(block) == count + 1
    latest = await sync_to_async(
        lambda: BlockUpdate.objects.filter(block=block).latest("pk")
    )()
    assert (latest.actor_kind, latest.actor_name) == ("agent", agent.name)


async def test_update_is_broadcast_to_other_peers_and_not_echoed(
    partner, agent_token, block
):
    alice = await Peer.open(user=partner, peer_id=11)
    bob = await Peer.open(peer_id=12)
    await alice.join(str(block.pk))
    await bob.join(str(block.pk), token=agent_token.raw)
    ack = await alice.edit(str(block.pk), " from alice")
    assert ack.status == sp.UpdateStatus.OK
    relayed = await bob.receive()
    assert isinstance(relayed, sp.DocUpdate)
    bob.doc.import_batch(list(relayed.updates))
    assert bob.text() == "hello from alice"
    assert await alice.nothing_more()


class _RecordingWriter:
    """Stands for a Daphne connection's ``FrameWriter``: keeps the frames it
    is given, or declines them all (``covers=False``), as a closing
    socket's does."""

    def __init__(self, *, covers: bool = True) -> None:
        self.covers = covers
        self.frames: list[bytes] = []

    def write(self, payload: bytes) -> bool:
        if self.covers:
            self.frames.append(payload)
        return self.covers


async def test_a_sockets_binary_frames_go_through_its_frame_writer(
    partner, agent_token, block
):
    alice = await Peer.open(user=partner, peer_id=11)
    writer = _RecordingWriter()
    bob = await Peer.open(peer_id=12, writer=writer)
    await alice.join(str(block.pk))
    await bob.send(sp.JoinRequest(LOR, str(block.pk), agent_token.raw.encode(), b""))
    # Text frames (ping / pong) still go through ASGI, after what came first.
    assert await bob.nothing_more()
    joined, backfill = (sp.decode(frame) for frame in writer.frames)
    assert isinstance(joined, sp.JoinResponseOk)
    bob.doc.import_batch(list(backfill.updates))
    ack = await alice.edit(str(block.pk), " from alice")
    assert ack.status == sp.UpdateStatus.OK
    assert await bob.nothing_more()
    relayed = sp.decode(writer.frames[-1])
    assert isinstance(relayed, sp.DocUpdate)
    bob.doc.import_batch(list(relayed.updates))
    assert bob.text() == "hello from alice"


async def test_frames_a_writer_declines_go_through_asgi(partner, block):
    writer = _RecordingWriter(covers=False)
    peer = await Peer.open(user=partner, writer=writer)
    assert isinstance(await peer.join(str(block.pk)), sp.JoinResponseOk)
    assert peer.text() == "hello"
    assert writer.frames == []


async def test_a_relayed_update_that_fails_to_store_asks_every_socket_to_rejoin(
    partner, block, monkeypatch
):
    room = str(block.pk)
    alice = await Peer.open(user=partner, peer_id=71)
    bob = await Peer.open(user=partner, peer_id=72)
    await alice.join(room)
    await bob.join(room)

    def disk_full(**kwargs):
        raise RuntimeError("database or disk is full")

    monkeypatch.setattr(change_module, "_block_record", disk_full)
    text = alice.doc.get_text("content")
    before = alice.doc.oplog_vv
    text.insert(text.len_unicode, " world")
    alice.doc.commit()
    update = alice.doc.export(loro.ExportMode.Updates(from_=before))
    batch = sp.new_batch_id()
    await alice.send(sp.DocUpdate(LOR, room, (update,), batch))

    # The update passed every check, so bob was sent it while it was being
    # stored; the store failed, so neither socket may keep its copy unsaid.
    relayed = await bob.receive()
    assert isinstance(relayed, sp.DocUpdate)
    bob.doc.import_batch(list(relayed.updates))
    rejoin = await bob.receive()
    assert isinstance(rejoin, sp.RoomError)
    assert rejoin.code == sp.RoomErrorCode.REJOIN_SUGGESTED
    answers = [await alice.receive(), await alice.receive()]
    assert sp.Ack(LOR, room, batch, sp.UpdateStatus.UNKNOWN) in answers
    assert any(
        isinstance(m, sp.RoomError) and m.code == sp.RoomErrorCode.REJOIN_SUGGESTED
        for m in answers
    )
    assert await sync_to_async(_text)(block) == "hello"

    # The rejoin hands the server what the client has and it lacks, as the
    # npm client does on JoinResponseOk: the change is stored after all.
    monkeypatch.undo()
    joined = await bob.join(room)
    assert isinstance(joined, sp.JoinResponseOk)
    missing = bob.doc.export(
        loro.ExportMode.Updates(from_=loro.VersionVector.decode(joined.version))
    )
    batch = sp.new_batch_id()
    await bob.send(sp.DocUpdate(LOR, room, (missing,), batch))
    assert await bob.receive() == sp.Ack(LOR, room, batch, sp.UpdateStatus.OK)
    assert await sync_to_async(_text)(block) == "hello world"


async def test_every_peer_gets_every_update_when_all_edit_at_once(partner, block):
    # Each peer sends a burst while the others do: more relays reach each
    # socket at once than a channel-layer channel holds (100), and none may
    # be dropped.
    peers = [await Peer.open(user=partner, peer_id=40 + i) for i in range(6)]
    room, burst = str(block.pk), 40
    for peer in peers:
        await peer.join(room)
    for peer in peers:
        text = peer.doc.get_text("content")
        for k in range(burst):
            before = peer.doc.oplog_vv
            text.insert(0, f"{peer.doc.peer_id}.{k};")
            peer.doc.commit()
            update = peer.doc.export(loro.ExportMode.Updates(from_=before))
            await peer.send(sp.DocUpdate(LOR, room, (update,), sp.new_batch_id()))
    for peer in peers:
        acks = relayed = 0
        while acks < burst or relayed < burst * (len(peers) - 1):
            message = await peer.receive()
            if isinstance(message, sp.Ack):
                assert message.status == sp.UpdateStatus.OK
                acks += 1
            else:
                peer.doc.import_batch(list(message.updates))
                relayed += 1
    stored = await sync_to_async(_text)(block)
    assert {peer.text() for peer in peers} == {stored}


async def test_api_changes_reach_open_rooms(partner, agent, block):
    peer = await Peer.open(user=partner)
    await peer.join(str(block.pk))
    await sync_to_async(block_operate)(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "append_text", "text": " (agent)"}],
    )
    relayed = await peer.receive()
    peer.doc.import_batch(list(relayed.updates))
    assert peer.text() == "hello (agent)"


async def test_corrupt_update_is_invalid_and_nothing_is_stored(partner, block):
    peer = await Peer.open(user=partner)
    await peer.join(str(block.pk))
    count = await sync_to_async(_stored_updates)(block)
    batch = sp.new_batch_id()
    await peer.send(sp.DocUpdate(LOR, str(block.pk), (b"\x00garbage" * 10,), batch))
    ack = await peer.receive()
    assert ack == sp.Ack(LOR, str(block.pk), batch, sp.UpdateStatus.INVALID_UPDATE)
    assert await sync_to_async(_stored_updates)(block) == count
    assert await sync_to_async(_text)(block) == "hello"


async def test_update_over_the_char_limit_is_payload_too_large(partner, agent):
    block = await sync_to_async(_block)(agent, char_limit=10)
    peer = await Peer.open(user=partner)
    await peer.join(str(block.pk))
    ack = await peer.edit(str(block.pk), "x" * 50)
    assert ack.status == sp.UpdateStatus.PAYLOAD_TOO_LARGE
    assert await sync_to_async(_text)(block) == "hello"


async def test_a_block_over_its_byte_cap_takes_deletions_but_not_growth(
    partner, agent, settings
):
    content = secrets.token_hex(400)  # does not compress
    block = await sync_to_async(_block)(agent, content=content)
    settings.MEMORY_BLOCK_MAX_BYTES = 500  # less than it stores already
    room = str(block.pk)
    peer = await Peer.open(user=partner)
    await peer.join(room)

    assert (await peer.edit(room, at=0, delete=100)).status == sp.UpdateStatus.OK
    assert await sync_to_async(_text)(block) == content[100:]
    ack = await peer.edit(room, "more")
    assert ack.status == sp.UpdateStatus.PAYLOAD_TOO_LARGE
    assert await sync_to_async(_text)(block) == content[100:]


async def test_oversize_frame_is_payload_too_large(partner, block):
    peer = await Peer.open(user=partner)
    await peer.join(str(block.pk))
    batch = sp.new_batch_id()
    big = b"x" * (sp.MAX_MESSAGE_SIZE + 10)
    frame = b"%LOR" + bytes([36]) + str(block.pk).encode() + b"\x03\x01"
    frame += sp._uleb128(len(big)) + big + batch
    await peer.ws.send_to(bytes_data=frame)
    ack = await peer.receive()
    assert ack.status == sp.UpdateStatus.PAYLOAD_TOO_LARGE


async def test_append_only_agent_cannot_rewrite(agent, agent_token):
    block = await sync_to_async(_block)(agent, permission="append")
    peer = await Peer.open()
    await peer.join(str(block.pk), token=agent_token.raw)
    assert (await peer.edit(str(block.pk), " more")).status == sp.UpdateStatus.OK
    ack = await peer.edit(str(block.pk), at=0, delete=5)
    assert ack.status == sp.UpdateStatus.PERMISSION_DENIED
    assert await sync_to_async(_text)(block) == "hello more"


async def test_update_before_joining_is_permission_denied(block, partner):
    peer = await Peer.open(user=partner)
    batch = sp.new_batch_id()
    await peer.send(sp.DocUpdate(LOR, str(block.pk), (b"x",), batch))
    assert (await peer.receive()).status == sp.UpdateStatus.PERMISSION_DENIED


async def test_large_update_arrives_in_fragments_and_is_stored(partner, agent):
    block = await sync_to_async(_block)(agent, char_limit=1_000_000)
    peer = await Peer.open(user=partner)
    await peer.join(str(block.pk))
    other = await Peer.open(user=partner, peer_id=99)
    await other.join(str(block.pk))
    before = peer.doc.oplog_vv
    # Random-ish text so that the update does not compress below 256 KiB.
    words = [f"{i * 7919 % 100003:x}" for i in range(80_000)]
    peer.doc.get_text("content").insert(5, " ".join(words))
    peer.doc.commit()
    update = peer.doc.export(loro.ExportMode.Updates(from_=before))
    assert len(update) > sp.MAX_MESSAGE_SIZE
    frames = sp.doc_update_frames(LOR, str(block.pk), [update], sp.new_batch_id())
    header = sp.decode(frames[0])
    assert isinstance(header, sp.DocUpdateFragmentHeader)
    for frame in frames:
        await peer.ws.send_to(bytes_data=frame)
    ack = await peer.receive(timeout=20)
    assert ack == sp.Ack(LOR, str(block.pk), header.batch_id, sp.UpdateStatus.OK)
    assert await sync_to_async(_text)(block) == peer.text()
    # the other peer gets it too, in fragments again
    relayed_header = await other.receive()
    assert isinstance(relayed_header, sp.DocUpdateFragmentHeader)
    assembler = sp.FragmentAssembler()
    assembler.start(relayed_header, now=0)
    whole = None
    while whole is None:
        whole = assembler.add(await other.receive())
    other.doc.import_batch(list(whole))
    assert other.text() == peer.text()


async def test_incomplete_fragments_time_out(partner, block, monkeypatch):
    monkeypatch.setattr(BlockSyncConsumer, "fragment_timeout", 0.2)
    peer = await Peer.open(user=partner)
    await peer.join(str(block.pk))
    batch = sp.new_batch_id()
    room = str(block.pk)
    await peer.send(sp.DocUpdateFragmentHeader(LOR, room, batch, 2, 10))
    await peer.send(sp.DocUpdateFragment(LOR, room, batch, 0, b"12345"))
    ack = await peer.receive(timeout=3)
    assert ack == sp.Ack(LOR, room, batch, sp.UpdateStatus.FRAGMENT_TIMEOUT)
    await peer.send(sp.DocUpdateFragment(LOR, room, batch, 1, b"67890"))
    ack = await peer.receive()
    assert ack.status == sp.UpdateStatus.FRAGMENT_TIMEOUT


async def test_a_flood_of_updates_is_rate_limited(partner, block, settings):
    settings.PATTERN_SYNC_RATE_LIMIT = 0.5  # one update, then one per 2 s
    peer = await Peer.open(user=partner)
    await peer.join(str(block.pk))
    statuses = [(await peer.edit(str(block.pk), "x")).status for _ in range(3)]
    assert statuses == [sp.UpdateStatus.OK] + [sp.UpdateStatus.RATE_LIMITED] * 2
    assert await sync_to_async(_text)(block) == "hellox"


async def test_ping_is_answered_with_pong(partner):
    peer = await Peer.open(user=partner)
    await peer.ws.send_to(text_data="ping")
    assert await peer.ws.receive_from() == "pong"


async def test_malformed_frame_closes_the_socket(partner):
    peer = await Peer.open(user=partner)
    await peer.ws.send_to(bytes_data=b"%LOR\x00\x09")
    output = await peer.ws.receive_output(timeout=2)
    assert output == {"type": "websocket.close", "code": CLOSE_PROTOCOL_ERROR}
    # Daphne accepts only 1000 and 3000-4999 from an application.
    assert 4000 <= CLOSE_PROTOCOL_ERROR <= 4999


async def test_leave_stops_the_updates(partner, block):
    alice = await Peer.open(user=partner, peer_id=21)
    bob = await Peer.open(user=partner, peer_id=22)
    await alice.join(str(block.pk))
    await bob.join(str(block.pk))
    await bob.send(sp.Leave(LOR, str(block.pk)))
    assert await bob.nothing_more()  # the leave has been handled
    await alice.edit(str(block.pk), "?")
    assert await bob.nothing_more()


async def test_presence_is_relayed_and_replayed_to_late_joiners(partner, block):
    room = str(block.pk)
    alice = await Peer.open(user=partner, peer_id=31)
    assert isinstance(await alice.join(room, crdt=EPH), sp.JoinResponseOk)
    store = loro.EphemeralStore(30_000)
    store.set("31-cm-user", {"name": "alice", "colorClassName": "peer-colour-1"})
    await alice.send(sp.DocUpdate(EPH, room, (store.encode_all(),), sp.new_batch_id()))
    assert (await alice.receive()).status == sp.UpdateStatus.OK

    bob = await Peer.open(user=partner, peer_id=32)
    await bob.join(room, crdt=EPH)
    replayed = await bob.receive()
    mirror = loro.EphemeralStore(30_000)
    mirror.apply(replayed.updates[0])
    assert mirror.get("31-cm-user")["name"] == "alice"

    store.set("31-cm-cursor", {"anchor": b"\x01"})
    await alice.send(
        sp.DocUpdate(EPH, room, (store.encode("31-cm-cursor"),), b"\x00" * 8)
    )
    await alice.receive()  # ack
    live = await bob.receive()
    mirror.apply(live.updates[0])
    assert mirror.get("31-cm-cursor") is not None
    # presence is never stored
    assert await sync_to_async(_stored_updates)(block) == 1


async def test_corrupt_presence_is_invalid(partner, block):
    peer = await Peer.open(user=partner)
    await peer.join(str(block.pk), crdt=EPH)
    batch = sp.new_batch_id()
    await peer.send(sp.DocUpdate(EPH, str(block.pk), (b"\xff\xfe",), batch))
    assert (await peer.receive()).status == sp.UpdateStatus.INVALID_UPDATE


async def test_one_socket_multiplexes_rooms_of_several_blocks(partner, agent):
    first = await sync_to_async(_block)(agent)
    second = await sync_to_async(
        lambda: block_create(
            actor=Actor.system(), label="other", owner=agent, content="two"
        )
    )()
    both = await Peer.open(user=partner, peer_id=41)
    await both.join(str(first.pk))
    other_doc = loro.LoroDoc()
    await both.send(
        sp.JoinRequest(LOR, str(second.pk), b"", other_doc.oplog_vv.encode())
    )
    assert isinstance(await both.receive(), sp.JoinResponseOk)
    other_doc.import_batch(list((await both.receive()).updates))
    assert other_doc.get_text("content").to_string() == "two"

    writer = await Peer.open(user=partner, peer_id=42)
    await writer.join(str(second.pk))
    await writer.edit(str(second.pk), "!")
    relayed = await both.receive()
    assert relayed.room_id == str(second.pk)
    other_doc.import_batch(list(relayed.updates))
    assert other_doc.get_text("content").to_string() == "two!"
    assert both.text() == "hello"


async def test_unreadable_version_is_version_unknown(partner, block):
    peer = await Peer.open(user=partner)
    await peer.send(sp.JoinRequest(LOR, str(block.pk), b"", b"\xff\xff\xff"))
    response = await peer.receive()
    assert response.code == sp.JoinErrorCode.VERSION_UNKNOWN
    # the npm client then retries with an empty version: a whole snapshot
    await peer.send(sp.JoinRequest(LOR, str(block.pk), b"", b""))
    assert isinstance(await peer.receive(), sp.JoinResponseOk)
    peer.doc.import_batch(list((await peer.receive()).updates))
    assert peer.text() == "hello"


async def test_a_dashboard_form_edit_reaches_open_rooms(partner, block):
    peer = await Peer.open(user=partner)
    await peer.join(str(block.pk))

    def post_form():
        client = Client()
        client.force_login(partner)
        return client.post(
            f"/memory/blocks/{block.pk}/edit", {"content": "rewritten in a form"}
        )

    response = await sync_to_async(post_form)()
    assert response.status_code == 302
    relayed = await peer.receive()
    peer.doc.import_batch(list(relayed.updates))
    assert peer.text() == "rewritten in a form"


def test_malformed_frame_closes_with_the_application_code_through_daphne(
    daphne_server,
):
    ws_url = sync_url(daphne_server)
    ws = WebSocket(ws_url, headers={"Origin": "http://127.0.0.1"})
    try:
        assert ws.status == 101
        ws.send_binary(b"%LOR\x00\x09")
        assert ws.close_code() == CLOSE_PROTOCOL_ERROR
    finally:
        ws.close()


async def test_malformed_frame_is_logged_in_one_line(partner, caplog):
    peer = await Peer.open(user=partner)
    with caplog.at_level("INFO", logger="memory.blocks.sync.consumer"):
        await peer.ws.send_to(bytes_data=b"%LOR\x00\x09")
        await peer.ws.receive_output(timeout=2)
    (record,) = caplog.records
    assert record.exc_info is None and "\n" not in record.getMessage()


async def test_updates_to_containers_outside_the_schema_are_refused_and_not_stored(
    partner, block
):
    peer = await Peer.open(user=partner, peer_id=41)
    await peer.join(str(block.pk))
    stored = await sync_to_async(_stored_updates)(block)
    for n in range(10):
        before = peer.doc.oplog_vv
        peer.doc.get_text(f"x{n}").insert(0, "y" * 300_000)
        peer.doc.commit()
        update = peer.doc.export(loro.ExportMode.Updates(from_=before))
        frames = sp.doc_update_frames(LOR, str(block.pk), [update], b"")
        header = sp.decode(frames[0])
        assert isinstance(header, sp.DocUpdateFragmentHeader)
        for frame in frames:
            await peer.ws.send_to(bytes_data=frame)
        ack = await peer.receive()
        assert ack == sp.Ack(
            LOR, str(block.pk), header.batch_id, sp.UpdateStatus.INVALID_UPDATE
        )
    assert await sync_to_async(_stored_updates)(block) == stored
    joiner = await Peer.open(user=partner, peer_id=42)
    await joiner.join(str(block.pk))
    assert joiner.doc.get_value().keys() == {"content"}


# --- rights that change while a socket is open ----------------------------


@pytest.fixture
def shared_block(agent, other_agent):
    block = _block(agent)
    block_share(
        actor=Actor.system(), block=block, agent=other_agent, access="read_write"
    )
    return block


async def _evicted(peer: Peer, room: str) -> sp.RoomError:
    message = await peer.receive()
    assert message == sp.RoomError(LOR, room, sp.RoomErrorCode.EVICTED, message.message)
    return message


async def _guest_and_partner(block, guest_agent, partner) -> tuple[Peer, Peer]:
    """The block's room joined by ``guest_agent`` (with a token of its own)
    and by the partner (with the session)."""
    token = await sync_to_async(agent_token_issue)(agent=guest_agent)
    guest = await Peer.open(peer_id=51)
    await guest.join(str(block.pk), token=token.raw)
    session = await Peer.open(user=partner, peer_id=52)
    await session.join(str(block.pk))
    return guest, session


async def test_unsharing_evicts_the_agents_open_socket_at_once(
    partner, other_agent, shared_block
):
    room = str(shared_block.pk)
    guest, owner_side = await _guest_and_partner(shared_block, other_agent, partner)

    await sync_to_async(block_unshare)(
        actor=Actor.system(), block=shared_block, agent=other_agent
    )

    await _evicted(guest, room)
    assert (await owner_side.edit(room, "!")).status == sp.UpdateStatus.OK
    assert await guest.nothing_more()  # the edit was not relayed to it
    assert (await guest.edit(room, "?")).status == sp.UpdateStatus.PERMISSION_DENIED
    assert await sync_to_async(_text)(shared_block) == "hello!"


async def test_a_share_downgraded_to_read_refuses_updates_but_still_relays(
    partner, other_agent, shared_block
):
    room = str(shared_block.pk)
    guest, writer = await _guest_and_partner(shared_block, other_agent, partner)

    await sync_to_async(block_share)(
        actor=Actor.system(), block=shared_block, agent=other_agent, access="read_only"
    )

    ack = await guest.edit(room, "?")
    assert ack.status == sp.UpdateStatus.PERMISSION_DENIED
    assert (await writer.edit(room, "!")).status == sp.UpdateStatus.OK
    relayed = await guest.receive()
    assert isinstance(relayed, sp.DocUpdate)
    assert await sync_to_async(_text)(shared_block) == "hello!"


async def test_a_permission_downgrade_refuses_the_owners_next_update(
    partner, agent, agent_token, block
):
    room = str(block.pk)
    peer = await Peer.open(peer_id=55)
    await peer.join(room, token=agent_token.raw)
    await sync_to_async(block_configure)(
        actor=Actor.for_user(partner), block=block, permission="read_only"
    )
    assert (await peer.edit(room, "?")).status == sp.UpdateStatus.PERMISSION_DENIED
    assert await sync_to_async(_text)(block) == "hello"


async def test_revoking_the_token_evicts_every_socket_joined_with_it(
    partner, agent, agent_token, block
):
    room = str(block.pk)
    first, second = await Peer.open(peer_id=56), await Peer.open(peer_id=57)
    await first.join(room, token=agent_token.raw)
    await second.join(room, token=agent_token.raw)
    await second.join(room, token=agent_token.raw, crdt=EPH)
    session = await Peer.open(user=partner, peer_id=58)
    await session.join(room)

    await sync_to_async(agent_token_revoke)(agent=agent)

    await _evicted(first, room)
    await _evicted(second, room)
    presence = await second.receive()
    assert presence == sp.RoomError(
        EPH, room, sp.RoomErrorCode.EVICTED, presence.message
    )
    assert "revoked" in presence.message
    # The human's session socket is untouched; the agent's are closed.
    assert (await session.edit(room, "!")).status == sp.UpdateStatus.OK
    assert await first.closed() == await second.closed() == CLOSE_UNAUTHENTICATED


async def test_a_socket_only_in_the_presence_room_is_evicted_too(
    partner, agent, agent_token, block
):
    room = str(block.pk)
    watcher = await Peer.open(peer_id=62)
    assert isinstance(
        await watcher.join(room, token=agent_token.raw, crdt=EPH), sp.JoinResponseOk
    )
    session = await Peer.open(user=partner, peer_id=63)
    await session.join(room, crdt=EPH)

    await sync_to_async(agent_token_revoke)(agent=agent)

    evicted = await watcher.receive()
    assert evicted == sp.RoomError(EPH, room, sp.RoomErrorCode.EVICTED, evicted.message)
    # The partner's presence no longer reaches it.
    store = loro.EphemeralStore(30_000)
    store.set("cursor", 7)
    presence = sp.DocUpdate(EPH, room, (store.encode_all(),), sp.new_batch_id())
    await session.send(presence)
    assert (await session.receive()).status == sp.UpdateStatus.OK
    assert await watcher.closed() == CLOSE_UNAUTHENTICATED


def _unannounced(monkeypatch, *modules) -> None:
    """Revocations made through ``modules``' services reach no socket: as if
    the socket's own re-check had not come yet when its next update did."""
    for module in modules:
        monkeypatch.setattr(module, "rights_revoke_send", lambda **kw: None)


async def test_an_update_sent_right_after_the_token_is_revoked_is_refused(
    agent, agent_token, block, monkeypatch
):
    _unannounced(monkeypatch, agent_services)
    room = str(block.pk)
    peer = await Peer.open(peer_id=60)
    await peer.join(room, token=agent_token.raw)
    stored = await sync_to_async(_stored_updates)(block)

    await sync_to_async(agent_token_revoke)(agent=agent)

    assert (await peer.edit(room, "?")).status == sp.UpdateStatus.PERMISSION_DENIED
    assert await sync_to_async(_stored_updates)(block) == stored
    assert await sync_to_async(_text)(block) == "hello"


async def test_an_update_sent_right_after_an_unshare_is_refused(
    partner, other_agent, shared_block, monkeypatch
):
    _unannounced(monkeypatch, block_sharing)
    room = str(shared_block.pk)
    guest, _ = await _guest_and_partner(shared_block, other_agent, partner)
    stored = await sync_to_async(_stored_updates)(shared_block)

    await sync_to_async(block_unshare)(
        actor=Actor.system(), block=shared_block, agent=other_agent
    )

    assert (await guest.edit(room, "?")).status == sp.UpdateStatus.PERMISSION_DENIED
    assert await sync_to_async(_stored_updates)(shared_block) == stored
    assert await sync_to_async(_text)(shared_block) == "hello"


@pytest.mark.redis
def test_a_revoked_token_evicts_its_sockets_in_every_daphne_process(
    agent, agent_token, redis_url, redis_channel_layer
):
    block = _block(agent)
    room = str(block.pk)
    with (
        daphne(PATTERN_REDIS_URL=redis_url) as (url_a, _),
        daphne(PATTERN_REDIS_URL=redis_url) as (url_b, _),
    ):
        # The last socket is in the block's presence room only.
        rooms = [(url_a, LOR), (url_b, LOR), (url_b, EPH)]
        sockets = [
            (WebSocket(url, headers={"Origin": "http://127.0.0.1"}), crdt)
            for url, crdt in rooms
        ]
        try:
            for ws, crdt in sockets:
                join = sp.JoinRequest(crdt, room, agent_token.raw.encode(), b"")
                ws.send_binary(sp.encode(join))
                assert isinstance(sp.decode(ws.receive_binary()), sp.JoinResponseOk)
                if crdt == LOR:
                    assert isinstance(sp.decode(ws.receive_binary()), sp.DocUpdate)

            agent_token_revoke(agent=agent)  # in this process, sent over Redis

            for ws, crdt in sockets:
                evicted = sp.decode(ws.receive_binary())
                assert isinstance(evicted, sp.RoomError)
                assert (evicted.crdt, evicted.code) == (crdt, sp.RoomErrorCode.EVICTED)
                assert ws.close_code() == CLOSE_UNAUTHENTICATED
        finally:
            for ws, _ in sockets:
                ws.close()


async def test_a_socket_without_origin_or_session_cookie_is_accepted(block):
    communicator = WebsocketCommunicator(application, "/ws/sync/")
    connected, _ = await communicator.connect()
    assert connected
    await communicator.disconnect()


async def test_a_session_cookie_without_origin_is_refused(partner, block):
    client = Client()
    await sync_to_async(client.force_login)(partner)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    communicator = WebsocketCommunicator(
        application, "/ws/sync/", headers=[(b"cookie", cookie)]
    )
    connected, _ = await communicator.connect()
    assert not connected


async def test_a_cross_site_origin_is_refused(block):
    communicator = WebsocketCommunicator(
        application, "/ws/sync/", headers=[(b"origin", b"https://evil.example")]
    )
    connected, _ = await communicator.connect()
    assert not connected


async def test_a_recheck_that_fails_asks_the_client_to_join_again(
    partner, agent, agent_token, block, monkeypatch
):
    room = str(block.pk)
    peer = await Peer.open(peer_id=59)
    await peer.join(room, token=agent_token.raw)

    def database_gone(**kwargs):
        raise RuntimeError("database is locked")

    monkeypatch.setattr(consumer_module, "_join_block", database_gone)
    await sync_to_async(block_configure)(
        actor=Actor.for_user(partner), block=block, permission="read_only"
    )
    message = await peer.receive()
    assert message == sp.RoomError(
        LOR, room, sp.RoomErrorCode.REJOIN_SUGGESTED, message.message
    )


# --- what an agent's socket received --------------------------------------


async def _until(predicate, timeout: float = 10.0):
    """``predicate()`` (run in a thread: it reads the database) once true."""
    deadline = time.monotonic() + timeout
    while not (value := await sync_to_async(predicate)()):
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
    return value


def _look(agent, block) -> int | None:
    """The block's version counter as the agent last received it."""
    looks = BlockSeen.objects.filter(agent=agent, block=block)
    return looks.values_list("version", flat=True).first()


def _counter(block) -> int:
    return MemoryBlock.objects.values_list("version", flat=True).get(pk=block.pk)


async def test_an_agent_socket_that_received_a_change_is_not_told_it_again(
    partner, agent, agent_token, agent_client, block
):
    room = str(block.pk)
    reader = await Peer.open(peer_id=61)
    await reader.join(room, token=agent_token.raw)
    # The join sent the document: the agent has seen the block as it is.
    await _until(lambda: _look(agent, block) == _counter(block))
    writer = await Peer.open(user=partner, peer_id=62)
    await writer.join(room)

    assert (await writer.edit(room, " from Sam")).status == sp.UpdateStatus.OK
    relayed = await reader.receive()
    reader.doc.import_batch(list(relayed.updates))

    assert reader.text() == "hello from Sam"
    await _until(lambda: _look(agent, block) == _counter(block))
    changes = await sync_to_async(agent_client.get)("/api/blocks/changes")
    assert changes.json()["blocks"] == []


async def test_an_agent_sockets_looks_are_merged_and_written_off_its_path(
    partner, agent, agent_token, block, monkeypatch
):
    sent: list[list] = []
    monkeypatch.setitem(blocks_seen_record_task.app.conf, "task_always_eager", False)
    monkeypatch.setattr(blocks_seen_record_task, "delay", sent.append)
    monkeypatch.setattr(seen._LOOKS, "_delay", 600.0)  # sent by flush only
    room = str(block.pk)
    reader = await Peer.open(peer_id=63)
    await reader.join(room, token=agent_token.raw)
    writer = await Peer.open(user=partner, peer_id=64)
    await writer.join(room)

    for n in range(5):
        assert (await writer.edit(room, f" {n}")).status == sp.UpdateStatus.OK
    for _ in range(5):
        reader.doc.import_batch(list((await reader.receive()).updates))
    newest = await sync_to_async(_counter)(block)
    await _until(lambda: seen._LOOKS._pending.get((agent.pk, room)) == newest)

    # Nothing written, nothing sent, while the frames went out.
    assert sent == []
    assert await sync_to_async(_look)(agent, block) is None
    assert seen.blocks_seen_flush() == 1
    assert sent == [[[agent.pk, room, newest]]]
    await sync_to_async(blocks_seen_record_task)(sent[0])
    assert await sync_to_async(_look)(agent, block) == newest


async def test_a_text_frame_other_than_ping_closes_the_socket(partner):
    peer = await Peer.open(user=partner)
    await peer.ws.send_to(text_data="hello?")
    output = await peer.ws.receive_output(timeout=2)
    assert output == {"type": "websocket.close", "code": CLOSE_PROTOCOL_ERROR}


async def test_a_socket_that_joins_nothing_is_closed_after_the_timeout(
    settings, partner, block
):
    settings.PATTERN_SYNC_JOIN_TIMEOUT = 0.3
    idle, busy = await Peer.open(), await Peer.open(user=partner, peer_id=2)
    await busy.join(str(block.pk))
    output = await idle.ws.receive_output(timeout=3)
    assert output == {"type": "websocket.close", "code": CLOSE_IDLE}
    assert await busy.ws.receive_nothing(timeout=0.5)
    await busy.ws.disconnect()


async def test_one_socket_more_than_an_actor_may_hold_is_closed(settings, partner):
    settings.PATTERN_SYNC_SOCKETS_PER_ACTOR = 2
    held = [await Peer.open(user=partner, peer_id=i) for i in (1, 2)]
    one_more = await Peer.open(user=partner, peer_id=3)
    output = await one_more.ws.receive_output(timeout=2)
    assert output == {"type": "websocket.close", "code": CLOSE_TOO_MANY}
    await held[0].ws.disconnect()
    again = await Peer.open(user=partner, peer_id=4)
    assert await again.ws.receive_nothing(timeout=0.3)
    for peer in (held[1], again):
        await peer.ws.disconnect()


async def test_a_token_revoked_without_any_message_ends_the_socket(
    agent, agent_token, block, monkeypatch
):
    """Another process revoked it (nothing reaches this one but the
    database): the watcher finds it and the socket is evicted and closed."""
    monkeypatch.setattr(agent_services, "rights_revoke_send", lambda **kw: None)
    room = str(block.pk)
    peer = await Peer.open(peer_id=61)
    await peer.join(room, token=agent_token.raw)
    await sync_to_async(agent_token_revoke)(agent=agent)
    evicted = await peer.receive(timeout=3)
    assert isinstance(evicted, sp.RoomError)
    assert evicted.code == sp.RoomErrorCode.EVICTED
    assert await peer.closed() == CLOSE_UNAUTHENTICATED
