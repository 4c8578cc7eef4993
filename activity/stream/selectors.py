"""Reads of the activity stream: lists, keyword search, timeline counts.

Callers pass a constellation already cleared by
``activity.stream.permissions``; nothing here crosses constellations.
"""

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db.models import Count, Exists, Min, OuterRef, Q, QuerySet, Sum

from activity.stream.models import (
    IMPORTANCE_RANK,
    ActivityEvent,
    ActivityHourCount,
    ActivityTerm,
    EventType,
)
from activity.stream.permissions import activity_visible
from activity.stream.services import event_terms, hour_of
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.errors import InvalidInput

MAX_PAGE = 200
MAX_QUERY_TERMS = 8


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
    actor: Actor,
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
    qs = ActivityEvent.objects.filter(
        activity_visible(actor), constellation=constellation
    )
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
    *, actor: Actor, constellation: Constellation, query: str, limit: int = 20
) -> list[ActivityEvent]:
    """Events whose line holds every word of ``query``, newest first."""
    terms = event_terms(query)[:MAX_QUERY_TERMS]
    if not terms:
        raise InvalidInput(
            "the search needs at least one word of 2+ letters (not only "
            "words like 'the' or 'to')"
        )
    limit = max(1, min(limit, MAX_PAGE))
    wanted = _every_word(
        constellation.pk,
        terms,
        limit=limit,
        narrowed=activity_visible(actor, via="event__"),
    )
    events = ActivityEvent.objects.select_related("agent", "actor_user").in_bulk(wanted)
    return [events[i] for i in wanted if i in events]


