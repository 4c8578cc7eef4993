"""Background work of activity: each task calls one service."""

from celery import shared_task


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
