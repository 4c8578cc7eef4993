"""examples/agent_loop.py against a live server and a fake model endpoint
on loopback (no network)."""

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memory.blocks.services import block_create
from memory.models import MemoryBlock
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.conftest import READY_SECONDS, REPO, subprocess_env

pytestmark = pytest.mark.slow

TOOL_ARGS = {"label": "notes", "content": "Sam prefers check-ins before 10am."}


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **message},
                "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@pytest.fixture
def fake_model() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An OpenAI-compatible chat endpoint that first calls
    core_memory_append, then answers in text; it keeps every request."""
    requests: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append(body)
            if len(requests) == 1:
                message = {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "core_memory_append",
                                "arguments": json.dumps(TOOL_ARGS),
                            },
                        }
                    ],
                }
            else:
                message = {"content": "Noted: check-ins before 10am."}
            data = json.dumps(_completion(message)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", requests
    finally:
        server.shutdown()
        server.server_close()


def test_agent_loop_registers_the_tools_and_calls_them_with_its_token(
    daphne_server: str, fake_model: tuple[str, list[dict[str, Any]]], agent
):
    model_url, requests = fake_model
    block = block_create(actor=Actor.system(), owner=agent, label="notes")
    token = agent_token_issue(agent=agent).raw
    result = subprocess.run(
        [
            sys.executable,
            "examples/agent_loop.py",
            "--server",
            daphne_server,
            "--token",
            token,
            "--model-url",
            model_url,
            "--model",
            "fake-model",
            "Remember when Sam likes check-ins.",
        ],
        cwd=REPO,
        env={**subprocess_env(), "OPENAI_API_KEY": "none"},
        capture_output=True,
        text=True,
        timeout=READY_SECONDS,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Noted: check-ins before 10am."
    first, second = requests
    names = {t["function"]["name"] for t in first["tools"]}
    assert {"core_memory_append", "core_memory_replace", "context"} <= names
    assert agent.name in first["messages"][0]["content"]
    tool_reply = second["messages"][-1]
    assert tool_reply["role"] == "tool" and tool_reply["tool_call_id"] == "call_1"
    assert json.loads(tool_reply["content"])["status"] == "applied"
    block.refresh_from_db()
    assert block.rendered == TOOL_ARGS["content"]
    assert MemoryBlock.objects.filter(owner=agent).count() == 1
