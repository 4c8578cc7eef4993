"""How Daphne serves this project: frames written straight to a connection
(a real Daphne protocol on a real Twisted TCP connection over a socket
pair, with a reactor that records when Twisted is asked to write later),
and request bodies handed on unparsed."""

import asyncio
import socket
from collections.abc import Iterator
from functools import partial
from io import BytesIO
from typing import Any

import pytest
from autobahn.twisted.websocket import WebSocketServerFactory
from daphne.http_protocol import WebRequest
from daphne.ws_protocol import WebSocketProtocol
from twisted.internet import address, tcp

from pattern_site.kernel.daphne_server import (
    SCOPE_KEY,
    FrameWriter,
    daphne_bodies_unparsed,
    frame_send,
    frame_writer,
    with_frame_writers,
)


class _Reactor:
    """What a connection asks of its reactor (Twisted's method names),
    recorded."""

    def __init__(self) -> None:
        self.writers: list[object] = []

    def addWriter(self, writer: object) -> None:
        self.writers.append(writer)

    def removeWriter(self, writer: object) -> None:
        pass

    def addReader(self, reader: object) -> None:
        pass

    def removeReader(self, reader: object) -> None:
        pass

    def callLater(self, *args: Any, **kwargs: Any) -> Any:
        return _Delayed()

    def seconds(self) -> float:
        return 0.0


class _Delayed:
    def cancel(self) -> None:
        pass


class _Connection(tcp.Connection):
    def getPeer(self) -> address.IPv4Address:
        return address.IPv4Address("TCP", "127.0.0.1", 50000)

    def getHost(self) -> address.IPv4Address:
        return address.IPv4Address("TCP", "127.0.0.1", 8000)


@pytest.fixture
def wired() -> Iterator[tuple[WebSocketProtocol, _Connection, socket.socket]]:
    """An open Daphne websocket on the server end of a socket pair, and the
    client end to read its bytes from."""
    server_end, client_end = socket.socketpair()
    server_end.setblocking(False)
    client_end.settimeout(5)
    protocol = WebSocketProtocol()
    protocol.factory = WebSocketServerFactory()
    connection = _Connection(server_end, protocol, _Reactor())
    connection.connected = 1
    protocol.makeConnection(connection)
    protocol.state = protocol.STATE_OPEN  # as after the handshake
    yield protocol, connection, client_end
    server_end.close()
    client_end.close()


