"""The tool loop of an agent answered by the LLM: one delivery, one turn.

The delivery's content is stored as the user message of a new batch of the
agent's conversation.  Then, step by step: the request is composed (the
system prompt from ``memory.context`` with the agent's tool rules, then its
compressed history, this turn's batch whole), the agent's model is called
with the tool registry's functions, the answer is
stored (its text, and its tool calls), each tool call is run as the agent
(``pattern_site.kernel.tools.tool_call``: the agent's own rights) and its
result stored as a tool message; a tool that fails, or a call that breaks a
tool rule, gives the model an error as its result.  The turn ends on:

- ``send_message`` (an exit tool whatever the rules say): its text is the
  agent's answer to the delivery (the registry's ``send_message``, which a
  caller outside a turn uses, stores it as an assistant message instead);
- a final answer (text without tool calls), which is the answer too;
- a tool with an ``exit_loop`` rule: the step's text is the answer;
- the step limit, the daily token budget, the turn's timeout, a provider
  error or timeout: the delivery fails with the reason.

Each call is recorded before it runs, in one transaction with the step's
assistant message: the first as begun (``started``, with its started event:
it runs next), the others as ``pending`` until they begin (``started``,
committed with the started event before the tool runs).  Its result
(``completed``) is stored in one transaction with its tool message and its
completed event.  So a re-run of the turn after a crash runs the calls
never begun, reports the ones begun as of unknown outcome (never running
them again), and goes on.  A step of calls without text is the calls
recorded and nothing else: its assistant message is stored with the
first result (one append a step, not two), and a re-run rebuilds it from
the recorded calls when no result was stored.

What a turn reads once is kept between its steps (``TurnState``): the
agent, its conversation row as the last append left it, the history
settings, the calls made so far, and the built context.  The context is
built again only after a step that ran a tool that may write (the
registry's ``writes``; a tool it does not know counts as one), keeping
its sections about others (recent activity, the catch-up digest) as the
turn began; others' block changes and handoffs show from that rebuild or
the next turn.  Rights are not kept: each tool checks them as it runs.

Text, tool calls started and completed (arguments, the result cut short)
go to the run's event stream; each call (its tool and whether it
succeeded, never its arguments) and the turn's end
(how many calls, its outcome) go to the activity stream.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from activity.llm.client import (
    ChatClient,
    LLMUnavailable,
    RequestedCall,
    chat_client,
    json_encode,
)
from coordination.groups import services
from coordination.groups.models import (
    AgentLoopConfig,
    AgentToolCall,
    AgentTurn,
    DeliveryStatus,
    RunDelivery,
    ToolCallStatus,
    TurnStatus,
)
from memory.context import (
    BuiltContext,
    ToolRule,
    context_build,
    request_compose,
    request_tokens,
    tool_rule_parse,
)
from memory.longterm.compose import HeldRows, HistoryConfig, history_config_for
from memory.longterm.models import Conversation
from memory.longterm.schemas import SEND_MESSAGE
from memory.longterm.selectors import batch_answers_count
from memory.longterm.services import (
    conversation_current,
    messages_append,
    messages_append_in_transaction,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.selectors import actor_names
from pattern_site.kernel.agents.services import agent_touch
from pattern_site.kernel.db.rows import instances_insert, row_update
from pattern_site.kernel.errors import ApplicationError, Conflict
from pattern_site.kernel.events import EventType, Importance, event_record
from pattern_site.kernel.tools import invalid_arguments_message, tool_get

# The turn's heartbeat and its agent's last activity are written at most
# this often when nothing else writes the turn's row: far below
# AGENT_TURN_RESUME_AFTER_SECONDS, and each write is a transaction a step
# would otherwise pay for.
LIVENESS_WRITE_SECONDS = 1.0

logger = logging.getLogger(__name__)

# Every agent's loop ends on send_message, whatever else its rules say.
DEFAULT_RULES = (ToolRule(SEND_MESSAGE, "exit_loop"),)
UNKNOWN_OUTCOME = (
    "error: the worker running this call stopped before its result was"
    " recorded; it may or may not have taken effect and was not run again."
    " Check before calling it again."
)


def tool_registry() -> ModuleType:
    """The agent tool registry (``tool_functions``, ``tool_call``)."""
    from pattern_site.kernel import tools

    return tools


class TurnEnded(Exception):
    """The turn cannot go on: ``exit`` names how, ``reason`` says why."""

    def __init__(self, exit: str, reason: str) -> None:
        super().__init__(reason)
        self.exit, self.reason = exit, reason


@dataclass
class Answer:
    exit: str
    text: str


@dataclass
class TurnState:
    """What a turn reads once and keeps between its steps."""

    turn: AgentTurn
    actor: Actor
    # As the last append left it (that append's locked row): its summary
    # and count are current for composing the next request.
    conversation: Conversation
    rules: list[ToolRule]
    history: HistoryConfig
    # The calls completed this turn, in order (what the rules count).
    done: list[str]
    built: BuiltContext | None = None
    # A tool that may write ran since ``built``: built again before the
    # next request, keeping its sections about others.
    stale: bool = False
    # The step's assistant message (calls, no text), stored with the first
    # of its results.
    unstored: dict[str, Any] | None = None
    beat_at: float = 0.0
    touched_at: float | None = None
    # The history rows its requests read: each step reads only the rows
    # appended since.
    held: HeldRows = field(default_factory=HeldRows)

    @property
    def agent(self) -> Agent:
        return self.turn.agent

    def beat_due(self) -> bool:
        return time.monotonic() - self.beat_at >= LIVENESS_WRITE_SECONDS


def loop_config_for(agent: Agent) -> AgentLoopConfig:
    return AgentLoopConfig.objects.filter(agent=agent).first() or AgentLoopConfig(
        agent=agent
    )


def tool_rules_for(config: AgentLoopConfig) -> list[ToolRule]:
    stored = [tool_rule_parse(raw) for raw in config.tool_rules]
    extra = [r for r in DEFAULT_RULES if r not in stored]
    return stored + extra


@transaction.atomic
def agent_loop_config_update(
    *,
    agent: Agent,
    tool_rules: list[dict[str, Any]] | None = None,
    provider: str | None = None,
    max_steps: int | None = None,
    timeout_seconds: int | None = None,
) -> AgentLoopConfig:
    """Change an agent's loop settings (None: keep); rules are checked."""
    config, _ = AgentLoopConfig.objects.get_or_create(agent=agent)
    if tool_rules is not None:
        config.tool_rules = [
            {"tool": r.tool, "kind": r.kind, "value": r.value}
            for r in map(tool_rule_parse, tool_rules)
        ]
    for name, value in (
        ("provider", provider),
        ("max_steps", max_steps),
        ("timeout_seconds", timeout_seconds),
    ):
        if value is not None:
            setattr(config, name, value)
    config.full_clean()
    config.save()
    return config


