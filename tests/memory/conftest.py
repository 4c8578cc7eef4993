"""Fixtures of the long-term memory tests: clean search indexes, model states."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from memory import embeddings
from memory.indexes import INDEXED
from memory.retrieval import index_clear


@pytest.fixture(autouse=True)
def _empty_search_indexes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Django's flush leaves FTS5/vec0 tables alone (ARCHITECTURE fact 7)."""
    uses_db = {"db", "transactional_db"} & set(request.fixturenames)
    if not uses_db and not request.node.get_closest_marker("django_db"):
        yield
        return
    request.getfixturevalue("transactional_db" if _transactional(request) else "db")
    for _model, index in INDEXED.values():
        index_clear(index)
    yield


def _transactional(request: pytest.FixtureRequest) -> bool:
    marker = request.node.get_closest_marker("django_db")
    return "transactional_db" in request.fixturenames or bool(
        marker and marker.kwargs.get("transaction")
    )


@contextmanager
def model_dir(settings: Any, path: Any) -> Iterator[None]:
    """Use another model directory, with the process's model cache emptied;
    afterwards the old directory and the loaded model come back."""
    saved = (settings.EMBEDDING_MODEL_DIR, embeddings._model)
    settings.EMBEDDING_MODEL_DIR = str(path)
    embeddings.embedding_reset()
    try:
        yield
    finally:
        embeddings.embedding_reset()
        settings.EMBEDDING_MODEL_DIR, embeddings._model = saved


@pytest.fixture
def no_embedding_model(settings: Any, tmp_path: Any) -> Iterator[None]:
    """No model: an empty model directory, and the process cache emptied."""
    with model_dir(settings, tmp_path):
        yield


@pytest.fixture(scope="session")
def embedding_model_loaded() -> Any:
    """The one model of this test process (skips when none is installed)."""
    model = embeddings.embedding_model()
    if model is None:
        pytest.skip(embeddings.embedding_status().reason)
    return model
