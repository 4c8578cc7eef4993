from datetime import timedelta
from typing import Any

import pytest

from activity.stream.models import EventType
from activity.stream.timeline import SPANS, span_pick, timeline_build
from pattern_site.kernel.actors import Actor


@pytest.mark.parametrize(
    ("age", "key"),
    [
        (None, "24h"),
        (timedelta(minutes=20), "6h"),
        (timedelta(hours=5), "6h"),
        (timedelta(hours=7), "24h"),
        (timedelta(hours=30), "3d"),
    ],
)
def test_the_default_span_is_the_shortest_that_shows_the_last_three_days(
    age: timedelta | None, key: str, now: Any
) -> None:
    earliest = None if age is None else now - age
    assert span_pick(key=None, earliest=earliest, now=now).key == key


def test_a_span_asked_for_wins_and_an_unknown_one_falls_back(now: Any) -> None:
    assert span_pick(key="7d", earliest=now, now=now).key == "7d"
    assert span_pick(key="1y", earliest=now, now=now).key == "6h"


def test_every_span_has_about_two_dozen_columns() -> None:
    assert all(20 <= span.columns <= 30 for span in SPANS)


def test_events_land_in_the_cell_of_their_time_and_agent(
    constellation: Any, agent: Any, flux: Any, record: Any, now: Any
) -> None:
    for minutes in (2, 2, 50):
        record(
            actor=Actor.for_agent(flux),
            event_type=EventType.TOOL_EXECUTED,
            details={"tool": "recall"},
            ago=timedelta(minutes=minutes),
        )
    timeline = timeline_build(
        constellation=constellation, agents=[agent, flux], now=now
    )
    assert timeline.span.key == "6h"
    rows = {row.name: [cell.count for cell in row.cells] for row in timeline.rows}
    assert sum(rows[agent.name]) == 0
    assert sum(rows[flux.name]) == 3
    # The two calls made at once share a cell (one of the newest two, as
    # ``now`` may have just crossed a 15-minute boundary) at the top level.
    assert sum(rows[flux.name][-2:]) == 2 and max(rows[flux.name]) == 2
    assert max(cell.level for cell in timeline.rows[1].cells) == 4
    assert timeline.total == 3
    by_day = timeline_build(
        constellation=constellation, agents=[agent, flux], now=now, span_key="7d"
    )
    assert by_day.total == 3 and by_day.columns == 28
