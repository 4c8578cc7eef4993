"""Deadlines, sleeptime checks and LLM answers of agent groups: each task
calls one service.

Every task can run early or twice: the services check the deadlines, the
check interval or that the delivery is still pending again under the row
lock.
"""

from typing import Any

from celery import shared_task


@shared_task(name="groups.run_deadlines_sweep", ignore_result=True)
def run_deadlines_sweep_task() -> None:
    from coordination.groups.services import run_deadlines_sweep

    run_deadlines_sweep()


@shared_task(name="groups.group_sleeptime_sweep", ignore_result=True)
def group_sleeptime_sweep_task() -> None:
    from coordination.groups.services import group_sleeptime_sweep

    group_sleeptime_sweep()


@shared_task(
    bind=True, name="groups.delivery_llm_answer", ignore_result=True, max_retries=None
)
def delivery_llm_answer_task(self: Any, delivery_id: int) -> None:
    """Answer the delivery; while a turn left running by another worker may
    still be alive, ask again once it could have been silent long enough."""
    from coordination.groups.llm import delivery_llm_answer

    wait = delivery_llm_answer(delivery_id=delivery_id)
    if wait > 0:
        raise self.retry(countdown=wait)
