"""Deadlines of group runs, kept by Celery without costing the router.

Routing a message may set deadlines: a vote's close, a delivery's timeout.
Publishing a Celery task per deadline is a broker write (several
milliseconds on the embedded SQLite broker), more than the routing
decision itself.  Instead a deadline books a ``run_deadlines_sweep`` at
the next whole ``RESOLUTION`` after it: the sweep closes everything then
overdue, so every deadline within one such slot shares a single task, and
a process publishes each slot once.  The booking is handed to a
``Batcher`` when the route's transaction commits and published from its
timer thread, off the caller's path.  A deadline whose booking is lost
with its process is still kept by the beat's periodic sweep.
"""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta

from django.db import transaction

from coordination.groups import tasks
from pattern_site.kernel.batching import Batcher

# Deadlines are kept at most this late (seconds), plus the worker's delay.
RESOLUTION = 1.0

_published: set[datetime] = set()
_published_lock = threading.Lock()


def deadline_schedule(*, at: datetime) -> None:
    """Have a sweep run soon after ``at`` (once this transaction commits)."""
    slot = _slot(at)
    transaction.on_commit(lambda: _SLOTS.add([(slot, None)]))


def _slot(at: datetime) -> datetime:
    seconds = math.ceil(at.timestamp() / RESOLUTION) * RESOLUTION
    return datetime.fromtimestamp(seconds, tz=UTC)


def _publish(pending: dict[datetime, None]) -> None:
    now = datetime.now(tz=UTC)
    with _published_lock:
        _published.difference_update(
            [s for s in _published if s < now - timedelta(seconds=RESOLUTION)]
        )
        slots = [slot for slot in pending if slot not in _published]
        _published.update(slots)
    for slot in slots:
        tasks.run_deadlines_sweep_task.apply_async(eta=slot)


_SLOTS: Batcher[datetime, None] = Batcher(
    name="group run deadlines",
    send=_publish,
    merge=lambda _old, _new: None,
    delay=0.02,
    max_items=100,
    eager=lambda: bool(tasks.run_deadlines_sweep_task.app.conf.task_always_eager),
)