def rule_violation(
    rules: list[ToolRule], name: str, done: list[str], *, first: bool
) -> str:
    """Why calling ``name`` now breaks a rule (``done``: the calls made
    so far this turn), or "" when it may be called."""
    for rule in rules:
        if rule.kind == "start_constraint" and first and name != rule.tool:
            return f"rule broken: call `{rule.tool}` first before any other tools"
        if rule.tool != name:
            continue
        if rule.kind == "max_calls" and done.count(name) >= int(rule.value or 0):
            return f"rule broken: call `{name}` at most {rule.value} times"
        if rule.kind == "requires_prior" and rule.value not in done:
            return f"rule broken: call `{name}` only after calling `{rule.value}`"
    return ""


def _exit_tools(rules: list[ToolRule]) -> set[str]:
    return {r.tool for r in rules if r.kind == "exit_loop"}


@transaction.atomic
def agent_turn_begin(*, delivery: RunDelivery) -> AgentTurn:
    """The delivery's turn: the one begun already, or a new one with the
    delivery's content stored as the first message of its batch."""
    existing = AgentTurn.objects.filter(delivery=delivery).first()
    if existing is not None:
        return existing
    conversation = conversation_current(agent=delivery.agent)
    turn = AgentTurn.objects.create(
        delivery=delivery,
        agent=delivery.agent,
        conversation_id=conversation.pk,
        batch_id=f"delivery-{delivery.pk}",
    )
    messages_append(
        conversation=conversation,
        messages=[{"role": "user", "content": delivery.content}],
        # Stored as people read it ("partner", "Flux"), not as a ref.
        author=actor_names(refs=[delivery.run.requested_by])[delivery.run.requested_by],
        batch_id=turn.batch_id,
    )
    return turn


