"""Agents answered by the LLM: the site answers their deliveries through the
activity app's provider (a loopback OpenAI-compatible server,
``tests.fake_llm``) and posts through the services an agent's program uses.
Celery runs eagerly here, as in the rest of the suite: the task runs when
the routing transaction's after-commit callbacks do."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from activity.llm.models import LLMUsage
from coordination.groups.models import DeliveryStatus, RunStatus
from coordination.groups.services import (
    delivery_complete,
    delivery_take,
    group_message_route,
    run_deadlines_sweep,
)
from coordination.groups.tasks import delivery_llm_answer_task
from coordination.groups.turns import loop_config_for, tool_rules_for
from memory.blocks.services import block_create
from memory.context import context_build
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue, agent_update
from tests.coordination.groups.conftest import config_ids
from tests.fake_llm import completion

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def every_piece_a_chunk(settings):
    settings.GROUPS_LLM_CHUNK_SECONDS = 0


@pytest.fixture(autouse=True)
def _tools(tools):
    """Deliveries are answered by the tool loop, which offers the tools."""


@pytest.fixture
def after_commit(django_capture_on_commit_callbacks):
    """Run what the block commits (the LLM task among it) as it would."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def route(after_commit):
    def route(group, message, **kwargs):
        with after_commit():
            run = group_message_route(
                actor=Actor.system(), group=group, message=message, **kwargs
            )
        run.refresh_from_db()
        return run

    return route


def answered_by_llm(agent, model="gpt-4o-mini"):
    return agent_update(agent=agent, model_name=model, answered_by_llm=True)


def events(run):
    return [(e.type, e.data) for e in run.events.order_by("seq")]


def test_round_robin_member_with_a_model_answers_with_its_context_as_prompt(
    make_group, agents, llm, route
):
    flux = answered_by_llm(agents["Flux"])
    block_create(
        actor=Actor.system(),
        label="persona",
        owner=flux,
        block_type="core",
        content="I guard the partner's time.",
    )
    group = make_group("round_robin", [("Flux", "regular"), ("Anchor", "regular")])
    llm.answer_streamed(["Block ", "9-11 ", "for deep work."], tokens=90)

    run = route(group, "plan my morning")

    assert run.status == RunStatus.COMPLETED
    (request,) = llm.requests
    system, user = request["body"]["messages"]
    rules = tool_rules_for(loop_config_for(flux))
    # Its context as it was when asked: the run had started, not completed.
    built = context_build(agent=flux, tool_rules=rules).system_prompt
    then = [line for line in built.split("\n") if "run completed" not in line]
    assert len(then) == len(built.split("\n")) - 1
    assert system == {"role": "system", "content": "\n".join(then)}
    assert "started a round robin run of the group Group" in system["content"]
    assert system["content"].startswith("You are Flux, an agent of the Pattern")
    assert "I guard the partner's time." in system["content"]
    assert user == {"role": "user", "content": "plan my morning"}
    assert request["body"]["model"] == "gpt-4o-mini"
    assert request["body"]["stream"] is True
    assert [t for t, _ in events(run)] == [
        "Started",
        "AgentStarted",
        "TextChunk",
        "TextChunk",
        "TextChunk",
        "TextChunk",
        "AgentCompleted",
        "Complete",
    ]
    chunks = [data for t, data in events(run) if t == "TextChunk"]
    assert [c["text"] for c in chunks if not c["is_final"]] == [
        "Block ",
        "9-11 ",
        "for deep work.",
    ]
    assert chunks[-1] == {
        "agent_id": flux.pk,
        "text": "Block 9-11 for deep work.",
        "is_final": True,
    }
    assert run.result == {"answers": {str(flux.pk): "Block 9-11 for deep work."}}
    assert LLMUsage.objects.get(constellation=flux.constellation).tokens == 90

    # The task running again finds the delivery answered and asks nothing.
    delivery_llm_answer_task(run.deliveries.get().pk)
    assert len(llm.requests) == 1
    # Anchor's turn: its program takes the delivery from its inbox.
    second = route(group, "and the afternoon?")
    assert delivery_take(agent=agents["Anchor"])[0].run_id == second.pk
    assert len(llm.requests) == 1