def _received(client_end: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        data += client_end.recv(size - len(data))
    return data


def _framed_by_autobahn(protocol: WebSocketProtocol, payload: bytes) -> bytes:
    """The bytes autobahn's own send path writes for ``payload``."""
    transport = protocol.transport
    before = len(transport._tempDataBuffer)
    protocol.sendMessage(payload, isBinary=True)
    framed = b"".join(transport._tempDataBuffer[before:])
    del transport._tempDataBuffer[before:]
    transport._tempDataLen -= len(framed)
    transport.reactor.writers.clear()
    return framed


@pytest.mark.parametrize("size", [0, 5, 125, 126, 65535, 65536])
def test_a_frame_is_sent_at_once_as_autobahn_frames_it(wired, size):
    protocol, connection, client_end = wired
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    expected = _framed_by_autobahn(protocol, payload)
    assert FrameWriter(protocol).write(payload)
    assert _received(client_end, len(expected)) == expected
    # All of it taken by the socket: nothing left for the loop to write.
    assert connection.reactor.writers == []
    assert connection.dataBuffer == b"" and connection._tempDataBuffer == []


def test_a_frame_queues_behind_bytes_twisted_still_holds(wired):
    protocol, connection, client_end = wired
    protocol.sendMessage(b"first", isBinary=True)  # buffered for the loop
    first = b"".join(connection._tempDataBuffer)
    second = _framed_by_autobahn(protocol, b"second")
    assert FrameWriter(protocol).write(b"second")
    assert b"".join(connection._tempDataBuffer) == first + second
    connection.doWrite()
    assert _received(client_end, len(first + second)) == first + second


def test_the_rest_of_a_partly_sent_frame_waits_for_the_loop(wired):
    protocol, connection, client_end = wired
    connection.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    payload = b"x" * 2_000_000  # more than the socket takes at once
    expected = _framed_by_autobahn(protocol, payload)
    assert FrameWriter(protocol).write(payload)
    assert connection.reactor.writers == [connection]
    got = b""
    while len(got) < len(expected):
        connection.doWrite()
        got += client_end.recv(1 << 20)
    assert got == expected


@pytest.mark.parametrize(
    "state",
    [
        pytest.param(lambda p: setattr(p, "state", p.STATE_CLOSING), id="closing"),
        pytest.param(lambda p: setattr(p, "state", p.STATE_CLOSED), id="closed"),
        pytest.param(lambda p: p.send_queue.append((b"x", True)), id="queued"),
        pytest.param(
            lambda p: setattr(p, "maxMessagePayloadSize", 10), id="over the limit"
        ),
    ],
)
def test_what_the_writer_does_not_cover_goes_through_asgi(wired, state):
    protocol, connection, _client_end = wired
    state(protocol)
    assert not FrameWriter(protocol).write(b"payload of 18 bytes")
    assert connection._tempDataBuffer == [] and connection.reactor.writers == []
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(frame_send(FrameWriter(protocol), send, b"payload of 18 bytes"))
    assert sent == [{"type": "websocket.send", "bytes": b"payload of 18 bytes"}]


def test_only_daphne_websockets_get_a_writer_in_their_scope(wired):
    protocol, _connection, _client_end = wired
    seen: list[dict] = []

    async def app(scope: dict, receive: Any, send: Any) -> None:
        seen.append(scope)

    async def other_send(message: dict) -> None:
        pass

    wrapped = with_frame_writers(app)
    daphne_send = partial(_handle_reply, protocol)
    asyncio.run(wrapped({"type": "websocket"}, None, daphne_send))
    asyncio.run(wrapped({"type": "websocket"}, None, other_send))
    asyncio.run(wrapped({"type": "http"}, None, daphne_send))
    writer = frame_writer(seen[0])
    assert writer is not None and writer.protocol is protocol
    assert SCOPE_KEY not in seen[1] and SCOPE_KEY not in seen[2]


async def _handle_reply(protocol: WebSocketProtocol, message: dict) -> None:
    """Stands for ``daphne.server.Server.handle_reply``."""


class _Server:
    def protocol_connected(self, protocol: object) -> None:
        pass


class _Channel:
    """What a Twisted request asks of its HTTP channel."""

    transport = None

    def __init__(self) -> None:
        self.factory = type("Factory", (), {"server": _Server()})()

    def getPeer(self) -> tuple:
        return ("127.0.0.1", 50000)

    def getHost(self) -> tuple:
        return ("127.0.0.1", 8000)


@pytest.mark.parametrize(
    "content_type, body",
    [
        (b"application/x-www-form-urlencoded", b"name=value&other=1"),
        (
            b"multipart/form-data; boundary=xyz",
            b'--xyz\r\nContent-Disposition: form-data; name="file";'
            b' filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n'
            + b"x" * 10_000
            + b"\r\n--xyz--\r\n",
        ),
    ],
)
def test_daphne_hands_form_bodies_on_without_parsing_them(content_type, body):
    # Served by Daphne, the application gets the raw body; Twisted's own
    # parse of it (run on the event loop) is never read.
    daphne_bodies_unparsed()
    request = WebRequest(_Channel())
    request.process = lambda: None  # Daphne's: hands the body to the app
    request.requestHeaders.setRawHeaders(b"content-type", [content_type])
    request.content = BytesIO(body)
    request.content.seek(0, 2)
    request.requestReceived(b"POST", b"/upload", b"HTTP/1.1")
    assert request.args == {}
    assert request.content.read() == body


def test_a_connection_being_closed_gets_its_frame_through_twisted(wired):
    # Twisted flushes what it holds, then closes: nothing is sent beside it.
    protocol, connection, _client_end = wired
    connection.disconnecting = True
    assert FrameWriter(protocol).write(b"late")
    assert connection._tempDataBuffer == [b"\x82\x04late"]
