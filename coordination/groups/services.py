"""Writes of agent groups and their runs.

Routing a message locks the group's row (``select_for_update``; on SQLite
every transaction here begins IMMEDIATE, which takes the write lock at
once), asks the group's pattern whom to deliver to, stores its new state,
the run, the deliveries and the ``Started`` event, in one transaction.
Everything that changes a run afterwards (an agent taking its work,
chunks, tool calls, answers, failures, deadlines) locks the run's row,
writes its events with consecutive numbers and lets the pattern decide
what comes next.  Readers are woken after commit; timeouts are kept by
Celery sweeps booked after commit for just after each deadline.
"""

import random
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

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
from coordination.groups.patterns.sleeptime import (
    Observed,
    fired_triggers,
    intervention_prompt,
)
from coordination.groups.selectors import (
    delivery_view,
    group_get_locked,
    group_members,
    run_delivery_views,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.errors import Conflict, InvalidInput, LimitExceeded, NotFound

MAX_MESSAGE_CHARS = 20_000
MAX_CHUNK_CHARS = 20_000


# --- groups and members -------------------------------------------------------


def _validated_config(
    *, pattern: str, config: dict[str, Any], members: tuple[Member, ...] | None
) -> dict[str, Any]:
    typed = pattern_get(pattern).validate(config, members)
    return typed.model_dump(mode="json")


@transaction.atomic
def group_create(
    *,
    constellation: Constellation,
    name: str,
    pattern: str,
    description: str = "",
    config: dict[str, Any] | None = None,
) -> AgentGroup:
    """A new group; agents named in ``config`` are checked once members join."""
    if AgentGroup.objects.filter(constellation=constellation, name=name).exists():
        raise Conflict(
            f"constellation {constellation.name!r} already has a group named {name!r}"
        )
    engine = pattern_get(pattern)
    clean = _validated_config(pattern=pattern, config=config or {}, members=None)
    group = AgentGroup(
        constellation=constellation,
        name=name,
        description=description,
        pattern=pattern,
        config=clean,
        state=engine.initial_state(engine.validate(clean)),
    )
    group.full_clean()
    group.save()
    return group


@transaction.atomic
def group_update(
    *,
    group: AgentGroup,
    description: str | None = None,
    pattern: str | None = None,
    config: dict[str, Any] | None = None,
) -> AgentGroup:
    """Change a group; a new pattern or configuration resets the pattern state."""
    group = group_get_locked(group_id=group.pk)
    fields = []
    if description is not None:
        group.description = description
        fields.append("description")
    if pattern is not None or config is not None:
        new_pattern = pattern or group.pattern
        raw = config if config is not None else group.config
        if new_pattern != group.pattern and config is None:
            raw = {}
        clean = _validated_config(
            pattern=new_pattern, config=raw, members=group_members(group=group)
        )
        engine = pattern_get(new_pattern)
        group.pattern, group.config = new_pattern, clean
        group.state = engine.initial_state(engine.validate(clean))
        fields += ["pattern", "config", "state"]
    group.full_clean()
    group.save(update_fields=[*fields, "updated_at"])
    return group


@transaction.atomic
def group_delete(*, group: AgentGroup) -> None:
    group.delete()


def _clean_capabilities(capabilities: Iterable[str]) -> list[str]:
    clean = []
    for capability in capabilities:
        text = " ".join(str(capability).split())
        if not text:
            continue
        if len(text) > 100:
            raise InvalidInput(f"capability {text[:20]!r}... exceeds 100 characters")
        if text not in clean:
            clean.append(text)
    if len(clean) > 50:
        raise InvalidInput(f"{len(clean)} capabilities given; at most 50 allowed")
    return clean


@transaction.atomic
def group_member_add(
    *,
    group: AgentGroup,
    agent: Agent,
    role: str = MemberRole.REGULAR,
    domain: str = "",
    capabilities: Iterable[str] = (),
) -> GroupMembership:
    if agent.constellation_id != group.constellation_id:
        raise NotFound(f"agent {agent.pk} does not exist")
    if role not in MemberRole.values:
        raise InvalidInput(
            f"unknown member role {role!r}; one of: {', '.join(MemberRole.values)}"
        )
    domain = domain.strip()
    if role == MemberRole.SPECIALIST and not domain:
        raise InvalidInput("a specialist needs a domain (e.g. 'task_management')")
    if role != MemberRole.SPECIALIST and domain:
        raise InvalidInput(f"only specialists have a domain; this member is {role}")
    if group.memberships.filter(agent=agent).exists():
        raise Conflict(f"{agent.name} is already a member of group {group.name!r}")
    membership = GroupMembership(
        group=group,
        agent=agent,
        role=role,
        domain=domain,
        capabilities=_clean_capabilities(capabilities),
    )
    membership.full_clean()
    membership.save()
    return membership


@transaction.atomic
def group_member_remove(*, group: AgentGroup, agent_id: int) -> None:
    membership = group.memberships.filter(agent_id=agent_id).first()
    if membership is None:
        raise NotFound(f"agent {agent_id} is not a member of group {group.name!r}")
    config = pattern_get(group.pattern).validate(group.config)
    referenced = {
        getattr(config, "leader_id", None),
        getattr(config, "intervention_agent_id", None),
        *(a for s in getattr(config, "stages", []) for a in s.agent_ids),
    }
    if agent_id in referenced:
        raise Conflict(
            f"{membership.agent.name} is named in the group's {group.pattern}"
            " configuration; change the configuration first"
        )
    membership.delete()


@transaction.atomic
def group_metric_record(*, group: AgentGroup, metric: str, value: float) -> None:
    """Record the latest value of a metric a sleeptime trigger may watch."""
    metric = metric.strip()
    if not metric or len(metric) > 100:
        raise InvalidInput("a metric name is 1 to 100 characters")
    group = group_get_locked(group_id=group.pk)
    metrics = dict(group.state.get("metrics", {}))
    metrics[metric] = float(value)
    group.state = {**group.state, "metrics": metrics}
    group.save(update_fields=["state", "updated_at"])


# --- runs -------------------------------------------------------------------


def _event(run: GroupRun, type_: str, data: dict[str, Any]) -> GroupRunEvent:
    """Append an event to a locked run (the caller saves ``last_seq``)."""
    run.last_seq += 1
    return GroupRunEvent.objects.create(
        run=run, seq=run.last_seq, type=type_, data=data
    )


def _wake_after_commit(run: GroupRun, agent_ids: Iterable[int] = ()) -> None:
    run_id, agents = run.pk, tuple(sorted(set(agent_ids)))
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
            _event(
                run,
                GroupEventType.ERROR,
                {
                    "agent_id": delivery.agent_id,
                    "message": f"agent {delivery.agent_id} is unavailable",
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


def _start_run(
    *,
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
    _, failed = _deliver(run, decision.deliveries, members, now)
    if failed:
        _settle(run, failed, members=members, now=now)
    if run.closes_at is not None and run.status == RunStatus.RUNNING:
        deadline_schedule(at=run.closes_at)
    _wake_after_commit(run, [d.agent_id for d in decision.deliveries])
    return run


@transaction.atomic
def group_message_route(
    *,
    actor: Actor,
    group: AgentGroup,
    message: str,
    options: list[str] | None = None,
) -> GroupRun:
    """Route ``message`` through ``group``: a new run, delivered to inboxes."""
    message = message.strip()
    if not message:
        raise InvalidInput("the message is empty")
    if len(message) > MAX_MESSAGE_CHARS:
        raise LimitExceeded(
            f"the message is {len(message)} characters; at most"
            f" {MAX_MESSAGE_CHARS} are allowed"
        )
    clean_options = [" ".join(o.lower().split()) for o in options or [] if o.strip()]
    if clean_options and group.pattern != "voting":
        raise InvalidInput("options are for voting groups only")
    group = group_get_locked(group_id=group.pk)
    engine = pattern_get(group.pattern)
    members = group_members(group=group)
    decision = engine.route(
        config=engine.validate(group.config),
        state=dict(group.state),
        members=members,
        message=message,
        rng=random.Random(),
    )
    run = _start_run(
        group=group,
        message=message,
        options=clean_options,
        requested_by=actor.ref,
        decision=decision,
        members=members,
        now=timezone.now(),
    )
    return run


def _lock_run(run_id: int) -> GroupRun:
    # The run's row only (``of``): on PostgreSQL a plain FOR UPDATE locks
    # the joined group row as well, which every run of the group shares.
    return (
        GroupRun.objects.select_for_update(of=("self",))
        .select_related("group")
        .get(pk=run_id)
    )


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
    if error:
        run.result = {"error": error}
        _event(
            run,
            GroupEventType.ERROR,
            {"agent_id": None, "message": error, "recoverable": False},
        )
        return
    answered = run.deliveries.filter(status=DeliveryStatus.COMPLETED).exclude(
        kind__in=[DeliveryKind.OBSERVE, DeliveryKind.SELECT]
    )
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


# --- what agents do with their deliveries ---------------------------------------


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


def _lock_open_delivery(delivery: RunDelivery) -> tuple[RunDelivery, GroupRun]:
    run = _lock_run(delivery.run_id)
    delivery = RunDelivery.objects.select_related("agent").get(pk=delivery.pk)
    if run.status != RunStatus.RUNNING:
        raise Conflict(f"run {run.pk} has ended ({run.status}); nothing more is taken")
    if delivery.status not in OPEN_DELIVERY_STATUSES:
        raise Conflict(
            f"delivery {delivery.pk} is {delivery.status}; only a pending or taken"
            " delivery accepts output"
        )
    if delivery.kind == DeliveryKind.OBSERVE:
        raise Conflict("an observer's delivery takes no output")
    return delivery, run


def _output_event(run: GroupRun, type_: str, data: dict[str, Any]) -> GroupRunEvent:
    """An event of an agent's output on a locked run; readers woken."""
    event = _event(run, type_, data)
    run.save(update_fields=["last_seq"])
    _wake_after_commit(run)
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


@transaction.atomic
def run_delivery_expire(*, delivery_id: int, now: datetime | None = None) -> bool:
    """Expire a delivery whose deadline has passed; False if there is none."""
    now = now or timezone.now()
    delivery = RunDelivery.objects.filter(pk=delivery_id).first()
    if delivery is None:
        return False
    run = _lock_run(delivery.run_id)
    delivery = RunDelivery.objects.select_related("agent").get(pk=delivery_id)
    if (
        run.status != RunStatus.RUNNING
        or delivery.status not in OPEN_DELIVERY_STATUSES
        or delivery.deadline_at is None
        or delivery.deadline_at > now
    ):
        return False
    seconds = (delivery.deadline_at - delivery.created_at).total_seconds()
    _delivery_end_unanswered(
        delivery,
        run,
        status=DeliveryStatus.EXPIRED,
        reason=f"no answer within {seconds:.0f} s",
    )
    return True


@transaction.atomic
def run_vote_close(*, run_id: int, now: datetime | None = None) -> bool:
    """Close a vote whose time is up; False if it is not (yet) due."""
    now = now or timezone.now()
    run = GroupRun.objects.filter(pk=run_id).first()
    if run is None:
        return False
    run = _lock_run(run_id)
    if run.status != RunStatus.RUNNING or run.closes_at is None or run.closes_at > now:
        return False
    run.deliveries.filter(
        kind=DeliveryKind.VOTE, status__in=OPEN_DELIVERY_STATUSES
    ).update(status=DeliveryStatus.EXPIRED, failure="voting closed", finished_at=now)
    engine = pattern_get(run.pattern)
    members = group_members(group=run.group)
    step = engine.close(config=engine.validate(run.config), ctx=_context(run, members))
    _settle(run, [], members=members, now=now, step=step)
    _wake_after_commit(run)
    return True


def run_deadlines_sweep(*, now: datetime | None = None) -> int:
    """Expire every overdue delivery and close every overdue vote.

    Booked by ``coordination.groups.deadlines`` for just after each
    deadline, and run by the beat too, for a booking lost with its process.
    It also queues again the deliveries the LLM should answer that are
    still pending a sweep interval after they were made (their task was
    lost with its process or a killed worker; a second task for one finds
    it claimed and does nothing).
    """
    now = now or timezone.now()
    stalled = RunDelivery.objects.filter(
        status=DeliveryStatus.PENDING,
        agent__answered_by_llm=True,
        run__status=RunStatus.RUNNING,
        created_at__lte=now - timedelta(seconds=settings.GROUPS_SWEEP_SECONDS),
    ).values_list("pk", flat=True)
    for delivery_id in stalled:
        llm_answer_queue(delivery_id=delivery_id)
    overdue = list(
        RunDelivery.objects.filter(
            status__in=OPEN_DELIVERY_STATUSES,
            deadline_at__lte=now,
            run__status=RunStatus.RUNNING,
        ).values_list("pk", flat=True)
    )
    closing = list(
        GroupRun.objects.filter(
            status=RunStatus.RUNNING, closes_at__lte=now
        ).values_list("pk", flat=True)
    )
    done = sum(run_delivery_expire(delivery_id=i, now=now) for i in overdue)
    return done + sum(run_vote_close(run_id=i, now=now) for i in closing)


@transaction.atomic
def run_delegate(
    *, delivery: RunDelivery, message: str, agent_id: int | None = None
) -> RunDelivery | None:
    """The leader hands part of its work to a member.

    Returns the new delivery, or None when the delegation could not be made
    and the group's fallback (``fail``) ended the run.  With the
    ``handle_self`` fallback a refused delegation raises ``LimitExceeded``
    and the leader keeps the work.
    """
    message = message.strip()
    if not message:
        raise InvalidInput("the delegated message is empty")
    delivery, run = _lock_open_delivery(delivery)
    if delivery.kind != DeliveryKind.LEAD:
        raise Conflict(
            f"only the leader's delivery may delegate; this one is {delivery.kind}"
        )
    group = group_get_locked(group_id=run.group_id)
    engine = pattern_get(run.pattern)
    config = engine.validate(run.config)
    members = group_members(group=group)
    wanted = None
    if agent_id is not None:
        wanted = next((m for m in members if m.agent_id == agent_id), None)
        if wanted is None or agent_id == delivery.agent_id:
            raise InvalidInput(
                f"agent {agent_id} is not a member the leader can delegate to"
            )
    target, why, group_state = engine.delegation_target(  # type: ignore[attr-defined]
        config=config,
        state=dict(group.state),
        members=members,
        run_state=dict(run.state),
        message=message,
        wanted=wanted,
        rng=random.Random(),
    )
    now = timezone.now()
    if target is None:
        if config.fallback_behavior == "handle_self":
            raise LimitExceeded(
                f"delegation refused: {why}; the leader keeps this work"
                " (fallback handle_self)"
            )
        step = Step(error=f"delegation refused: {why} (fallback fail)")
        _settle(run, [], members=members, now=now, step=step)
        _wake_after_commit(run)
        return None
    counts = dict(run.state.get("delegations", {}))
    counts[str(target.agent_id)] = counts.get(str(target.agent_id), 0) + 1
    run.state = {**run.state, "delegations": counts}
    group.state = group_state
    group.save(update_fields=["state", "updated_at"])
    GroupMembership.objects.filter(group=group, agent_id=target.agent_id).update(
        last_routed_at=now
    )
    made, failed = _deliver(
        run,
        [Deliver(agent_id=target.agent_id, kind="delegated", content=message)],
        members,
        now,
    )
    _settle(run, failed, members=members, now=now)
    _wake_after_commit(run, [target.agent_id])
    return made[0]


# --- sleeptime --------------------------------------------------------------


@transaction.atomic
def group_sleeptime_check(
    *, group_id: int, now: datetime | None = None, force: bool = False
) -> GroupRun | None:
    """Evaluate a sleeptime group's triggers; start an intervention if any fire.

    Skipped (None) when the group's check interval has not passed since its
    last check, unless ``force``.
    """
    now = now or timezone.now()
    group = AgentGroup.objects.filter(pk=group_id, pattern="sleeptime").first()
    if group is None:
        return None
    group = group_get_locked(group_id=group_id)
    if group.pattern != "sleeptime":
        return None
    engine = pattern_get("sleeptime")
    config = engine.validate(group.config)
    state = dict(group.state)
    last_check = _parse_time(state.get("last_check_at"))
    if (
        not force
        and last_check is not None
        and (now - last_check).total_seconds() < config.check_interval
    ):
        return None
    since = _parse_time(state.get("last_intervention_at")) or group.created_at
    observed = Observed(
        now=now,
        since=since,
        messages_since=GroupRun.objects.filter(
            group__constellation_id=group.constellation_id, started_at__gt=since
        )
        .exclude(requested_by=SLEEPTIME_ACTOR)
        .count(),
        metrics={k: float(v) for k, v in state.get("metrics", {}).items()},
    )
    fired = fired_triggers(config, observed)
    state["last_check_at"] = now.isoformat()
    if not fired:
        group.state = state
        group.save(update_fields=["state", "updated_at"])
        return None
    members = group_members(group=group)
    agent = engine.intervener(config, members)  # type: ignore[attr-defined]
    state["last_intervention_at"] = now.isoformat()
    state["last_fired"] = [t.name for t in fired]
    decision = Decision(
        deliveries=[
            Deliver(
                agent_id=agent.agent_id,
                kind="intervene",
                content=intervention_prompt(fired, observed),
            )
        ],
        group_state=state,
        state_changes={"fired": [t.name for t in fired]},
    )
    return _start_run(
        group=group,
        message=decision.deliveries[0].content,
        options=[],
        requested_by=SLEEPTIME_ACTOR,
        decision=decision,
        members=members,
        now=now,
    )


SLEEPTIME_ACTOR = "system:sleeptime"


def group_sleeptime_sweep(*, now: datetime | None = None) -> list[GroupRun]:
    """Check every sleeptime group that is due; the interventions started."""
    now = now or timezone.now()
    ids = AgentGroup.objects.filter(pattern="sleeptime").values_list("pk", flat=True)
    started = [group_sleeptime_check(group_id=i, now=now) for i in ids]
    return [run for run in started if run is not None]


def _parse_time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


# --- import -------------------------------------------------------------------


@transaction.atomic
def group_import(
    *, constellation: Constellation, document: dict[str, Any], replace: bool = False
) -> AgentGroup:
    """Create (or with ``replace``, recreate) a group from an exported document."""
    if not isinstance(document.get("group"), dict):
        raise InvalidInput("the document has no [group] table")
    head = document["group"]
    name = str(head.get("name", "")).strip()
    if not name:
        raise InvalidInput("[group] needs a name")
    existing = AgentGroup.objects.filter(constellation=constellation, name=name)
    if existing.exists():
        if not replace:
            raise Conflict(
                f"constellation {constellation.name!r} already has a group named"
                f" {name!r}; import with replace to overwrite it"
            )
        existing.delete()
    agents = {a.name: a for a in constellation.agents.all()}

    def agent_named(value: Any) -> Agent:
        agent = agents.get(str(value))
        if agent is None:
            raise InvalidInput(
                f"no agent named {value!r} in constellation {constellation.name!r}"
            )
        return agent

    pattern = str(head.get("pattern", ""))
    pattern_get(pattern)
    group = AgentGroup(
        constellation=constellation,
        name=name,
        description=str(head.get("description", "")),
        pattern=pattern,
    )
    group.full_clean(exclude=["config", "state"])
    group.save()
    for member in document.get("members", []):
        if not isinstance(member, dict):
            raise InvalidInput("each [[members]] entry is a table")
        group_member_add(
            group=group,
            agent=agent_named(member.get("agent")),
            role=str(member.get("role", MemberRole.REGULAR)),
            domain=str(member.get("domain", "")),
            capabilities=[str(c) for c in member.get("capabilities", [])],
        )
    return group_update(
        group=group,
        config=_names_to_ids(document.get("config", {}), agent_named),
    )


def _names_to_ids(config: Any, agent_named: Any) -> dict[str, Any]:
    if not isinstance(config, dict):
        raise InvalidInput("[config] must be a table")
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in ("leader", "intervention_agent"):
            out[f"{key}_id"] = agent_named(value).pk
        elif key == "stages" and isinstance(value, list):
            stages = []
            for stage in value:
                if not isinstance(stage, dict):
                    raise InvalidInput("each [[config.stages]] entry is a table")
                stages.append(
                    {
                        **{k: v for k, v in stage.items() if k != "agents"},
                        "agent_ids": [
                            agent_named(a).pk for a in stage.get("agents", [])
                        ],
                    }
                )
            out[key] = stages
        else:
            out[key] = value
    return out
