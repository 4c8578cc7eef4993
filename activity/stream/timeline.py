"""The timeline picture: events per agent over a span a person picks, as a
grid of cells (HTML, so it stays readable at any width)."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from activity.stream.selectors import activity_buckets, activity_earliest
from pattern_site.kernel.agents.models import Agent, Constellation


@dataclass(frozen=True)
class Span:
    key: str
    label: str
    length: timedelta
    bucket: timedelta
    tick: str  # strftime of a column's label

    @property
    def columns(self) -> int:
        return int(self.length / self.bucket)


# About two dozen columns whatever the span: wide enough cells to point at on
# a phone, fine enough to tell a morning from an evening.
SPANS = (
    Span("6h", "6 hours", timedelta(hours=6), timedelta(minutes=15), "%H:%M"),
    Span("24h", "24 hours", timedelta(hours=24), timedelta(hours=1), "%H:00"),
    Span("3d", "3 days", timedelta(days=3), timedelta(hours=3), "%a %H:00"),
    Span("7d", "7 days", timedelta(days=7), timedelta(hours=6), "%a %d"),
)
DEFAULT_REACH = timedelta(days=3)
TICKS = 4
LEVELS = 4
PEOPLE = "people & system"


@dataclass(frozen=True)
class Cell:
    count: int
    level: int  # 0 (none) .. LEVELS
    title: str


@dataclass(frozen=True)
class Row:
    name: str
    cells: list[Cell]


@dataclass(frozen=True)
class Timeline:
    span: Span
    spans: tuple[Span, ...]
    columns: int
    ticks: list[tuple[int, str]]  # (first column, 1-based; label)
    tick_span: int  # columns one label stands over
    rows: list[Row]
    total: int
    start: datetime


def span_pick(*, key: str | None, earliest: datetime | None, now: datetime) -> Span:
    """The span asked for; else the shortest one that shows every event of
    the last three days (a quiet constellation's first hour fills a 6-hour
    grid instead of one cell of a 72-hour one)."""
    for span in SPANS:
        if span.key == key:
            return span
    if earliest is None:
        return SPANS[1]
    for span in SPANS:
        if now - earliest <= span.length - span.bucket:
            return span
    return next(s for s in SPANS if s.length >= DEFAULT_REACH)


def _floor(moment: datetime, bucket: timedelta) -> datetime:
    seconds = int(bucket.total_seconds())
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)


def timeline_build(
    *,
    constellation: Constellation,
    agents: list[Agent],
    now: datetime,
    span_key: str | None = None,
) -> Timeline:
    earliest = activity_earliest(constellation=constellation, since=now - DEFAULT_REACH)
    span = span_pick(key=span_key, earliest=earliest, now=now)
    start = _floor(now, span.bucket) - span.bucket * (span.columns - 1)
    counts = activity_buckets(
        constellation=constellation, since=start, bucket=span.bucket
    )
    peak = max((n for row in counts.values() for n in row.values()), default=0)
    labelled = [(a.name, a.pk) for a in agents] + [(PEOPLE, None)]
    rows = []
    for name, agent_id in labelled:
        row = counts.get(agent_id, {})
        cells = []
        for i in range(span.columns):
            n = row.get(i, 0)
            at = start + span.bucket * i
            level = 0 if not n else max(1, round(LEVELS * n / peak))
            cells.append(
                Cell(
                    count=n,
                    level=level,
                    title=f"{name}, {at:%a %H:%M} to {at + span.bucket:%H:%M} UTC: "
                    f"{n} event{'' if n == 1 else 's'}",
                )
            )
        rows.append(Row(name=name, cells=cells))
    every = span.columns // TICKS
    ticks = [
        (i + 1, f"{start + span.bucket * i:{span.tick}}")
        for i in range(0, span.columns, every)
    ]
    return Timeline(
        span=span,
        spans=SPANS,
        columns=span.columns,
        ticks=ticks,
        tick_span=every,
        rows=rows,
        total=sum(c.count for r in rows for c in r.cells),
        start=start,
    )
