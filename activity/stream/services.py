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
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from activity.stream.describe import event_line
from activity.stream.models import ActivityEvent, ActivityTerm, EventType, Importance
from activity.stream.recorder import recorder
from coordination.actors import Actor
from coordination.errors import InvalidInput
from coordination.models import Agent, Constellation

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


def _who(actor: Actor, agent: Agent | None) -> str:
    if actor.kind == "human":
        return actor.display_name
    if agent is not None:
        return agent.name
    return "System"


def activity_record(
    *,
    actor: Actor,
    event_type: str,
    agent: Agent | None = None,
    constellation_id: int | None = None,
    details: dict[str, Any] | None = None,
    importance: str = Importance.LOW,
    at: datetime | None = None,
) -> None:
    """Record that ``actor`` did ``event_type`` once the transaction commits.

    ``agent`` is the agent concerned when a human or the system acted (an
    agent actor is its own agent); ``constellation_id`` is needed only when
    no agent is concerned.
    """
    if not settings.ACTIVITY_RECORDING or not _enabled.get():
        return
    if event_type not in EventType.values:
        raise InvalidInput(
            f"unknown activity event type {event_type!r}; "
            f"allowed: {', '.join(EventType.values)}"
        )
    if importance not in Importance.values:
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
    details = details or {}
    event = ActivityEvent(
        constellation_id=constellation_id,
        agent=agent,
        actor_user=actor.user if actor.kind == "human" else None,
        event_type=event_type,
        details=details,
        importance=importance,
        text=event_line(who=_who(actor, agent), event_type=event_type, details=details)[
            :500
        ],
        created_at=at or timezone.now(),
    )
    add = recorder().add

    def hand_over() -> None:  # a def: Django's robust on_commit logs __qualname__
        add(event)

    transaction.on_commit(hand_over, robust=True)


def event_terms(text: str) -> list[str]:
    """The distinct lower-case words of ``text`` the keyword index keeps."""
    seen: dict[str, None] = {}
    for word in TERM_PATTERN.findall(text.lower()):
        seen.setdefault(word, None)
        if len(seen) >= MAX_TERMS:
            break
    return list(seen)


def activity_events_store(events: list[ActivityEvent]) -> None:
    """Insert ``events`` with their keyword terms; then broadcast them."""
    with transaction.atomic():
        ActivityEvent.objects.bulk_create(events)
        ActivityTerm.objects.bulk_create(
            [
                ActivityTerm(
                    event_id=event.pk,
                    constellation_id_value=event.constellation_id,
                    term=term,
                )
                for event in events
                for term in event_terms(event.text)
            ]
        )
    _broadcast(events)


def event_payload(event: ActivityEvent) -> dict[str, Any]:
    return {
        "type": "activity.event",
        "id": event.pk,
        "event_type": event.event_type,
        "agent_id": event.agent_id,
        "importance": event.importance,
        "text": event.text,
        "created_at": event.created_at.isoformat(),
    }


def _broadcast(events: list[ActivityEvent]) -> None:
    from coordination.consumers import constellation_group

    layer = get_channel_layer()
    if layer is None:
        return
    try:
        for event in events:
            async_to_sync(layer.group_send)(
                constellation_group(event.constellation_id),
                {"type": "constellation.event", "event": event_payload(event)},
            )
    except Exception:
        # The events are stored; a dashboard that missed the push shows
        # them on its next load.
        logger.warning("broadcasting activity events failed", exc_info=True)


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
