"""Deadlines and LLM answers are kept by a real Celery worker, with nobody
connected."""

import pytest

from coordination.groups.models import GroupRun, RunStatus
from coordination.groups.services import (
    delivery_complete,
    delivery_take,
    group_message_route,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_update
from tests.conftest import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_worker_expires_a_silent_stage_and_the_pipeline_skips_it(
    celery_worker_process, make_group, agents
):
    group = make_group(
        "pipeline",
        [("Entropy", "regular"), ("Flux", "regular")],
        {
            "stages": [
                {
                    "name": "analysis",
                    "agent_ids": [agents["Entropy"].pk],
                    "timeout": 1,
                    "on_failure": "skip",
                },
                {"name": "scheduling", "agent_ids": [agents["Flux"].pk]},
            ]
        },
    )
    run = group_message_route(actor=Actor.system(), group=group, message="report")
    # Entropy never answers; the worker's countdown task expires its stage.
    second = wait_until(lambda: delivery_take(agent=agents["Flux"]))
    assert "report" in second[0].content
    delivery_complete(delivery=second[0], text="Tue")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.result["stages"][0]["skipped"] is True


def test_a_worker_closes_a_vote_at_its_timeout(
    celery_worker_process, make_group, agents
):
    group = make_group(
        "voting",
        [("Entropy", "regular"), ("Flux", "regular"), ("Anchor", "regular")],
        {"quorum": 2, "voting_timeout": 1},
    )
    run = group_message_route(actor=Actor.system(), group=group, message="a or b?")
    for name in ("Entropy", "Flux"):
        delivery = delivery_take(agent=agents[name])[0]
        delivery_complete(delivery=delivery, text="", vote="b")
    wait_until(lambda: GroupRun.objects.get(pk=run.pk).status != RunStatus.RUNNING)
    run.refresh_from_db()
    assert run.result["decision"] == "b"


@pytest.fixture
def llm_for_workers(llm, settings, monkeypatch):
    """The fake LLM server, for the processes started after this fixture."""
    monkeypatch.setenv("PATTERN_LLM_BASE_URL", settings.LLM_BASE_URL)
    monkeypatch.setenv("PATTERN_LLM_MAX_RETRIES", "0")
    return llm


def test_a_worker_answers_for_an_agent_answered_by_the_llm(
    llm_for_workers, celery_worker_process, make_group, agents
):
    agent_update(agent=agents["Flux"], model_name="gpt-4o-mini", answered_by_llm=True)
    group = make_group("round_robin", [("Flux", "regular")])
    llm_for_workers.answer_streamed(["Nine ", "to eleven."])
    run = group_message_route(actor=Actor.system(), group=group, message="plan")
    wait_until(lambda: GroupRun.objects.get(pk=run.pk).status != RunStatus.RUNNING)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.deliveries.get().answer == "Nine to eleven."
    (request,) = llm_for_workers.requests
    assert request["body"]["messages"][0]["content"].startswith("You are Flux")
    types = list(run.events.order_by("seq").values_list("type", flat=True))
    assert types[:3] == ["Started", "AgentStarted", "TextChunk"]
    assert types[-2:] == ["AgentCompleted", "Complete"]
