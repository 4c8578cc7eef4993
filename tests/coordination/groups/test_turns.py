"""The tool loop of agents answered by the LLM, against the scripted
OpenAI-compatible server (``tests.fake_llm``): tools run as the agent,
results fed back, rules enforced, every exit, and a re-run after a crash.

The tools are the registry's interface (``tool_functions``, ``tool_call``)
over a few test tools; ``core_memory_append`` calls the very function its
HTTP endpoint calls, so the agent's rights are the ones HTTP checks."""

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from activity.llm.models import LLMUsage
from activity.stream.models import ActivityEvent, EventType
from coordination.groups import turns
from coordination.groups.llm import delivery_llm_answer
from coordination.groups.models import (
    AgentToolCall,
    AgentTurn,
    DeliveryStatus,
    RunDelivery,
    RunStatus,
    ToolCallStatus,
)
from coordination.groups.services import group_message_route
from coordination.groups.tasks import delivery_llm_answer_task
from coordination.groups.turns import UNKNOWN_OUTCOME, agent_loop_config_update
from memory.blocks.models import MemoryBlock
from memory.blocks.services import block_create
from memory.longterm.models import Message
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue, agent_update
from tests.coordination.groups.conftest import Crash

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def every_piece_a_chunk(settings):
    settings.GROUPS_LLM_CHUNK_SECONDS = 0


@pytest.fixture
def flux(agents):
    return agent_update(
        agent=agents["Flux"], model_name="gpt-4o-mini", answered_by_llm=True
    )


@pytest.fixture
def ask(make_group, flux, django_capture_on_commit_callbacks):
    group = make_group("round_robin", [("Flux", "regular")])

    def ask(message: str = "note that I like tea"):
        with django_capture_on_commit_callbacks(execute=True):
            run = group_message_route(
                actor=Actor.system(), group=group, message=message
            )
        run.refresh_from_db()
        return run

    return ask


def events(run, *types):
    return [(e.type, e.data) for e in run.events.order_by("seq") if e.type in types]


def last_tool_results(request: dict) -> list[tuple[str, str]]:
    """The tool results at the end of a request, (call id, content)."""
    out = []
    for message in reversed(request["body"]["messages"]):
        if message["role"] != "tool":
            break
        out.insert(0, (message["tool_call_id"], message["content"]))
    return out


def test_a_multi_step_turn_runs_tools_as_the_agent_and_sends_its_answer(
    flux, ask, llm, tools
):
    block = block_create(actor=Actor.system(), label="human", owner=flux)
    llm.answer_tools(
        ("c1", "core_memory_append", {"label": "human", "content": "likes tea"}),
        text="Saving that.",
    )
    llm.answer_tools(("c2", "send_message", {"message": "Noted: you like tea."}))

    run = ask()

    assert run.status == RunStatus.COMPLETED
    assert run.result == {"answers": {str(flux.pk): "Noted: you like tea."}}
    block.refresh_from_db()
    assert "likes tea" in block.rendered
    # The second request carries the first step and its result.
    second = llm.requests[1]["body"]
    assert [m["role"] for m in second["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]
    assert second["messages"][2]["tool_calls"][0]["function"] == {
        "name": "core_memory_append",
        "arguments": '{"label": "human", "content": "likes tea"}',
    }
    assert {t["function"]["name"] for t in second["tools"]} >= {
        "core_memory_append",
        "send_message",
    }
    assert (
        "The conversation will end after calling `send_message`"
        in (second["messages"][0]["content"])
    )
    # The whole turn is one batch of Flux's conversation.
    stored = list(Message.objects.filter(agent=flux).order_by("position"))
    assert [(m.role, m.tool_call_id) for m in stored] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "c1"),
        ("assistant", ""),
        ("tool", "c2"),
    ]
    assert len({m.batch_id for m in stored}) == 1
    # Shown live: the text, each call started and completed.
    shown = events(run, "TextChunk", "ToolCallStarted", "ToolCallCompleted")
    assert shown[0] == (
        "TextChunk",
        {"agent_id": flux.pk, "text": "Saving that.", "is_final": False},
    )
    assert shown[1][1]["fn_name"] == "core_memory_append"
    assert shown[1][1]["args"] == {"label": "human", "content": "likes tea"}
    assert shown[2][1]["result"]["ok"] is True
    turn = AgentTurn.objects.get()
    assert (turn.status, turn.exit, turn.steps) == ("completed", "send_message", 2)


