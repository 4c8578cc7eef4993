"""The embedding pipeline: rows of any searchable table get their vectors
in Celery, after commit, in batches."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from functools import partial

from django.conf import settings
from django.db import (
    transaction,
)
from django.db.models import F

from memory.search.embedder import embed_texts, embedding_status
from memory.search.index import index_put_texts, index_put_vectors
from memory.search.registry import EmbeddingState, search_table, search_tables
from memory.search.tasks import embedding_backfill_task, embeddings_refresh_task
from pattern_site.kernel.batching import Batcher

logger = logging.getLogger(__name__)


def _send_embeds(pending: dict[tuple[str, int], None]) -> None:
    by_kind: dict[str, list[int]] = {}
    for kind, row_id in pending:
        by_kind.setdefault(kind, []).append(row_id)
    size = settings.EMBEDDING_BATCH_SIZE
    for kind, ids in by_kind.items():
        ids.sort()
        for start in range(0, len(ids), size):
            embeddings_refresh_task.delay(kind, ids[start : start + size])


# Rows committed within a few milliseconds of each other (one transaction's,
# or several requests') are embedded by one task: the model embeds a batch
# much faster per row than one row at a time.
_EMBEDS: Batcher[tuple[str, int], None] = Batcher(
    name="rows to embed",
    send=_send_embeds,
    merge=lambda _old, _new: None,
    delay=0.02,
    max_items=4096,
    eager=lambda: bool(embeddings_refresh_task.app.conf.task_always_eager),
)


def embedding_schedule(*, kind: str, row_ids: Iterable[int]) -> None:
    """Embed these rows once the current transaction commits (batched with
    other rows committed at about the same time; rows of a rolled-back
    savepoint or transaction are never sent)."""
    keys = [((kind, row_id), None) for row_id in row_ids]
    if keys:
        transaction.on_commit(partial(_EMBEDS.add, keys))


def embedding_flush() -> int:
    """Send this process's rows waiting to be embedded now."""
    return _EMBEDS.flush()


# The columns embedding a row reads (the rest would only be converted).
_EMBED_FIELDS = ("content", "content_hash", "embedded_hash", "embedding_state")


def embeddings_refresh(*, kind: str, row_ids: Sequence[int]) -> int:
    """Embed rows whose vector is missing or stale; returns how many got one.

    Idempotent: rows already embedded from their current content are
    skipped, and a row changed while its text was being embedded keeps the
    state pending (its own task will follow).
    """
    table = search_table(kind)
    model, index = table.model, table.index
    rows = [
        row
        for row in model.objects.filter(pk__in=list(row_ids)).only(
            *_EMBED_FIELDS, index.scope_column, index.owner_column
        )
        if row.embedded_hash != row.content_hash
        or row.embedding_state != EmbeddingState.READY
    ]
    if not rows:
        return 0
    vectors = embed_texts([row.content for row in rows])
    if vectors is None:
        return 0
    if vectors and vectors[0].shape != (index.dim,):
        # The vec0 tables were created for index.dim; a model of another
        # size must not half-fill them.  Rows stay pending (and searchable
        # by keywords) until the configuration matches.
        logger.error(
            "embedding model gives %s-d vectors; the search index holds %s-d",
            vectors[0].shape[0],
            index.dim,
        )
        return 0
    with transaction.atomic():
        current = dict(
            model.objects.filter(pk__in=[r.pk for r in rows]).values_list(
                "pk", "content_hash"
            )
        )
        fresh = [
            (row, vec)
            for row, vec in zip(rows, vectors, strict=True)
            if current.get(row.pk) == row.content_hash
        ]
        index_put_vectors(
            index,
            rows=[
                (
                    row.pk,
                    getattr(row, index.scope_column),
                    getattr(row, index.owner_column),
                    vec,
                )
                for row, vec in fresh
            ],
        )
        # The write lock is held: content_hash cannot change under us.
        model.objects.filter(pk__in=[row.pk for row, _vec in fresh]).update(
            embedding_state=EmbeddingState.READY, embedded_hash=F("content_hash")
        )
    if table.on_embedded is not None and fresh:
        table.on_embedded([row.pk for row, _vec in fresh])
    return len(fresh)


def embedding_backfill(*, batch: int | None = None) -> dict[str, int]:
    """Embed up to ``batch`` rows of each kind that still have no vector."""
    if not embedding_status().available:
        return {table.kind: 0 for table in search_tables()}
    size = batch or settings.EMBEDDING_BACKFILL_BATCH
    done: dict[str, int] = {}
    for table in search_tables():
        ids = list(
            table.model.objects.filter(embedding_state=EmbeddingState.PENDING)
            .order_by("pk")
            .values_list("pk", flat=True)[:size]
        )
        done[table.kind] = (
            embeddings_refresh(kind=table.kind, row_ids=ids) if ids else 0
        )
    return done


def embedding_backfill_step() -> dict[str, int]:
    """One bounded backfill run, followed by another while there is more.

    A kind that filled its whole batch probably has more rows waiting: the
    next run is queued behind whatever else is queued by then, so a backlog
    drains batch after batch without keeping other tasks waiting.  A run
    that could not embed a full batch (no model, a model of another size,
    rows changed meanwhile) stops the chain; the next trigger retries.
    """
    done = embedding_backfill()
    if any(n >= settings.EMBEDDING_BACKFILL_BATCH for n in done.values()):
        embedding_backfill_task.delay()
    return done


def embedding_catch_up() -> bool:
    """Queue a backfill run if rows wait for their vector and a model can
    embed them; whether one was queued.  Cheap (an indexed look-up per
    kind) when nothing waits."""
    if not embedding_status().available:
        return False
    if not any(
        table.model.objects.filter(embedding_state=EmbeddingState.PENDING).exists()
        for table in search_tables()
    ):
        return False
    embedding_backfill_task.delay()
    return True


def search_rows_reindex(*, kind: str, row_ids: Sequence[int]) -> None:
    """Put the keyword-index rows of these base rows (back) in place: rows
    written without their services (a restored backup) become searchable."""
    table = search_table(kind)
    if not row_ids:
        return
    if table.reindex is not None:
        table.reindex(row_ids)
        return
    index = table.index
    rows = table.model.objects.filter(pk__in=list(row_ids)).values_list(
        "pk", index.scope_column, index.owner_column, "content"
    )
    index_put_texts(index, rows=list(rows))