def test_a_pipeline_mixes_llm_stages_with_a_program_stage(
    make_group, agents, llm, route, after_commit
):
    answered_by_llm(agents["Entropy"])
    answered_by_llm(agents["Archive"], model="llama-3-8b")
    group = make_group(
        "pipeline",
        [("Entropy", "regular"), ("Flux", "regular"), ("Archive", "regular")],
        {
            "stages": [
                {"name": "analysis", "agent_ids": [agents["Entropy"].pk]},
                {"name": "scheduling", "agent_ids": [agents["Flux"].pk]},
                {"name": "filing", "agent_ids": [agents["Archive"].pk]},
            ]
        },
    )
    llm.answer_streamed(["Three parts: ", "forms, receipts, filing."])
    llm.answer_streamed(["Noted for next year."])

    run = route(group, "do my taxes")
    assert run.status == RunStatus.RUNNING
    (scheduling,) = delivery_take(agent=agents["Flux"])
    assert "[analysis] Three parts: forms, receipts, filing." in scheduling.content
    with after_commit():
        delivery_complete(delivery=scheduling, text="Tue 9am: forms")

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert [s["answers"] for s in run.result["stages"]] == [
        ["Three parts: forms, receipts, filing."],
        ["Tue 9am: forms"],
        ["Noted for next year."],
    ]
    filing = llm.requests[1]["body"]
    assert filing["model"] == "llama-3-8b"
    assert "[scheduling] Tue 9am: forms" in filing["messages"][1]["content"]
    assert filing["messages"][0]["content"].startswith("You are Archive")
    started = [d["agent_id"] for t, d in events(run) if t == "AgentStarted"]
    assert started == [agents["Entropy"].pk, agents["Flux"].pk, agents["Archive"].pk]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"status": 503, "delay": 0.0}, "the LLM call failed"),
        ({"status": 200, "delay": 1.5}, "the LLM did not answer in time"),
    ],
    ids=["provider-error", "timeout"],
)
def test_a_provider_failure_fails_the_delivery_with_an_error_event(
    make_group, agents, llm, route, settings, answer, reason
):
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_TIMEOUT = 0.5
    flux = answered_by_llm(agents["Flux"])
    group = make_group("round_robin", [("Flux", "regular")])
    llm.answer(completion("too late"), **answer)

    run = route(group, "plan my morning")

    assert run.status == RunStatus.FAILED
    delivery = run.deliveries.get()
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.failure.startswith(f"model gpt-4o-mini: {reason}")
    errors = [data for t, data in events(run) if t == "Error"]
    assert errors[0]["agent_id"] == flux.pk
    assert errors[0]["message"].startswith(f"Flux: model gpt-4o-mini: {reason}")
    assert errors[0]["recoverable"] is True
    assert errors[-1]["recoverable"] is False  # the run ends: nobody answered
    assert [t for t, _ in events(run)][:3] == ["Started", "AgentStarted", "Error"]


def test_a_spent_budget_fails_the_delivery_before_any_call(
    make_group, agents, llm, route, settings
):
    settings.LLM_DAILY_TOKEN_BUDGET = 100
    answered_by_llm(agents["Flux"])
    group = make_group("round_robin", [("Flux", "regular")])

    run = route(group, "plan my morning")

    assert llm.requests == []
    failure = run.deliveries.get().failure
    assert "has used 0 of its 100 LLM tokens today" in failure


def test_without_a_provider_the_delivery_fails_and_says_what_to_set(
    make_group, agents, route, settings
):
    settings.LLM_BASE_URL = ""
    answered_by_llm(agents["Flux"])
    group = make_group("round_robin", [("Flux", "regular")])

    run = route(group, "plan my morning")

    assert "no LLM provider is configured (set PATTERN_LLM_BASE_URL)" in (
        run.deliveries.get().failure
    )


