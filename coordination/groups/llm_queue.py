"""Queueing the LLM's answers to deliveries, off the routing path.

A delivery to an agent answered by the LLM needs a Celery task, and a
broker write costs more than routing itself (see
``coordination.groups.deadlines``).  The delivery is handed to a
``Batcher`` when the transaction that made it commits, and its task is
published from the batcher's timer thread (at once, in the caller, when
tasks run inline).  With the broker down nothing is queued and the
delivery stays pending: the deadline sweep queues it again later.
"""

from __future__ import annotations

import logging

import kombu.exceptions
from django.db import transaction

from coordination.groups import tasks
from pattern_site.kernel.batching import Batcher

logger = logging.getLogger(__name__)


def llm_answer_queue(*, delivery_id: int) -> None:
    """Have the LLM answer this delivery (once this transaction commits)."""
    transaction.on_commit(lambda: _ANSWERS.add([(delivery_id, None)]))


def _publish(pending: dict[int, None]) -> None:
    for delivery_id in sorted(pending):
        try:
            tasks.delivery_llm_answer_task.apply_async((delivery_id,), retry=False)
        except kombu.exceptions.OperationalError as exc:
            logger.warning("delivery %s: LLM answer not queued (%s)", delivery_id, exc)


_ANSWERS: Batcher[int, None] = Batcher(
    name="deliveries for the LLM",
    send=_publish,
    merge=lambda _old, _new: None,
    delay=0.02,
    max_items=100,
    eager=lambda: bool(tasks.delivery_llm_answer_task.app.conf.task_always_eager),
)