def test_a_tool_error_is_fed_back_and_a_final_answer_ends_the_turn(ask, llm, tools):
    llm.answer_tools(("c1", "fail", {}))
    llm.answer_streamed(["Sorry, ", "the tool broke."])

    run = ask()

    assert last_tool_results(llm.requests[1]) == [("c1", "error: the tool broke")]
    delivery = run.deliveries.get()
    assert delivery.answer == "Sorry, the tool broke."
    assert AgentTurn.objects.get().exit == "final_answer"


def test_parallel_tool_calls_all_run_and_all_results_go_back(ask, llm, tools):
    llm.answer_tools(("a", "lookup", {"q": "tea"}), ("b", "lookup", {"q": "cake"}))
    llm.answer_streamed(["Both found."])

    ask()

    assert [args["q"] for _, args in tools.ran] == ["tea", "cake"]
    assert last_tool_results(llm.requests[1]) == [
        ("a", "found tea"),
        ("b", "found cake"),
    ]


@pytest.mark.parametrize(
    ("rule", "calls", "refused"),
    [
        (
            {"tool": "lookup", "kind": "start_constraint"},
            [("fail", {})],
            "rule broken: call `lookup` first before any other tools",
        ),
        (
            {"tool": "lookup", "kind": "max_calls", "value": 1},
            [("lookup", {"q": "1"}), ("lookup", {"q": "2"})],
            "rule broken: call `lookup` at most 1 times",
        ),
        (
            {"tool": "fail", "kind": "requires_prior", "value": "lookup"},
            [("fail", {})],
            "rule broken: call `fail` only after calling `lookup`",
        ),
    ],
    ids=["start_constraint", "max_calls", "requires_prior"],
)
def test_a_call_breaking_a_tool_rule_gets_an_error_naming_it(
    flux, ask, llm, tools, rule, calls, refused
):
    agent_loop_config_update(agent=flux, tool_rules=[rule])
    llm.answer_tools(*[(f"c{i}", n, a) for i, (n, a) in enumerate(calls)])
    llm.answer_streamed(["ok"])

    ask()

    results = last_tool_results(llm.requests[1])
    assert results[-1] == (f"c{len(calls) - 1}", f"error: {refused}")
    # The refused call never reached the tool.
    assert len(tools.ran) == len(calls) - 1
    system = llm.requests[0]["body"]["messages"][0]["content"]
    assert "# Tool Execution Rules" in system


def test_an_exit_rule_ends_the_turn_after_its_tool(flux, ask, llm, tools):
    agent_loop_config_update(
        agent=flux, tool_rules=[{"tool": "finish", "kind": "exit_loop"}]
    )
    llm.answer_tools(("c1", "finish", {}), text="All done.")

    run = ask()

    assert len(llm.requests) == 1
    assert run.deliveries.get().answer == "All done."
    assert AgentTurn.objects.get().exit == "exit_rule:finish"


def test_the_step_limit_fails_the_turn(flux, ask, llm, tools):
    agent_loop_config_update(agent=flux, max_steps=2)
    for i in range(3):
        llm.answer_tools((f"c{i}", "lookup", {"q": str(i)}))

    run = ask()

    assert len(llm.requests) == 2
    delivery = run.deliveries.get()
    assert delivery.status == DeliveryStatus.FAILED
    assert "step limit (2 model calls)" in delivery.failure
    assert AgentTurn.objects.get().exit == "step_limit"


def test_a_spent_budget_stops_the_turn_between_steps(flux, ask, llm, tools, settings):
    settings.LLM_DAILY_TOKEN_BUDGET = 5_000
    llm.answer_tools(("c1", "lookup", {"q": "tea"}), tokens=4_900)

    run = ask()

    assert len(llm.requests) == 1
    assert LLMUsage.objects.get().tokens == 4_900
    failure = run.deliveries.get().failure
    assert "has used 4900 of its 5000 LLM tokens today" in failure
    assert AgentTurn.objects.get().exit == "budget"


