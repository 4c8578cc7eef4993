"""The Loro Syncing Protocol's binary frames, byte for byte as npm
``loro-protocol`` 0.3.0 encodes them (``encode``/``decode`` in its
``dist/index.js``; ``protocol.md`` of github.com/loro-dev/protocol).

Pure codec, no I/O: the websocket consumer turns frames into messages here and
messages back into frames.  A frame is::

    magic (4 bytes: %LOR, %EPH, ...) | varBytes room id (<= 128 bytes)
    | type byte | body

``varBytes`` is a LEB128 length followed by that many bytes; ``varString`` is
varBytes holding UTF-8.  Batch ids are 8 raw bytes (the JS side shows them as
``0x``-prefixed hex).  No frame may exceed 256 KiB; larger updates travel as a
fragment header and fragments (see ``doc_update_frames`` and
``FragmentAssembler``).  Keepalive is the text frames ``ping`` / ``pong``,
outside this codec.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass, field

MAX_MESSAGE_SIZE = 256 * 1024
MAX_ROOM_ID_LENGTH = 128
# The npm client splits updates larger than this into fragments; we do the same
# for what we send, leaving room for the frame header.
FRAGMENT_LIMIT = min(240 * 1024, MAX_MESSAGE_SIZE - 4096)
FRAGMENT_TIMEOUT_SECONDS = 10.0
BATCH_ID_LENGTH = 8
PING = "ping"
PONG = "pong"


class CrdtType(enum.StrEnum):
    LORO = "%LOR"
    LORO_EPHEMERAL = "%EPH"
    LORO_EPHEMERAL_PERSISTED = "%EPS"
    YJS = "%YJS"
    YJS_AWARENESS = "%YAW"
    ELO = "%ELO"
    FLOCK = "%FLO"


class MessageType(enum.IntEnum):
    JOIN_REQUEST = 0
    JOIN_RESPONSE_OK = 1
    JOIN_ERROR = 2
    DOC_UPDATE = 3
    DOC_UPDATE_FRAGMENT_HEADER = 4
    DOC_UPDATE_FRAGMENT = 5
    ROOM_ERROR = 6
    LEAVE = 7
    ACK = 8


class JoinErrorCode(enum.IntEnum):
    UNKNOWN = 0
    VERSION_UNKNOWN = 1
    AUTH_FAILED = 2
    APP_ERROR = 127


class RoomErrorCode(enum.IntEnum):
    REJOIN_SUGGESTED = 1
    EVICTED = 2
    UNKNOWN = 127


class UpdateStatus(enum.IntEnum):
    """Status byte of an Ack; ``reason`` is the client's name for it."""

    OK = 0
    UNKNOWN = 1
    PERMISSION_DENIED = 3
    INVALID_UPDATE = 4
    PAYLOAD_TOO_LARGE = 5
    RATE_LIMITED = 6
    FRAGMENT_TIMEOUT = 7
    APP_ERROR = 127

    @property
    def reason(self) -> str:
        return self.name.lower()


class Permission(enum.StrEnum):
    READ = "read"
    WRITE = "write"


class ProtocolError(ValueError):
    """A frame that is not a valid message of the protocol."""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    crdt: CrdtType
    room_id: str
    auth: bytes = b""
    version: bytes = b""
    type = MessageType.JOIN_REQUEST


@dataclass(frozen=True, slots=True)
class JoinResponseOk:
    crdt: CrdtType
    room_id: str
    permission: Permission
    version: bytes = b""
    extra: bytes = b""
    type = MessageType.JOIN_RESPONSE_OK


@dataclass(frozen=True, slots=True)
class JoinError:
    crdt: CrdtType
    room_id: str
    code: JoinErrorCode
    message: str
    receiver_version: bytes | None = None
    app_code: str | None = None
    type = MessageType.JOIN_ERROR


@dataclass(frozen=True, slots=True)
class DocUpdate:
    crdt: CrdtType
    room_id: str
    updates: tuple[bytes, ...]
    batch_id: bytes
    type = MessageType.DOC_UPDATE


@dataclass(frozen=True, slots=True)
class DocUpdateFragmentHeader:
    crdt: CrdtType
    room_id: str
    batch_id: bytes
    fragment_count: int
    total_size: int
    type = MessageType.DOC_UPDATE_FRAGMENT_HEADER


