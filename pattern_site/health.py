"""What ``GET /api/health`` reports: each subsystem the site depends on.

Database, channel layer or broker down: ``unavailable`` (HTTP 503).  No
worker heartbeat for a minute: ``degraded`` (HTTP 200: pages and tools
answer, background work waits).  No embedding model: the embeddings entry
says so and search uses keywords; that is a supported setup, not a fault.
"""

import time
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from memory.search.embedder import embedding_status
from pattern_site.celery import app as celery_app
from pattern_site.heartbeat import STALE_AFTER_SECONDS, worker_heartbeat_at


def _database() -> dict[str, Any]:
    info: dict[str, Any] = {"vendor": connection.vendor}
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
        if connection.vendor == "sqlite":
            cursor.execute("SELECT sqlite_version(), vec_version()")
            info["sqlite_version"], info["sqlite_vec_version"] = cursor.fetchone()
            cursor.execute("PRAGMA journal_mode")
            info["journal_mode"] = cursor.fetchone()[0]
        elif connection.vendor == "postgresql":
            cursor.execute(
                "SELECT current_setting('server_version'), (SELECT extversion"
                " FROM pg_extension WHERE extname = 'vector')"
            )
            info["server_version"], info["pgvector_version"] = cursor.fetchone()
    return {"ok": True, **info}


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


def _worker() -> dict[str, Any]:
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


def _embeddings() -> dict[str, Any]:
    status = embedding_status()
    return {
        "ok": status.available,
        "model": status.model,
        "dim": status.dim,
        "detail": status.reason,
    }


def health_report() -> tuple[bool, dict[str, Any]]:
    """(healthy, report): healthy is False only when the site cannot answer."""
    report: dict[str, Any] = {"request_id": uuid.uuid4().hex}
    healthy = True
    for name, check in (
        ("database", _database),
        ("channel_layer", _channel_layer),
        ("broker", _broker),
    ):
        try:
            report[name] = check()
        except Exception as exc:
            healthy = False
            report[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    try:
        report["worker"] = _worker()
    except Exception as exc:
        report["worker"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    report["embeddings"] = _embeddings()
    if not healthy:
        report["status"] = "unavailable"
    else:
        report["status"] = "ok" if report["worker"]["ok"] else "degraded"
    report["debug"] = settings.DEBUG
    return healthy, report