def _heartbeat(state: TurnState) -> None:
    if state.beat_due():
        AgentTurn.objects.filter(pk=state.turn.pk).update(heartbeat_at=timezone.now())
        state.beat_at = time.monotonic()


def _store(state: TurnState, messages: list[dict[str, Any]]) -> None:
    stored = messages_append_in_transaction(
        conversation=state.conversation,
        messages=messages,
        batch_id=state.turn.batch_id,
    )
    state.conversation = stored[0].conversation


def _after_commit_raise(body: Callable[[], None], post: Callable[[], None]) -> None:
    """``body`` and ``post`` (an event on the run's stream) in one
    transaction; when ``post`` finds the delivery ended, ``body`` is
    committed all the same (the refusal comes before the event writes
    anything) and the turn ends after."""
    ended: TurnEnded | None = None
    with transaction.atomic():
        body()
        try:
            post()
        except TurnEnded as exc:
            ended = exc
    if ended is not None:
        raise ended


def _step_record(
    state: TurnState, text: str, calls: list[RequestedCall], stream: Stream
) -> list[AgentToolCall]:
    """The model's answer stored and its calls recorded in one
    transaction: the first call as begun, with its started event (it runs
    next), the others as pending."""
    turn = state.turn
    recorded: list[AgentToolCall] = []
    message = _calls_message(text, [(c.id, c.name, c.arguments) for c in calls])

    def record() -> None:
        turn.steps += 1
        turn.heartbeat_at = timezone.now()
        row_update(turn, ("steps", "heartbeat_at"))
        state.beat_at = time.monotonic()
        if text or not calls:
            _store(state, [message])
        else:
            state.unstored = message
        recorded[:] = [
            AgentToolCall(
                turn=turn,
                step=turn.steps,
                call_id=c.id,
                name=c.name,
                arguments=c.arguments,
                status=ToolCallStatus.STARTED if i == 0 else ToolCallStatus.PENDING,
            )
            for i, c in enumerate(calls)
        ]
        if recorded:
            instances_insert(recorded)

    def post() -> None:
        if recorded:
            stream.started(recorded[0], _arguments(recorded[0])[0])

    _after_commit_raise(record, post)
    return recorded


def _calls_message(text: str, calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    """A step's assistant message: its text and its (id, name, arguments)
    calls."""
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": id_, "name": name, "arguments": arguments}
            for id_, name, arguments in calls
        ],
    }


def _call_complete(
    state: TurnState, call: AgentToolCall, ok: bool, result: str, stream: Stream
) -> None:
    """The result recorded with its tool message (after its step's
    assistant message when that is not stored yet) and its completed
    event, in one transaction."""

    def record() -> None:
        call.status, call.ok, call.result = ToolCallStatus.COMPLETED, ok, result
        row_update(call, ("status", "ok", "result"))
        _heartbeat(state)
        answer = {
            "role": "tool",
            "content": result or "(empty)",
            "tool_call_id": call.call_id,
        }
        _store(state, [state.unstored, answer] if state.unstored else [answer])
        state.unstored = None
        event_record(
            actor=state.actor,
            event_type=EventType.TOOL_EXECUTED,
            details={"tool": call.name, "success": ok},
        )

    _after_commit_raise(record, lambda: stream.completed(call))


def _call_begin(
    state: TurnState, call: AgentToolCall, args: Any, stream: Stream
) -> bool:
    """Mark the call begun, its started event with it; False when another
    worker began it already."""
    claimed = False

    def claim() -> None:
        nonlocal claimed
        _heartbeat(state)
        claimed = bool(
            AgentToolCall.objects.filter(
                pk=call.pk, status=ToolCallStatus.PENDING
            ).update(status=ToolCallStatus.STARTED)
        )

    def post() -> None:
        if claimed:
            stream.started(call, args)

    _after_commit_raise(claim, post)
    return claimed


