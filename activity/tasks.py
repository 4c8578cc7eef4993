"""Background work of activity: each task calls one service.

``activity_events_store_task`` takes the batch itself rather than ids: the
events do not exist before it stores them.
"""

from typing import Any

from celery import shared_task


@shared_task(name="activity.activity_events_store", ignore_result=True)
def activity_events_store_task(rows: list[list[Any]]) -> None:
    from activity.stream.services import activity_events_store_rows

    activity_events_store_rows(rows=rows)


@shared_task(name="activity.agent_summary_refresh", ignore_result=True)
def agent_summary_refresh_task(agent_id: int) -> None:
    from activity.summaries.services import agent_summary_refresh_from_activity

    agent_summary_refresh_from_activity(agent_id=agent_id)


@shared_task(name="activity.agent_summaries_refresh", ignore_result=True)
def agent_summaries_refresh_task() -> None:
    from activity.summaries.services import agent_summaries_refresh

    agent_summaries_refresh()


@shared_task(name="activity.constellation_summaries_generate", ignore_result=True)
def constellation_summaries_generate_task() -> None:
    from activity.summaries.services import constellation_summaries_generate

    constellation_summaries_generate()


@shared_task(name="activity.activity_retention_fold", ignore_result=True)
def activity_retention_fold_task() -> None:
    from activity.summaries.services import activity_retention_fold

    activity_retention_fold()
