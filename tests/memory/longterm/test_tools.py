"""The conversation_search tool: the caller's own conversations, by role
and by day, over HTTP and through ``tool_call``."""

from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from memory.longterm.models import Message
from memory.longterm.services import conversation_start, messages_append
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.tools import tool_call


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
