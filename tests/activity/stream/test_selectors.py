from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from activity.stream.models import ActivityEvent, EventType
from activity.stream.selectors import activity_counts
from pattern_site.kernel.actors import Actor


@pytest.mark.parametrize(
    ("since_hours", "until_hours"),
    [(30.5, 0), (30.5, 2.25), (5, 4.4), (0.7, 0), (48, 38)],
)
def test_counts_from_hourly_rollups_match_the_events(
    agent: Any,
    flux: Any,
    partner: Any,
    record: Any,
    now: datetime,
    since_hours: float,
    until_hours: float,
) -> None:
    for minutes in range(0, 40 * 60, 37):
        actor = Actor.for_agent(flux if minutes % 2 else agent)
        if minutes % 5 == 0:
            actor = Actor.for_user(partner)
        record(
            actor=actor,
            agent=flux,
            event_type=EventType.MESSAGE_SENT if minutes % 3 else EventType.NOTABLE,
            ago=timedelta(minutes=minutes),
        )
    since = now - timedelta(hours=since_hours)
    until = now - timedelta(hours=until_hours)
    expected = Counter(
        (e.agent_id, e.actor_user_id, e.event_type)
        for e in ActivityEvent.objects.filter(
            created_at__gte=since, created_at__lt=until
        )
    )
    got: Counter[tuple[Any, ...]] = Counter()
    for agent_id, user_id, kind, n in activity_counts(
        constellation_id=agent.constellation_id, since=since, until=until
    ):
        got[(agent_id, user_id, kind)] += n
    assert got == expected
    assert sum(expected.values()) > 0


def test_search_any_finds_events_holding_some_words_within_filters(
    agent: Any, flux: Any, record: Any, constellation: Any, now: datetime
) -> None:
    from activity.stream.selectors import activity_search_any

    def sent(who: Any, summary: str, hours: int) -> None:
        record(
            actor=Actor.for_agent(who),
            event_type=EventType.MESSAGE_SENT,
            details={"target": "Partner", "summary": summary},
            ago=timedelta(hours=hours),
        )

    sent(agent, "budget review moved", 30)
    sent(flux, "review the garden plan", 20)
    sent(flux, "budget approved", 10)
    sent(agent, "lunch at noon", 5)

    def texts(**kwargs: Any) -> list[str]:
        found = activity_search_any(
            actor=Actor.system(), constellation=constellation, **kwargs
        )
        return [e.text.split(": ", 1)[1] for e in found]

    assert texts(query="budget review") == [
        "budget approved",
        "review the garden plan",
        "budget review moved",
    ]
    assert texts(query="budget review", agent_id=flux.pk) == [
        "budget approved",
        "review the garden plan",
    ]
    assert texts(
        query="budget review",
        since=now - timedelta(hours=25),
        until=now - timedelta(hours=15),
    ) == ["review the garden plan"]
    # Each word brings its newest events; those holding every word, however
    # old, come too.
    assert texts(query="budget review", limit=1) == [
        "budget approved",
        "review the garden plan",
        "budget review moved",
    ]
    assert texts(query="the !") == []