class Stream:
    """The turn's steps on the run's event stream: text as it streams in
    (the first piece at once, then what arrived, at most every
    ``GROUPS_LLM_CHUNK_SECONDS``), each tool call started and completed.
    A delivery that ended meanwhile (its deadline, the run) ends the turn."""

    def __init__(self, delivery: RunDelivery) -> None:
        self.delivery = delivery
        self.pending: list[str] = []
        self.sent_at: float | None = None

    def _post(self, service: Callable[..., Any], **kwargs: Any) -> None:
        try:
            service(delivery=self.delivery, **kwargs)
        except Conflict as exc:
            raise TurnEnded("delivery_ended", exc.message) from exc

    def add(self, text: str) -> None:
        self.pending.append(text)
        if (
            self.sent_at is None
            or time.monotonic() - self.sent_at >= settings.GROUPS_LLM_CHUNK_SECONDS
        ):
            self.flush()

    def flush(self) -> None:
        text = "".join(self.pending)
        if not text:
            return
        self.pending, self.sent_at = [], time.monotonic()
        self._post(services.delivery_chunk_add, text=text)

    def started(self, call: AgentToolCall, args: Any) -> None:
        shown = args if isinstance(args, dict) else {"raw": call.arguments}
        self._post(
            services.turn_tool_call_started,
            call_id=call.call_id,
            fn_name=call.name,
            args=shown,
        )

    def completed(self, call: AgentToolCall) -> None:
        limit = settings.AGENT_TURN_RESULT_PREVIEW_CHARS
        result = call.result
        preview = result if len(result) <= limit else result[:limit] + "…"
        self._post(
            services.turn_tool_call_completed,
            call_id=call.call_id,
            result={"ok": bool(call.ok), "text": preview},
        )


def _arguments(call: AgentToolCall) -> tuple[dict[str, Any] | None, str]:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError as exc:
        return None, f"error: the arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, "error: the arguments must be a JSON object"
    return value, ""


def _send_message_check(args: dict[str, Any]) -> tuple[bool, str, str | None]:
    """``send_message``'s arguments checked as the registry's tool checks
    them.  In a turn the message is stored as the call itself (its
    arguments, which the chat shows) and answers the delivery."""
    tool = tool_get(SEND_MESSAGE)
    assert tool is not None
    try:
        parsed = tool.args.model_validate(args)
    except ValidationError as exc:
        return False, f"error: {invalid_arguments_message(exc)}", None
    message = parsed.message.strip()
    if not message:
        return False, "error: send_message needs a non-empty 'message'", None
    return True, "sent", message


def _may_write(name: str) -> bool:
    """Whether running tool ``name`` may change what the agent's context
    shows (a tool the registry does not know may)."""
    tool = tool_get(name)
    return tool is None or tool.writes


def _run_call(call: AgentToolCall, *, state: TurnState, stream: Stream) -> str | None:
    """Run one recorded call: one begun as it was recorded, or one pending
    (never one another worker began); the answer when it was
    ``send_message``."""
    args, error = _arguments(call)
    if call.status != ToolCallStatus.STARTED and not _call_begin(
        state, call, args, stream
    ):
        return None
    done = state.done
    violation = rule_violation(state.rules, call.name, done, first=not done)
    answer = None
    if error or violation:
        ok, result = False, error or f"error: {violation}"
    elif call.name == SEND_MESSAGE:
        ok, result, answer = _send_message_check(args or {})
    else:
        if _may_write(call.name):
            state.stale = True
        outcome = tool_registry().tool_call(
            actor=state.actor, name=call.name, arguments=args
        )
        ok = outcome.ok
        result = outcome.text if ok else f"error: {outcome.text}"
    done.append(call.name)
    _call_complete(state, call, ok, result, stream)
    return answer if ok else None


def _resume(state: TurnState, stream: Stream) -> list[AgentToolCall]:
    """Calls begun by a worker that stopped get an unknown-outcome result;
    those never begun are returned, to run now."""
    unfinished = list(state.turn.tool_calls.exclude(status=ToolCallStatus.COMPLETED))
    if unfinished:
        state.unstored = _step_unstored(state, step=unfinished[0].step)
    for call in unfinished:
        if call.status == ToolCallStatus.STARTED:
            _call_complete(state, call, False, UNKNOWN_OUTCOME, stream)
    state.done[:] = state.turn.tool_calls.filter(
        status=ToolCallStatus.COMPLETED
    ).values_list("name", flat=True)
    return [c for c in unfinished if c.status == ToolCallStatus.PENDING]


