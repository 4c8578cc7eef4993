"""Deadlines: a delivery unanswered in time expires, a vote whose time is up
closes, and the sweep (booked after each deadline and run by the beat)
does both for everything overdue and queues again the LLM's stalled
deliveries.  Each is safe to run twice: what is not (or no longer) due is
left alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from coordination.groups.llm_queue import llm_answer_queue
from coordination.groups.models import (
    OPEN_DELIVERY_STATUSES,
    DeliveryKind,
    DeliveryStatus,
    GroupRun,
    RunDelivery,
    RunStatus,
)
from coordination.groups.patterns import pattern_get
from coordination.groups.selectors import group_members
from coordination.groups.services.deliveries import _delivery_end_unanswered
from coordination.groups.services.runs import (
    _context,
    _lock_run,
    _settle,
    _wake_after_commit,
)


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
