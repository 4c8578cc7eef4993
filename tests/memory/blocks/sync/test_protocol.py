"""The Loro Syncing Protocol codec against itself and against npm loro-protocol."""

import json
from pathlib import Path

import loro
import pytest

from memory.blocks.sync import protocol as sp

VECTORS = json.loads((Path(__file__).parent / "vectors" / "vectors.json").read_text())
ROOM = "2f1c8a52-6a70-4d1e-9a0b-0c6a6f1f4a11"
BATCH = bytes.fromhex("0102030405060708")

EVERY_MESSAGE = [
    sp.JoinRequest(sp.CrdtType.LORO, ROOM, b"token", b"\x01\x07\x18"),
    sp.JoinRequest(sp.CrdtType.LORO_EPHEMERAL, ROOM),
    sp.JoinResponseOk(sp.CrdtType.LORO, ROOM, sp.Permission.WRITE, b"\x00"),
    sp.JoinResponseOk(sp.CrdtType.LORO, "é", sp.Permission.READ, b"v", b"extra"),
    sp.JoinError(sp.CrdtType.LORO, ROOM, sp.JoinErrorCode.AUTH_FAILED, "auth_failed"),
    sp.JoinError(
        sp.CrdtType.LORO, ROOM, sp.JoinErrorCode.VERSION_UNKNOWN, "?", b"\x01\x02"
    ),
    sp.JoinError(
        sp.CrdtType.LORO, ROOM, sp.JoinErrorCode.APP_ERROR, "x", app_code="quota"
    ),
    sp.DocUpdate(sp.CrdtType.LORO, ROOM, (b"a", b"", b"z" * 300), BATCH),
    sp.DocUpdate(sp.CrdtType.LORO, ROOM, (), BATCH),
    sp.DocUpdateFragmentHeader(sp.CrdtType.LORO, ROOM, BATCH, 3, 600_000),
    sp.DocUpdateFragment(sp.CrdtType.LORO, ROOM, BATCH, 2, b"\xff" * 1000),
    sp.RoomError(sp.CrdtType.LORO, ROOM, sp.RoomErrorCode.EVICTED, "gone"),
    sp.Leave(sp.CrdtType.LORO_EPHEMERAL, ROOM),
    *[sp.Ack(sp.CrdtType.LORO, ROOM, BATCH, status) for status in sp.UpdateStatus],
]


@pytest.mark.parametrize("message", EVERY_MESSAGE, ids=lambda m: type(m).__name__)
def test_every_message_type_round_trips(message):
    assert sp.decode(sp.encode(message)) == message


def _expected(vector):
    fields = vector["message"]

    def raw(value):
        return bytes.fromhex(value["hex"])

    crdt = sp.CrdtType(fields["crdt"])
    room = fields["roomId"]
    batch = bytes.fromhex(fields.get("batchId", "0x")[2:])
    match sp.MessageType(fields["type"]):
        case sp.MessageType.JOIN_REQUEST:
            return sp.JoinRequest(
                crdt, room, raw(fields["auth"]), raw(fields["version"])
            )
        case sp.MessageType.JOIN_RESPONSE_OK:
            extra = raw(fields["extra"]) if "extra" in fields else b""
            return sp.JoinResponseOk(
                crdt,
                room,
                sp.Permission(fields["permission"]),
                raw(fields["version"]),
                extra,
            )
        case sp.MessageType.JOIN_ERROR:
            version = (
                raw(fields["receiverVersion"]) if "receiverVersion" in fields else None
            )
            return sp.JoinError(
                crdt,
                room,
                sp.JoinErrorCode(fields["code"]),
                fields["message"],
                version,
                fields.get("appCode"),
            )
        case sp.MessageType.DOC_UPDATE:
            return sp.DocUpdate(
                crdt, room, tuple(raw(u) for u in fields["updates"]), batch
            )
        case sp.MessageType.DOC_UPDATE_FRAGMENT_HEADER:
            return sp.DocUpdateFragmentHeader(
                crdt, room, batch, fields["fragmentCount"], fields["totalSizeBytes"]
            )
        case sp.MessageType.DOC_UPDATE_FRAGMENT:
            return sp.DocUpdateFragment(
                crdt, room, batch, fields["index"], raw(fields["fragment"])
            )
        case sp.MessageType.ROOM_ERROR:
            return sp.RoomError(
                crdt, room, sp.RoomErrorCode(fields["code"]), fields["message"]
            )
        case sp.MessageType.LEAVE:
            return sp.Leave(crdt, room)
        case sp.MessageType.ACK:
            return sp.Ack(
                crdt,
                room,
                bytes.fromhex(fields["refId"][2:]),
                sp.UpdateStatus(fields["status"]),
            )


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: v["name"])
def test_frames_from_the_npm_encoder_decode_and_reencode_identically(vector):
    frame = bytes.fromhex(vector["frame"])
    message = sp.decode(frame)
    assert message == _expected(vector)
    assert sp.encode(message) == frame


def test_npm_doc_update_carries_an_update_python_loro_imports():
    vector = next(v for v in VECTORS["vectors"] if v["name"] == "doc_update")
    message = sp.decode(bytes.fromhex(vector["frame"]))
    doc = loro.LoroDoc()
    doc.import_(message.updates[0])
    assert doc.get_text("text").to_string() == VECTORS["loroText"]


def test_every_status_code_is_covered_by_the_vectors():
    names = {v["name"] for v in VECTORS["vectors"] if v["name"].startswith("ack_")}
    assert len(names) == len(sp.UpdateStatus)


