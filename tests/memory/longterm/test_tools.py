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