def test_a_provider_timeout_mid_turn_fails_it(ask, llm, tools, settings):
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_TIMEOUT = 0.5
    llm.answer_tools(("c1", "lookup", {"q": "tea"}))
    llm.answer({"late": True}, delay=1.5)

    run = ask()

    assert "the LLM did not answer in time" in run.deliveries.get().failure
    assert AgentTurn.objects.get().exit == "error"


def test_a_rerun_after_a_crash_never_runs_a_begun_call_again(ask, llm, tools, settings):
    tools.crash_on = "fail"
    llm.answer_tools(("c1", "fail", {}), ("c2", "lookup", {"q": "tea"}))
    with pytest.raises(Crash):
        ask()
    call = AgentToolCall.objects.get(call_id="c1")
    assert call.status == ToolCallStatus.STARTED
    assert AgentToolCall.objects.get(call_id="c2").status == ToolCallStatus.PENDING

    tools.crash_on = ""
    llm.answer_streamed(["Recovered."])
    delivery = AgentTurn.objects.get().delivery
    # While the crashed worker might still be alive, a re-run waits.
    assert delivery_llm_answer(delivery_id=delivery.pk) > 0
    assert AgentToolCall.objects.get(call_id="c2").status == ToolCallStatus.PENDING
    settings.AGENT_TURN_RESUME_AFTER_SECONDS = 0
    delivery_llm_answer_task(delivery.pk)

    # c1 began before the crash: reported, not run again; c2 ran once.
    assert [name for name, _ in tools.ran] == ["fail", "lookup"]
    results = dict(last_tool_results(llm.requests[1]))
    assert results["c1"].startswith("error: the worker running this call stopped")
    assert results["c2"] == "found tea"
    delivery.refresh_from_db()
    assert delivery.answer == "Recovered."
    # Run again once answered: nothing more happens.
    delivery_llm_answer_task(delivery.pk)
    assert len(llm.requests) == 2


def test_the_agent_cannot_edit_through_the_loop_what_it_cannot_over_http(
    flux, agents, ask, llm, tools
):
    other = block_create(
        actor=Actor.system(),
        label="ledger",
        owner=flux,
        permission="read_only",
        content="balance 10",
    )
    client = Client(HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=flux).raw}")
    over_http = client.post(
        "/api/tools/core_memory_append",
        {"label": "ledger", "content": "balance 1000"},
        content_type="application/json",
    )
    assert over_http.status_code == 403
    llm.answer_tools(
        ("c1", "core_memory_append", {"label": "ledger", "content": "balance 1000"})
    )
    llm.answer_streamed(["I could not."])

    ask()

    (result,) = last_tool_results(llm.requests[1])
    assert result[1] == f"error: {over_http.json()['detail']}"
    other.refresh_from_db()
    assert "1000" not in other.rendered


def test_an_agent_uses_its_own_provider_whose_key_stays_out_of_failures(
    flux, ask, llm, tools, settings
):
    fake_url = settings.LLM_BASE_URL
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens there
    settings.LLM_PROVIDERS = {"own": {"base_url": fake_url, "api_key": "sk-secret"}}
    agent_loop_config_update(agent=flux, provider="own")
    llm.answer_streamed(["From my own provider."])

    run = ask()

    assert run.deliveries.get().answer == "From my own provider."
    agent_loop_config_update(agent=flux, provider="gone")
    failed = ask("again")
    failure = failed.deliveries.get().failure
    assert "no LLM provider 'gone' is configured" in failure
    assert "sk-secret" not in failure


def test_a_turn_over_its_time_fails_before_calling_the_model_again(
    flux, ask, llm, tools
):
    agent_loop_config_update(agent=flux, timeout_seconds=0)

    run = ask()

    assert llm.requests == []
    assert "the turn ran over its 0 s" in run.deliveries.get().failure
    assert AgentTurn.objects.get().exit == "timeout"