def test_status_reasons_are_the_clients_names():
    assert sp.UpdateStatus.PERMISSION_DENIED.reason == "permission_denied"
    assert sp.UpdateStatus.INVALID_UPDATE.reason == "invalid_update"
    assert sp.UpdateStatus.PAYLOAD_TOO_LARGE.reason == "payload_too_large"
    assert sp.UpdateStatus.RATE_LIMITED.reason == "rate_limited"
    assert sp.UpdateStatus.FRAGMENT_TIMEOUT.reason == "fragment_timeout"


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"%LO",
        b"%XYZ\x00\x00",
        b"%LOR\x05ab",  # room id shorter than its length
        b"%LOR\x00\x09",  # unknown message type
        b"%LOR\x00\x03\x01\x01a",  # DocUpdate without its batch id
        b"%LOR\x00\x03\x00" + BATCH + b"!",  # trailing bytes
        b"%LOR\x00\x08" + BATCH,  # Ack without status
        b"%LOR\x00\x01\x04root\x00\x00",  # invalid permission
        b"%LOR\x00\x00\xff\xff\xff\xff\xff\xff\x01",  # LEB128 too large
    ],
)
def test_malformed_frames_raise_protocol_error(frame):
    with pytest.raises(sp.ProtocolError):
        sp.decode(frame)


def test_unknown_codes_decode_as_unknown_like_the_npm_decoder():
    ack = sp.decode(b"%LOR\x00\x08" + BATCH + b"\x63")
    assert ack.status is sp.UpdateStatus.UNKNOWN
    error = sp.decode(b"%LOR\x00\x06\x09\x00")
    assert error.code is sp.RoomErrorCode.UNKNOWN


def test_encode_refuses_frames_over_256_kib_and_long_room_ids():
    with pytest.raises(sp.ProtocolError, match="exceeds maximum"):
        sp.encode(
            sp.DocUpdate(sp.CrdtType.LORO, ROOM, (b"x" * sp.MAX_MESSAGE_SIZE,), BATCH)
        )
    with pytest.raises(sp.ProtocolError, match="room id"):
        sp.encode(sp.Leave(sp.CrdtType.LORO, "r" * 129))


def test_large_updates_are_split_into_fragments_that_reassemble():
    big = bytes(range(256)) * 2000  # 512000 bytes
    frames = sp.doc_update_frames(sp.CrdtType.LORO, ROOM, [b"small", big], BATCH)
    assert all(len(frame) <= sp.MAX_MESSAGE_SIZE for frame in frames)
    messages = [sp.decode(frame) for frame in frames]
    assert messages[0] == sp.DocUpdate(
        sp.CrdtType.LORO, ROOM, (b"small",), messages[0].batch_id
    )
    header = messages[1]
    assert isinstance(header, sp.DocUpdateFragmentHeader)
    assert header.fragment_count == 3 and header.total_size == len(big)
    assembler = sp.FragmentAssembler()
    assembler.start(header, now=0.0)
    # out of order is fine
    assert assembler.add(messages[4]) is None
    assert assembler.add(messages[2]) is None
    assert assembler.add(messages[3]) == (big,)
    assert len(assembler) == 0


def test_small_updates_travel_in_one_frame():
    frames = sp.doc_update_frames(sp.CrdtType.LORO, ROOM, [b"a", b"b"], BATCH)
    assert [sp.decode(f) for f in frames] == [
        sp.DocUpdate(sp.CrdtType.LORO, ROOM, (b"a", b"b"), BATCH)
    ]


def test_fragment_batches_time_out_and_later_fragments_are_refused():
    assembler = sp.FragmentAssembler(timeout=10)
    header = sp.DocUpdateFragmentHeader(sp.CrdtType.LORO, ROOM, BATCH, 2, 4)
    assembler.start(header, now=100.0)
    assert (
        assembler.add(sp.DocUpdateFragment(sp.CrdtType.LORO, ROOM, BATCH, 0, b"ab"))
        is None
    )
    assert assembler.expired(now=109.0) == []
    assert assembler.next_deadline() == 110.0
    assert assembler.expired(now=110.0) == [header]
    with pytest.raises(sp.FragmentError) as caught:
        assembler.add(sp.DocUpdateFragment(sp.CrdtType.LORO, ROOM, BATCH, 1, b"cd"))
    assert caught.value.status is sp.UpdateStatus.FRAGMENT_TIMEOUT


def test_fragments_that_lie_about_their_size_are_invalid():
    assembler = sp.FragmentAssembler()
    assembler.start(
        sp.DocUpdateFragmentHeader(sp.CrdtType.LORO, ROOM, BATCH, 2, 3), now=0
    )
    assembler.add(sp.DocUpdateFragment(sp.CrdtType.LORO, ROOM, BATCH, 0, b"ab"))
    with pytest.raises(sp.FragmentError) as caught:
        assembler.add(sp.DocUpdateFragment(sp.CrdtType.LORO, ROOM, BATCH, 1, b"cd"))
    assert caught.value.status is sp.UpdateStatus.INVALID_UPDATE


def test_announced_size_over_the_limit_is_payload_too_large():
    assembler = sp.FragmentAssembler(max_total_size=1000)
    with pytest.raises(sp.FragmentError) as caught:
        assembler.start(
            sp.DocUpdateFragmentHeader(sp.CrdtType.LORO, ROOM, BATCH, 2, 1001), now=0
        )
    assert caught.value.status is sp.UpdateStatus.PAYLOAD_TOO_LARGE
