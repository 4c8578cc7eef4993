"""The in-process buffer between a committed write and its stored event.

``activity_record`` hands events here from ``transaction.on_commit``, so an
event exists only for a committed transaction.  With
``ACTIVITY_BATCH_SIZE`` above 1, events wait in memory and one daemon
thread hands them over in batches (every ``ACTIVITY_FLUSH_SECONDS`` or as
soon as a batch is full) to the worker, which stores them: the request
that caused an event pays neither for the insert nor for rendering it.
A clean exit flushes what is left: ``atexit`` for servers and scripts, and
the Celery ``worker_process_shutdown`` hook connected in ``apps.py``.
A batch size of 1 hands each event over in the committing thread.
"""

import atexit
import logging
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)


class Recorder:
    def __init__(self, store: Callable[[list[Any]], None]) -> None:
        self._store = store
        self._pending: list[Any] = []
        self._lock = threading.Lock()
        # Serialises stores, so an exit flush waits for a running one.
        self._store_lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, event: Any) -> None:
        batch = settings.ACTIVITY_BATCH_SIZE
        if batch <= 1:
            self._store_now([event])
            return
        with self._lock:
            self._pending.append(event)
            full = len(self._pending) >= batch
        self._ensure_thread()
        if full:
            self._wake.set()

    def flush(self) -> int:
        """Store every pending event now; returns how many."""
        with self._lock:
            events, self._pending = self._pending, []
        if events:
            self._store_now(events)
        return len(events)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def _store_now(self, events: list[Any]) -> None:
        with self._store_lock:
            self._store(events)

    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(
                target=self._run, name="activity-recorder", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        from django.db import close_old_connections

        while True:
            self._wake.wait(settings.ACTIVITY_FLUSH_SECONDS)
            self._wake.clear()
            try:
                self.flush()
            except Exception:
                # The batch is lost only when the database refuses it; the
                # thread must survive to store the next ones.
                logger.exception("storing a batch of activity events failed")
            close_old_connections()


_recorder: Recorder | None = None


def recorder() -> Recorder:
    global _recorder
    if _recorder is None:
        from activity.stream.services import activity_events_enqueue

        _recorder = Recorder(activity_events_enqueue)
        atexit.register(_recorder.flush)
    return _recorder