def activity_search_any(
    *,
    actor: Actor,
    constellation: Constellation,
    query: str,
    limit: int = 20,
    agent_id: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[ActivityEvent]:
    """Events whose line holds any word of ``query``, newest first, for a
    caller that ranks them by how many words they hold: those holding
    every word (however old) and each word's newest ``limit``; none when
    the query has no word the index keeps.  ``agent_id``, ``since`` and
    ``until`` narrow to one agent's events and a time range."""
    terms = event_terms(query)[:MAX_QUERY_TERMS]
    if not terms:
        return []
    limit = max(1, min(limit, MAX_PAGE))
    narrowed = activity_visible(actor, via="event__")
    if agent_id is not None:
        narrowed &= Q(event__agent_id=agent_id)
    if since is not None:
        narrowed &= Q(event__created_at__gte=since)
    if until is not None:
        narrowed &= Q(event__created_at__lte=until)
    wanted = set(_every_word(constellation.pk, terms, limit=limit, narrowed=narrowed))
    postings = ActivityTerm.objects.filter(
        narrowed, constellation_id_value=constellation.pk
    )
    for term in terms:
        wanted.update(
            postings.filter(term=term)
            .order_by("-event_id")
            .values_list("event_id", flat=True)[:limit]
        )
    events = ActivityEvent.objects.select_related("agent", "actor_user").in_bulk(wanted)
    return [events[i] for i in sorted(events, reverse=True)]


def _every_word(
    constellation_id: int, terms: list[str], *, limit: int, narrowed: Q | None = None
) -> list[int]:
    """Ids of the newest ``limit`` events holding every one of ``terms``
    (and matching ``narrowed``, a condition on the postings' event)."""
    postings = ActivityTerm.objects.filter(constellation_id_value=constellation_id)
    if len(terms) > 1:
        # Walk the rarest word's postings, newest first, and look each other
        # word up in the index: no word's whole posting list is read.
        terms = sorted(terms, key=lambda t: postings.filter(term=t).count())
    ids = postings.filter(narrowed or Q(), term=terms[0])
    for term in terms[1:]:
        ids = ids.filter(
            Exists(postings.filter(term=term, event_id=OuterRef("event_id")))
        )
    return list(ids.order_by("-event_id").values_list("event_id", flat=True)[:limit])


def _recent_for_agent(agent: Agent, limit: int) -> QuerySet[ActivityEvent]:
    own_noise = Q(agent=agent, actor_user__isnull=True) & ~Q(
        event_type=EventType.NOTABLE
    )
    return (
        ActivityEvent.objects.filter(
            activity_visible(Actor.for_agent(agent)),
            constellation_id=agent.constellation_id,
        )
        .exclude(own_noise)
        .order_by("-created_at", "-id")[:limit]
    )


# Read at the start of every turn of an agent's loop, where building the
# query (a subquery per kind of object an event is about) cost a hundred
# times running it: compiled once per limit.  An agent's rights over
# events are conditions on its id, its constellation and its ref alone
# (each kind's readable ids are subqueries of those), so the statement
# built for a marker agent is every agent's, and the rights are still
# decided by the database at each read.  A kind whose rule used anything
# else would leave its marker out of the statement, which fails to compile.
_AGENT_MARKER, _CONSTELLATION_MARKER = -8_100_001, -8_100_002
_RECENT_FOR_AGENT: dict[int, CompiledQuery] = {}


def _recent_for_agent_compiled(limit: int) -> CompiledQuery:
    compiled = _RECENT_FOR_AGENT.get(limit)
    if compiled is None:
        compiled = _RECENT_FOR_AGENT[limit] = CompiledQuery(
            lambda agent_id, constellation_id, ref: _recent_for_agent(
                Agent(pk=agent_id, constellation_id=constellation_id), limit
            ),
            agent_id=_AGENT_MARKER,
            constellation_id=_CONSTELLATION_MARKER,
            ref=Actor.for_agent(Agent(pk=_AGENT_MARKER)).ref,
        )
    return compiled


def recent_activity_for_agent(*, agent: Agent, limit: int) -> list[ActivityEvent]:
    """The newest events of ``agent``'s constellation that others caused:
    its own actions are left out, except what it flagged as notable."""
    return _recent_for_agent_compiled(limit).all(
        agent_id=agent.pk,
        constellation_id=agent.constellation_id,
        ref=Actor.for_agent(agent).ref,
    )


def activity_about(
    *, actor: Actor, constellation_id: int, kind: str, object_id: int, limit: int = 50
) -> list[ActivityEvent]:
    """The events about one object (a task's history), newest first, as
    ``actor`` may read them."""
    return list(
        ActivityEvent.objects.filter(
            activity_visible(actor),
            constellation_id=constellation_id,
            object_kind=kind,
            object_id=object_id,
        ).order_by("-created_at", "-id")[:limit]
    )


def activity_earliest(
    *, constellation: Constellation, since: datetime
) -> datetime | None:
    """When the constellation's first event after ``since`` happened (one
    read of the (constellation, created_at) index)."""
    return ActivityEvent.objects.filter(
        constellation=constellation, created_at__gte=since
    ).aggregate(first=Min("created_at"))["first"]


def activity_buckets(
    *, constellation: Constellation, since: datetime, bucket: timedelta
) -> dict[int | None, dict[int, int]]:
    """Events per agent (None: humans and system) per ``bucket`` from
    ``since``, keyed by the bucket's index.  Buckets of an hour or more add
    up the hourly counts; shorter ones count the events themselves (a short
    span holds few)."""
    rows: Iterable[tuple[int | None, int | None, datetime, int]]
    if bucket >= timedelta(hours=1):
        rows = (
            ActivityHourCount.objects.filter(
                constellation=constellation, hour__gte=since
            )
            .values_list("agent_key", "user_key", "hour")
            .annotate(total=Sum("n"))
            .order_by()
        )
    else:
        rows = (
            (agent_id, user_id, at, 1)
            for agent_id, user_id, at in ActivityEvent.objects.filter(
                constellation=constellation, created_at__gte=since
            ).values_list("agent_id", "actor_user_id", "created_at")
        )
    counts: dict[int | None, dict[int, int]] = defaultdict(dict)
    for agent_key, user_key, at, n in rows:
        row = counts[agent_key if agent_key and not user_key else None]
        index = int((at - since) / bucket)
        row[index] = row.get(index, 0) + n
    return counts


def activity_counts(
    *, constellation_id: int, since: datetime, until: datetime
) -> list[tuple[int | None, int | None, str, int]]:
    """(agent id, user id, event type, count) of the events in
    [``since``, ``until``): whole hours from the hourly counts, the partial
    hours at either end from the events themselves."""
    first_full = hour_of(since) + (
        timedelta(hours=1) if since != hour_of(since) else timedelta(0)
    )
    last_full = hour_of(until)
    if first_full >= last_full:
        return _event_counts(constellation_id, since, until)
    rows = _event_counts(constellation_id, since, first_full) + _event_counts(
        constellation_id, last_full, until
    )
    hourly = (
        ActivityHourCount.objects.filter(
            constellation_id=constellation_id,
            hour__gte=first_full,
            hour__lt=last_full,
        )
        .values_list("agent_key", "user_key", "event_type")
        .annotate(total=Sum("n"))
        .order_by()
    )
    rows += [(a or None, u or None, t, n) for a, u, t, n in hourly]
    return rows


def _event_counts(
    constellation_id: int, since: datetime, until: datetime
) -> list[tuple[int | None, int | None, str, int]]:
    if since >= until:
        return []
    return list(
        ActivityEvent.objects.filter(
            constellation_id=constellation_id,
            created_at__gte=since,
            created_at__lt=until,
        )
        .values_list("agent_id", "actor_user_id", "event_type")
        .annotate(n=Count("id"))
        .order_by()
    )