def test_a_turn_calls_the_real_tool_registry_with_the_agents_own_rights(
    flux, agents, ask, llm
):
    """No stand-in: the loop's tool calls go through ``tool_call``, so what
    the agent may not do over HTTP it may not do here either."""
    mine = block_create(actor=Actor.system(), label="human", owner=flux)
    theirs = block_create(actor=Actor.system(), label="private", owner=agents["Anchor"])
    llm.answer_tools(
        ("c1", "core_memory_append", {"label": "private", "content": "peek"}),
        ("c2", "core_memory_append", {"label": "human", "content": "likes tea"}),
    )
    llm.answer_tools(("c3", "send_message", {"message": "Noted."}))

    run = ask()

    assert run.status == RunStatus.COMPLETED
    results = dict(last_tool_results(llm.requests[1]))
    assert "private" in results["c1"] and "likes tea" not in results["c1"]
    assert '"status": "applied"' in results["c2"] or "updated" in results["c2"]
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert "likes tea" in mine.rendered
    assert "peek" not in theirs.rendered
    calls = {c.call_id: c for c in AgentToolCall.objects.all()}
    assert (calls["c1"].ok, calls["c2"].ok) == (False, True)


def test_a_turn_records_each_call_and_its_end_in_the_activity_stream(
    flux, ask, llm, tools
):
    block_create(actor=Actor.system(), label="human", owner=flux)
    llm.answer_tools(
        ("c1", "core_memory_append", {"label": "human", "content": "likes tea"}),
        ("c2", "fail", {"secret": "never shown"}),
    )
    llm.answer_tools(("c3", "send_message", {"message": "Noted."}))

    ask()

    executed = ActivityEvent.objects.filter(
        event_type=EventType.TOOL_EXECUTED
    ).order_by("id")
    # The tool and whether it worked, never what it was called with.
    assert [e.details for e in executed] == [
        {"tool": "core_memory_append", "success": True},
        {"tool": "fail", "success": False},
        {"tool": "send_message", "success": True},
    ]
    assert {e.agent_id for e in executed} == {flux.pk}
    (turn,) = ActivityEvent.objects.filter(event_type=EventType.AGENT_TURN)
    assert turn.agent_id == flux.pk
    assert turn.details == {"tool_calls": 3, "outcome": "send_message"}


def test_a_failed_turn_is_recorded_with_why_it_failed(flux, ask, llm, tools):
    agent_loop_config_update(agent=flux, max_steps=1)
    llm.answer_tools(("c1", "lookup", {"q": "tea"}))

    ask()

    (turn,) = ActivityEvent.objects.filter(event_type=EventType.AGENT_TURN)
    assert turn.details == {"tool_calls": 1, "outcome": "failed: step_limit"}
    assert turn.importance == "medium"


def test_send_message_with_an_empty_message_is_refused_and_the_turn_goes_on(
    flux, ask, llm, tools
):
    llm.answer_tools(("c1", "send_message", {"message": "  "}))
    llm.answer_tools(("c2", "send_message", {"message": "Now with words."}))

    run = ask()

    assert run.deliveries.get().answer == "Now with words."
    results = dict(last_tool_results(llm.requests[1]))
    assert "non-empty" in results["c1"]
    calls = AgentToolCall.objects.order_by("id")
    assert [(c.call_id, c.ok) for c in calls] == [("c1", False), ("c2", True)]


def test_message_agent_wakes_a_recipient_answered_by_the_llm_in_its_own_turn(
    flux, agents, ask, llm
):
    anchor = agent_update(
        agent=agents["Anchor"], model_name="gpt-4o-mini", answered_by_llm=True
    )
    llm.answer_tools(
        ("c1", "message_agent", {"agent": "Anchor", "message": "Block Friday."})
    )
    llm.answer_tools(("c2", "send_message", {"message": "Asked Anchor."}))
    llm.answer_tools(("a1", "send_message", {"message": "Friday is blocked."}))

    run = ask()

    assert run.deliveries.get().answer == "Asked Anchor."
    (theirs,) = AgentTurn.objects.filter(agent=anchor)
    assert (theirs.status, theirs.exit) == ("completed", "send_message")
    delivery = theirs.delivery
    assert delivery.content == "Message from Flux: Block Friday."
    assert delivery.answer == "Friday is blocked."
    assert delivery.run.requested_by == f"agent:{flux.pk}"
    # Anchor's model was asked with the message as its user message.
    assert llm.requests[2]["body"]["messages"][-1] == {
        "role": "user",
        "content": "Message from Flux: Block Friday.",
    }


