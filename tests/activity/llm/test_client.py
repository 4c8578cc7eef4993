"""The OpenAI path against a small OpenAI-compatible server on loopback
(``tests.fake_llm``): canned Chat Completions answers, every request
recorded."""

import json
from datetime import timedelta
from typing import Any

import pytest

from activity.llm.client import LLMUnavailable, chat_client, estimate_tokens
from activity.llm.models import LLMUsage
from activity.llm.services import llm_usage_add
from activity.stream.models import EventType, Importance
from activity.summaries.services import (
    agent_summary_refresh,
    constellation_summary_generate,
)
from activity.summaries.summarizers import SummaryMessage, summarizer_status
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import LimitExceeded
from tests.fake_llm import FakeLLM, completion


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


def _streamed(agent: Any) -> tuple[Any, list[str]]:
    client = chat_client(model="agent-model")
    assert client is not None
    received: list[str] = []
    done = client.complete_streamed(
        constellation_id=agent.constellation_id,
        messages=[{"role": "user", "content": "hello"}],
        on_text=received.append,
    )
    return done, received


def test_a_streamed_answer_arrives_piece_by_piece_and_is_charged(
    agent: Any, llm: FakeLLM
) -> None:
    llm.answer_streamed(["Tuesday ", "at ", "nine."], tokens=75)
    done, received = _streamed(agent)
    assert received == ["Tuesday ", "at ", "nine."]
    assert done.text == "Tuesday at nine." and done.tokens == 75
    body = llm.requests[0]["body"]
    assert body["stream"] is True and body["model"] == "agent-model"
    assert body["stream_options"] == {"include_usage": True}
    assert LLMUsage.objects.get().tokens == 75


def test_a_stream_cut_before_its_end_is_refused_and_still_charged(
    agent: Any, llm: FakeLLM
) -> None:
    llm.answer_streamed(["Tuesday ", "at "], cut=True)
    with pytest.raises(LLMUnavailable, match="stopped before it was finished"):
        _streamed(agent)
    # No usage reported: the prompt and what arrived are estimated.
    assert LLMUsage.objects.get().tokens > 0


def test_a_streamed_answer_respects_the_budget(
    agent: Any, llm: FakeLLM, settings: Any
) -> None:
    settings.LLM_DAILY_TOKEN_BUDGET = 500
    with pytest.raises(LimitExceeded, match="of its 500 LLM tokens"):
        _streamed(agent)
    assert llm.requests == []


def test_a_callers_count_of_the_prompt_is_what_is_budgeted_and_charged(
    agent: Any, llm: FakeLLM, settings: Any
) -> None:
    """A caller that counted its prompt (a turn's composer counts the
    history as it fits it) passes the count: the budget check uses it, and
    so does the charge when the provider reports no usage."""
    settings.LLM_DAILY_TOKEN_BUDGET = 10_000
    client = chat_client(model="agent-model")
    assert client is not None
    hello = [{"role": "user", "content": "hello"}]
    with pytest.raises(LimitExceeded, match="of its 10000 LLM tokens"):
        client.complete_step(
            constellation_id=agent.constellation_id,
            messages=hello,
            on_text=lambda _: None,
            prompt_tokens=20_000,
        )
    assert llm.requests == []

    llm.answer_streamed(["Noted, thanks."], tokens=None)
    client.complete_step(
        constellation_id=agent.constellation_id,
        messages=hello,
        on_text=lambda _: None,
        prompt_tokens=1_234,
    )
    assert LLMUsage.objects.get().tokens == 1_234 + estimate_tokens("Noted, thanks.")


def test_streamed_answers_reuse_the_providers_connection(
    agent: Any, llm_kept_alive: FakeLLM
) -> None:
    """Each stream is read to its end, past ``[DONE]``: the next model call
    goes over the same connection (no new handshake a step)."""
    for text in ("One.", "Two."):
        llm_kept_alive.answer_streamed([text])
    assert [_streamed(agent)[0].text for _ in range(2)] == ["One.", "Two."]
    first, second = llm_kept_alive.connections
    assert first == second


def test_an_error_event_in_the_stream_is_unavailable_and_charged(
    agent: Any, llm_kept_alive: FakeLLM
) -> None:
    llm_kept_alive.answer_streamed(["Tues"], error="the model is overloaded")
    with pytest.raises(LLMUnavailable, match="the model is overloaded"):
        _streamed(agent)
    assert LLMUsage.objects.get().tokens > 0