def _step_unstored(state: TurnState, *, step: int) -> dict[str, Any] | None:
    """The assistant message of a step whose calls a stopped worker left
    unfinished, rebuilt from its recorded calls when it is not stored (a
    step without text, no result stored yet).  Every step stores one
    assistant message, so step ``step``'s is stored once the batch holds
    ``step`` of them (call ids alone may repeat from step to step)."""
    turn = state.turn
    stored = batch_answers_count(
        conversation_id=turn.conversation_id, batch_id=turn.batch_id
    )
    if stored >= step:
        return None
    calls = turn.tool_calls.filter(step=step).order_by("id")
    return _calls_message("", [(c.call_id, c.name, c.arguments) for c in calls])


def _run_calls(
    calls: list[AgentToolCall], *, state: TurnState, stream: Stream, text: str
) -> Answer | None:
    """Run a step's calls in order; the answer when one of them ends the
    turn (``send_message``, or a tool with an exit rule)."""
    exits = _exit_tools(state.rules)
    answer: Answer | None = None
    for call in calls:
        sent = _run_call(call, state=state, stream=stream)
        if sent is not None:
            answer = Answer(SEND_MESSAGE, sent)
        elif call.name in exits and answer is None and call.ok:
            answer = Answer(f"exit_rule:{call.name}", text)
    return answer


def _model_step(
    client: ChatClient,
    *,
    state: TurnState,
    tools: bytes,
    stream: Stream,
) -> tuple[str, list[RequestedCall]]:
    agent = state.agent
    if state.built is None or state.stale:
        state.built = context_build(
            agent=agent,
            tool_rules=state.rules,
            history=state.history,
            others_from=state.built,
        )
        state.stale = False
    messages = request_compose(
        agent=agent,
        built=state.built,
        conversation=state.conversation,
        active_batch_id=state.turn.batch_id,
        history=state.history,
        held=state.held,
    )
    now = time.monotonic()
    if state.touched_at is None or now - state.touched_at >= LIVENESS_WRITE_SECONDS:
        # Answering is the agent being active: its next context has no
        # catch-up digest for the time it was answering.
        agent_touch(agent_id=agent.pk, at=timezone.now())
        state.touched_at = now
    step = client.complete_step(
        constellation_id=agent.constellation_id,
        messages=messages,
        tools=tools,
        on_text=stream.add,
        prompt_tokens=request_tokens(state.built),
    )
    stream.flush()
    return step.text, step.tool_calls


# The registry's functions as a request's JSON, by the tools' names.
_TOOLS_ENCODED: dict[tuple[str, ...], bytes] = {}


def _tools_encoded(functions: list[dict[str, Any]]) -> bytes:
    """``functions`` encoded once for every request of every turn (tens of
    kilobytes).  The registry makes a tool's function once and never
    changes it (``tool_functions``), so the names say what an encoding
    holds."""
    names = tuple(f["function"]["name"] for f in functions)
    encoded = _TOOLS_ENCODED.get(names)
    if encoded is None:
        encoded = _TOOLS_ENCODED[names] = json_encode(functions) if functions else b""
    return encoded


def agent_turn_run(*, delivery: RunDelivery) -> Answer:
    """Run (or resume) the delivery's turn until it exits; the answer, or
    ``TurnEnded`` with the reason it could not give one."""
    agent = delivery.agent
    config = loop_config_for(agent)
    rules = tool_rules_for(config)
    client = chat_client(model=agent.model_name, provider=config.provider)
    if client is None:
        raise TurnEnded(
            "error", "no LLM provider is configured (set PATTERN_LLM_BASE_URL)"
        )
    turn = agent_turn_begin(delivery=delivery)
    turn.agent = agent
    state = TurnState(
        turn=turn,
        actor=Actor.for_agent(agent),
        conversation=Conversation.objects.get(pk=turn.conversation_id),
        rules=rules,
        history=history_config_for(constellation=agent.constellation_id),
        done=[],
        beat_at=time.monotonic(),
    )
    deadline = turn.started_at.timestamp() + config.timeout_seconds
    stream = Stream(delivery)
    tools = _tools_encoded(tool_registry().tool_functions())
    # A turn's calls are recorded with the step that asked for them (in one
    # transaction): a turn without a step has none to resume.
    resumed = _resume(state, stream) if turn.steps else []
    answer = _run_calls(resumed, state=state, stream=stream, text="")
    while answer is None:
        if turn.steps >= config.max_steps:
            raise TurnEnded(
                "step_limit",
                f"the step limit ({config.max_steps} model calls) was reached"
                " before the agent answered",
            )
        if time.time() > deadline:
            raise TurnEnded(
                "timeout", f"the turn ran over its {config.timeout_seconds} s"
            )
        try:
            text, calls = _model_step(client, state=state, tools=tools, stream=stream)
        except ApplicationError as exc:
            kind = "budget" if exc.code == "limit_exceeded" else "error"
            raise TurnEnded(kind, f"model {agent.model_name}: {exc.message}") from exc
        recorded = _step_record(state, text, calls, stream)
        if not calls:
            if not text:
                raise TurnEnded("error", "the model answered nothing")
            return Answer("final_answer", text)
        answer = _run_calls(recorded, state=state, stream=stream, text=text)
    return answer


