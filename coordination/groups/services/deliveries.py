"""What agents do with their deliveries: take them (or the site claims one
for an agent the LLM answers), stream chunks and tool calls, answer (a
vote, for a vote delivery) or give up.  Each locks the delivery's run,
refuses output to an ended run or a closed delivery, and lets the pattern
decide what follows an answer or a failure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Subquery
from django.utils import timezone

from coordination.groups.models import (
    OPEN_DELIVERY_STATUSES,
    DeliveryKind,
    DeliveryStatus,
    GroupEventType,
    GroupRun,
    GroupRunEvent,
    RunDelivery,
    RunStatus,
)
from coordination.groups.selectors import delivery_view, group_members
from coordination.groups.services.runs import (
    MAX_MESSAGE_CHARS,
    _event,
    _lock_run,
    _settle,
    _wake_after_commit,
    _wake_run_after_commit,
)
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.db.rows import CompiledIncrement, row_insert, row_update
from pattern_site.kernel.errors import Conflict, InvalidInput, LimitExceeded, NotFound

MAX_CHUNK_CHARS = 20_000


INBOX_MAX_ITEMS = 50


@transaction.atomic
def delivery_take(*, agent: Agent, limit: int = 10) -> list[RunDelivery]:
    """Claim the agent's pending deliveries (oldest first), at most ``limit``."""
    limit = max(1, min(limit, INBOX_MAX_ITEMS))
    # The deliveries' rows only: their runs are locked one by one below;
    # locking the joined run and group rows here too made concurrent takes
    # lock the group's one row in different orders and deadlock.
    deliveries = list(
        RunDelivery.objects.select_for_update(of=("self",))
        .select_related("run__group")
        .filter(
            agent=agent,
            status=DeliveryStatus.PENDING,
            run__status=RunStatus.RUNNING,
        )
        .order_by("id")[:limit]
    )
    now = timezone.now()
    for delivery in deliveries:
        _delivery_start(delivery, _lock_run(delivery.run_id), agent=agent, now=now)
    return deliveries


@transaction.atomic
def delivery_claim(*, delivery_id: int) -> RunDelivery | None:
    """Claim one pending delivery for the site to answer (an agent answered
    by the LLM), as ``delivery_take`` does for an agent's program; None when
    it is no longer pending, its run has ended or its agent was since given
    back to its own program."""
    delivery = RunDelivery.objects.filter(pk=delivery_id).first()
    if delivery is None:
        return None
    run = _lock_run(delivery.run_id)
    delivery = RunDelivery.objects.select_related("agent__constellation").get(
        pk=delivery_id
    )
    if (
        run.status != RunStatus.RUNNING
        or delivery.status != DeliveryStatus.PENDING
        or not delivery.agent.answered_by_llm
    ):
        return None
    _delivery_start(delivery, run, agent=delivery.agent, now=timezone.now())
    return delivery


def _delivery_start(
    delivery: RunDelivery, run: GroupRun, *, agent: Agent, now: datetime
) -> None:
    """The agent starts on its delivery (``AgentStarted``); observing needs
    no answer, so an observer's delivery is completed as it is taken."""
    delivery.taken_at = now
    if delivery.kind == DeliveryKind.OBSERVE:
        delivery.status, delivery.finished_at = DeliveryStatus.COMPLETED, now
    else:
        delivery.status = DeliveryStatus.TAKEN
        _event(
            run,
            GroupEventType.AGENT_STARTED,
            {
                "agent_id": agent.pk,
                "agent_name": agent.name,
                "role": delivery.role,
                "delivery_id": delivery.pk,
                "kind": delivery.kind,
            },
        )
        run.save(update_fields=["last_seq"])
        _wake_after_commit(run)
    delivery.save(update_fields=["status", "taken_at", "finished_at"])
    delivery.run = run


# Read again under the run's lock at every piece of output (compiled once).
_DELIVERY = CompiledQuery(
    lambda delivery_id: (
        RunDelivery.objects.select_related("agent")
        .filter(pk=delivery_id)
        .order_by()[:1]
    ),
    delivery_id=-730_204,
)


def _lock_open_delivery(delivery: RunDelivery) -> tuple[RunDelivery, GroupRun]:
    run = _lock_run(delivery.run_id)
    found = _DELIVERY.first(delivery_id=delivery.pk)
    if found is None:
        raise RunDelivery.DoesNotExist(f"delivery {delivery.pk} does not exist")
    _refuse_output(found, run)
    return found, run


