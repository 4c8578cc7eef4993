"""Coordination writes record their activity events once, after commit."""

from datetime import timedelta
from typing import Any

from activity.stream.models import ActivityEvent, EventType
from activity.summaries.digest import catch_up_build
from coordination.work.services import (
    coordination_note_add,
    handoff_create,
    task_block,
    task_claim,
    task_complete,
    task_create,
    task_status_set,
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


def test_a_tasks_life_is_recorded_by_its_title(
    agent: Any, flux: Any, constellation: Any, django_capture_on_commit_callbacks: Any
) -> None:
    entropy = Actor.for_agent(agent)
    with django_capture_on_commit_callbacks(execute=True):
        tasks = [
            task_create(actor=entropy, constellation=constellation, title=title)
            for title in ("Book the dentist", "Renew passport", "Plan the trip")
        ]
        for task in tasks[:2]:
            task_claim(actor=entropy, task=task)
        task_complete(actor=entropy, task=tasks[0])
        task_block(actor=entropy, task=tasks[1], reason="waiting for photos")
        task_status_set(actor=entropy, task=tasks[2], status="cancelled")
    texts = list(
        ActivityEvent.objects.exclude(event_type=EventType.TASK_ASSIGNED)
        .order_by("pk")
        .values_list("text", flat=True)
    )
    first, second, third = (t.ref for t in tasks)
    assert texts == [
        f'Entropy created task "Book the dentist" ({first})',
        f'Entropy created task "Renew passport" ({second})',
        f'Entropy created task "Plan the trip" ({third})',
        f'Entropy completed task "Book the dentist" ({first})',
        f'Entropy marked task "Renew passport" ({second}) blocked: waiting for photos',
        f'Entropy cancelled task "Plan the trip" ({third})',
    ]
    # Flux's catch-up counts them as people would.
    Agent = type(flux)
    Agent.objects.filter(pk=flux.pk).update(last_active_at=flux.created_at)
    flux.refresh_from_db()
    later = flux.created_at + timedelta(hours=2)
    catch_up = catch_up_build(agent=flux, now=later)
    assert catch_up is not None
    assert "3 tasks created" in catch_up.text
    assert "1 task completed" in catch_up.text
