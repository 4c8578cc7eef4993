"""Deadlines and sleeptime checks of agent groups: each task calls one service.

Every task can run early or twice: the services check the deadline or the
check interval again under the row lock.
"""

from celery import shared_task


@shared_task(name="groups.run_delivery_expire", ignore_result=True)
def run_delivery_expire_task(delivery_id: int) -> None:
    from coordination.groups.services import run_delivery_expire

    run_delivery_expire(delivery_id=delivery_id)


@shared_task(name="groups.run_vote_close", ignore_result=True)
def run_vote_close_task(run_id: int) -> None:
    from coordination.groups.services import run_vote_close

    run_vote_close(run_id=run_id)


@shared_task(name="groups.run_deadlines_sweep", ignore_result=True)
def run_deadlines_sweep_task() -> None:
    from coordination.groups.services import run_deadlines_sweep

    run_deadlines_sweep()


@shared_task(name="groups.group_sleeptime_sweep", ignore_result=True)
def group_sleeptime_sweep_task() -> None:
    from coordination.groups.services import group_sleeptime_sweep

    group_sleeptime_sweep()
