"""The worker's heartbeat: a timestamp the worker records on beat's
schedule, which ``/api/health`` reads.

A fresh heartbeat shows that beat schedules, the broker delivers and a
worker runs tasks.  It is kept where every process of the site can read it:
in Redis when ``PATTERN_REDIS_URL`` is set (workers may run on other hosts),
else in a file under ``PATTERN_DATA_DIR`` (the embedded broker already
requires web and worker to share that directory).
"""

import os
import time
from pathlib import Path

from django.conf import settings

REDIS_KEY = "pattern:worker-heartbeat"
# Seconds between heartbeats, and without one before health degrades.
HEARTBEAT_SECONDS = 15.0
STALE_AFTER_SECONDS = 60.0


def _heartbeat_file() -> Path:
    return Path(settings.DATA_DIR) / "worker-heartbeat"


def _redis():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2)


def worker_heartbeat_record(*, at: float | None = None) -> None:
    """Record that a worker ran a task at ``at`` (default: now, Unix time)."""
    stamp = repr(time.time() if at is None else at)
    if settings.REDIS_URL:
        _redis().set(REDIS_KEY, stamp)
        return
    path = _heartbeat_file()
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(stamp)
    # A reader sees the old stamp or the new one, never half of one.
    os.replace(partial, path)


def worker_heartbeat_at() -> float | None:
    """Unix time of the last heartbeat; None if none was ever recorded."""
    if settings.REDIS_URL:
        raw = _redis().get(REDIS_KEY)
        return float(raw) if raw is not None else None
    try:
        return float(_heartbeat_file().read_text())
    except FileNotFoundError:
        return None
