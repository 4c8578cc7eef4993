"""Deadlines, sleeptime checks and LLM answers of agent groups: each task
calls one service.

Every task can run early or twice: the services check the deadlines, the
check interval or that the delivery is still pending again under the row
lock.
"""

from celery import shared_task


@shared_task(name="groups.run_deadlines_sweep", ignore_result=True)
def run_deadlines_sweep_task() -> None:
    from coordination.groups.services import run_deadlines_sweep

    run_deadlines_sweep()


@shared_task(name="groups.group_sleeptime_sweep", ignore_result=True)
def group_sleeptime_sweep_task() -> None:
    from coordination.groups.services import group_sleeptime_sweep

    group_sleeptime_sweep()


@shared_task(name="groups.delivery_llm_answer", ignore_result=True)
def delivery_llm_answer_task(delivery_id: int) -> None:
    from coordination.groups.llm import delivery_llm_answer

    delivery_llm_answer(delivery_id=delivery_id)
