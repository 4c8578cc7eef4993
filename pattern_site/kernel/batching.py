"""Work counted in this process and handed on in batches, off the caller's path.

A ``Batcher`` takes items from any thread and sends what has gathered with
one call of ``send``: at once when ``max_items`` are waiting or when tasks
run inline (eager Celery, i.e. the tests), else after ``delay`` seconds from
a timer thread, and at exit whatever still waits.  A process killed outright
loses at most one window of items.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


class Batcher(Generic[K, V]):
    def __init__(
        self,
        *,
        name: str,
        send: Callable[[dict[K, V]], None],
        merge: Callable[[V | None, V], V],
        delay: float,
        max_items: int,
        eager: Callable[[], bool],
    ) -> None:
        self.name = name
        self._send = send
        self._merge = merge
        self._delay = delay
        self._max_items = max_items
        self._eager = eager
        self._lock = threading.Lock()
        self._pending: dict[K, V] = {}
        self._timer: threading.Timer | None = None
        atexit.register(self._flush_logged)

    def add(self, items: Iterable[tuple[K, V]]) -> None:
        if not self.add_nowait(items):
            self.flush()

    def add_nowait(self, items: Iterable[tuple[K, V]]) -> bool:
        """``add`` that never sends on the caller's thread (an event loop's):
        False when what waits is due now (full, or tasks run inline), for
        the caller to ``flush`` from a thread that may block."""
        with self._lock:
            for key, value in items:
                self._pending[key] = self._merge(self._pending.get(key), value)
            if len(self._pending) >= self._max_items:
                return False
            # A timer runs only when tasks were not inline as it started;
            # the setting is read (it costs) only when none runs.
            if self._timer is None and self._eager():
                return False
            if self._timer is None and self._pending:
                self._timer = threading.Timer(self._delay, self._flush_logged)
                self._timer.daemon = True
                self._timer.start()
        return True

    def flush(self) -> int:
        """Send what waits now; returns how many items."""
        with self._lock:
            pending, self._pending = self._pending, {}
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if pending:
            self._send(pending)
        return len(pending)

    def _flush_logged(self) -> None:
        try:
            self.flush()
        except Exception:  # timer thread or exit: nobody else would see it
            logger.exception("could not send the batch of %s", self.name)
