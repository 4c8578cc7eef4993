"""Background work of long-term memory: tasks take ids and call one service.

A repeated access count only over-counts retrievals, so each task can run
twice safely; consolidation skips scopes it consolidated recently.
"""

from datetime import datetime

from celery import shared_task
from celery.signals import worker_ready


@shared_task(name="memory.archival_record_accesses", ignore_result=True)
def archival_entries_record_access_task(accesses: list[list]) -> int:
    """[entry id, times retrieved, last time (ISO 8601)] per entry."""
    from memory.longterm.access import archival_entries_record_access

    return archival_entries_record_access(
        accesses=[(pk, n, datetime.fromisoformat(at)) for pk, n, at in accesses]
    )


@shared_task(name="memory.agent_summary_refresh", ignore_result=True)
def agent_summary_refresh_task(agent_id: int) -> None:
    """Summarise an agent's conversation once it went idle."""
    from memory.longterm.services import agent_summary_from_messages

    agent_summary_from_messages(agent_id=agent_id)


@shared_task(name="memory.archival_consolidate_due", ignore_result=True)
def archival_consolidate_due_task() -> list[int]:
    """Consolidate every scope whose last run is older than the schedule's
    interval: a second run straight after changes nothing."""
    from datetime import timedelta

    from django.conf import settings

    from memory.longterm.consolidation import archival_consolidate_due

    # Beat's next tick comes one interval after the last started, so the
    # last run finished slightly less than an interval ago: it must count
    # as due then.
    return archival_consolidate_due(
        every=timedelta(hours=settings.ARCHIVAL_CONSOLIDATION_HOURS) * 0.9
    )


@worker_ready.connect
def _archival_consolidation_catch_up(**_kwargs: object) -> None:
    # Runs missed while no worker was up are caught up once, on start; the
    # task itself skips scopes consolidated within the interval.
    archival_consolidate_due_task.delay()


@shared_task(name="memory.conversation_summarize", ignore_result=True)
def conversation_summarize_task(conversation_id: int, through: int) -> None:
    """Fold a conversation's evicted history into its summary."""
    from memory.longterm.services import conversation_summarize

    conversation_summarize(conversation_id=conversation_id, through=through)