def _refuse_output(delivery: RunDelivery, run: GroupRun) -> None:
    """Conflict unless ``delivery`` of the locked ``run`` takes output."""
    if run.status != RunStatus.RUNNING:
        raise Conflict(f"run {run.pk} has ended ({run.status}); nothing more is taken")
    if delivery.status not in OPEN_DELIVERY_STATUSES:
        raise Conflict(
            f"delivery {delivery.pk} is {delivery.status}; only a pending or taken"
            " delivery accepts output"
        )
    if delivery.kind == DeliveryKind.OBSERVE:
        raise Conflict("an observer's delivery takes no output")


def _output_event(run: GroupRun, type_: str, data: dict[str, Any]) -> GroupRunEvent:
    """An event of an agent's output on a locked run; readers woken.  The
    event and the run's sequence go through statements built once: the
    site's own turn posts two events a step."""
    run.last_seq += 1
    row_update(run, ("last_seq",))
    return _event_insert(run.pk, run.last_seq, type_, data)


def _event_insert(
    run_id: int, seq: int, type_: str, data: dict[str, Any]
) -> GroupRunEvent:
    """The event numbered ``seq`` of a run whose sequence has moved to it;
    the run's readers woken after commit."""
    event = GroupRunEvent(
        run_id=run_id, seq=seq, type=type_, data=data, created_at=timezone.now()
    )
    event.pk = row_insert(event)
    _wake_run_after_commit(run_id)
    return event


@transaction.atomic
def delivery_chunk_add(*, delivery: RunDelivery, text: str) -> GroupRunEvent:
    """A piece of the agent's answer as it is produced."""
    if not text:
        raise InvalidInput("the chunk is empty")
    if len(text) > MAX_CHUNK_CHARS:
        raise LimitExceeded(
            f"the chunk is {len(text)} characters; at most {MAX_CHUNK_CHARS}"
        )
    delivery, run = _lock_open_delivery(delivery)
    return _output_event(
        run,
        GroupEventType.TEXT_CHUNK,
        {"agent_id": delivery.agent_id, "text": text, "is_final": False},
    )


@transaction.atomic
def delivery_tool_call_start(
    *, delivery: RunDelivery, call_id: str, fn_name: str, args: dict[str, Any]
) -> GroupRunEvent:
    if not call_id.strip() or not fn_name.strip():
        raise InvalidInput("a tool call needs a call_id and a fn_name")
    delivery, run = _lock_open_delivery(delivery)
    return _output_event(
        run,
        GroupEventType.TOOL_CALL_STARTED,
        {
            "agent_id": delivery.agent_id,
            "call_id": call_id,
            "fn_name": fn_name,
            "args": args,
        },
    )


@transaction.atomic
def delivery_tool_call_complete(
    *, delivery: RunDelivery, call_id: str, result: Any
) -> GroupRunEvent:
    delivery, run = _lock_open_delivery(delivery)
    started = run.events.filter(
        type=GroupEventType.TOOL_CALL_STARTED,
        data__agent_id=delivery.agent_id,
        data__call_id=call_id,
    ).exists()
    if not started:
        raise NotFound(f"no tool call {call_id!r} was started by this agent in run")
    return _output_event(
        run,
        GroupEventType.TOOL_CALL_COMPLETED,
        {"agent_id": delivery.agent_id, "call_id": call_id, "result": result},
    )


# The site's own turn posts two events a step.  Its run's sequence moves
# in one statement that also checks the delivery and the run still take
# output (compiled once); the delivery is read, with its run locked, only
# when that statement refuses, to say why.
_OPEN_RUN_SEQ_NEXT = CompiledIncrement(
    lambda delivery_id: GroupRun.objects.filter(
        pk=Subquery(
            RunDelivery.objects.filter(
                pk=delivery_id, status__in=OPEN_DELIVERY_STATUSES
            )
            .exclude(kind=DeliveryKind.OBSERVE)
            .order_by()
            .values("run_id")[:1]
        ),
        status=RunStatus.RUNNING,
    ).order_by(),
    "last_seq",
    delivery_id=-730_206,
)

_DELIVERY_RUN_LOCKED = CompiledQuery(
    lambda delivery_id: (
        RunDelivery.objects.select_for_update(of=("run",))
        .select_related("run")
        .only("status", "kind", "agent_id", "run__status", "run__last_seq")
        .filter(pk=delivery_id)
        .order_by()[:1]
    ),
    delivery_id=-730_205,
)


