"""Embedding work in Celery: tasks take row ids and call one service.

Each can run twice safely: rows whose vector matches their content are
skipped.
"""

from celery import shared_task


@shared_task(name="memory.embed_rows", ignore_result=True)
def embeddings_refresh_task(kind: str, row_ids: list[int]) -> int:
    from memory.search.pipeline import embeddings_refresh

    return embeddings_refresh(kind=kind, row_ids=row_ids)


@shared_task(name="memory.embedding_backfill", ignore_result=True)
def embedding_backfill_task() -> dict[str, int]:
    from memory.search.pipeline import embedding_backfill

    return embedding_backfill()
