"""The backfill of rows left without their vector: bounded runs that follow
one another while there is more, and the catch-up that starts them."""

import uuid
from typing import Any

import numpy as np
import pytest

from memory.longterm.services import archival_entry_create
from memory.models import ArchivalEntry, EmbeddingState
from memory.search import tasks
from memory.search.pipeline import embedding_backfill_step, embedding_catch_up


@pytest.fixture
def queued(monkeypatch: Any) -> list[str]:
    """Backfill runs queued (not run); the rows' own embedding tasks lost."""
    sent: list[str] = []
    monkeypatch.setattr(tasks.embeddings_refresh_task, "delay", lambda *a: None)
    monkeypatch.setattr(
        tasks.embedding_backfill_task, "delay", lambda: sent.append("backfill")
    )
    return sent


def _pending() -> int:
    return ArchivalEntry.objects.filter(embedding_state=EmbeddingState.PENDING).count()


def test_a_backlog_drains_in_bounded_runs_each_queueing_the_next(
    agent: Any, embedding_model_loaded: Any, settings: Any, queued: list[str]
):
    settings.EMBEDDING_BACKFILL_BATCH = 2
    for i in range(5):
        archival_entry_create(agent=agent, content=f"lost fact {i}")
    runs = []
    while True:
        runs.append(embedding_backfill_step()["archival"])
        if len(queued) < len(runs):  # this run did not ask for another
            break
    assert runs == [2, 2, 1]
    assert _pending() == 0


def test_a_run_that_cannot_embed_asks_for_no_other(
    agent: Any, no_embedding_model: Any, settings: Any, queued: list[str]
):
    settings.EMBEDDING_BACKFILL_BATCH = 1
    archival_entry_create(agent=agent, content="waits for a model")
    assert embedding_backfill_step()["archival"] == 0
    assert queued == []
    assert embedding_catch_up() is False
    assert queued == []


def test_the_catch_up_queues_a_run_only_when_rows_wait(
    agent: Any, embedding_model_loaded: Any, queued: list[str]
):
    assert embedding_catch_up() is False
    entry = archival_entry_create(agent=agent, content="left without a vector")
    assert embedding_catch_up() is True
    assert queued == ["backfill"]
    embedding_backfill_step()
    entry.refresh_from_db()
    assert entry.embedding_state == EmbeddingState.READY
    assert embedding_catch_up() is False


def test_a_starting_worker_queues_a_backfill_run(monkeypatch: Any):
    from celery.signals import worker_ready

    from memory.longterm import tasks as longterm_tasks

    monkeypatch.setattr(
        longterm_tasks.archival_consolidate_due_task, "delay", lambda: None
    )
    sent: list[str] = []
    monkeypatch.setattr(
        tasks.embedding_backfill_task, "delay", lambda: sent.append("backfill")
    )
    worker_ready.send(sender=None)
    assert sent == ["backfill"]


def test_a_query_asked_again_is_not_embedded_again(
    embedding_model_loaded: Any, monkeypatch: Any
):
    from memory.search import embedder

    runs: list[list[str]] = []
    real = embedder.embed_texts

    def counted(texts: list[str]) -> Any:
        runs.append(texts)
        return real(texts)

    monkeypatch.setattr(embedder, "embed_texts", counted)
    text = f"when did the heron come back {uuid.uuid4()}"
    first = embedder.embed_query(text)
    again = embedder.embed_query(text)
    assert runs == [[text]]
    assert first is not None and again is not None
    assert np.array_equal(first, again)
    assert not again.flags.writeable  # shared: no search may change it
