"""A real Celery worker killed (SIGKILL) in the middle of an agent's turn:
the task, leased to the dead worker, runs on the next one, which resumes
the turn where the database says it stopped, never running a recorded
tool call again."""

import signal
from typing import Any

import pytest
from django.conf import settings

from coordination.groups.models import (
    AgentToolCall,
    AgentTurn,
    DeliveryStatus,
    RunStatus,
    ToolCallStatus,
    TurnStatus,
)
from coordination.groups.services import group_create, group_member_add
from coordination.groups.services.routing import group_message_route
from memory.longterm.models import ArchivalEntry
from pattern_site.celery import app as celery_app
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_update
from tests.conftest import READY_SECONDS, celery_configure, celery_worker, wait_until
from tests.factories import AgentFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_env(llm: Any) -> dict[str, str]:
    """Workers answering through the scripted LLM server; a re-run takes
    over a turn at once (the test kills its worker, it cannot be alive)."""
    return {
        "PATTERN_LLM_BASE_URL": settings.LLM_BASE_URL,
        "PATTERN_LLM_API_KEY": "test-key",
        "PATTERN_LLM_MODEL": "test-model",
        "PATTERN_LLM_TIMEOUT": str(READY_SECONDS),
        "PATTERN_ACTIVITY_EMBEDDER": "",
        "PATTERN_GROUPS_LLM_CHUNK_SECONDS": "0",
        "PATTERN_AGENT_TURN_RESUME_AFTER_SECONDS": "0",
    }


def test_a_worker_killed_mid_turn_resumes_it_on_the_next_without_repeating_a_call(
    constellation: Any, llm: Any, worker_env: dict[str, str]
):
    flux = agent_update(
        agent=AgentFactory(constellation=constellation, name="Flux"),
        model_name="test-model",
        answered_by_llm=True,
    )
    group = group_create(
        constellation=constellation, name="Solo", pattern="round_robin"
    )
    group_member_add(group=group, agent=flux)
    llm.answer_tools(
        (
            "c1",
            "archival_memory_insert",
            {"content": "The partner likes tea", "domain": "preferences"},
        )
    )
    # The turn's second model call waits: the worker is mid-turn, its first
    # tool call done, when it is killed.
    held = llm.hold()
    llm.answer_tools(("c2", "send_message", {"message": "Noted: tea."}))
    broker = settings.CELERY_BROKER_URL
    old = (celery_app.conf.task_always_eager, celery_app.conf.broker_url)
    celery_configure(eager=False, broker_url=broker)
    try:
        with celery_worker(broker, **worker_env) as first:
            run = group_message_route(
                actor=Actor.system(), group=group, message="remember: tea"
            )
            assert held.arrived.wait(READY_SECONDS), "".join(first.log)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=READY_SECONDS)
        turn = AgentTurn.objects.get()
        assert turn.status == TurnStatus.RUNNING
        assert AgentToolCall.objects.get(call_id="c1").status == (
            ToolCallStatus.COMPLETED
        )
        assert ArchivalEntry.objects.filter(agent=flux).count() == 1

        with celery_worker(broker, **worker_env) as second:

            def finished() -> bool:
                run.refresh_from_db()
                return run.status != RunStatus.RUNNING

            wait_until(finished, interval=0.2)
            log = "".join(second.log)
    finally:
        held.release.set()
        celery_configure(eager=old[0], broker_url=old[1])

    assert run.status == RunStatus.COMPLETED, log
    delivery = run.deliveries.get()
    assert (delivery.status, delivery.answer) == (
        DeliveryStatus.COMPLETED,
        "Noted: tea.",
    )
    turn.refresh_from_db()
    assert (turn.status, turn.exit) == (TurnStatus.COMPLETED, "send_message")
    # Each call id recorded once, the insert run once, though the turn ran
    # on two workers.
    calls = list(AgentToolCall.objects.order_by("id").values_list("call_id", "ok"))
    assert calls == [("c1", True), ("c2", True)]
    assert ArchivalEntry.objects.filter(agent=flux).count() == 1
    # The resumed turn's model call carried the first call's stored result.
    resumed = llm.requests[-1]["body"]["messages"]
    assert [m["role"] for m in resumed[-3:]] == ["user", "assistant", "tool"]
    assert resumed[-1]["tool_call_id"] == "c1"