@transaction.atomic
def _turn_end(turn: AgentTurn, *, status: str, exit: str, reason: str = "") -> None:
    turn.status, turn.exit, turn.reason = status, exit, reason[:2000]
    turn.finished_at = timezone.now()
    turn.save(update_fields=["status", "exit", "reason", "finished_at"])
    failed = status == TurnStatus.FAILED
    event_record(
        actor=Actor.for_agent(turn.agent),
        event_type=EventType.AGENT_TURN,
        details={
            "tool_calls": turn.tool_calls.count(),
            "outcome": f"failed: {exit}" if failed else exit,
        },
        importance=Importance.MEDIUM if failed else Importance.LOW,
    )


def delivery_turn_answer(*, delivery: RunDelivery) -> None:
    """Answer a taken delivery with the agent's tool loop, and complete or
    fail the delivery with the outcome."""
    try:
        answer = agent_turn_run(delivery=delivery)
    except TurnEnded as ended:
        _finish(delivery, ok=False, exit=ended.exit, text=ended.reason)
        return
    except LLMUnavailable as exc:
        _finish(delivery, ok=False, exit="error", text=exc.message)
        return
    except Exception as exc:
        logger.exception("delivery %s: the agent's turn failed", delivery.pk)
        _finish(
            delivery,
            ok=False,
            exit="error",
            text=f"the site could not run the turn ({type(exc).__name__})",
        )
        return
    _finish(delivery, ok=True, exit=answer.exit, text=answer.text)


def _finish(delivery: RunDelivery, *, ok: bool, exit: str, text: str) -> None:
    turn = AgentTurn.objects.filter(delivery=delivery).first()
    try:
        if ok:
            services.delivery_complete(delivery=delivery, text=text)
        else:
            services.delivery_fail(delivery=delivery, reason=text)
    except ApplicationError as exc:
        logger.info("delivery %s: %s", delivery.pk, exc.message)
        ok, text = False, exc.message
    if turn is None:
        return
    # The answer is in the conversation already: the final answer's
    # message, the send_message call, or the exit step's text.
    _turn_end(
        turn,
        status=TurnStatus.COMPLETED if ok else TurnStatus.FAILED,
        exit=exit,
        reason="" if ok else text,
    )


def delivery_turn_resume(*, delivery_id: int) -> float:
    """Go on with a taken delivery whose turn a stopped worker left
    running, once that worker has been silent for
    ``AGENT_TURN_RESUME_AFTER_SECONDS`` (taking the turn over so that no
    other re-run does too).  Returns the seconds to wait before asking
    again while the turn still shows signs of life, else 0."""
    turn = AgentTurn.objects.filter(
        delivery_id=delivery_id,
        status=TurnStatus.RUNNING,
        delivery__status=DeliveryStatus.TAKEN,
    ).first()
    if turn is None:
        return 0.0
    now = timezone.now()
    silent = (now - turn.heartbeat_at).total_seconds()
    wait = settings.AGENT_TURN_RESUME_AFTER_SECONDS - silent
    if wait > 0:
        return wait
    taken = AgentTurn.objects.filter(pk=turn.pk, heartbeat_at=turn.heartbeat_at).update(
        heartbeat_at=now
    )
    if taken:
        delivery = RunDelivery.objects.select_related(
            "agent__constellation", "run"
        ).get(pk=delivery_id)
        delivery_turn_answer(delivery=delivery)
    return 0.0