@dataclass(frozen=True, slots=True)
class DocUpdateFragment:
    crdt: CrdtType
    room_id: str
    batch_id: bytes
    index: int
    fragment: bytes
    type = MessageType.DOC_UPDATE_FRAGMENT


@dataclass(frozen=True, slots=True)
class RoomError:
    crdt: CrdtType
    room_id: str
    code: RoomErrorCode
    message: str
    type = MessageType.ROOM_ERROR


@dataclass(frozen=True, slots=True)
class Leave:
    crdt: CrdtType
    room_id: str
    type = MessageType.LEAVE


@dataclass(frozen=True, slots=True)
class Ack:
    crdt: CrdtType
    room_id: str
    ref_id: bytes
    status: UpdateStatus
    type = MessageType.ACK


Message = (
    JoinRequest
    | JoinResponseOk
    | JoinError
    | DocUpdate
    | DocUpdateFragmentHeader
    | DocUpdateFragment
    | RoomError
    | Leave
    | Ack
)


# --- primitives ---------------------------------------------------------------


def _uleb128(n: int) -> bytes:
    if n < 0 or n > 0xFFFFFFFF:
        raise ProtocolError(f"integer {n} does not fit the protocol's u32")
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _var_bytes(data: bytes) -> bytes:
    return _uleb128(len(data)) + data


def _var_string(text: str) -> bytes:
    return _var_bytes(text.encode("utf-8"))


@dataclass(slots=True)
class _Reader:
    buf: memoryview
    offset: int = 0

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.offset

    def byte(self) -> int:
        if self.offset >= len(self.buf):
            raise ProtocolError("truncated frame")
        value = self.buf[self.offset]
        self.offset += 1
        return value

    def raw(self, length: int) -> bytes:
        if self.offset + length > len(self.buf):
            raise ProtocolError("truncated frame")
        value = bytes(self.buf[self.offset : self.offset + length])
        self.offset += length
        return value

    def uleb128(self) -> int:
        result = 0
        shift = 0
        while True:
            byte = self.byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result & 0xFFFFFFFF
            shift += 7
            if shift > 35:
                raise ProtocolError("LEB128 integer too large")

    def var_bytes(self) -> bytes:
        return self.raw(self.uleb128())

    def var_string(self) -> str:
        try:
            return self.var_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError("string is not UTF-8") from exc

    def batch_id(self, context: str) -> bytes:
        if self.remaining < BATCH_ID_LENGTH:
            raise ProtocolError(f"invalid {context}: missing batch id")
        return self.raw(BATCH_ID_LENGTH)

    def end(self, context: str) -> None:
        if self.remaining:
            raise ProtocolError(f"invalid {context}: unexpected trailing bytes")


def _check_batch_id(batch_id: bytes) -> bytes:
    if len(batch_id) != BATCH_ID_LENGTH:
        raise ProtocolError("a batch id is exactly 8 bytes")
    return batch_id


def _enum_or(enum_type: type[enum.IntEnum], value: int, default: enum.IntEnum):
    try:
        return enum_type(value)
    except ValueError:
        return default


# --- encode / decode ----------------------------------------------------------


def encode(message: Message) -> bytes:
    """One binary frame; ``ProtocolError`` if it breaks a protocol limit."""
    room = message.room_id.encode("utf-8")
    if len(room) > MAX_ROOM_ID_LENGTH:
        raise ProtocolError("room id too long")
    out = bytearray(CrdtType(message.crdt).value.encode("ascii"))
    out += _var_bytes(room)
    out.append(message.type)
    match message:
        case JoinRequest():
            out += _var_bytes(message.auth) + _var_bytes(message.version)
        case JoinResponseOk():
            out += _var_string(Permission(message.permission).value)
            out += _var_bytes(message.version) + _var_bytes(message.extra)
        case JoinError():
            out.append(message.code)
            out += _var_string(message.message)
            code = message.code
            if code == JoinErrorCode.VERSION_UNKNOWN and message.receiver_version:
                out += _var_bytes(message.receiver_version)
            if code == JoinErrorCode.APP_ERROR and message.app_code:
                out += _var_string(message.app_code)
        case DocUpdate():
            out += _uleb128(len(message.updates))
            for update in message.updates:
                out += _var_bytes(update)
            out += _check_batch_id(message.batch_id)
        case DocUpdateFragmentHeader():
            out += _check_batch_id(message.batch_id)
            out += _uleb128(message.fragment_count) + _uleb128(message.total_size)
        case DocUpdateFragment():
            out += _check_batch_id(message.batch_id)
            out += _uleb128(message.index) + _var_bytes(message.fragment)
        case RoomError():
            out.append(message.code)
            out += _var_string(message.message)
        case Ack():
            out += _check_batch_id(message.ref_id)
            out.append(message.status)
        case Leave():
            pass
    if len(out) > MAX_MESSAGE_SIZE:
        raise ProtocolError(
            f"message size {len(out)} exceeds maximum {MAX_MESSAGE_SIZE}"
        )
    return bytes(out)