def test_a_supervisor_leader_delegates_with_a_tool_and_the_reply_joins_its_run(
    agents, make_group, llm, django_capture_on_commit_callbacks
):
    entropy, flux = (
        agent_update(agent=agents[n], model_name="gpt-4o-mini", answered_by_llm=True)
        for n in ("Entropy", "Flux")
    )
    planning = make_group(
        "supervisor",
        [("Entropy", "supervisor"), ("Flux", "regular"), ("Pattern", "regular")],
        name="Planning",
    )
    llm.answer_tools(
        ("e1", "delegate", {"agent": "Flux", "message": "Find a slot for the dentist"})
    )
    llm.answer_tools(("e2", "send_message", {"message": "Flux is on it."}))
    llm.answer_tools(("f1", "send_message", {"message": "Tuesday 10:00 is free."}))

    with django_capture_on_commit_callbacks(execute=True):
        run = group_message_route(
            actor=Actor.system(), group=planning, message="Plan next week"
        )
    run.refresh_from_db()

    # The leader's tool call made the delegation, as the HTTP route would.
    delegated = json.loads(dict(last_tool_results(llm.requests[1]))["e1"])
    assert delegated["agent"] == "Flux"
    assert "its answer joins the run" in delegated["detail"]
    assert llm.requests[2]["body"]["messages"][-1]["content"] == (
        "Find a slot for the dentist"
    )
    # Flux answered in a turn of its own; its reply is part of the run.
    assert run.status == RunStatus.COMPLETED
    assert run.result["answers"] == {
        str(entropy.pk): "Flux is on it.",
        str(flux.pk): "Tuesday 10:00 is free.",
    }
    kinds = dict(run.deliveries.values_list("agent__name", "kind"))
    assert kinds == {"Entropy": "lead", "Flux": "delegated"}


def test_delegate_is_refused_to_an_agent_that_leads_no_run(flux, ask, llm):
    llm.answer_tools(("c1", "delegate", {"agent": "Anchor", "message": "Do it"}))
    llm.answer_streamed(["I will do it myself."])

    run = ask()

    (result,) = last_tool_results(llm.requests[1])
    assert result[1] == (
        "error: Flux leads no open run; only the leader of a supervisor"
        " group's run delegates"
    )
    assert run.deliveries.count() == 1


def test_the_next_request_shows_the_block_a_tool_just_changed(flux, ask, llm, tools):
    """The context is kept between steps, but not past a tool that writes."""
    block_create(actor=Actor.system(), label="human", owner=flux, block_type="core")
    llm.answer_tools(("c1", "conversation_search", {"query": "tea"}))
    llm.answer_tools(
        ("c2", "core_memory_append", {"label": "human", "content": "likes tea"})
    )
    llm.answer_tools(("c3", "send_message", {"message": "Noted."}))

    ask()

    systems = [r["body"]["messages"][0]["content"] for r in llm.requests]
    assert "likes tea" not in systems[1]
    assert "likes tea" in systems[2]


def test_a_right_taken_away_mid_turn_holds_for_the_next_call(
    flux, ask, llm, tools, monkeypatch
):
    block = block_create(actor=Actor.system(), label="human", owner=flux)
    run = tools.tool_call

    def revoking(*, actor, name, arguments):
        if name == "lookup":
            MemoryBlock.objects.filter(pk=block.pk).update(permission="read_only")
        return run(actor=actor, name=name, arguments=arguments)

    monkeypatch.setattr(tools, "tool_call", revoking)
    llm.answer_tools(("c1", "core_memory_append", {"label": "human", "content": "tea"}))
    llm.answer_tools(("c2", "lookup", {"q": "x"}))
    llm.answer_tools(
        ("c3", "core_memory_append", {"label": "human", "content": "cake"})
    )
    llm.answer_streamed(["Done."])

    ask()

    results = dict(last_tool_results(llm.requests[3]))
    assert results["c3"].startswith("error:")
    block.refresh_from_db()
    assert "tea" in block.rendered and "cake" not in block.rendered


# The loop's own queries for one step of ``core_memory_append`` (a tool that
# writes, so the context is built again): model call, the step and its call
# recorded, the tool, its result, both run events and the step's messages
# (30 on SQLite and PostgreSQL: a query more is a regression to look at).
# What the loop queues (embedding, activity events) runs after it, not
# counted.
QUERIES_PER_STEP = 31


