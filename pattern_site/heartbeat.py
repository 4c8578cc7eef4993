"""The worker's heartbeat: a timestamp the worker records on beat's
schedule, which ``/api/health`` reads.

A fresh heartbeat shows that beat schedules, the broker delivers and a
worker runs tasks.  It is kept where every process of the site can read it:
in Redis when ``PATTERN_REDIS_URL`` is set (workers may run on other hosts),
else in a file under ``PATTERN_DATA_DIR`` (the embedded broker already
requires web and worker to share that directory).
"""

import json
import os
import time
from pathlib import Path

from django.conf import settings

REDIS_KEY = "pattern:worker-heartbeat"
WRITES_KEY = "pattern:database-writes"
# Seconds between heartbeats, and without one before health degrades.
HEARTBEAT_SECONDS = 15.0
STALE_AFTER_SECONDS = 60.0


def _heartbeat_file() -> Path:
    return Path(settings.DATA_DIR) / "worker-heartbeat"


def _writes_file() -> Path:
    return Path(settings.DATA_DIR) / "database-writes"


def _store(key: str, path: Path, value: str) -> None:
    if settings.REDIS_URL:
        _redis().set(key, value)
        return
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(value)
    # A reader sees the old value or the new one, never half of one.
    os.replace(partial, path)


def _load(key: str, path: Path) -> str | None:
    if settings.REDIS_URL:
        raw = _redis().get(key)
        return raw.decode() if raw is not None else None
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _redis():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2)


def worker_heartbeat_record(*, at: float | None = None) -> None:
    """Record that a worker ran a task at ``at`` (default: now, Unix time)."""
    _store(REDIS_KEY, _heartbeat_file(), repr(time.time() if at is None else at))


def worker_heartbeat_at() -> float | None:
    """Unix time of the last heartbeat; None if none was ever recorded."""
    raw = _load(REDIS_KEY, _heartbeat_file())
    return float(raw) if raw is not None else None


def database_writes_record(*, problem: str, at: float | None = None) -> None:
    """Record what the worker's last write probe found ("" when writes go
    through), for pages to show without probing the database themselves."""
    at = time.time() if at is None else at
    _store(WRITES_KEY, _writes_file(), json.dumps({"at": at, "problem": problem}))


def database_writes_problem() -> str:
    """Why writes failed at the last probe, "" if they went through (or no
    probe within a minute: then the worker's own banner speaks)."""
    raw = _load(WRITES_KEY, _writes_file())
    if raw is None:
        return ""
    record = json.loads(raw)
    if time.time() - record["at"] > STALE_AFTER_SECONDS:
        return ""
    return str(record["problem"])
