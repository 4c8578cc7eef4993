"""Group runs in the activity stream: each run's start (who started it,
the group, its pattern) and its end (the outcome), read only by those who
may see the run."""

from typing import Any

import pytest

from activity.stream.models import ActivityEvent, EventType
from activity.stream.selectors import activity_list
from coordination.groups.models import RunStatus
from coordination.groups.services import (
    delivery_complete,
    delivery_fail,
    delivery_take,
    group_message_route,
)
from pattern_site.kernel.actors import Actor

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_once(
    make_group: Any, agents: dict[str, Any], django_capture_on_commit_callbacks
):
    """Route a message from Entropy through a round robin group of Flux,
    then let Flux answer (or fail)."""

    def run(*, fail: bool = False) -> Any:
        group = make_group("round_robin", [("Flux", "regular"), ("Entropy", "regular")])
        with django_capture_on_commit_callbacks(execute=True):
            run = group_message_route(
                actor=Actor.for_agent(agents["Entropy"]),
                group=group,
                message="who takes the dentist call?",
            )
            (delivery,) = delivery_take(agent=agents["Flux"])
            if fail:
                delivery_fail(delivery=delivery, reason="no phone")
            else:
                delivery_complete(delivery=delivery, text="I will")
        run.refresh_from_db()
        return run

    return run


def test_a_run_records_its_start_and_its_completion(run_once, agents):
    run = run_once()
    assert run.status == RunStatus.COMPLETED
    (started,) = ActivityEvent.objects.filter(event_type=EventType.GROUP_RUN_STARTED)
    assert started.agent == agents["Entropy"]
    assert started.details == {
        "group": "Group",
        "pattern": "round_robin",
        "summary": "who takes the dentist call?",
    }
    (ended,) = ActivityEvent.objects.filter(event_type=EventType.GROUP_RUN_COMPLETED)
    assert ended.details["outcome"] == "completed"
    assert ended.details["summary"] == "1 answer"
    assert ended.details["pattern"] == "round_robin"


def test_a_failed_run_records_its_failure(run_once):
    run = run_once(fail=True)
    assert run.status == RunStatus.FAILED
    (ended,) = ActivityEvent.objects.filter(event_type=EventType.GROUP_RUN_COMPLETED)
    assert ended.details["outcome"] == "failed"
    assert ended.importance == "medium"


def test_only_those_who_may_see_the_run_read_its_events(
    run_once, agents, constellation, partner
):
    run_once()

    def run_events(actor: Actor) -> set[str]:
        return {
            e.event_type
            for e in activity_list(actor=actor, constellation=constellation)
            if e.event_type.startswith("group_run")
        }

    both = {EventType.GROUP_RUN_STARTED, EventType.GROUP_RUN_COMPLETED}
    assert run_events(Actor.for_agent(agents["Flux"])) == both
    assert run_events(Actor.for_user(partner)) == both
    assert run_events(Actor.for_agent(agents["Archive"])) == set()
