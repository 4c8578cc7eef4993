"""Agents racing for the same task or state key on real SQLite, from real
threads with their own connections: exactly one wins each race, every
other gets ``Conflict``, and nothing is overwritten unseen."""

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from coordination.work.models import CoordinationState, Task, TaskStatus
from coordination.work.services import (
    coordination_state_set,
    task_claim,
    task_complete,
    task_create,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import Conflict
from tests.factories import AgentFactory

RACERS = 6
ROUNDS = 5


def race(work: Callable[[int], Any]) -> tuple[list[Any], list[BaseException]]:
    """Run ``work(n)`` in ``RACERS`` threads released at once."""
    wins: list[Any] = []
    errors: list[BaseException] = []
    start = threading.Barrier(RACERS)

    def run(n: int) -> None:
        try:
            start.wait()
            wins.append(work(n))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return wins, errors


@pytest.fixture
def racers(constellation: Any) -> list[Actor]:
    return [
        Actor.for_agent(AgentFactory(constellation=constellation, name=f"Racer{n}"))
        for n in range(RACERS)
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_concurrent_claims_have_exactly_one_winner(
    constellation, partner, racers, round_
):
    task = task_create(
        actor=Actor.for_user(partner), constellation=constellation, title="one job"
    )
    wins, errors = race(lambda n: task_claim(actor=racers[n], task=task))
    assert len(wins) == 1
    assert len(errors) == RACERS - 1
    assert all(isinstance(e, Conflict) for e in errors), errors
    winner = wins[0].assignee
    assert {e.message for e in errors} == {
        f"{task.ref} was already claimed by @{winner.name}"
    }
    task.refresh_from_db()
    assert (task.status, task.assignee_id) == (TaskStatus.IN_PROGRESS, winner.pk)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_concurrent_completions_have_exactly_one_winner(
    constellation, partner, racers, round_
):
    task = task_create(
        actor=Actor.for_user(partner), constellation=constellation, title="one job"
    )
    wins, errors = race(lambda n: task_complete(actor=racers[n], task=task))
    assert len(wins) == 1
    assert len(errors) == RACERS - 1
    assert all(isinstance(e, Conflict) for e in errors), errors
    assert all(f"{task.ref} is done" in e.message for e in errors)
    task.refresh_from_db()
    assert task.status == TaskStatus.DONE
    assert task.assignee_id == wins[0].assignee_id
    assert Task.objects.count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("version", [0, 1], ids=["create", "update"])
def test_concurrent_state_writes_at_one_version_keep_exactly_one(
    constellation, racers, version
):
    if version:
        coordination_state_set(
            actor=racers[0],
            constellation=constellation,
            key="focus",
            value="start",
            expected_version=0,
        )
    wins, errors = race(
        lambda n: coordination_state_set(
            actor=racers[n],
            constellation=constellation,
            key="focus",
            value=f"writer {n}",
            expected_version=version,
        )
    )
    assert len(wins) == 1
    assert len(errors) == RACERS - 1
    assert all(isinstance(e, Conflict) for e in errors), errors
    state = CoordinationState.objects.get(key="focus")
    assert (state.version, state.value) == (version + 1, wins[0].value)
