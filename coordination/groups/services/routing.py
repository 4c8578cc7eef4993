"""Routing work to members: a message through a group starts a run (the
group's row locked while its pattern picks the members and its state
changes), and a leader delegates part of its work to a member (or the
group's fallback decides when it cannot).
"""

from __future__ import annotations

import random

from django.db import transaction
from django.utils import timezone

from coordination.groups.models import (
    AgentGroup,
    DeliveryKind,
    GroupMembership,
    GroupRun,
    RunDelivery,
)
from coordination.groups.patterns import pattern_get
from coordination.groups.patterns.base import Deliver, Step
from coordination.groups.selectors import group_get_locked, group_members
from coordination.groups.services.deliveries import _lock_open_delivery
from coordination.groups.services.runs import (
    MAX_MESSAGE_CHARS,
    _deliver,
    _settle,
    _start_run,
    _wake_after_commit,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import Conflict, InvalidInput, LimitExceeded


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
        actor=actor,
        group=group,
        message=message,
        options=clean_options,
        requested_by=actor.ref,
        decision=decision,
        members=members,
        now=timezone.now(),
    )
    return run


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