def test_a_steps_queries_stay_bounded_however_long_the_turn(
    flux, ask, llm, monkeypatch
):
    """The queries of the turn's work (``agent_turn_run``) grow by a fixed
    number per tool step: nothing a step does is read again for every
    earlier step, and a step costs at most ``QUERIES_PER_STEP``."""
    block_create(actor=Actor.system(), label="notes", owner=flux, char_limit=10_000)
    counted: list[int] = []
    run = turns.agent_turn_run

    def counting(*, delivery):
        with CaptureQueriesContext(connection) as captured:
            answer = run(delivery=delivery)
        counted.append(len(captured))
        return answer

    monkeypatch.setattr(turns, "agent_turn_run", counting)

    def turn(steps: int, tag: str) -> None:
        for i in range(steps):
            llm.answer_tools(
                (
                    f"{tag}{i}",
                    "core_memory_append",
                    {"label": "notes", "content": f"{tag} {i}"},
                )
            )
        llm.answer_tools((f"{tag}x", "send_message", {"message": "Noted."}))
        assert ask().status == RunStatus.COMPLETED

    turn(1, "w")
    turn(2, "a")
    turn(8, "b")

    per_step = (counted[2] - counted[1]) / 6
    assert per_step <= QUERIES_PER_STEP, (per_step, counted)


def test_a_delivery_ended_while_a_tool_ran_keeps_its_result_and_ends_the_turn(
    ask, llm, tools
):
    """The completed event is refused once the delivery has ended (its
    deadline passed while the tool ran): the call's result and its tool
    message are committed all the same, nothing more is posted, and the
    turn ends."""
    ran = tools.tool_call

    def ending(**kwargs):
        RunDelivery.objects.update(status=DeliveryStatus.EXPIRED)
        return ran(**kwargs)

    tools.tool_call = ending
    llm.answer_tools(("c1", "lookup", {"q": "tea"}))
    llm.answer_streamed(["Never asked."])

    run = ask()

    assert len(llm.requests) == 1
    call = AgentToolCall.objects.get()
    assert (call.status, call.ok, call.result) == (
        ToolCallStatus.COMPLETED,
        True,
        "found tea",
    )
    stored = list(Message.objects.order_by("position"))
    assert [(m.role, m.tool_call_id) for m in stored] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "c1"),
    ]
    shown = events(run, "ToolCallStarted", "ToolCallCompleted")
    assert [(kind, data["call_id"]) for kind, data in shown] == [
        ("ToolCallStarted", "c1")
    ]
    turn = AgentTurn.objects.get()
    assert (turn.status, turn.exit) == ("failed", "delivery_ended")


@pytest.mark.parametrize("text", ["", "Checking."])
def test_a_rerun_stores_the_crashed_steps_calls_once_before_their_results(
    ask, llm, tools, settings, text
):
    """A step of calls alone is stored with its first result; a worker that
    stopped before any result leaves it to the re-run, which stores it
    from the recorded calls (a step with text was stored as recorded, and
    is not stored twice)."""
    tools.crash_on = "fail"
    llm.answer_tools(("c1", "fail", {}), ("c2", "lookup", {"q": "tea"}), text=text)
    with pytest.raises(Crash):
        ask()
    tools.crash_on = ""
    llm.answer_streamed(["Recovered."])
    delivery = AgentTurn.objects.get().delivery
    settings.AGENT_TURN_RESUME_AFTER_SECONDS = 0
    delivery_llm_answer_task(delivery.pk)

    stored = list(Message.objects.order_by("position"))
    assert [(m.role, m.content, m.tool_call_id) for m in stored] == [
        ("user", "note that I like tea", ""),
        ("assistant", text, ""),
        ("tool", UNKNOWN_OUTCOME, "c1"),
        ("tool", "found tea", "c2"),
        ("assistant", "Recovered.", ""),
    ]
    assert [(c["id"], c["name"]) for c in stored[1].tool_calls] == [
        ("c1", "fail"),
        ("c2", "lookup"),
    ]
    assert [m["role"] for m in llm.requests[1]["body"]["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
    ]
