"""The conversation_search tool: the caller's own conversations, by role
and by day, over HTTP and through ``tool_call``; the search tool's answer
as a model reads it."""

import json
from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from memory.longterm.compose import token_counter
from memory.longterm.models import Message
from memory.longterm.schemas import SearchOut
from memory.longterm.services import (
    archival_entry_create,
    conversation_start,
    messages_append,
)
from memory.search.pipeline import embeddings_refresh
from memory.search.registry import EmbeddingState
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.tools import tool_call
from tests.factories import AgentFactory


def _talk(agent: Any) -> None:
    messages_append(
        conversation=conversation_start(agent=agent),
        messages=[
            {"role": "user", "content": "the dentist is on Friday"},
            {"role": "assistant", "content": "noted the dentist for Friday"},
            {"role": "user", "content": "buy oat milk"},
        ],
    )


def _contents(value: dict[str, Any]) -> list[str]:
    return [hit["content"] for hit in value["results"]]


def test_conversation_search_finds_the_agents_messages_over_http(
    agent: Any, agent_client: Client
) -> None:
    _talk(agent)
    response = agent_client.post(
        "/api/tools/conversation_search",
        {"query": "dentist"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    # Words first; a search by meaning may add the rest after them.
    assert sorted(_contents(response.json())[:2]) == [
        "noted the dentist for Friday",
        "the dentist is on Friday",
    ]


def test_conversation_search_keeps_to_the_roles_asked(agent: Any) -> None:
    _talk(agent)
    result = tool_call(
        actor=Actor.for_agent(agent),
        name="conversation_search",
        arguments={"query": "dentist", "roles": ["assistant"], "limit": 5},
    )
    assert result.ok, result.text
    assert _contents(result.value) == ["noted the dentist for Friday"]


def test_conversation_search_keeps_to_the_days_asked(agent: Any) -> None:
    _talk(agent)
    Message.objects.filter(content__startswith="the dentist").update(
        created_at=timezone.now() - timedelta(days=3)
    )
    today = timezone.now().date().isoformat()
    result = tool_call(
        actor=Actor.for_agent(agent),
        name="conversation_search",
        arguments={"query": "dentist", "start_date": today, "end_date": today},
    )
    assert result.ok, result.text
    found = _contents(result.value)
    assert "noted the dentist for Friday" in found
    assert "the dentist is on Friday" not in found
    backwards = tool_call(
        actor=Actor.for_agent(agent),
        name="conversation_search",
        arguments={"query": "dentist", "start_date": today, "end_date": "2020-01-01"},
    )
    assert not backwards.ok
    assert "start_date is after end_date" in backwards.text


def test_conversation_search_never_finds_another_agents_messages(
    agent: Any, other_agent: Any
) -> None:
    _talk(other_agent)
    result = tool_call(
        actor=Actor.for_agent(agent),
        name="conversation_search",
        arguments={"query": "dentist"},
    )
    assert result.ok, result.text
    assert result.value["results"] == []


def test_send_message_stores_the_agents_message_to_its_partner(
    agent: Any, agent_client: Client
) -> None:
    response = agent_client.post(
        "/api/tools/send_message",
        {"message": "  The dentist moved to Friday.  "},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["role"], body["content"]) == (
        "assistant",
        "The dentist moved to Friday.",
    )
    (stored,) = Message.objects.filter(agent=agent)
    assert stored.pk == body["id"]
    assert stored.conversation.agent_id == agent.pk


def test_send_message_goes_to_the_current_conversation(agent: Any) -> None:
    _talk(agent)
    result = tool_call(
        actor=Actor.for_agent(agent),
        name="send_message",
        arguments={"message": "Booked."},
    )
    assert result.ok, result.text
    last = Message.objects.filter(agent=agent).order_by("position").last()
    assert (last.role, last.content) == ("assistant", "Booked.")
    assert last.conversation.messages.count() == 4


def test_send_message_refuses_an_empty_message(agent: Any) -> None:
    result = tool_call(
        actor=Actor.for_agent(agent), name="send_message", arguments={"message": " "}
    )
    assert not result.ok
    assert "empty" in result.text
    assert not Message.objects.filter(agent=agent).exists()


# The search tool's answer, as a model reads it.


def _nulls(value: Any, path: str = "") -> list[str]:
    """Where ``value`` holds a null, as dotted paths."""
    if value is None:
        return [path]
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in _nulls(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [n for i, v in enumerate(value) for n in _nulls(v, f"{path}[{i}]")]
    return []


def _tokens(value: Any) -> int:
    return token_counter("gpt-4o-mini").count(json.dumps(value))


def _search_http(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/tools/search", body, content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def test_search_answers_without_nulls_or_ranking_details(
    agent: Any, agent_client: Client
) -> None:
    archival_entry_create(
        agent=agent, content="the dentist moved to Monday", tags=["health"]
    )
    _talk(agent)
    body = {"query": "dentist", "domain": "all", "mode": "fts"}
    plain = _search_http(agent_client, body)
    explained = _search_http(agent_client, {**body, "explain": True})
    assert [h["id"] for h in plain["results"]] == [
        h["id"] for h in explained["results"]
    ]
    assert len(plain["results"]) >= 3
    assert _nulls(plain) == []
    assert not {"timings_ms", "mode_requested", "quantised"} & plain.keys()
    for hit in plain["results"]:
        assert not {"scores", "duplicates", "snippet_html"} & hit.keys()
    entry = next(h for h in plain["results"] if h["kind"] == "archival")
    assert entry["content"] == "the dentist moved to Monday"
    assert entry["tags"] == ["health"]
    assert entry["provenance"]["store"] == "archival_memory"
    message = next(h for h in plain["results"] if h["kind"] == "message")
    assert "tags" not in message and message["role"] in ("user", "assistant")
    # What an agent loop, the MCP server and HTTP give is the same answer.
    called = tool_call(actor=Actor.for_agent(agent), name="search", arguments=body)
    assert called.ok and _nulls(called.value) == []
    assert called.value["results"] == plain["results"]
    # Every field, null or not, as the answer was shaped before.
    everything = SearchOut.model_validate(explained).model_dump(mode="json")
    plain_tokens, all_tokens = _tokens(plain), _tokens(everything)
    explained_tokens = _tokens(explained)
    print(
        f"search answer: {plain_tokens} tokens; explained {explained_tokens};"
        f" with every field: {all_tokens}"
    )
    assert plain_tokens * 2 < all_tokens
    assert plain_tokens < explained_tokens < all_tokens


def test_explain_brings_the_ranking_details_and_timings_back(
    agent: Any, agent_client: Client
) -> None:
    _talk(agent)
    answer = _search_http(
        agent_client,
        {"query": "oat milk", "domain": "conversations", "explain": True},
    )
    hit = answer["results"][0]
    assert hit["content"] == "buy oat milk"
    assert hit["scores"]["fts_rank"] == 1 and hit["scores"]["score"] > 0
    assert "<mark>oat</mark>" in hit["snippet_html"]
    assert hit["duplicates"] == []
    assert answer["mode_requested"] == "auto"
    assert answer["timings_ms"]["message.total"] >= 0
    assert _nulls(answer) == []  # explained answers leave nulls out too


def test_a_just_written_entry_is_found_by_keywords_until_its_embedding_arrives(
    agent: Any, constellation: Any, embedding_model_loaded: Any
) -> None:
    boat = archival_entry_create(agent=agent, content="the sailing boat is moored")
    embeddings_refresh(kind="archival", row_ids=[boat.pk])
    # Written a moment ago: its vector comes from a task after commit.
    fresh = archival_entry_create(agent=agent, content="Ana visits on June 7th")
    other = AgentFactory(constellation=constellation, name="Flux")
    archival_entry_create(agent=other, content="Ana visits Flux in July")
    assert fresh.embedding_state == EmbeddingState.PENDING

    def search(mode: str) -> dict[str, Any]:
        called = tool_call(
            actor=Actor.for_agent(agent),
            name="search",
            arguments={"query": "When does Ana visit?", "mode": mode},
        )
        assert called.ok, called.text
        return called.value

    for mode in ("vector", "auto"):
        answer = search(mode)
        contents = [hit["content"] for hit in answer["results"]]
        assert contents[0] == "Ana visits on June 7th", mode
        # Flux's entry waits too, but is not the agent's to see.
        assert "Ana visits Flux in July" not in contents
        assert answer["pending_embeddings"] == 1, mode
        assert "1 entry is still waiting for an embedding" in answer["degraded"]
    assert embeddings_refresh(kind="archival", row_ids=[fresh.pk]) == 1
    embedded = search("vector")
    assert "pending_embeddings" not in embedded and embedded["degraded"] == ""
    assert embedded["results"][0]["content"] == "Ana visits on June 7th"
