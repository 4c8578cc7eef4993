"""A bare RFC 6455 client over a socket, for tests that need the frames a
real server (Daphne) sends: its close codes, what it does to a bad frame."""

import base64
import os
import socket
import struct
from urllib.parse import urlsplit

OP_BINARY = 0x2
OP_CLOSE = 0x8


class WebSocket:
    def __init__(self, url: str, *, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {parts.path or '/'} HTTP/1.1",
            f"Host: {parts.hostname}:{parts.port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            *(f"{name}: {value}" for name, value in (headers or {}).items()),
        ]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            response += chunk
        head, _, self.buffer = response.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1]) if head else 0

    def send_binary(self, payload: bytes) -> None:
        mask = os.urandom(4)
        header = bytes([0x80 | OP_BINARY])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", len(payload))
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the TCP connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def receive(self) -> tuple[int, bytes]:
        """The next frame's opcode and payload (servers do not mask)."""
        first, second = self._read(2)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", self._read(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", self._read(8))[0]
        return first & 0x0F, self._read(length)

    def receive_binary(self) -> bytes:
        """The next binary frame's payload (a close frame is an error)."""
        while True:
            opcode, payload = self.receive()
            if opcode == OP_BINARY:
                return payload
            if opcode == OP_CLOSE:
                raise ConnectionError(f"closed by the server: {payload!r}")

    def close_code(self) -> int:
        """Read frames until the server's close frame; its status code."""
        while True:
            opcode, payload = self.receive()
            if opcode == OP_CLOSE:
                return struct.unpack("!H", payload[:2])[0] if payload else 1005

    def close(self) -> None:
        self.sock.close()
