from datetime import timedelta
from typing import Any

import pytest

from activity.stream.context import recent_activity_render
from activity.stream.models import EventType
from memory.context import context_build
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.humanize import ago


@pytest.mark.parametrize(
    ("delta", "said"),
    [
        (timedelta(seconds=20), "just now"),
        (timedelta(minutes=1), "1 minute ago"),
        (timedelta(minutes=59), "59 minutes ago"),
        (timedelta(hours=1), "1 hour ago"),
        (timedelta(hours=2, minutes=30), "2 hours ago"),
        (timedelta(hours=23, minutes=59), "23 hours ago"),
        (timedelta(hours=30), "yesterday"),
        (timedelta(days=2), "2 days ago"),
        (timedelta(days=7), "7 days ago"),
        (timedelta(days=65), "2 months ago"),
    ],
)
def test_ago_says_relative_times_like_people(delta: timedelta, said: str) -> None:
    assert ago(delta) == said


def test_recent_activity_lists_others_newest_first_without_own_noise(
    agent: Any, flux: Any, partner: Any, record: Any
) -> None:
    record(
        actor=Actor.for_user(partner),
        agent=agent,
        event_type=EventType.MEMORY_BLOCK_UPDATED,
        details={"label": "persona", "change_type": "replace"},
        ago=timedelta(hours=30),
    )
    record(
        actor=Actor.for_agent(flux),
        event_type=EventType.MESSAGE_SENT,
        details={"target": "Bluesky", "summary": "thread about async Rust"},
        ago=timedelta(hours=2),
    )
    record(
        actor=Actor.for_agent(agent),
        event_type=EventType.TOOL_EXECUTED,
        details={"tool": "recall"},
        ago=timedelta(minutes=5),
    )
    record(
        actor=Actor.for_agent(agent),
        event_type=EventType.NOTABLE,
        details={"description": "Partner prefers mornings"},
        ago=timedelta(minutes=3),
    )
    assert recent_activity_render(agent) == (
        "<recent_activity>\n"
        "[3 minutes ago] Entropy flagged: Partner prefers mornings\n"
        "[2 hours ago] Flux sent a message to Bluesky: thread about async Rust\n"
        "[yesterday] partner updated Entropy's persona block (replace)\n"
        "</recent_activity>"
    )


def test_recent_activity_keeps_the_configured_number_of_lines(
    agent: Any, flux: Any, record: Any, settings: Any
) -> None:
    settings.ACTIVITY_CONTEXT_EVENTS = 2
    for n in range(4):
        record(
            actor=Actor.for_agent(flux),
            event_type=EventType.TOOL_EXECUTED,
            details={"tool": f"tool{n}"},
            ago=timedelta(hours=n + 1),
        )
    lines = recent_activity_render(agent).splitlines()
    assert lines[1:-1] == [
        "[1 hour ago] Flux ran tool0",
        "[2 hours ago] Flux ran tool1",
    ]


def test_recent_activity_is_empty_without_events(agent: Any) -> None:
    assert recent_activity_render(agent) == ""


def test_context_builder_renders_recent_activity_by_default(
    agent: Any, flux: Any, record: Any
) -> None:
    record(
        actor=Actor.for_agent(flux),
        event_type=EventType.HANDOFF_INITIATED,
        details={"to_name": "Entropy", "summary": "the tax forms"},
        ago=timedelta(hours=4),
    )
    prompt = context_build(agent=agent).system_prompt
    assert (
        "<recent_activity>\n[4 hours ago] Flux handed off to Entropy: the tax forms\n"
        "</recent_activity>" in prompt
    )
