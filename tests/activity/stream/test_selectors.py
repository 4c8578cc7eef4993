from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from activity.stream.models import ActivityEvent, EventType
from activity.stream.selectors import activity_counts
from coordination.actors import Actor


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
