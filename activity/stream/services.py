"""Writes of the activity stream: the one write path every app calls.

``activity_record`` is called by the services of every app, inside their
transaction.  It builds the event in memory and hands it to the recorder
on commit, so a rolled-back transaction records nothing and the caller
never waits on the insert (see ``activity.stream.recorder``).
``activity_events_store`` is what the recorder calls: a bulk insert of
events and their keyword terms, then a broadcast to the constellation's
dashboard group.  ``activity_recording(enabled=False)`` turns recording
off for a block of code in this thread (benchmarks, bulk imports).
"""

import logging
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from activity.stream.describe import SYSTEM, event_line
from activity.stream.models import (
    ActivityEvent,
    ActivityHourCount,
    ActivityTerm,
    EventType,
    Importance,
)
from activity.stream.recorder import recorder
from activity.tasks import activity_events_store_task
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.db.compiled import model_new
from pattern_site.kernel.db.rows import instances_insert, rows_add, rows_insert
from pattern_site.kernel.errors import InvalidInput
from pattern_site.kernel.realtime import group_for_constellation, publish_on_commit

logger = logging.getLogger(__name__)

_enabled: ContextVar[bool] = ContextVar("activity_recording", default=True)
TERM_PATTERN = re.compile(r"[^\W_]{2,40}")
MAX_TERMS = 64


@contextmanager
def activity_recording(*, enabled: bool) -> Iterator[None]:
    token = _enabled.set(enabled)
    try:
        yield
    finally:
        _enabled.reset(token)


EVENT_TYPES = frozenset(EventType.values)
IMPORTANCES = frozenset(Importance.values)
# Words every event line shares carry no meaning for a search.
STOP_WORDS = frozenset(
    ["a", "an", "and", "the", "to", "of", "in", "on", "at", "for", "from", "was"]
)


class PendingEvent(NamedTuple):
    """What ``activity_record`` keeps until commit: plain values only, so
    the caller pays for no model instance and no rendering (and a tuple is
    the cheapest thing to build and to send to the worker)."""

    constellation_id: int
    agent_id: int | None
    actor_user_id: int | None
    who: str
    subject: str
    event_type: str
    details: dict[str, Any]
    importance: str
    object_kind: str
    object_id: int | None
    at: datetime


def _who(actor: Actor) -> str:
    return SYSTEM if actor.kind == "system" else actor.display_name


def activity_record(
    *,
    actor: Actor,
    event_type: str,
    agent: Agent | None = None,
    constellation_id: int | None = None,
    details: dict[str, Any] | None = None,
    importance: str = Importance.LOW,
    at: datetime | None = None,
    about: tuple[str, int] | None = None,
) -> None:
    """Record that ``actor`` did ``event_type`` once the transaction commits.

    ``agent`` is the agent concerned when a human or the system acted (an
    agent actor is its own agent); ``constellation_id`` is needed only when
    no agent is concerned.  ``about`` names the object the event is about
    (kind, id): only those who may read that object read the event (see
    ``activity.stream.permissions``).
    """
    if not settings.ACTIVITY_RECORDING or not _enabled.get():
        return
    if event_type not in EVENT_TYPES:
        raise InvalidInput(
            f"unknown activity event type {event_type!r}; "
            f"allowed: {', '.join(EventType.values)}"
        )
    if importance not in IMPORTANCES:
        raise InvalidInput(
            f"unknown importance {importance!r}; "
            f"allowed: {', '.join(Importance.values)}"
        )
    if actor.kind == "agent":
        agent = actor.agent
    if agent is not None:
        constellation_id = agent.constellation_id
    if constellation_id is None:
        raise InvalidInput("an activity event needs an agent or a constellation")
    who = _who(actor)
    if actor.kind == "system" and agent is not None:
        # A system event has no agent; the one it concerns is named in it.
        details = {**(details or {}), "agent_id": agent.pk}
    event = PendingEvent(
        constellation_id=constellation_id,
        agent_id=agent.pk if agent is not None and actor.kind != "system" else None,
        actor_user_id=actor.user.pk if actor.user is not None else None,
        who=who,
        subject=agent.name if agent is not None else who,
        event_type=event_type,
        details=details or {},
        importance=importance,
        object_kind=about[0] if about else "",
        object_id=about[1] if about else None,
        at=at or timezone.now(),
    )
    add = recorder().add

    def hand_over() -> None:  # a def: Django's robust on_commit logs __qualname__
        add(event)

    transaction.on_commit(hand_over, robust=True)


def event_terms(text: str) -> list[str]:
    """The distinct lower-case words of ``text`` the keyword index keeps."""
    seen: dict[str, None] = {}
    for word in TERM_PATTERN.findall(text.lower()):
        if word not in STOP_WORDS:
            seen.setdefault(word, None)
            if len(seen) >= MAX_TERMS:
                break
    return list(seen)


