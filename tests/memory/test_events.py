"""Memory writes record their activity events once, after commit."""

from typing import Any

import pytest
from django.db import transaction

from activity.stream.models import ActivityEvent, EventType
from memory.blocks.services import block_append, block_create, block_share
from memory.longterm.services import (
    archival_entry_create,
    archival_entry_delete,
    conversation_start,
    messages_append,
)
from pattern_site.kernel.actors import Actor


def _events(event_type: str) -> list[ActivityEvent]:
    return list(ActivityEvent.objects.filter(event_type=event_type).order_by("pk"))


def test_a_block_append_records_one_block_update(
    agent: Any, django_capture_on_commit_callbacks: Any
) -> None:
    block = block_create(
        actor=Actor.system(),
        owner=agent,
        label="journal",
        template="custom",
        schema={"kind": "text"},
    )
    with django_capture_on_commit_callbacks(execute=True):
        block_append(actor=Actor.for_agent(agent), block=block, content="met Flux")
    (event,) = [
        e
        for e in _events(EventType.MEMORY_BLOCK_UPDATED)
        if e.details["change_type"] == "edit"
    ]
    assert event.agent == agent and event.details["label"] == "journal"
    # Other agents read the activity stream, not this agent's block.
    assert "summary" not in event.details
    assert "met Flux" not in event.text


def test_a_constellation_block_change_carries_its_summary(
    agent: Any, django_capture_on_commit_callbacks: Any
) -> None:
    block = block_create(
        actor=Actor.system(),
        constellation=agent.constellation,
        label="plans",
        template="custom",
        schema={"kind": "text"},
    )
    with django_capture_on_commit_callbacks(execute=True):
        block_append(actor=Actor.for_agent(agent), block=block, content="met Flux")
    (event,) = [
        e
        for e in _events(EventType.MEMORY_BLOCK_UPDATED)
        if e.details["change_type"] == "edit"
    ]
    assert "met Flux" in event.details["summary"] and "met Flux" in event.text


def test_a_rolled_back_change_records_nothing(
    agent: Any, other_agent: Any, django_capture_on_commit_callbacks: Any
) -> None:
    block = block_create(actor=Actor.system(), owner=agent, label="plans")
    with django_capture_on_commit_callbacks(execute=True):
        try:
            with transaction.atomic():
                block_share(
                    actor=Actor.system(),
                    block=block,
                    agent=other_agent,
                    access="read_only",
                )
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
    assert not [
        e
        for e in _events(EventType.MEMORY_BLOCK_UPDATED)
        if e.details["change_type"] == "share"
    ]


def test_archival_writes_record_tool_events(
    agent: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        entry = archival_entry_create(agent=agent, content="the partner likes tea")
        archival_entry_delete(entry=entry)
    tools = [e.details["tool"] for e in _events(EventType.TOOL_EXECUTED)]
    assert tools == ["archival_memory_insert", "archival_memory_delete"]


@pytest.mark.parametrize(
    ("role", "event_type"),
    [
        ("user", EventType.MESSAGE_RECEIVED),
        ("assistant", EventType.MESSAGE_SENT),
    ],
)
def test_messages_record_received_and_sent_but_not_tool_noise(
    agent: Any, django_capture_on_commit_callbacks: Any, role: str, event_type: str
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        messages_append(
            conversation=conversation_start(agent=agent, title="partner"),
            messages=[
                {"role": role, "content": "how was the trip?"},
                {"role": "tool", "content": "{}", "tool_call_id": "call_1"},
            ],
        )
    (event,) = _events(event_type)
    assert event.agent == agent and event.details["summary"] == "how was the trip?"
    assert ActivityEvent.objects.count() == 1


def test_a_message_event_names_its_author_as_people_call_it(
    agent: Any, other_agent: Any, partner: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        messages_append(
            conversation=conversation_start(agent=agent, title="chat"),
            messages=[
                {
                    "role": "user",
                    "content": "lunch?",
                    "author": f"agent:{other_agent.pk}",
                },
                {"role": "user", "content": "tea?", "author": f"human:{partner.pk}"},
            ],
        )
    lines = [e.text for e in _events(EventType.MESSAGE_RECEIVED)]
    assert lines == [
        f"{agent.name} received a message from {other_agent.name}: lunch?",
        f"{agent.name} received a message from {partner.username}: tea?",
    ]
