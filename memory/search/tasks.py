"""Embedding work in Celery: tasks take row ids and call one service.

Each can run twice safely: rows whose vector matches their content are
skipped.
"""

from celery import shared_task
from celery.signals import worker_ready


@shared_task(name="memory.embed_rows", ignore_result=True)
def embeddings_refresh_task(kind: str, row_ids: list[int]) -> int:
    from memory.search.pipeline import embeddings_refresh

    return embeddings_refresh(kind=kind, row_ids=row_ids)


@shared_task(name="memory.embedding_backfill", ignore_result=True)
def embedding_backfill_task() -> dict[str, int]:
    from memory.search.pipeline import embedding_backfill_step

    return embedding_backfill_step()


@worker_ready.connect
def _embedding_catch_up_on_start(**_kwargs: object) -> None:
    # Rows whose own task was lost (the web process died before sending
    # it, or the broker was down) are embedded as soon as a worker is up,
    # not at the next periodic run.
    embedding_backfill_task.delay()
