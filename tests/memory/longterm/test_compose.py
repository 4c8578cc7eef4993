"""The history of a model request: token counting, limits, batch-aware
compression and recursive summarization."""

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.longterm.compose import (
    Batch,
    HeldRows,
    HistoryMessage,
    ModelContextLimits,
    TokenCounter,
    batches_compress,
    batches_newest_first,
    estimate_tokens,
    history_compose,
    history_config_for,
    model_limits,
    token_counter,
)
from memory.longterm.services import (
    conversation_start,
    conversation_summarize,
    messages_append,
)
from memory.models import ContextConfig


def test_token_estimate_tracks_text_length():
    assert estimate_tokens("") == 0
    assert estimate_tokens("hello world") == 4
    assert estimate_tokens('{"a": 1}') == 7
    long = estimate_tokens("The partner works best in the morning. " * 100)
    assert 700 <= long <= 1100


def test_openai_models_are_counted_with_their_own_tokenizer():
    gpt = token_counter("gpt-4o-mini")
    assert gpt.kind == "bpe o200k_base"
    assert gpt.count("hello world") == 2
    assert token_counter("openai/gpt-4").kind == "bpe cl100k_base"
    assert token_counter("gpt-4o-2024-08-06").kind == "bpe o200k_base"
    other = token_counter("llama-3-8b")
    assert other.kind.startswith("heuristic")
    assert other.count("hello world") == 4


@pytest.mark.parametrize(
    ("model", "max_tokens"),
    [("claude-sonnet-4", 200_000), ("gpt-4o-mini", 128_000), ("unknown", 128_000)],
)
def test_model_limits_by_prefix(model, max_tokens):
    assert model_limits(model).max_tokens == max_tokens


def test_a_constellation_overrides_a_model_familys_limits():
    small = ModelContextLimits(8_000, 1_000, 5_000, 1_000)
    assert model_limits("gpt-4o-mini", {"gpt-4o": small}) == small
    assert model_limits("claude-3", {"gpt-4o": small}).max_tokens == 200_000


# Random histories: batches of a user message, then assistant messages that
# may call tools (each answered, or - a crashed turn - not), and answers.
@st.composite
def histories(draw: Any) -> list[HistoryMessage]:
    messages: list[HistoryMessage] = []
    for b in range(draw(st.integers(0, 12))):
        batch = draw(st.sampled_from([f"b{b}", ""]))

        def add(role: str, content: str = "x", batch: str = batch, **kw: Any) -> None:
            position = len(messages) + 1
            messages.append(
                HistoryMessage(position, role, content, batch_id=batch, **kw)
            )

        add("user", "hello " * draw(st.integers(1, 30)))
        for step in range(draw(st.integers(0, 3)) if batch else 0):
            ids = [f"c{b}-{step}-{i}" for i in range(draw(st.integers(1, 3)))]
            calls = tuple({"id": i, "name": "t", "arguments": "{}"} for i in ids)
            add("assistant", "", tool_calls=calls)
            answered = draw(st.booleans()) or draw(st.booleans())
            for call_id in ids if answered else ids[:-1]:
                add("tool", "result " * draw(st.integers(1, 20)), tool_call_id=call_id)
        add("assistant", "done " * draw(st.integers(1, 10)))
    return messages


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=histories(),
    budget=st.integers(0, 400),
    cap=st.integers(1, 60),
    keep=st.one_of(st.none(), st.integers(1, 60)),
    active_index=st.integers(0, 12),
)
def test_compression_keeps_batches_whole_and_pairs_together(
    messages, budget, cap, keep, active_index
):
    batches = list(batches_newest_first(reversed(messages)))
    active = batches[active_index % len(batches)].key if batches else ""
    result = batches_compress(
        iter(batches),
        active=active,
        budget=budget,
        max_messages=cap,
        keep_recent=keep,
        count=estimate_tokens,
    )
    kept = [m for b in result.kept for m in b.messages]
    by_key: dict[str, list[int]] = {}
    for m in messages:
        by_key.setdefault(m.batch_id or f"#{m.position}", []).append(m.position)
    kept_positions = [m.position for m in kept]
    # Whole batches, in order.
    assert kept_positions == sorted(kept_positions)
    for batch in result.kept:
        assert [m.position for m in batch.messages] == by_key[batch.key]
    # Every call sent has its result sent, and every result its call.
    calls = {c["id"] for m in kept for c in m.tool_calls}
    answers = {m.tool_call_id for m in kept if m.role == "tool"}
    if active not in {b.key for b in result.kept}:
        assert calls == answers
    else:
        others = [b for b in result.kept if b.key != active]
        assert all(b.complete for b in others)
    # The active batch is always sent; the rest stay within the limits.
    if active:
        assert active in {b.key for b in result.kept}
    rest = [b for b in result.kept if b.key != active]
    assert (
        sum(m.tokens(estimate_tokens) for b in rest for m in b.messages) <= budget
        or not rest
    )
    others = sum(len(b.messages) for b in rest)
    assert not rest or others <= cap
    # Nothing is sent from before an evicted batch, but the active one.
    if result.evicted_through:
        assert all(
            m.position > result.evicted_through for b in rest for m in b.messages
        )


