"""Background work of long-term memory: tasks take ids and call one service.

A repeated access count only over-counts retrievals, so each task can run
twice safely.
"""

from datetime import datetime

from celery import shared_task


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


@shared_task(name="memory.conversation_summarize", ignore_result=True)
def conversation_summarize_task(conversation_id: int, through: int) -> None:
    """Fold a conversation's evicted history into its summary."""
    from memory.longterm.services import conversation_summarize

    conversation_summarize(conversation_id=conversation_id, through=through)
