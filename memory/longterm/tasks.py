"""Background work of memory: tasks take ids, re-fetch, call one service.

Each can run twice safely: embedding skips rows whose vector matches their
content, and a repeated access count only over-counts retrievals.
"""

from datetime import datetime

from celery import shared_task

from memory.services import (
    archival_entries_record_access,
    embedding_backfill,
    embeddings_refresh,
)


@shared_task(name="memory.embed_rows", ignore_result=True)
def embed_rows(kind: str, row_ids: list[int]) -> int:
    return embeddings_refresh(kind=kind, row_ids=row_ids)


@shared_task(name="memory.embedding_backfill", ignore_result=True)
def embedding_backfill_task() -> dict[str, int]:
    return embedding_backfill()


@shared_task(name="memory.archival_record_accesses", ignore_result=True)
def archival_record_accesses(accesses: list[list]) -> int:
    """[entry id, times retrieved, last time (ISO 8601)] per entry."""
    return archival_entries_record_access(
        accesses=[(pk, n, datetime.fromisoformat(at)) for pk, n, at in accesses]
    )


@shared_task(name="memory.archival_record_access", ignore_result=True)
def archival_record_access(entry_ids: list[int], at: str) -> int:
    """One retrieval of each entry: tasks queued before counts were batched."""
    when = datetime.fromisoformat(at)
    return archival_entries_record_access(accesses=[(pk, 1, when) for pk in entry_ids])
