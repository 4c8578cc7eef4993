"""Each coordination pattern on deterministic scenarios, through the services."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from coordination.groups.models import DeliveryStatus, GroupRun, RunStatus
from coordination.groups.services import (
    delivery_complete,
    delivery_fail,
    delivery_take,
    group_message_route,
    group_metric_record,
    group_update,
    run_deadlines_sweep,
    run_delegate,
    turn_tool_call_completed,
    turn_tool_call_started,
)
from coordination.groups.tasks import group_sleeptime_sweep_task
from pattern_site.kernel.agents.services import agent_update
from pattern_site.kernel.errors import Conflict, InvalidInput, LimitExceeded
from tests.coordination.groups.conftest import config_ids

pytestmark = pytest.mark.django_db


def take_one(agent):
    taken = delivery_take(agent=agent)
    assert len(taken) == 1, f"{agent.name} has {len(taken)} deliveries"
    return taken[0]


def event_types(run):
    return [e.type for e in run.events.order_by("seq")]


def test_round_robin_takes_turns_and_skips_an_unavailable_member(
    make_group, agents, system
):
    group = make_group(
        "round_robin",
        [("Pattern", "regular"), ("Momentum", "regular"), ("Anchor", "regular")],
    )
    agent_update(agent=agents["Momentum"], is_active=False)
    chosen = []
    for _ in range(4):
        run = group_message_route(actor=system, group=group, message="help")
        chosen.append(run.deliveries.get().agent.name)
    assert chosen == ["Pattern", "Anchor", "Pattern", "Anchor"]


def test_round_robin_without_skipping_refuses_when_it_is_an_unavailable_turn(
    make_group, agents, system
):
    group = make_group(
        "round_robin",
        [("Pattern", "regular"), ("Momentum", "regular")],
        {"skip_unavailable": False, "current_index": 1},
    )
    agent_update(agent=agents["Momentum"], is_active=False)
    with pytest.raises(Conflict, match="Momentum's turn"):
        group_message_route(actor=system, group=group, message="help")
    assert GroupRun.objects.count() == 0
    group.refresh_from_db()
    assert group.state["current_index"] == 1


def test_a_run_streams_the_seed_events_from_start_to_complete(
    make_group, agents, system
):
    group = make_group("round_robin", [("Flux", "regular"), ("Archive", "observer")])
    run = group_message_route(actor=system, group=group, message="plan my day")
    delivery = take_one(agents["Flux"])
    assert delivery_take(agent=agents["Archive"])[0].status == "completed"
    delivery_complete(delivery=delivery, text="9am: deep work")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert event_types(run) == [
        "Started",
        "AgentStarted",
        "TextChunk",
        "AgentCompleted",
        "Complete",
    ]
    started, complete = run.events.first(), run.events.last()
    assert started.data == {
        "group_id": group.pk,
        "pattern": "round_robin",
        "agent_count": 1,
    }
    assert complete.data["agent_responses"] == [
        {
            "agent_id": agents["Flux"].pk,
            "agent_name": "Flux",
            "answer": "9am: deep work",
        }
    ]
    assert [e.seq for e in run.events.all()] == [1, 2, 3, 4, 5]


def test_dynamic_capability_picks_the_member_whose_capabilities_match(
    make_group, agents, system
):
    group = make_group(
        "dynamic",
        [
            ("Entropy", "regular", {"capabilities": ["task breakdown", "planning"]}),
            ("Flux", "specialist", {"domain": "time", "capabilities": ["schedules"]}),
            ("Anchor", "regular", {"capabilities": ["habits", "medication"]}),
        ],
        {"selector": "capability"},
    )
    run = group_message_route(
        actor=system, group=group, message="Did I take my medication? Check habits"
    )
    assert run.deliveries.get().agent.name == "Anchor"
    run = group_message_route(actor=system, group=group, message="fix my schedules")
    assert run.deliveries.get().agent.name == "Flux"


def test_dynamic_load_balancing_picks_the_least_recently_used(
    make_group, agents, system
):
    group = make_group(
        "dynamic",
        [("Entropy", "regular"), ("Flux", "regular"), ("Anchor", "regular")],
        {"selector": "load_balancing"},
    )
    names = [
        group_message_route(actor=system, group=group, message="x")
        .deliveries.get()
        .agent.name
        for _ in range(4)
    ]
    assert names == ["Entropy", "Flux", "Anchor", "Entropy"]


def test_dynamic_supervisor_selector_asks_the_supervisor_who_answers(
    make_group, agents, system
):
    group = make_group(
        "dynamic",
        [("Pattern", "supervisor"), ("Entropy", "regular"), ("Flux", "regular")],
        {"selector": "supervisor"},
    )
    run = group_message_route(actor=system, group=group, message="break this down")
    select = take_one(agents["Pattern"])
    assert select.kind == "select"
    assert "Entropy" in select.content
    delivery_complete(delivery=select, text="Entropy")
    answer = take_one(agents["Entropy"])
    delivery_complete(delivery=answer, text="step 1")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    responses = run.events.last().data["agent_responses"]
    assert [r["agent_name"] for r in responses] == ["Entropy"]


def test_supervisor_delegates_up_to_the_limit_then_the_leader_keeps_it(
    make_group, agents, system
):
    group = make_group(
        "supervisor",
        [("Entropy", "supervisor"), ("Flux", "regular"), ("Pattern", "regular")],
        {**config_ids(agents, leader_id="Entropy"), "max_delegations_per_agent": 1},
    )
    run = group_message_route(actor=system, group=group, message="plan the week")
    lead = take_one(agents["Entropy"])
    assert lead.kind == "lead"
    made = run_delegate(
        delivery=lead, message="estimate times", agent_id=agents["Flux"].pk
    )
    assert made.agent_id == agents["Flux"].pk
    with pytest.raises(LimitExceeded, match="Flux already has 1/1"):
        run_delegate(delivery=lead, message="more", agent_id=agents["Flux"].pk)
    delivery_complete(delivery=lead, text="plan")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING  # waits for the delegate
    delivery_complete(delivery=take_one(agents["Flux"]), text="2h")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED


def test_supervisor_fallback_fail_ends_the_run_when_no_one_can_take_it(
    make_group, agents, system
):
    group = make_group(
        "supervisor",
        [("Entropy", "supervisor"), ("Flux", "regular")],
        {
            **config_ids(agents, leader_id="Entropy"),
            "max_delegations_per_agent": 1,
            "fallback_behavior": "fail",
        },
    )
    run = group_message_route(actor=system, group=group, message="plan")
    lead = take_one(agents["Entropy"])
    assert run_delegate(delivery=lead, message="a").agent_id == agents["Flux"].pk
    assert run_delegate(delivery=lead, message="b") is None
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "no member is available" in run.events.last().data["message"]


def test_supervisor_routes_to_a_stand_in_when_the_leader_is_unavailable(
    make_group, agents, system
):
    group = make_group(
        "supervisor",
        [("Entropy", "supervisor"), ("Flux", "regular", {"capabilities": ["time"]})],
        config_ids(agents, leader_id="Entropy"),
    )
    agent_update(agent=agents["Entropy"], is_active=False)
    run = group_message_route(actor=system, group=group, message="time?")
    assert run.deliveries.get().agent.name == "Flux"


def voting_group(make_group, agents, **config):
    return make_group(
        "voting",
        [
            ("Entropy", "regular"),
            ("Flux", "supervisor"),
            ("Anchor", "regular"),
            ("Momentum", "regular"),
        ],
        {"quorum": 2, **config},
    )


def vote_all(agents, votes):
    for name, vote in votes:
        delivery_complete(delivery=take_one(agents[name]), text="because", vote=vote)


def test_voting_majority_decides(make_group, agents, system):
    group = voting_group(make_group, agents)
    run = group_message_route(actor=system, group=group, message="tea or coffee?")
    vote_all(
        agents,
        [
            ("Entropy", "Tea"),
            ("Flux", "coffee"),
            ("Anchor", "tea"),
            ("Momentum", "tea"),
        ],
    )
    run.refresh_from_db()
    assert run.result["decision"] == "tea"
    assert run.result["totals"] == {"tea": 3.0, "coffee": 1.0}
    assert run.result["tie_broken_by"] == ""


def test_voting_tie_is_broken_by_the_supervisor(make_group, agents, system):
    group = voting_group(make_group, agents, tie_breaker="supervisor")
    run = group_message_route(actor=system, group=group, message="tea or coffee?")
    vote_all(
        agents,
        [
            ("Entropy", "tea"),
            ("Anchor", "tea"),
            ("Flux", "coffee"),
            ("Momentum", "coffee"),
        ],
    )
    run.refresh_from_db()
    assert run.result["decision"] == "coffee"
    assert run.result["tie_broken_by"] == "supervisor"


def test_voting_tie_by_first_vote_and_random(make_group, agents, system):
    group = voting_group(make_group, agents, tie_breaker="first_vote")
    run = group_message_route(actor=system, group=group, message="a or b?")
    vote_all(
        agents, [("Flux", "b"), ("Entropy", "a"), ("Anchor", "a"), ("Momentum", "b")]
    )
    run.refresh_from_db()
    assert (run.result["decision"], run.result["tie_broken_by"]) == ("b", "first_vote")
    group_update(group=group, config={"quorum": 2, "tie_breaker": "random"})
    run = group_message_route(actor=system, group=group, message="a or b?")
    vote_all(
        agents, [("Flux", "b"), ("Entropy", "a"), ("Anchor", "a"), ("Momentum", "b")]
    )
    run.refresh_from_db()
    assert run.result["decision"] in ("a", "b")
    assert run.result["tie_broken_by"] == "random"


def test_voting_tie_with_no_tie_breaker_fails_the_run(make_group, agents, system):
    group = voting_group(make_group, agents, tie_breaker="none")
    run = group_message_route(actor=system, group=group, message="a or b?")
    vote_all(
        agents, [("Flux", "b"), ("Entropy", "a"), ("Anchor", "a"), ("Momentum", "b")]
    )
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.events.last().data["message"] == "the vote is tied between b, a"


def test_voting_weights_votes_by_expertise(make_group, agents, system):
    group = make_group(
        "voting",
        [
            ("Entropy", "regular"),
            ("Anchor", "regular"),
            ("Flux", "specialist", {"domain": "sleep", "capabilities": ["bedtime"]}),
        ],
        {"quorum": 3, "weight_by_expertise": True},
    )
    run = group_message_route(
        actor=system, group=group, message="bedtime at 11 for sleep?"
    )
    vote_all(agents, [("Entropy", "no"), ("Anchor", "no"), ("Flux", "yes")])
    run.refresh_from_db()
    assert run.result["totals"] == {"no": 2.0, "yes": 3.0}
    assert run.result["decision"] == "yes"


def test_voting_timeout_closes_with_quorum_or_fails_below_it(
    make_group, agents, system
):
    group = voting_group(make_group, agents, quorum=2, voting_timeout=30)
    run = group_message_route(actor=system, group=group, message="a or b?")
    vote_all(agents, [("Flux", "a"), ("Entropy", "a")])
    assert run_deadlines_sweep() == 0  # not due yet
    assert run_deadlines_sweep(now=timezone.now() + timedelta(seconds=31)) == 1
    run.refresh_from_db()
    assert run.result["decision"] == "a"
    assert set(run.deliveries.values_list("status", flat=True)) == {
        "completed",
        "expired",
    }
    run = group_message_route(actor=system, group=group, message="again?")
    vote_all(agents, [("Flux", "a")])
    run_deadlines_sweep(now=timezone.now() + timedelta(seconds=31))
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.result["error"] == "quorum not reached: 1 of 2 votes within 30 s"


def test_voting_refuses_a_vote_outside_the_options(make_group, agents, system):
    group = voting_group(make_group, agents)
    group_message_route(
        actor=system, group=group, message="pick", options=["Tea", "Coffee"]
    )
    delivery = take_one(agents["Flux"])
    with pytest.raises(InvalidInput, match="not one of the options: tea, coffee"):
        delivery_complete(delivery=delivery, text="", vote="water")
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.TAKEN


def pipeline_group(make_group, agents, second):
    return make_group(
        "pipeline",
        [("Entropy", "regular"), ("Flux", "regular")],
        {
            "stages": [
                {"name": "analysis", "agent_ids": [agents["Entropy"].pk]},
                {
                    "name": "scheduling",
                    "agent_ids": [agents["Flux"].pk],
                    "timeout": 60,
                    **second,
                },
            ]
        },
    )


def test_pipeline_passes_each_stage_output_to_the_next(make_group, agents, system):
    group = pipeline_group(make_group, agents, {})
    run = group_message_route(actor=system, group=group, message="write the report")
    assert delivery_take(agent=agents["Flux"]) == []
    delivery_complete(delivery=take_one(agents["Entropy"]), text="3 parts")
    second = take_one(agents["Flux"])
    assert "[analysis] 3 parts" in second.content
    delivery_complete(delivery=second, text="Tue-Thu")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert [s["answers"] for s in run.result["stages"]] == [["3 parts"], ["Tue-Thu"]]


def test_pipeline_retries_a_failed_stage_then_aborts(make_group, agents, system):
    group = pipeline_group(
        make_group, agents, {"on_failure": "retry", "max_attempts": 2}
    )
    run = group_message_route(actor=system, group=group, message="report")
    delivery_complete(delivery=take_one(agents["Entropy"]), text="ok")
    delivery_fail(delivery=take_one(agents["Flux"]), reason="calendar down")
    retry = take_one(agents["Flux"])
    assert retry.attempt == 2
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    delivery_fail(delivery=retry, reason="still down")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.result["error"] == (
        "stage 'scheduling' failed after 2 attempt(s): still down; aborted"
    )


def test_pipeline_retry_succeeds_on_the_second_attempt_after_a_timeout(
    make_group, agents, system
):
    group = pipeline_group(
        make_group, agents, {"on_failure": "retry", "max_attempts": 2}
    )
    run = group_message_route(actor=system, group=group, message="report")
    delivery_complete(delivery=take_one(agents["Entropy"]), text="ok")
    take_one(agents["Flux"])
    assert run_deadlines_sweep(now=timezone.now() + timedelta(seconds=61)) == 1
    retry = take_one(agents["Flux"])
    delivery_complete(delivery=retry, text="done")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert "no answer within 60 s" in " ".join(
        e.data["message"] for e in run.events.filter(type="Error")
    )


def test_pipeline_abort_and_skip(make_group, agents, system):
    group = pipeline_group(make_group, agents, {"on_failure": "skip"})
    run = group_message_route(actor=system, group=group, message="report")
    delivery_complete(delivery=take_one(agents["Entropy"]), text="ok")
    delivery_fail(delivery=take_one(agents["Flux"]), reason="busy")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.result["stages"][1] == {
        "stage": "scheduling",
        "skipped": True,
        "answers": [],
    }
    config = {**group.config}
    config["stages"][0]["on_failure"] = "abort"
    group_update(group=group, config=config)
    run = group_message_route(actor=system, group=group, message="report")
    delivery_fail(delivery=take_one(agents["Entropy"]), reason="no data")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert delivery_take(agent=agents["Flux"]) == []


def test_pipeline_parallel_stages_start_together(make_group, agents, system):
    group = pipeline_group(make_group, agents, {})
    config = {**group.config, "parallel_stages": True}
    group_update(group=group, config=config)
    run = group_message_route(actor=system, group=group, message="report")
    flux, entropy = take_one(agents["Flux"]), take_one(agents["Entropy"])
    assert flux.content == entropy.content == "report"
    delivery_complete(delivery=flux, text="b")
    delivery_complete(delivery=entropy, text="a")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED


def sleeptime_group(make_group, agents, triggers):
    return make_group(
        "sleeptime",
        [("Pattern", "regular"), ("Archive", "supervisor")],
        {
            "check_interval": 60,
            "triggers": triggers,
            **config_ids(agents, intervention_agent_id="Archive"),
        },
    )


def test_sleeptime_trigger_fires_from_the_beat_task(make_group, agents, system):
    sleeptime_group(
        make_group,
        agents,
        [
            {
                "name": "stress",
                "condition": {
                    "kind": "threshold_exceeded",
                    "metric": "stress_level",
                    "threshold": 8.0,
                },
                "priority": "high",
            }
        ],
    )
    group_sleeptime_sweep_task.delay()
    assert delivery_take(agent=agents["Archive"]) == []
    from coordination.groups.models import AgentGroup

    group = AgentGroup.objects.get()
    group_metric_record(group=group, metric="stress_level", value=9)
    group_sleeptime_sweep_task.delay()  # within check_interval: not checked
    assert delivery_take(agent=agents["Archive"]) == []
    group.refresh_from_db()
    group.state = {**group.state, "last_check_at": "2000-01-01T00:00:00+00:00"}
    group.save(update_fields=["state"])
    group_sleeptime_sweep_task.delay()
    intervention = take_one(agents["Archive"])
    assert intervention.kind == "intervene"
    assert "- stress (high)" in intervention.content
    assert intervention.run.requested_by == "system:sleeptime"


def test_sleeptime_activity_trigger_counts_routed_messages(make_group, agents, system):
    sleeptime = sleeptime_group(
        make_group,
        agents,
        [
            {
                "name": "constellation_sync",
                "condition": {
                    "kind": "constellation_activity",
                    "message_threshold": 2,
                    "time_threshold": 3600,
                },
            }
        ],
    )
    other = make_group("round_robin", [("Flux", "regular")], name="Other")
    from coordination.groups.services import group_sleeptime_check

    group_message_route(actor=system, group=other, message="one")
    assert group_sleeptime_check(group_id=sleeptime.pk, force=True) is None
    group_message_route(actor=system, group=other, message="two")
    run = group_sleeptime_check(group_id=sleeptime.pk, force=True)
    assert run is not None
    assert "2 message(s) were routed" in run.message
    assert group_sleeptime_check(group_id=sleeptime.pk, force=True) is None


def test_invalid_configuration_is_refused_and_nothing_changes(make_group, agents):
    group = make_group("round_robin", [("Flux", "regular")])
    with pytest.raises(InvalidInput, match="invalid voting configuration: quorum"):
        group_update(group=group, pattern="voting", config={"quorum": 0})
    with pytest.raises(InvalidInput, match=r"leader_id \d+ is not a member"):
        group_update(
            group=group, pattern="supervisor", config={"leader_id": agents["Anchor"].pk}
        )
    group.refresh_from_db()
    assert group.pattern == "round_robin"


def test_a_run_finishes_under_the_configuration_it_started_with(
    make_group, agents, system
):
    group = pipeline_group(make_group, agents, {})
    run = group_message_route(actor=system, group=group, message="report")
    group_update(group=group, pattern="round_robin", config={})
    delivery_complete(delivery=take_one(agents["Entropy"]), text="ok")
    delivery_complete(delivery=take_one(agents["Flux"]), text="Tue")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert [s["stage"] for s in run.result["stages"]] == ["analysis", "scheduling"]


def test_dynamic_capability_by_embedding_matches_meaning_not_words(
    make_group, agents, system
):
    from memory.search.embedder import embedding_status

    if not embedding_status().available:
        pytest.skip(embedding_status().reason)
    group = make_group(
        "dynamic",
        [
            ("Flux", "regular", {"capabilities": ["money", "budget", "invoices"]}),
            ("Anchor", "regular", {"capabilities": ["sleep", "rest", "naps"]}),
        ],
        {"selector": "capability", "use_embeddings": True},
    )
    run = group_message_route(
        actor=system, group=group, message="I am exhausted and want to lie down"
    )
    assert run.deliveries.get().agent.name == "Anchor"


def test_a_turns_tool_events_follow_the_runs_sequence_until_its_delivery_ends(
    make_group, agents, system
):
    """The site's turn posts its tool-call events on the run's sequence,
    gapless after the service events; once the delivery (and so the run) has
    ended, the next is refused with nothing written (no event, the sequence
    unmoved)."""
    group = make_group("round_robin", [("Pattern", "regular")])
    run = group_message_route(actor=system, group=group, message="help")
    delivery = take_one(agents["Pattern"])
    with transaction.atomic():
        started = turn_tool_call_started(
            delivery=delivery, call_id="c1", fn_name="f", args={"a": 1}
        )
        completed = turn_tool_call_completed(
            delivery=delivery, call_id="c1", result={"ok": True}
        )
    run.refresh_from_db()
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, run.last_seq + 1))
    assert (started.seq, completed.seq) == (run.last_seq - 1, run.last_seq)
    assert run.events.get(seq=started.seq).data == {
        "agent_id": agents["Pattern"].pk,
        "call_id": "c1",
        "fn_name": "f",
        "args": {"a": 1},
    }

    delivery_fail(delivery=delivery, reason="gave up")
    run.refresh_from_db()
    last_seq, count = run.last_seq, run.events.count()
    with transaction.atomic(), pytest.raises(Conflict, match="has ended"):
        turn_tool_call_started(delivery=delivery, call_id="c2", fn_name="f", args={})
    run.refresh_from_db()
    assert (run.last_seq, run.events.count()) == (last_seq, count)