def test_llm_voters_vote_in_json_checked_against_the_options(
    make_group, agents, llm, route, after_commit
):
    answered_by_llm(agents["Entropy"])
    answered_by_llm(agents["Flux"])
    group = make_group(
        "voting",
        [("Entropy", "regular"), ("Flux", "regular"), ("Anchor", "regular")],
        {"quorum": 3},
    )
    llm.answer(completion(json.dumps({"vote": "B", "reason": "Less risk."})))
    llm.answer(completion(json.dumps({"vote": "c"})))
    llm.answer(completion(json.dumps({"vote": "b", "reason": "Agreed."})))

    run = route(group, "ship on friday or monday?", options=["a", "b"])
    (anchor,) = delivery_take(agent=agents["Anchor"])
    with after_commit():
        delivery_complete(delivery=anchor, text="", vote="a")

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.result["decision"] == "b"
    assert run.result["votes"] == {
        str(agents["Entropy"].pk): "b",
        str(agents["Flux"].pk): "b",
        str(agents["Anchor"].pk): "a",
    }
    first = llm.requests[0]["body"]
    assert first["response_format"] == {"type": "json_object"}
    assert "Choose exactly one of: a, b." in first["messages"][1]["content"]
    retry = llm.requests[2]["body"]["messages"]
    assert '"vote" must be one of: a, b' in retry[-1]["content"]
    answers = {d.agent_id: d.answer for d in run.deliveries.all()}
    assert answers[agents["Entropy"].pk] == "Less risk."


def test_the_sweep_sends_again_a_delivery_whose_task_was_lost(
    make_group, agents, llm, after_commit, settings
):
    answered_by_llm(agents["Flux"])
    group = make_group("round_robin", [("Flux", "regular")])
    # Routed without its after-commit work: the task never ran.
    run = group_message_route(actor=Actor.system(), group=group, message="plan")
    llm.answer_streamed(["Late, ", "but answered."])

    with after_commit():
        run_deadlines_sweep()
    assert llm.requests == []  # not stalled yet: its task may still be queued
    later = timezone.now() + timedelta(seconds=settings.GROUPS_SWEEP_SECONDS + 1)
    with after_commit():
        run_deadlines_sweep(now=later)

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.deliveries.get().answer == "Late, but answered."


def test_an_agent_answered_by_the_llm_has_no_inbox(agents, client):
    flux = answered_by_llm(agents["Flux"])
    token = agent_token_issue(agent=flux).raw
    response = client.get("/api/inbox", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 403
    assert "answered by its model gpt-4o-mini" in response.json()["detail"]


def test_the_group_page_shows_who_answers_each_member(
    make_group, agents, partner, client, settings
):
    settings.LLM_BASE_URL = ""
    answered_by_llm(agents["Flux"])
    group = make_group(
        "supervisor",
        [("Flux", "supervisor"), ("Anchor", "regular")],
        config_ids(agents, leader_id="Flux"),
    )
    client.force_login(partner)
    page = client.get(f"/groups/{group.pk}/").content.decode()
    assert '<span class="badge">LLM</span> gpt-4o-mini' in page
    assert "its program" in page
    assert "no LLM provider is configured" in page


def test_an_agent_given_back_to_its_program_keeps_its_pending_delivery(
    make_group, agents, llm
):
    flux = answered_by_llm(agents["Flux"])
    group = make_group("round_robin", [("Flux", "regular")])
    run = group_message_route(actor=Actor.system(), group=group, message="plan")
    agent_update(agent=flux, answered_by_llm=False)

    delivery_llm_answer_task(run.deliveries.get().pk)

    assert llm.requests == []
    assert delivery_take(agent=flux)[0].run_id == run.pk