def _turn_output(
    delivery: RunDelivery, type_: str, data: dict[str, Any]
) -> GroupRunEvent:
    """An event of the site's own turn (``coordination.groups.turns``), in
    the caller's transaction: the run's sequence moved (and its row locked)
    by a statement that refuses an ended run or delivery, then the event.

    Unlike the services an agent's program calls over HTTP, no savepoint:
    a refusal (``Conflict``: the run or the delivery ended) comes before
    anything is written, so the caller's transaction stays whole and
    commits its own rows."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("a turn's event is posted in the turn's transaction")
    data = {"agent_id": delivery.agent_id, **data}
    moved = _OPEN_RUN_SEQ_NEXT.run(delivery_id=delivery.pk)
    if not moved:
        found = _DELIVERY_RUN_LOCKED.first(delivery_id=delivery.pk)
        if found is None:
            raise RunDelivery.DoesNotExist(f"delivery {delivery.pk} does not exist")
        _refuse_output(found, found.run)
        # Open after all once read with its run locked (the update's
        # subquery sees the rows as its statement began, on PostgreSQL):
        # posted on the locked run, as an agent's program's output is.
        return _output_event(found.run, type_, data)
    ((run_id, seq),) = moved
    return _event_insert(run_id, seq, type_, data)


def turn_tool_call_started(
    *, delivery: RunDelivery, call_id: str, fn_name: str, args: dict[str, Any]
) -> GroupRunEvent:
    """``delivery_tool_call_start`` for the site's own turn, in its
    transaction (``_turn_output``)."""
    if not call_id.strip() or not fn_name.strip():
        raise InvalidInput("a tool call needs a call_id and a fn_name")
    return _turn_output(
        delivery,
        GroupEventType.TOOL_CALL_STARTED,
        {"call_id": call_id, "fn_name": fn_name, "args": args},
    )


def turn_tool_call_completed(
    *, delivery: RunDelivery, call_id: str, result: Any
) -> GroupRunEvent:
    """``delivery_tool_call_complete`` for the site's own turn, in its
    transaction (``_turn_output``).  The started event is not looked for:
    the turn commits a call as begun in one transaction with its started
    event, and completes only the calls it began."""
    return _turn_output(
        delivery,
        GroupEventType.TOOL_CALL_COMPLETED,
        {"call_id": call_id, "result": result},
    )


@transaction.atomic
def delivery_complete(
    *, delivery: RunDelivery, text: str, vote: str = ""
) -> RunDelivery:
    """The agent's final answer (and its vote, for a vote delivery)."""
    delivery, run = _lock_open_delivery(delivery)
    if len(text) > MAX_MESSAGE_CHARS:
        raise LimitExceeded(
            f"the answer is {len(text)} characters; at most {MAX_MESSAGE_CHARS}"
        )
    vote = " ".join(vote.lower().split())
    if delivery.kind == DeliveryKind.VOTE:
        if not vote:
            raise InvalidInput("a vote delivery needs a vote")
        if run.options and vote not in run.options:
            raise InvalidInput(
                f"vote {vote!r} is not one of the options: {', '.join(run.options)}"
            )
    elif vote:
        raise InvalidInput(f"this is a {delivery.kind} delivery; it takes no vote")
    if delivery.kind == DeliveryKind.SELECT and not text.strip():
        raise InvalidInput("name the member who should answer")
    now = timezone.now()
    delivery.status, delivery.answer, delivery.vote = (
        DeliveryStatus.COMPLETED,
        text,
        vote,
    )
    delivery.finished_at = now
    delivery.save(update_fields=["status", "answer", "vote", "finished_at"])
    _event(
        run,
        GroupEventType.TEXT_CHUNK,
        {"agent_id": delivery.agent_id, "text": text, "is_final": True},
    )
    _event(
        run,
        GroupEventType.AGENT_COMPLETED,
        {
            "agent_id": delivery.agent_id,
            "agent_name": delivery.agent.name,
            "message_id": delivery.pk,
        },
    )
    _settle(
        run, [delivery_view(delivery)], members=group_members(group=run.group), now=now
    )
    _wake_after_commit(run)
    return delivery


@transaction.atomic
def delivery_fail(*, delivery: RunDelivery, reason: str) -> RunDelivery:
    """The agent gives up on its delivery; the pattern decides what follows."""
    reason = reason.strip() or "the agent reported a failure"
    delivery, run = _lock_open_delivery(delivery)
    return _delivery_end_unanswered(
        delivery, run, status=DeliveryStatus.FAILED, reason=reason[:2000]
    )


def _delivery_end_unanswered(
    delivery: RunDelivery, run: GroupRun, *, status: str, reason: str
) -> RunDelivery:
    now = timezone.now()
    delivery.status, delivery.failure, delivery.finished_at = status, reason, now
    delivery.save(update_fields=["status", "failure", "finished_at"])
    _event(
        run,
        GroupEventType.ERROR,
        {
            "agent_id": delivery.agent_id,
            "message": f"{delivery.agent.name}: {reason}",
            "recoverable": True,
        },
    )
    _settle(
        run, [delivery_view(delivery)], members=group_members(group=run.group), now=now
    )
    _wake_after_commit(run)
    return delivery
