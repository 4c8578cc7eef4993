"""Where this project changes how Daphne serves it: binary websocket frames
written straight to a socket's connection, and request bodies left
unparsed (:func:`daphne_bodies_unparsed`).

A change to a block is relayed to every socket of its room.  Through the
ASGI ``send`` each frame passes Channels' session wrapper, Daphne's reply
handling, autobahn's message checks, framing and debug logging (whose
arguments, coloured names, are built even when nothing is logged), and
Twisted then only buffers the bytes and asks the loop to say when the
socket can take them, writing them at the loop's next turn: two epoll
changes and a callback more.  A relay to 15 sockets costs the event loop
about 0.75 ms that way, and about 0.3 ms written straight.

A :class:`FrameWriter` frames the payload with autobahn's own code (a
server's frames are unmasked) and hands it to the socket at once when
nothing of that socket's is waiting in Twisted's buffer, else appends it to
that buffer.  Every other frame of the socket goes through the same
transport, in the order it is written, so the socket's frames keep their
order whichever way each one goes.  Anything this path does not cover (a
socket not open, compression, a message over Daphne's size limit, a
transport other than plain TCP for the direct write) goes the usual way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial, wraps
from typing import Any

from autobahn.websocket.protocol import PreparedMessage
from daphne.http_protocol import WebRequest
from daphne.ws_protocol import WebSocketProtocol
from twisted.internet import tcp

# The scope key under which a websocket's writer is found (absent: the
# server is not Daphne, or the application was not wrapped).
SCOPE_KEY = "pattern.frame_writer"

ASGIApp = Callable[[dict, Any, Any], Awaitable[None]]


class FrameWriter:
    """Writes one socket's binary frames straight to its connection; on the
    event loop only, as Daphne's own replies are."""

    __slots__ = ("protocol",)

    def __init__(self, protocol: WebSocketProtocol) -> None:
        self.protocol = protocol

    def write(self, payload: bytes) -> bool:
        """Write ``payload`` as one binary message; False when this path
        does not cover it (send it through ASGI, which will answer as it
        always does: a closed socket drops it, an oversized one raises)."""
        protocol = self.protocol
        if (
            protocol.state != protocol.STATE_OPEN
            or protocol.send_queue
            or protocol._perMessageCompress is not None
            or 0 < protocol.maxMessagePayloadSize < len(payload)
        ):
            return False
        data = PreparedMessage(
            payload, isBinary=True, applyMask=False, doNotCompress=True
        ).payloadHybi
        transport = protocol.transport
        if (
            isinstance(transport, tcp.Connection)
            and transport.connected
            and not transport.disconnecting
            and not transport.dataBuffer
            and getattr(transport, "_tempDataBuffer", None) == []
        ):
            sent = transport.writeSomeData(data)
            if isinstance(sent, int):
                if sent == len(data):
                    return True
                data = data[sent:]
            # Lost meanwhile: buffered like any write, and Twisted finds
            # the loss at its next turn.
        transport.write(data)
        return True


def daphne_protocol(send: Any) -> WebSocketProtocol | None:
    """The connection behind Daphne's ASGI ``send`` (Daphne hands each
    application ``partial(server.handle_reply, protocol)``), or None."""
    if isinstance(send, partial) and send.args:
        protocol = send.args[0]
        if isinstance(protocol, WebSocketProtocol):
            return protocol
    return None


def with_frame_writers(app: ASGIApp) -> ASGIApp:
    """``app`` with a :class:`FrameWriter` in the scope of each websocket
    that Daphne serves (``SCOPE_KEY``)."""

    async def application(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            protocol = daphne_protocol(send)
            if protocol is not None:
                scope = {**scope, SCOPE_KEY: FrameWriter(protocol)}
        await app(scope, receive, send)

    return application


def frame_writer(scope: dict) -> FrameWriter | None:
    return scope.get(SCOPE_KEY)  # type: ignore[no-any-return]


async def frame_send(writer: FrameWriter | None, send: Any, payload: bytes) -> None:
    """``payload`` as one binary message: through ``writer`` where it
    covers it, else through the ASGI ``send``."""
    if writer is None or not writer.write(payload):
        await send({"type": "websocket.send", "bytes": payload})


def daphne_bodies_unparsed() -> None:
    """Have Twisted leave request bodies to the application.

    Twisted's request parses a form body (urlencoded or multipart) into
    ``request.args``, on the event loop, before Daphne hands the raw body
    to the application, which never reads ``args``: a 5 MB upload held
    every socket of the process for ~170 ms, and reading any POST's
    Content-Type through the email package costs ~50 us."""
    if getattr(WebRequest, "bodies_unparsed", False):
        return
    init = WebRequest.__init__

    @wraps(init)
    def __init__(self: WebRequest, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("parsePOSTFormSubmission", False)
        init(self, *args, **kwargs)

    WebRequest.__init__ = __init__  # type: ignore[method-assign]
    WebRequest.bodies_unparsed = True  # type: ignore[attr-defined]
