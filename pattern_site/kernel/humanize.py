"""Relative times as people say them: "2 hours ago", "yesterday"."""

from datetime import datetime, timedelta

MINUTE = 60
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'} ago"


def ago(delta: timedelta) -> str:
    """How long ago something ``delta`` in the past happened."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < MINUTE:
        return "just now"
    if seconds < HOUR:
        return _plural(seconds // MINUTE, "minute")
    if seconds < DAY:
        return _plural(seconds // HOUR, "hour")
    if seconds < 2 * DAY:
        return "yesterday"
    if seconds < 60 * DAY:
        return _plural(seconds // DAY, "day")
    return _plural(seconds // (30 * DAY), "month")


def ago_at(moment: datetime | None, now: datetime) -> str:
    return "never" if moment is None else ago(now - moment)
