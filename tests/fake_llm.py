"""A small OpenAI-compatible server on loopback for the LLM paths: canned
Chat Completions answers (whole, or streamed as Server-Sent Events), every
request recorded.  The ``llm`` fixture points the LLM settings at it."""

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


def completion(content: str, tokens: int = 120) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": tokens - 20,
            "completion_tokens": 20,
            "total_tokens": tokens,
        },
    }


@dataclass(frozen=True)
class Streamed:
    """A streamed answer: ``pieces`` as content deltas, then (unless
    ``cut``, a stream that stops before it finished, or ``error``, an error
    event the provider sends instead of the rest) the finish reason and the
    usage chunk when ``tokens`` is given."""

    pieces: list[str]
    tokens: int | None = 120
    cut: bool = False
    error: str | None = None
    # Tool calls asked for after the text: (id, name, arguments as JSON
    # text), each streamed in two pieces as providers do.
    tool_calls: tuple[tuple[str, str, str], ...] = ()

    def events(self) -> Iterator[dict[str, Any]]:
        head = {"id": "chatcmpl-test", "object": "chat.completion.chunk"}
        head |= {"created": 0, "model": "test-model"}

        def delta(value: dict[str, Any], finish: str | None = None) -> dict:
            return head | {
                "choices": [{"index": 0, "delta": value, "finish_reason": finish}]
            }

        for piece in self.pieces:
            yield delta({"content": piece})
        for index, (call_id, name, arguments) in enumerate(self.tool_calls):
            half = len(arguments) // 2
            yield delta(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": arguments[:half]},
                        }
                    ]
                }
            )
            yield delta(
                {
                    "tool_calls": [
                        {"index": index, "function": {"arguments": arguments[half:]}}
                    ]
                }
            )
        if self.error is not None:
            yield {"error": {"message": self.error}}
            return
        if self.cut:
            return
        yield delta({}, "tool_calls" if self.tool_calls else "stop")
        if self.tokens is not None:
            yield head | {
                "choices": [],
                "usage": {
                    "prompt_tokens": self.tokens - 20,
                    "completion_tokens": 20,
                    "total_tokens": self.tokens,
                },
            }


@dataclass
class Held:
    """An answer the server sends only once ``release`` is set; ``arrived``
    is set when its request comes in (a model call a turn is waiting on)."""

    body: Any
    arrived: threading.Event
    release: threading.Event


class FakeLLM:
    def __init__(self) -> None:
        self.answers: list[tuple[int, Any, float]] = []
        self.requests: list[dict[str, Any]] = []
        # The client's address of each request: the same one twice is a
        # connection kept for the next call.
        self.connections: list[tuple[str, int]] = []

    def answer(self, body: Any, *, status: int = 200, delay: float = 0.0) -> None:
        self.answers.append((status, body, delay))

    def answer_streamed(
        self,
        pieces: list[str],
        *,
        tokens: int | None = 120,
        cut: bool = False,
        error: str | None = None,
    ) -> None:
        self.answers.append((200, Streamed(pieces, tokens, cut, error), 0.0))

    def hold(self) -> Held:
        """The next answer waits for ``release`` (then answers 500)."""
        held = Held({"error": {}}, threading.Event(), threading.Event())
        self.answers.append((500, held, 0.0))
        return held

    def answer_tools(
        self,
        *calls: tuple[str, str, dict[str, Any] | str],
        text: str = "",
        tokens: int | None = 120,
    ) -> None:
        """A streamed answer calling tools: ``(id, name, arguments)`` each,
        the arguments a dict or raw text, after ``text`` when given."""
        encoded = tuple(
            (i, n, a if isinstance(a, str) else json.dumps(a)) for i, n, a in calls
        )
        pieces = [text] if text else []
        self.answers.append((200, Streamed(pieces, tokens, tool_calls=encoded), 0.0))


@pytest.fixture
def llm(settings: Any) -> Iterator[FakeLLM]:
    """The fake provider, answering over HTTP/1.0: each stream ends when
    its connection closes."""
    yield from _serve(settings, keep_alive=False)


@pytest.fixture
def llm_kept_alive(settings: Any) -> Iterator[FakeLLM]:
    """The fake provider keeping its connections open, as a provider's
    endpoint does: HTTP/1.1, each stream sent with its length."""
    yield from _serve(settings, keep_alive=True)


def _serve(settings: Any, *, keep_alive: bool) -> Iterator[FakeLLM]:
    fake = FakeLLM()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
        # A kept connection's body, a second write, would otherwise wait
        # for the client's delayed acknowledgement.
        disable_nagle_algorithm = keep_alive

        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            fake.requests.append(
                {"path": self.path, "body": json.loads(self.rfile.read(length))}
            )
            fake.connections.append(self.client_address)
            status, body, delay = (
                fake.answers.pop(0) if fake.answers else (500, {"error": {}}, 0)
            )
            time.sleep(delay)
            if isinstance(body, Held):
                body.arrived.set()
                body.release.wait()
                body = body.body
            try:
                if isinstance(body, Streamed):
                    self._send_stream(body)
                else:
                    self._send_json(status, body)
            except OSError:
                pass  # the client gave up waiting

        def _send_json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, body: Streamed) -> None:
            events = [f"data: {json.dumps(event)}\n\n" for event in body.events()]
            if not (body.cut or body.error):
                events.append("data: [DONE]\n\n")
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            if keep_alive:
                data = "".join(events).encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            # HTTP/1.0: the stream ends when the connection closes.
            self.end_headers()
            for event in events:
                self.wfile.write(event.encode())
                self.wfile.flush()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.LLM_BASE_URL = f"http://127.0.0.1:{server.server_port}/v1"
    settings.LLM_API_KEY = "test-key"
    settings.LLM_MODEL = "test-model"
    settings.LLM_MAX_RETRIES = 2
    settings.LLM_TIMEOUT = 5.0
    settings.ACTIVITY_EMBEDDER = ""
    yield fake
    server.shutdown()
    server.server_close()
