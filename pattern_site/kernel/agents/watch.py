"""Open sockets learn that their agent token died, in every process.

A socket authenticated with an agent token outlives the check.  The
channel layer carries a revocation at once where it reaches
(``pattern_site.kernel.rights``), but the embedded in-memory layer never
leaves the process that revoked (a ``manage.py`` command, a worker).  So
each event loop with watched sockets runs one watcher that asks the
database, every :data:`POLL_SECONDS`, which of the tokens its sockets hold
are no longer live (revoked, rotated away, agent deactivated): one query by
primary key for all of them, never one per socket or per frame.  A socket
whose token died is told through the callback it registered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

from channels.db import database_sync_to_async

from pattern_site.kernel.agents.models import AgentToken

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5

OnDead = Callable[[int], None]


def agent_tokens_dead(*, token_ids: list[int]) -> set[int]:
    """Those of ``token_ids`` that are revoked, gone, or whose agent is
    deactivated."""
    live = AgentToken.objects.filter(
        pk__in=token_ids, revoked_at__isnull=True, agent__is_active=True
    ).values_list("pk", flat=True)
    return set(token_ids) - set(live)


def token_watch(*, token_id: int, on_dead: OnDead) -> None:
    """Call ``on_dead(token_id)`` (on this event loop) once the token dies."""
    _Watcher.current().add(token_id, on_dead)


def token_unwatch(*, token_id: int, on_dead: OnDead) -> None:
    _Watcher.current().discard(token_id, on_dead)


class _Watcher:
    """The watched tokens of one event loop, polled while there are any."""

    _watchers: dict[asyncio.AbstractEventLoop, _Watcher] = {}
    _lock = threading.Lock()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.tokens: dict[int, set[OnDead]] = {}
        self.task: asyncio.Task[None] | None = None

    @classmethod
    def current(cls) -> _Watcher:
        loop = asyncio.get_running_loop()
        with cls._lock:
            for closed in [other for other in cls._watchers if other.is_closed()]:
                del cls._watchers[closed]
            watcher = cls._watchers.get(loop)
            if watcher is None:
                watcher = cls._watchers[loop] = cls(loop)
            return watcher

    def add(self, token_id: int, on_dead: OnDead) -> None:
        self.tokens.setdefault(token_id, set()).add(on_dead)
        if self.task is None:
            self.task = self.loop.create_task(self._poll())

    def discard(self, token_id: int, on_dead: OnDead) -> None:
        callbacks = self.tokens.get(token_id)
        if callbacks is not None:
            callbacks.discard(on_dead)
            if not callbacks:
                del self.tokens[token_id]
        if not self.tokens and self.task is not None:
            self.task.cancel()
            self.task = None

    async def _poll(self) -> None:
        while self.tokens:
            await asyncio.sleep(POLL_SECONDS)
            try:
                dead = await database_sync_to_async(agent_tokens_dead)(
                    token_ids=list(self.tokens)
                )
            except Exception:
                # The next round asks again; a socket keeps its rights a
                # little longer, and its writes are still checked as stored.
                logger.warning("checking open sockets' tokens failed", exc_info=True)
                continue
            for token_id in dead:
                for on_dead in self.tokens.pop(token_id, ()):
                    with contextlib.suppress(Exception):
                        on_dead(token_id)
        self.task = None