def decode(frame: bytes) -> Message:
    """The message in one binary frame; ``ProtocolError`` when malformed."""
    reader = _Reader(memoryview(frame))
    if reader.remaining < 4:
        raise ProtocolError("too short for a CRDT type")
    magic = reader.raw(4)
    try:
        crdt = CrdtType(magic.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"invalid CRDT type {magic!r}") from exc
    room_id = reader.var_string()
    try:
        kind = MessageType(reader.byte())
    except ValueError as exc:
        raise ProtocolError("invalid message type") from exc
    match kind:
        case MessageType.JOIN_REQUEST:
            auth = reader.var_bytes()
            return JoinRequest(crdt, room_id, auth, reader.var_bytes())
        case MessageType.JOIN_RESPONSE_OK:
            permission = reader.var_string()
            if permission not in (Permission.READ, Permission.WRITE):
                raise ProtocolError(f"invalid permission {permission!r}")
            version = reader.var_bytes()
            extra = reader.var_bytes()
            return JoinResponseOk(crdt, room_id, Permission(permission), version, extra)
        case MessageType.JOIN_ERROR:
            code = _enum_or(JoinErrorCode, reader.byte(), JoinErrorCode.UNKNOWN)
            text = reader.var_string()
            receiver_version = app_code = None
            if code == JoinErrorCode.VERSION_UNKNOWN and reader.remaining:
                receiver_version = reader.var_bytes()
            if code == JoinErrorCode.APP_ERROR and reader.remaining:
                app_code = reader.var_string()
            return JoinError(crdt, room_id, code, text, receiver_version, app_code)
        case MessageType.DOC_UPDATE:
            count = reader.uleb128()
            updates = tuple(reader.var_bytes() for _ in range(count))
            batch_id = reader.batch_id("DocUpdate")
            reader.end("DocUpdate")
            return DocUpdate(crdt, room_id, updates, batch_id)
        case MessageType.DOC_UPDATE_FRAGMENT_HEADER:
            batch_id = reader.batch_id("DocUpdateFragmentHeader")
            count = reader.uleb128()
            total = reader.uleb128()
            reader.end("DocUpdateFragmentHeader")
            return DocUpdateFragmentHeader(crdt, room_id, batch_id, count, total)
        case MessageType.DOC_UPDATE_FRAGMENT:
            batch_id = reader.batch_id("DocUpdateFragment")
            index = reader.uleb128()
            fragment = reader.var_bytes()
            reader.end("DocUpdateFragment")
            return DocUpdateFragment(crdt, room_id, batch_id, index, fragment)
        case MessageType.ROOM_ERROR:
            code = _enum_or(RoomErrorCode, reader.byte(), RoomErrorCode.UNKNOWN)
            return RoomError(crdt, room_id, code, reader.var_string())
        case MessageType.LEAVE:
            return Leave(crdt, room_id)
        case MessageType.ACK:
            if reader.remaining < BATCH_ID_LENGTH + 1:
                raise ProtocolError("invalid Ack: missing fields")
            ref_id = reader.batch_id("Ack")
            status = _enum_or(UpdateStatus, reader.byte(), UpdateStatus.UNKNOWN)
            reader.end("Ack")
            return Ack(crdt, room_id, ref_id, status)
    raise ProtocolError("invalid message type")  # pragma: no cover - enum exhausted


