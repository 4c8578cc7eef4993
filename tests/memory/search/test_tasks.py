"""A real worker embeds, batch after batch, rows whose own tasks were lost."""

import re
from typing import Any

import pytest
from django.conf import settings

from memory.longterm.indexes import ARCHIVAL_INDEX
from memory.longterm.services import archival_entry_create
from memory.models import ArchivalEntry, EmbeddingState
from memory.search import tasks
from memory.search.index import index_vectors
from pattern_site.celery import app as celery_app
from tests.conftest import celery_worker, wait_until

BACKFILL_RUN = re.compile(r"Task memory\.embedding_backfill\[[^]]+\] succeeded")


def _all_embedded() -> bool:
    ids = list(ArchivalEntry.objects.values_list("pk", flat=True))
    pending = ArchivalEntry.objects.exclude(embedding_state=EmbeddingState.READY)
    return not pending.exists() and len(
        index_vectors(ARCHIVAL_INDEX, row_ids=ids)
    ) == len(ids)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_starting_worker_embeds_every_row_left_pending_in_several_batches(
    embedding_model_loaded: Any, agent: Any, monkeypatch: Any
):
    # Committed while the web process died before sending their tasks.
    monkeypatch.setattr(tasks.embeddings_refresh_task, "delay", lambda *a: None)
    for i in range(10):
        archival_entry_create(agent=agent, content=f"acknowledged fact {i}")
    assert not _all_embedded()
    # No beat runs here: only the worker's start can set the backfill going.
    # Tasks an earlier test left in the broker would start runs of their own.
    with celery_app.connection_for_write(settings.CELERY_BROKER_URL) as conn:
        celery_app.control.purge(connection=conn)
    with celery_worker(
        settings.CELERY_BROKER_URL, PATTERN_EMBEDDING_BACKFILL_BATCH="4"
    ) as worker:
        wait_until(_all_embedded)
        # 4 + 4 + 2 rows: the third run found less than a batch and stopped.
        wait_until(lambda: len(BACKFILL_RUN.findall("".join(worker.log))) >= 3)
        assert len(BACKFILL_RUN.findall("".join(worker.log))) == 3
