"""The OpenAI path against a small OpenAI-compatible server on loopback:
canned Chat Completions answers, every request recorded."""

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from activity.llm.client import LLMUnavailable, chat_client
from activity.llm.models import LLMUsage
from activity.llm.services import llm_usage_add
from activity.stream.models import EventType, Importance
from activity.summaries.services import (
    agent_summary_refresh,
    constellation_summary_generate,
)
from activity.summaries.summarizers import SummaryMessage, summarizer_status
from coordination.actors import Actor
from coordination.errors import LimitExceeded


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


class FakeLLM:
    def __init__(self) -> None:
        self.answers: list[tuple[int, Any, float]] = []
        self.requests: list[dict[str, Any]] = []

    def answer(self, body: Any, *, status: int = 200, delay: float = 0.0) -> None:
        self.answers.append((status, body, delay))


@pytest.fixture
def llm(settings: Any) -> Iterator[FakeLLM]:
    fake = FakeLLM()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            fake.requests.append(
                {"path": self.path, "body": json.loads(self.rfile.read(length))}
            )
            status, body, delay = (
                fake.answers.pop(0) if fake.answers else (500, {"error": {}}, 0)
            )
            time.sleep(delay)
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up waiting

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


def _messages(now: Any) -> list[SummaryMessage]:
    return [
        SummaryMessage(
            speaker="Partner" if n % 2 else "Entropy",
            text=f"Step {n} of the tax forms is done.",
            at=now - timedelta(minutes=10 - n),
        )
        for n in range(6)
    ]


def test_agent_summary_prompt_is_the_template_with_the_messages(
    agent: Any, llm: FakeLLM, now: Any
) -> None:
    llm.answer(completion("Entropy walked the partner through the tax forms.", 150))
    summary = agent_summary_refresh(agent=agent, messages=_messages(now))
    assert summary is not None
    assert summary.recent_summary == (
        "Entropy walked the partner through the tax forms."
    )
    assert summary.model == "test-model" and summary.tokens_used == 150
    (request,) = llm.requests
    assert request["path"] == "/v1/chat/completions"
    prompt = request["body"]["messages"][0]["content"]
    assert "Summarize Entropy's recent activity in 2-3 sentences." in prompt
    assert "Entropy: Step 4 of the tax forms is done." in prompt
    assert request["body"]["model"] == "test-model"
    assert LLMUsage.objects.get().tokens == 150
    assert summarizer_status()["kind"] == "llm"


def test_server_errors_are_retried(agent: Any, llm: FakeLLM, now: Any) -> None:
    llm.answer({"error": {"message": "busy"}}, status=500)
    llm.answer({"error": {"message": "busy"}}, status=500)
    llm.answer(completion("Recovered after two failures."))
    summary = agent_summary_refresh(agent=agent, messages=_messages(now))
    assert summary is not None and summary.recent_summary.startswith("Recovered")
    assert len(llm.requests) == 3


def test_a_slow_llm_times_out(agent: Any, llm: FakeLLM, settings: Any) -> None:
    settings.LLM_TIMEOUT = 0.3
    settings.LLM_MAX_RETRIES = 0
    llm.answer(completion("too late"), delay=1.5)
    client = chat_client()
    assert client is not None
    with pytest.raises(LLMUnavailable, match="did not answer in time"):
        client.complete(
            constellation_id=agent.constellation_id,
            messages=[{"role": "user", "content": "hello"}],
        )
    assert len(llm.requests) == 1  # no retry configured


def test_failing_llm_falls_back_to_an_extractive_summary(
    agent: Any, llm: FakeLLM, settings: Any, now: Any
) -> None:
    settings.LLM_MAX_RETRIES = 0
    llm.answer({"error": {"message": "down"}}, status=503)
    summary = agent_summary_refresh(agent=agent, messages=_messages(now))
    assert summary is not None
    assert summary.model == "extractive:lexical"


def test_spent_budget_refuses_the_call_before_it_is_made(
    agent: Any, llm: FakeLLM, settings: Any, now: Any
) -> None:
    settings.LLM_DAILY_TOKEN_BUDGET = 1000
    llm_usage_add(constellation_id=agent.constellation_id, tokens=900)
    client = chat_client()
    assert client is not None
    with pytest.raises(LimitExceeded, match="used 900 of its 1000 LLM tokens"):
        client.complete(
            constellation_id=agent.constellation_id,
            messages=[{"role": "user", "content": "hello"}],
        )
    summary = agent_summary_refresh(agent=agent, messages=_messages(now))
    assert summary is not None and summary.model == "extractive:lexical"
    assert llm.requests == []


def _notable(record: Any, agent: Any) -> None:
    record(
        actor=Actor.for_agent(agent),
        event_type=EventType.NOTABLE,
        importance=Importance.HIGH,
        details={"description": "Pause project-X"},
        ago=timedelta(hours=1),
    )


def test_malformed_json_is_asked_again_with_the_error(
    agent: Any, llm: FakeLLM, record: Any, now: Any
) -> None:
    _notable(record, agent)
    llm.answer(completion("Sure! Here is the summary: {not json", 80))
    llm.answer(
        completion(
            "```json\n"
            + json.dumps(
                {
                    "summary": "Project-X was paused.",
                    "key_decisions": ["Pause project-X"],
                    "open_threads": ["When to resume project-X"],
                }
            )
            + "\n```",
            90,
        )
    )
    summary = constellation_summary_generate(
        constellation=agent.constellation,
        period_start=now - timedelta(days=1),
        period_end=now,
    )
    assert summary is not None
    assert summary.summary == "Project-X was paused."
    assert summary.key_decisions == ["Pause project-X"]
    assert summary.open_threads == ["When to resume project-X"]
    assert summary.tokens_used == 170
    retry = llm.requests[1]["body"]["messages"]
    assert retry[1] == {
        "role": "assistant",
        "content": "Sure! Here is the summary: {not json",
    }
    assert "could not be used" in retry[2]["content"]
    first_prompt = llm.requests[0]["body"]["messages"][0]["content"]
    assert "Flagged notable events:\n- Pause project-X" in first_prompt
    assert llm.requests[0]["body"]["response_format"] == {"type": "json_object"}


def test_json_of_the_wrong_shape_twice_falls_back_to_extraction(
    agent: Any, llm: FakeLLM, record: Any, now: Any
) -> None:
    _notable(record, agent)
    llm.answer(completion(json.dumps({"summary": "ok", "key_decisions": "one"})))
    llm.answer(completion(json.dumps(["not", "an", "object"])))
    summary = constellation_summary_generate(
        constellation=agent.constellation,
        period_start=now - timedelta(days=1),
        period_end=now,
    )
    assert summary is not None
    assert summary.is_extractive
    assert summary.key_decisions == ["Pause project-X"]
    assert len(llm.requests) == 2