def doc_update_frames(
    crdt: CrdtType, room_id: str, updates: list[bytes], batch_id: bytes
) -> list[bytes]:
    """Frames carrying ``updates``: one DocUpdate when it fits in a frame,
    otherwise one DocUpdate per small update and a fragment header plus
    fragments (each under ``FRAGMENT_LIMIT``) per large one, as the npm client
    does.  When split, each part gets a fresh batch id."""
    try:
        return [encode(DocUpdate(crdt, room_id, tuple(updates), batch_id))]
    except ProtocolError:
        pass
    frames: list[bytes] = []
    for update in updates:
        sub_id = new_batch_id()
        if len(update) <= FRAGMENT_LIMIT:
            frames.append(encode(DocUpdate(crdt, room_id, (update,), sub_id)))
            continue
        count = -(-len(update) // FRAGMENT_LIMIT)
        frames.append(
            encode(DocUpdateFragmentHeader(crdt, room_id, sub_id, count, len(update)))
        )
        for index in range(count):
            chunk = update[index * FRAGMENT_LIMIT : (index + 1) * FRAGMENT_LIMIT]
            frames.append(
                encode(DocUpdateFragment(crdt, room_id, sub_id, index, chunk))
            )
    return frames


def new_batch_id() -> bytes:
    return secrets.token_bytes(BATCH_ID_LENGTH)


# --- fragment reassembly ------------------------------------------------------


@dataclass(slots=True)
class _PendingBatch:
    header: DocUpdateFragmentHeader
    deadline: float
    fragments: dict[int, bytes] = field(default_factory=dict)


class FragmentError(ProtocolError):
    """A fragment that cannot belong to its batch; ``status`` says how to ack."""

    def __init__(self, message: str, status: UpdateStatus) -> None:
        super().__init__(message)
        self.status = status


class FragmentAssembler:
    """Reassembles fragmented updates of one connection.  Pure: the caller
    passes the clock (``now``) and asks for ``expired`` batches, acking each
    with ``UpdateStatus.FRAGMENT_TIMEOUT``."""

    def __init__(
        self,
        *,
        timeout: float = FRAGMENT_TIMEOUT_SECONDS,
        max_total_size: int | None = None,
    ) -> None:
        self.timeout = timeout
        self.max_total_size = max_total_size
        self._batches: dict[tuple[CrdtType, str, bytes], _PendingBatch] = {}

    def start(self, header: DocUpdateFragmentHeader, *, now: float) -> None:
        if header.fragment_count < 1:
            raise FragmentError("no fragments announced", UpdateStatus.INVALID_UPDATE)
        if self.max_total_size is not None and header.total_size > self.max_total_size:
            raise FragmentError(
                "announced update too large", UpdateStatus.PAYLOAD_TOO_LARGE
            )
        key = (header.crdt, header.room_id, header.batch_id)
        self._batches[key] = _PendingBatch(header, now + self.timeout)

    def add(self, fragment: DocUpdateFragment) -> tuple[bytes, ...] | None:
        """The whole update once every fragment has arrived, else None."""
        key = (fragment.crdt, fragment.room_id, fragment.batch_id)
        batch = self._batches.get(key)
        if batch is None:
            raise FragmentError(
                "fragment of an unknown or expired batch",
                UpdateStatus.FRAGMENT_TIMEOUT,
            )
        header = batch.header
        if fragment.index >= header.fragment_count:
            del self._batches[key]
            raise FragmentError(
                "fragment index out of range", UpdateStatus.INVALID_UPDATE
            )
        batch.fragments[fragment.index] = fragment.fragment
        if len(batch.fragments) < header.fragment_count:
            size = sum(len(part) for part in batch.fragments.values())
            if size > header.total_size:
                del self._batches[key]
                raise FragmentError(
                    "fragments exceed the announced size",
                    UpdateStatus.INVALID_UPDATE,
                )
            return None
        del self._batches[key]
        data = b"".join(batch.fragments[i] for i in range(header.fragment_count))
        if len(data) != header.total_size:
            raise FragmentError(
                "fragments do not add up to the announced size",
                UpdateStatus.INVALID_UPDATE,
            )
        return (data,)

    def expired(self, *, now: float) -> list[DocUpdateFragmentHeader]:
        """Drop and return the batches whose deadline has passed."""
        gone = [key for key, batch in self._batches.items() if batch.deadline <= now]
        return [self._batches.pop(key).header for key in gone]

    def next_deadline(self) -> float | None:
        return min((b.deadline for b in self._batches.values()), default=None)

    def discard_room(self, crdt: CrdtType, room_id: str) -> None:
        for key in [k for k in self._batches if k[:2] == (crdt, room_id)]:
            del self._batches[key]

    def __len__(self) -> int:
        return len(self._batches)
