"""What every change of a run shares, called on its locked row.

:func:`_lock_run` locks the run's row; :func:`_start_run` stores a new run,
its ``Started`` event and its deliveries; :func:`_settle` lets the pattern
react to ended deliveries until nothing more happens, ending the run
(:func:`_run_end`) when the pattern says so.  Events get consecutive
numbers; readers are woken after commit (``coordination.groups.realtime``)
and deadlines booked (``coordination.groups.deadlines``).  A run's start
and its end go to the activity stream too, read by whoever may see the run.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from coordination.groups import realtime
from coordination.groups.deadlines import deadline_schedule
from coordination.groups.llm_queue import llm_answer_queue
from coordination.groups.models import (
    OPEN_DELIVERY_STATUSES,
    AgentGroup,
    DeliveryKind,
    DeliveryStatus,
    GroupEventType,
    GroupMembership,
    GroupRun,
    GroupRunEvent,
    MemberRole,
    RunDelivery,
    RunStatus,
)
from coordination.groups.patterns import pattern_get
from coordination.groups.patterns.base import (
    Decision,
    Deliver,
    DeliveryView,
    Member,
    RunContext,
    Step,
)
from coordination.groups.selectors import (
    GROUP_RUN,
    delivery_view,
    run_delivery_views,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.events import EventType, Importance, event_record

MAX_MESSAGE_CHARS = 20_000


def _event(run: GroupRun, type_: str, data: dict[str, Any]) -> GroupRunEvent:
    """Append an event to a locked run (the caller saves ``last_seq``)."""
    run.last_seq += 1
    return GroupRunEvent.objects.create(
        run=run, seq=run.last_seq, type=type_, data=data
    )


def _wake_after_commit(run: GroupRun, agent_ids: Iterable[int] = ()) -> None:
    _wake_run_after_commit(run.pk, agent_ids)


def _wake_run_after_commit(run_id: int, agent_ids: Iterable[int] = ()) -> None:
    agents = tuple(sorted(set(agent_ids)))
    realtime.wake_on_commit(run_ids=(run_id,), agent_ids=agents)


def _deliver(
    run: GroupRun,
    delivers: list[Deliver],
    members: tuple[Member, ...],
    now: datetime,
) -> tuple[list[RunDelivery], list[DeliveryView]]:
    """Store deliveries; one for an unavailable agent fails at once."""
    by_id = {m.agent_id: m for m in members}
    made, failed = [], []
    for d in delivers:
        member = by_id.get(d.agent_id)
        deadline = now + timedelta(seconds=d.timeout) if d.timeout else None
        delivery = RunDelivery(
            run=run,
            agent_id=d.agent_id,
            role=member.role if member else MemberRole.REGULAR,
            kind=d.kind,
            content=d.content,
            stage=d.stage,
            attempt=d.attempt,
            deadline_at=deadline,
        )
        if member is None or not member.available:
            delivery.status = DeliveryStatus.FAILED
            delivery.failure = "agent is unavailable"
            delivery.finished_at = now
        made.append(delivery)
    RunDelivery.objects.bulk_create(made)
    for delivery in made:
        if delivery.status == DeliveryStatus.FAILED:
            member = by_id.get(delivery.agent_id)
            who = member.name if member else f"agent {delivery.agent_id}"
            _event(
                run,
                GroupEventType.ERROR,
                {
                    "agent_id": delivery.agent_id,
                    "message": f"{who} is unavailable",
                    "recoverable": True,
                },
            )
            failed.append(delivery_view(delivery))
            continue
        if delivery.deadline_at is not None:
            deadline_schedule(at=delivery.deadline_at)
        if by_id[delivery.agent_id].answered_by_llm:
            llm_answer_queue(delivery_id=delivery.pk)
    return made, failed


def _run_activity(
    run: GroupRun, *, actor: Actor, event_type: str, details: dict[str, Any]
) -> None:
    event_record(
        actor=actor,
        event_type=event_type,
        constellation_id=run.group.constellation_id,
        details={"group": run.group.name, "pattern": run.pattern, **details},
        importance=Importance.MEDIUM
        if details.get("outcome") == RunStatus.FAILED
        else Importance.LOW,
        about=(GROUP_RUN, run.pk),
    )


def _start_run(
    *,
    actor: Actor,
    group: AgentGroup,
    message: str,
    options: list[str],
    requested_by: str,
    decision: Decision,
    members: tuple[Member, ...],
    now: datetime,
) -> GroupRun:
    asked = [d for d in decision.deliveries if d.kind != DeliveryKind.OBSERVE]
    run = GroupRun.objects.create(
        group=group,
        pattern=group.pattern,
        config=group.config,
        message=message,
        options=options,
        requested_by=requested_by,
        state=decision.run_state,
        closes_at=(
            now + timedelta(seconds=decision.close_after)
            if decision.close_after
            else None
        ),
        last_seq=1,
    )
    GroupRunEvent.objects.create(
        run=run,
        seq=1,
        type=GroupEventType.STARTED,
        data={
            "group_id": group.pk,
            "pattern": group.pattern,
            "agent_count": len(asked),
        },
    )
    if decision.group_state != group.state:
        group.state = decision.group_state
        group.save(update_fields=["state", "updated_at"])
    GroupMembership.objects.filter(
        group=group, agent_id__in=[d.agent_id for d in asked]
    ).update(last_routed_at=now)
    _run_activity(
        run,
        actor=actor,
        event_type=EventType.GROUP_RUN_STARTED,
        details={"summary": message[:160]},
    )
    _, failed = _deliver(run, decision.deliveries, members, now)
    if failed:
        _settle(run, failed, members=members, now=now)
    if run.closes_at is not None and run.status == RunStatus.RUNNING:
        deadline_schedule(at=run.closes_at)
    _wake_after_commit(run, [d.agent_id for d in decision.deliveries])
    return run


# The run's row only (``of``): on PostgreSQL a plain FOR UPDATE locks the
# joined group row as well, which every run of the group shares.  Compiled
# once: every event an agent's output adds locks its run.
_RUN_LOCKED = CompiledQuery(
    lambda run_id: (
        GroupRun.objects.select_for_update(of=("self",))
        .select_related("group")
        .filter(pk=run_id)
        .order_by()[:1]
    ),
    run_id=-730_203,
)


def _lock_run(run_id: int) -> GroupRun:
    run = _RUN_LOCKED.first(run_id=run_id)
    if run is None:
        raise GroupRun.DoesNotExist(f"run {run_id} does not exist")
    return run


def _context(run: GroupRun, members: tuple[Member, ...]) -> RunContext:
    return RunContext(
        message=run.message,
        members=members,
        run_state=dict(run.state),
        deliveries=run_delivery_views(run=run),
        rng=random.Random(run.pk),
    )


def _settle(
    run: GroupRun,
    finished: list[DeliveryView],
    *,
    members: tuple[Member, ...],
    now: datetime,
    step: Step | None = None,
) -> None:
    """Let the pattern react to ended deliveries until nothing more happens."""
    engine = pattern_get(run.pattern)
    config = engine.validate(run.config)
    queue = list(finished)
    pending_steps = [step] if step is not None else []
    while run.status == RunStatus.RUNNING and (queue or pending_steps):
        if pending_steps:
            current = pending_steps.pop(0)
        else:
            current = engine.advance(
                config=config, ctx=_context(run, members), finished=queue.pop(0)
            )
        if current.run_state is not None:
            run.state = current.run_state
        for notice in current.notices:
            _event(
                run,
                GroupEventType.ERROR,
                {"agent_id": None, "message": notice, "recoverable": True},
            )
        if current.deliveries:
            _, failed = _deliver(run, current.deliveries, members, now)
            queue.extend(failed)
            _wake_after_commit(run, [d.agent_id for d in current.deliveries])
        if current.error:
            _run_end(run, status=RunStatus.FAILED, error=current.error, now=now)
        elif current.done:
            _run_end(run, status=RunStatus.COMPLETED, result=current.result, now=now)
    run.save(update_fields=["state", "last_seq", "status", "result", "finished_at"])


def _run_end(
    run: GroupRun,
    *,
    status: str,
    now: datetime,
    result: dict[str, Any] | None = None,
    error: str = "",
) -> None:
    run.deliveries.filter(status__in=OPEN_DELIVERY_STATUSES).update(
        status=DeliveryStatus.CANCELLED, finished_at=now
    )
    run.status, run.finished_at = status, now
    answered = run.deliveries.filter(status=DeliveryStatus.COMPLETED).exclude(
        kind__in=[DeliveryKind.OBSERVE, DeliveryKind.SELECT]
    )
    count = answered.count()
    _run_activity(
        run,
        actor=Actor.system(),
        event_type=EventType.GROUP_RUN_COMPLETED,
        details={
            "outcome": status,
            "summary": error[:160]
            if error
            else f"{count} answer{'' if count == 1 else 's'}",
        },
    )
    if error:
        run.result = {"error": error}
        _event(
            run,
            GroupEventType.ERROR,
            {"agent_id": None, "message": error, "recoverable": False},
        )
        return
    responses = [
        {"agent_id": d.agent_id, "agent_name": d.agent.name, "answer": d.answer}
        for d in answered.select_related("agent").order_by("id")
    ]
    run.result = result or {}
    _event(
        run,
        GroupEventType.COMPLETE,
        {
            "group_id": run.group_id,
            "pattern": run.pattern,
            "execution_time": round((now - run.started_at).total_seconds(), 6),
            "agent_responses": responses,
            "state_changes": run.result,
        },
    )
