"""What every dashboard page shows in its frame (templates/base.html): the
pending approvals badge, the banner when no worker has been seen and the
one when the worker's last probe found database writes failing.

The banner reads the ``worker`` section of the health report (``ok``,
``last_heartbeat_seconds_ago``, ``detail``), produced by the callable named
in ``settings.DASHBOARD_WORKER_STATUS``; empty names none, and no banner is
shown.  A report that cannot be read shows no banner either: the frame of
every page must not fail because of it.
"""

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils.module_loading import import_string

from memory.blocks.selectors import approval_pending_count_for_actor
from pattern_site.heartbeat import database_writes_problem
from pattern_site.kernel.web import page_actor

# A worker not seen for this long gets the banner (the health report's own
# threshold decides "ok"; this one only words the banner).
WORKER_BANNER_AFTER_SECONDS = 60.0


def worker_banner(worker: dict[str, Any] | None) -> str:
    """The banner for the health report's ``worker`` section; "" if none."""
    if not worker or worker.get("ok", True):
        return ""
    age = worker.get("last_heartbeat_seconds_ago")
    if age is None:
        return (
            "No background worker has been seen yet: new memories are not "
            "indexed and scheduled work does not run."
        )
    if age < WORKER_BANNER_AFTER_SECONDS:
        return ""
    minutes = int(age // 60)
    since = f"{minutes} minute{'s' if minutes != 1 else ''}"
    return (
        f"No background worker seen for {since}: new memories are not indexed "
        "and scheduled work does not run until one is back."
    )


def worker_status() -> dict[str, Any] | None:
    """The health report's ``worker`` section, or None without a source."""
    path = settings.DASHBOARD_WORKER_STATUS
    if not path:
        return None
    try:
        return import_string(path)()
    except Exception as exc:  # the frame of every page must still render
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}


def writes_banner(problem: str) -> str:
    """The banner when the worker's last probe found writes failing."""
    if not problem:
        return ""
    return (
        "The database is not taking changes right now (it is busy or out of "
        "space): edits may be refused until it recovers. Reading works."
    )


def dashboard_frame(request: HttpRequest) -> dict[str, Any]:
    """Context processor for templates/base.html."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    return {
        "pending_approvals": approval_pending_count_for_actor(
            actor=page_actor(request)
        ),
        "worker_banner": worker_banner(worker_status()),
        "writes_banner": writes_banner(database_writes_problem()),
    }
