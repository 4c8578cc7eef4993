"""The search tool's ``activity`` domain: the constellation's activity events.

Who may read them is ``activity.stream.permissions``' to say; the events
come from the stream's own word index (``activity_search_any``) and are
ranked by the words they hold (``memory.search.engine.words_search``).
"""

from typing import Any

from activity.stream.models import ActivityEvent
from activity.stream.permissions import activity_constellation_for_read
from activity.stream.selectors import activity_search_any
from memory.longterm.domains import DomainQuery, word_outcome
from memory.search.engine import Hit, SearchOutcome, words_search

ACTIVITY_FILTERS = frozenset({"agent_id", "since", "until"})


def activity_domain_search(query: DomainQuery) -> SearchOutcome:
    constellation = activity_constellation_for_read(
        actor=query.actor, constellation_id=query.constellation.pk
    )
    if query.filters.beyond(ACTIVITY_FILTERS):
        return word_outcome([], mode=query.mode, what="activity events")
    events = activity_search_any(
        actor=query.actor,
        constellation=constellation,
        query=query.text,
        # Candidates beyond the limit: ranking by words reorders them.
        limit=max(query.limit * 4, query.fusion.depth),
        agent_id=query.filters.agent_id,
        since=query.filters.since,
        until=query.filters.until,
    )
    hits = words_search(
        ((event, event.text) for event in events),
        text=query.text,
        limit=query.limit,
        fusion=query.fusion,
        # No re-rank: an event's importance is a level, not the weight the
        # re-rank multiplies by.
    )
    return word_outcome(hits, mode=query.mode, what="activity events")


def activity_hit_payload(hit: Hit) -> dict[str, Any]:
    event: ActivityEvent = hit.row
    agent_name = event.agent.name if event.agent is not None else None
    return {
        "id": event.pk,
        "agent_id": event.agent_id,
        "agent_name": agent_name,
        "content": event.text,
        "created_at": event.created_at,
        "event_type": event.event_type,
        "importance": event.importance,
        "provenance": {
            "store": "activity",
            "event_id": event.pk,
            "event_type": event.event_type,
            "agent": agent_name,
        },
    }
