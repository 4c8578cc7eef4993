"""The timeline picture: events per agent per hour as an SVG grid."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from activity.stream.selectors import activity_timeline
from pattern_site.kernel.agents.models import Agent, Constellation

CELL = 9
GAP = 2
LABEL_WIDTH = 110
ROW = CELL + GAP


@dataclass(frozen=True)
class Cell:
    x: int
    y: int
    count: int
    opacity: float
    title: str


@dataclass(frozen=True)
class Timeline:
    width: int
    height: int
    rows: list[tuple[str, int]]
    cells: list[Cell]
    days: list[tuple[str, int]]
    total: int


def timeline_build(
    *, constellation: Constellation, agents: list[Agent], now: datetime, hours: int
) -> Timeline:
    counts = activity_timeline(constellation=constellation, now=now, hours=hours)
    start = (now - timedelta(hours=hours - 1)).replace(
        minute=0, second=0, microsecond=0
    )
    slots = [start + timedelta(hours=i) for i in range(hours)]
    labelled = [(a.name, a.pk) for a in agents] + [("people & system", None)]
    peak = max((n for row in counts.values() for n in row.values()), default=0)
    cells = []
    rows = []
    for r, (name, agent_id) in enumerate(labelled):
        y = 18 + r * ROW
        rows.append((name, y + CELL - 1))
        row = counts.get(agent_id, {})
        for i, slot in enumerate(slots):
            n = row.get(slot, 0)
            if not n:
                continue
            cells.append(
                Cell(
                    x=LABEL_WIDTH + i * ROW,
                    y=y,
                    count=n,
                    opacity=round(0.25 + 0.75 * n / peak, 2),
                    title=f"{name}, {slot:%a %H}:00 UTC: {n} events",
                )
            )
    days = [
        (f"{slot:%a %d}", LABEL_WIDTH + i * ROW)
        for i, slot in enumerate(slots)
        if slot.hour == 0
    ]
    return Timeline(
        width=LABEL_WIDTH + hours * ROW,
        height=18 + len(labelled) * ROW,
        rows=rows,
        cells=cells,
        days=days,
        total=sum(c.count for c in cells),
    )
