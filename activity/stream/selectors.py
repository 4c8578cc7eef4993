"""Reads of the activity stream: lists, keyword search, timeline counts.

Callers pass a constellation already cleared by
``activity.stream.permissions``; nothing here crosses constellations.
"""

from collections import defaultdict
from datetime import datetime, timedelta

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncHour

from activity.stream.models import (
    IMPORTANCE_RANK,
    ActivityEvent,
    ActivityTerm,
    EventType,
)
from activity.stream.services import event_terms
from coordination.errors import InvalidInput
from coordination.models import Agent, Constellation

MAX_PAGE = 200


def _importance_at_least(importance: str) -> list[str]:
    if importance not in IMPORTANCE_RANK:
        raise InvalidInput(
            f"unknown importance {importance!r}; "
            f"allowed: {', '.join(str(i) for i in IMPORTANCE_RANK)}"
        )
    floor = IMPORTANCE_RANK[importance]
    return [str(i) for i, rank in IMPORTANCE_RANK.items() if rank >= floor]


def activity_list(
    *,
    constellation: Constellation,
    agent_id: int | None = None,
    event_type: str | None = None,
    min_importance: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
) -> QuerySet[ActivityEvent]:
    if event_type is not None and event_type not in EventType.values:
        raise InvalidInput(
            f"unknown event type {event_type!r}; allowed: {', '.join(EventType.values)}"
        )
    qs = ActivityEvent.objects.filter(constellation=constellation)
    if agent_id is not None:
        qs = qs.filter(agent_id=agent_id)
    if event_type is not None:
        qs = qs.filter(event_type=event_type)
    if min_importance is not None:
        qs = qs.filter(importance__in=_importance_at_least(min_importance))
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    return qs.select_related("agent", "actor_user")[: max(1, min(limit, MAX_PAGE))]


def activity_search(
    *, constellation: Constellation, query: str, limit: int = 20
) -> list[ActivityEvent]:
    """Events whose line holds every word of ``query``, newest first."""
    terms = event_terms(query)
    if not terms:
        raise InvalidInput("the search needs at least one word of 2+ letters")
    qs = ActivityEvent.objects.filter(constellation=constellation)
    for term in terms[:8]:
        qs = qs.filter(
            pk__in=ActivityTerm.objects.filter(
                constellation_id_value=constellation.pk, term=term
            ).values("event_id")
        )
    return list(
        qs.select_related("agent", "actor_user").order_by("-id")[
            : max(1, min(limit, MAX_PAGE))
        ]
    )


def recent_activity_for_agent(*, agent: Agent, limit: int) -> list[ActivityEvent]:
    """The newest events of ``agent``'s constellation that others caused:
    its own actions are left out, except what it flagged as notable."""
    own_noise = Q(agent=agent, actor_user__isnull=True) & ~Q(
        event_type=EventType.NOTABLE
    )
    return list(
        ActivityEvent.objects.filter(constellation_id=agent.constellation_id)
        .exclude(own_noise)
        .order_by("-created_at", "-id")[:limit]
    )


def activity_timeline(
    *, constellation: Constellation, now: datetime, hours: int
) -> dict[int | None, dict[datetime, int]]:
    """Events per agent (None: humans and system) per hour, last ``hours``."""
    since = (now - timedelta(hours=hours)).replace(minute=0, second=0, microsecond=0)
    rows = (
        ActivityEvent.objects.filter(constellation=constellation, created_at__gte=since)
        .annotate(hour=TruncHour("created_at"))
        .values("agent_id", "hour")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts: dict[int | None, dict[datetime, int]] = defaultdict(dict)
    for row in rows:
        counts[row["agent_id"]][row["hour"]] = row["n"]
    return counts