def turn(
    conversation: Any, batch: str, words: int = 5, *, answered: bool = True
) -> None:
    call = {"id": f"{batch}-call", "name": "lookup", "arguments": "{}"}
    rows = [
        {"role": "user", "content": f"question {batch} " + "word " * words},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ]
    if answered:
        rows.append({"role": "tool", "content": "found", "tool_call_id": call["id"]})
    rows.append({"role": "assistant", "content": f"answer {batch}"})
    messages_append(conversation=conversation, messages=rows, batch_id=batch)


def test_history_drops_the_oldest_whole_batches_and_crashed_turns(agent: Any):
    ContextConfig.objects.create(
        constellation=agent.constellation,
        model_overrides={
            "tiny": {
                "max_tokens": 1000,
                "memory_tokens": 200,
                "history_tokens": 70,
                "reserved_response_tokens": 100,
            }
        },
    )
    conversation = conversation_start(agent=agent)
    for i in range(6):
        turn(conversation, f"t{i}", answered=i != 4)
    history = history_compose(conversation=conversation, model_name="tiny-1")
    users = [m["content"].split()[1] for m in history.messages if m["role"] == "user"]
    # The newest turns that fit, never the crashed one, oldest first.
    assert users == ["t3", "t5"]
    assert history.metadata["incomplete_batches_left_out"] == ["t4"]
    assert history.tokens <= 70
    assert history.messages[2] == {
        "role": "tool",
        "content": "found",
        "tool_call_id": "t3-call",
    }
    assert history.messages[1]["tool_calls"][0]["function"]["name"] == "lookup"
    # The turn being answered is sent whole, however large.
    turn(conversation, "big", words=400, answered=False)
    active = history_compose(
        conversation=conversation, model_name="tiny-1", active_batch_id="big"
    )
    assert [m["role"] for m in active.messages] == ["user", "assistant", "assistant"]


def test_held_rows_are_counted_once_and_only_new_rows_after(agent: Any):
    """Each step of a turn composes the whole history again: a held row
    keeps its count, so a composition counts only the rows new since, and
    its total is a fresh composition's."""
    conversation = conversation_start(agent=agent)
    for i in range(3):
        turn(conversation, f"t{i}")
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return estimate_tokens(text)

    counter, held = TokenCounter(count, "test"), HeldRows()

    def compose(held: HeldRows | None) -> Any:
        return history_compose(
            conversation=conversation, model_name="m", counter=counter, held=held
        )

    compose(held)
    assert "question t0 word word word word word " in counted
    counted.clear()
    turn(conversation, "t3")
    conversation.refresh_from_db()
    again = compose(held)
    new = ["question t3 word word word word word ", "", "lookup", "{}"]
    assert sorted(counted) == sorted([*new, "found", "answer t3"])
    assert again.tokens == compose(None).tokens


