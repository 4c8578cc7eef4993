"""What ``GET /api/health`` reports: each subsystem the site depends on.

``status`` is ``ok``; ``unavailable`` (HTTP 503) when the database fails,
since nothing works without it; or ``degraded`` (HTTP 200) when writes to
the database wait or fail, when the channel layer or the broker fails
(Redis, with ``PATTERN_REDIS_URL``), or no worker heartbeat was seen for a
minute: reads and writes go on and are committed,
and ``degraded`` says, for each failing part, what waits or is lost until it
returns.  No embedding model: the embeddings entry says so and search uses
keywords; that is a supported setup, not a fault.
"""

import time
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from activity.summaries.summarizers import summarizer_status
from memory.search.embedder import embedding_status
from pattern_site.celery import app as celery_app
from pattern_site.heartbeat import STALE_AFTER_SECONDS, worker_heartbeat_at
from pattern_site.kernel.db.probe import database_probe, database_write_probe

# How long the write probe waits for the write lock: a writer that waits
# longer than this already makes every request that writes feel stuck.
WRITE_PROBE_WAIT_SECONDS = 1.0


async def _roundtrip(layer: Any) -> None:
    channel = await layer.new_channel("health.")
    await layer.send(channel, {"type": "health.ping"})
    await layer.receive(channel)


def _channel_layer() -> dict[str, Any]:
    layer = get_channel_layer()
    backend = type(layer).__name__
    started = time.perf_counter()
    async_to_sync(_roundtrip)(layer)
    return {
        "ok": True,
        "backend": backend,
        "roundtrip_ms": round((time.perf_counter() - started) * 1000, 2),
    }


def _broker() -> dict[str, Any]:
    url = celery_app.conf.broker_url or ""
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return {"ok": True, "transport": url.split("://", 1)[0] or "unknown"}


def worker_status() -> dict[str, Any]:
    """The worker section of the report: when a worker last ran a task."""
    if celery_app.conf.task_always_eager:
        return {"ok": True, "detail": "tasks run inline (eager mode)"}
    at = worker_heartbeat_at()
    if at is None:
        return {
            "ok": False,
            "last_heartbeat_seconds_ago": None,
            "detail": "no worker heartbeat recorded yet",
        }
    age = round(max(0.0, time.time() - at), 1)
    ok = age < STALE_AFTER_SECONDS
    return {
        "ok": ok,
        "last_heartbeat_seconds_ago": age,
        "detail": "" if ok else f"no worker heartbeat for {age:.0f} s",
    }


def _database_writes() -> dict[str, Any]:
    return database_write_probe(wait_seconds=WRITE_PROBE_WAIT_SECONDS)


def database_writes_check() -> str:
    """ "" when a write would go through now, else why not (what the
    worker's heartbeat records for the dashboard's banner)."""
    try:
        _database_writes()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _embeddings() -> dict[str, Any]:
    status = embedding_status()
    return {
        "ok": status.available,
        "model": status.model,
        "dim": status.dim,
        "detail": status.reason,
    }


# What a failing part stops while writes go on (see module doc).
DEGRADED = {
    "channel_layer": (
        "live edits and rights revocations reach only the websockets of the "
        "process that made them; when the channel layer returns, every other "
        "process asks its sockets to rejoin, and they get what they missed"
    ),
    "broker": (
        "background tasks are not queued: new rows wait for their embedding "
        "(pending) until the backfill picks them up once the broker is back "
        "(as soon as a worker is idle, and every "
        f"{settings.EMBEDDING_BACKFILL_MINUTES} minutes); archival access "
        "counts and agents' last-active times of the outage are not recorded"
    ),
    "database_writes": (
        "writes wait for the database longer than "
        f"{WRITE_PROBE_WAIT_SECONDS:.0f} s or fail (a long transaction holds "
        "the write lock, or the disk is full or read-only): changes are "
        "refused or slow until it is back; reads go on"
    ),
    "worker": (
        "no worker has run a task for a minute (stopped, or behind a queue "
        "it has not emptied: its heartbeat waits in that queue too): "
        "embeddings, activity and summaries wait until one catches up"
    ),
}


def health_report() -> tuple[bool, dict[str, Any]]:
    """(serving, report): serving unless the database fails; the parts in
    ``DEGRADED`` and a silent worker degrade."""
    report: dict[str, Any] = {"request_id": uuid.uuid4().hex}
    failed = []
    for name, check in (
        ("database", database_probe),
        ("database_writes", _database_writes),
        ("channel_layer", _channel_layer),
        ("broker", _broker),
    ):
        try:
            report[name] = check()
        except Exception as exc:
            failed.append(name)
            report[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    try:
        report["worker"] = worker_status()
    except Exception as exc:
        report["worker"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    report["embeddings"] = _embeddings()
    report["summarizer"] = summarizer_status()
    serving = "database" not in failed
    if not report["worker"]["ok"]:
        failed.append("worker")
    report["degraded"] = {name: DEGRADED[name] for name in failed if name in DEGRADED}
    if not serving:
        report["status"] = "unavailable"
    else:
        report["status"] = "degraded" if failed else "ok"
    report["debug"] = settings.DEBUG
    return serving, report
