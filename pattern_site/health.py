"""What ``GET /api/health`` reports: each subsystem the site depends on."""

import time
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from activity.summaries.summarizers import summarizer_status
from memory.embeddings import embedding_status
from pattern_site.celery import app as celery_app


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


def _embeddings() -> dict[str, Any]:
    status = embedding_status()
    return {
        "ok": status.available,
        "model": status.model,
        "dim": status.dim,
        "detail": status.reason,
    }


def health_report() -> tuple[bool, dict[str, Any]]:
    """(healthy, report).  Embeddings being absent degrades, it is not down."""
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
    report["embeddings"] = _embeddings()
    report["summarizer"] = summarizer_status()
    report["status"] = "ok" if healthy else "unavailable"
    report["debug"] = settings.DEBUG
    return healthy, report