TERM_COLUMNS = ("event", "constellation_id_value", "term")
COUNT_KEY = ("constellation", "hour", "agent_key", "user_key", "event_type")


def hour_of(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _hour_counts(events: list[ActivityEvent]) -> list[tuple[Any, ...]]:
    counts: Counter[tuple[Any, ...]] = Counter(
        (
            e.constellation_id,
            hour_of(e.created_at),
            e.agent_id or 0,
            e.actor_user_id or 0,
            e.event_type,
        )
        for e in events
    )
    field = ActivityHourCount._meta.get_field("hour")
    return [
        (c, field.get_db_prep_value(h, connection), a, u, t, n)
        for (c, h, a, u, t), n in counts.items()
    ]


def activity_events_store(pending: list[PendingEvent]) -> list[ActivityEvent]:
    """Insert ``pending`` events with their keyword terms; then broadcast
    them.  Terms go in through one prepared statement run for every row:
    model instances for them would cost more than the inserts.  Everything
    but the statements is worked out before the transaction begins, and
    the events go in through a statement built once: the transaction holds
    the database's one write lock, which the site's requests wait for."""
    events = [
        model_new(
            ActivityEvent,
            {
                "id": None,
                "constellation_id": p.constellation_id,
                "agent_id": p.agent_id,
                "actor_user_id": p.actor_user_id,
                "event_type": p.event_type,
                "details": p.details,
                "importance": p.importance,
                "object_kind": p.object_kind,
                "object_id": p.object_id,
                "text": event_line(
                    who=p.who,
                    subject=p.subject,
                    event_type=p.event_type,
                    details=p.details,
                )[:500],
                "created_at": p.at,
            },
        )
        for p in pending
    ]
    terms = [event_terms(event.text) for event in events]
    counts = _hour_counts(events)
    with transaction.atomic():
        instances_insert(events)
        rows = [
            (event.pk, event.constellation_id, term)
            for event, words in zip(events, terms, strict=True)
            for term in words
        ]
        rows_insert(ActivityTerm, TERM_COLUMNS, rows)
        rows_add(ActivityHourCount, key=COUNT_KEY, field="n", rows=counts)
    _broadcast(events)
    return events


def event_payload(event: ActivityEvent) -> dict[str, Any]:
    return {
        "id": event.pk,
        "event_type": event.event_type,
        "agent_id": event.agent_id,
        "importance": event.importance,
        "text": event.text,
        "created_at": event.created_at.isoformat(),
    }


def _broadcast(events: list[ActivityEvent]) -> None:
    """One message per constellation for the whole batch; a dashboard that
    misses it shows the events on its next load."""
    by_constellation: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        by_constellation.setdefault(event.constellation_id, []).append(
            event_payload(event)
        )
    for constellation_id, payloads in by_constellation.items():
        publish_on_commit(
            group_for_constellation(constellation_id),
            {
                "type": "constellation.event",
                "event": {"type": "activity.events", "events": payloads},
            },
        )


def activity_events_enqueue(pending: list[PendingEvent]) -> None:
    """Hand a batch to the worker, which stores it (one task per batch)."""
    activity_events_store_task.delay([[*p[:-1], p.at.isoformat()] for p in pending])


def activity_events_store_rows(*, rows: list[list[Any]]) -> int:
    """Store a batch as the worker received it (``PendingEvent`` fields in
    order, the time in ISO 8601); returns how many."""
    pending = [
        PendingEvent(*row[:-1], at=datetime.fromisoformat(row[-1])) for row in rows
    ]
    return len(activity_events_store(pending))


def activity_flush() -> int:
    """Store the events this process still holds; returns how many."""
    return recorder().flush()


@transaction.atomic
def notable_flag(
    *,
    actor: Actor,
    constellation: Constellation,
    description: str,
    importance: str,
    agents_involved: list[Agent],
) -> None:
    """Flag a notable event (agents by tool, humans from the dashboard)."""
    description = " ".join(description.split())
    if not description:
        raise InvalidInput("a notable event needs a description")
    if len(description) > 400:
        raise InvalidInput(
            f"the description is {len(description)} characters; at most 400"
        )
    if any(a.constellation_id != constellation.pk for a in agents_involved):
        raise InvalidInput("agents involved must belong to the same constellation")
    activity_record(
        actor=actor,
        event_type=EventType.NOTABLE,
        agent=actor.agent,
        constellation_id=constellation.pk,
        importance=importance,
        details={
            "description": description,
            "agents_involved": [a.pk for a in agents_involved],
            "agents_involved_names": [a.name for a in agents_involved],
        },
    )
