"""Embeddings are computed by a real Celery worker process."""

from typing import Any

import pytest

from memory.longterm.indexes import ARCHIVAL_INDEX, MESSAGE_INDEX
from memory.longterm.services import (
    archival_entry_create,
    conversation_start,
    messages_append,
)
from memory.models import ArchivalEntry, EmbeddingState
from memory.search import tasks
from memory.search.index import index_vectors
from tests.conftest import REDIS_URL, wait_until


def _all_ready(model: Any, index: Any) -> bool:
    ids = list(model.objects.values_list("pk", flat=True))
    ready = model.objects.filter(embedding_state=EmbeddingState.READY).count()
    return ready == len(ids) and len(index_vectors(index, row_ids=ids)) == len(ids)


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("celery_worker_process", [REDIS_URL], indirect=True)
def test_entries_and_messages_get_vectors_after_commit_on_a_worker(
    embedding_model_loaded: Any, redis_url: str, celery_worker_process: Any, agent: Any
):
    for i in range(3):
        archival_entry_create(agent=agent, content=f"fact number {i}")
    conversation = conversation_start(agent=agent)
    messages_append(
        conversation=conversation,
        messages=[{"role": "user", "content": "hello there"}],
    )
    wait_until(lambda: _all_ready(ArchivalEntry, ARCHIVAL_INDEX))
    wait_until(lambda: _all_ready(type(conversation.messages.first()), MESSAGE_INDEX))


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("celery_worker_process", [REDIS_URL], indirect=True)
def test_backfill_fills_missing_vectors_on_a_worker(
    embedding_model_loaded: Any,
    redis_url: str,
    celery_worker_process: Any,
    agent: Any,
    monkeypatch: Any,
):
    # The rows' own embedding tasks are lost (e.g. written while no worker
    # had a model); only the periodic backfill can fill them in.
    monkeypatch.setattr(tasks.embeddings_refresh_task, "delay", lambda *args: None)
    for i in range(5):
        archival_entry_create(agent=agent, content=f"orphan fact {i}")
    assert not _all_ready(ArchivalEntry, ARCHIVAL_INDEX)
    tasks.embedding_backfill_task.delay()
    wait_until(lambda: _all_ready(ArchivalEntry, ARCHIVAL_INDEX))


def test_backfill_runs_every_30_minutes_by_default(settings: Any):
    from pattern_site.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["memory-embedding-backfill"]
    assert entry["schedule"] == 30 * 60
    assert entry["task"] in app.tasks
    assert settings.EMBEDDING_BACKFILL_BATCH == 50