def test_held_rows_compose_as_a_fresh_read_and_read_only_what_is_new(agent: Any):
    """A caller composing again and again (a turn) keeps the rows it read:
    the history is the one a fresh read gives, whoever appended since, and
    only the rows appended since are read."""
    ContextConfig.objects.create(constellation=agent.constellation, keep_recent=6)
    conversation = conversation_start(agent=agent)
    for i in range(4):
        turn(conversation, f"t{i}")
    held = HeldRows()

    def both(active: str = "") -> list[dict[str, Any]]:
        again = history_compose(
            conversation=conversation,
            model_name="gpt-4o",
            active_batch_id=active,
            held=held,
        )
        fresh = history_compose(
            conversation=conversation, model_name="gpt-4o", active_batch_id=active
        )
        assert again.messages == fresh.messages
        assert again.metadata == fresh.metadata
        return again.messages

    both()
    assert [m.position for m in held.rows][:2] == [16, 15]
    # Another writer's append, through its own row of the conversation.
    other = type(conversation).objects.get(pk=conversation.pk)
    turn(other, "t4", answered=False)
    conversation.refresh_from_db()
    sent = both(active="t4")
    assert sent[-1]["content"] == "answer t4"
    messages_append(
        conversation=other,
        messages=[{"role": "tool", "content": "found", "tool_call_id": "t4-call"}],
        batch_id="t4",
    )
    conversation.refresh_from_db()
    config = history_config_for(constellation=agent.constellation_id)
    with CaptureQueriesContext(connection) as read:
        history_compose(
            conversation=conversation,
            model_name="gpt-4o",
            active_batch_id="t4",
            config=config,
            held=held,
        )
    (query,) = read.captured_queries
    # The rows after the newest held one, not a page of history.
    assert "LIMIT" not in query["sql"]
    assert held.rows[0].position == 20
    both(active="t4")
    # A held set of another conversation is replaced, not mixed in.
    second = conversation_start(agent=agent)
    turn(second, "s0")
    composed = history_compose(conversation=second, model_name="gpt-4o", held=held)
    assert composed.messages[0]["content"].startswith("question s0")
    assert held.conversation_id == second.pk


def test_evicted_history_is_summarised_and_sent_at_the_head(
    agent: Any, django_capture_on_commit_callbacks: Any
):
    ContextConfig.objects.create(
        constellation=agent.constellation,
        compression="summarize",
        chunk_size=4,
        max_messages_cap=8,
    )
    conversation = conversation_start(agent=agent)
    for i in range(5):
        turn(conversation, f"t{i}")
    with django_capture_on_commit_callbacks(execute=True) as queued:
        history_compose(conversation=conversation, model_name="gpt-4o")
    assert len(queued) == 1
    conversation.refresh_from_db()
    # Two whole turns (8 messages) fit the cap: the three before are folded.
    assert conversation.summary_through == 12
    assert "question t0" in conversation.summary or "t1" in conversation.summary
    assert conversation.summary_model.startswith("extractive")
    history = history_compose(conversation=conversation, model_name="gpt-4o")
    head = history.messages[0]
    assert head["role"] == "system"
    assert head["content"].startswith("Summary of the earlier conversation:")
    users = [m["content"].split()[1] for m in history.messages if m["role"] == "user"]
    assert users == ["t4"]  # the summary takes a message of the cap
    # Summarising again up to the same point changes nothing.
    assert not conversation_summarize(conversation_id=conversation.pk, through=12)


def test_context_endpoint_returns_the_whole_request(agent: Any, agent_client: Any):
    conversation = conversation_start(agent=agent)
    turn(conversation, "t0")
    response = agent_client.post(
        "/api/context/build",
        {"include_request": True, "model": "gpt-4o"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    request = body["request"]
    assert request[0] == {"role": "system", "content": body["system_prompt"]}
    assert [m["role"] for m in request[1:]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert body["metadata"]["history"]["tokenizer"] == "bpe o200k_base"
    plain = agent_client.post(
        "/api/context/build", {}, content_type="application/json"
    ).json()
    assert plain["request"] is None


def test_batch_key_of_unbatched_messages_is_their_position():
    messages = [HistoryMessage(2, "user", "b"), HistoryMessage(1, "user", "a")]
    assert [b.key for b in batches_newest_first(messages)] == ["#2", "#1"]
    assert Batch("k", []).complete
