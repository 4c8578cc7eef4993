"""Coordination writes record their activity events once, after commit."""

from typing import Any

from activity.stream.models import ActivityEvent, EventType
from coordination.work.services import (
    coordination_note_add,
    handoff_create,
    task_claim,
    task_create,
)
from pattern_site.kernel.actors import Actor


def test_claiming_a_task_records_that_it_was_assigned(
    agent: Any, constellation: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        task = task_create(
            actor=Actor.system(), constellation=constellation, title="Fix the bug"
        )
        task_claim(actor=Actor.for_agent(agent), task=task)
    (event,) = ActivityEvent.objects.filter(event_type=EventType.TASK_ASSIGNED)
    assert event.agent == agent and event.details["task"] == task.ref


def test_handoffs_and_notes_are_recorded(
    agent: Any, flux: Any, constellation: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        handoff_create(
            actor=Actor.for_agent(agent), to_agent=flux, content="API half done"
        )
        coordination_note_add(
            actor=Actor.for_agent(agent),
            constellation=constellation,
            text="the partner seemed tired",
        )
        coordination_note_add(
            actor=Actor.for_agent(agent),
            constellation=constellation,
            text="we ship on Friday",
            decision=True,
        )
    (handoff,) = ActivityEvent.objects.filter(event_type=EventType.HANDOFF_INITIATED)
    assert handoff.details["to"] == "Flux" and handoff.agent == agent
    notes = ActivityEvent.objects.filter(event_type=EventType.NOTABLE)
    # Only the note flagged a decision is important enough for Key Decisions.
    assert {(n.details["description"], n.importance) for n in notes} == {
        ("the partner seemed tired", "low"),
        ("we ship on Friday", "medium"),
    }
