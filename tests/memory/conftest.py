"""Fixtures of the memory tests: blocks made through the services.

Fixtures of the long-term memory tests: clean search indexes, model states.
"""

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from memory.blocks.services import block_create
from memory.search import embedder
from memory.search.index import index_clear
from memory.search.registry import search_tables
from pattern_site.kernel.actors import Actor
from tests.conftest import REPO, missing, subprocess_env
from tests.factories import AgentFactory


@pytest.fixture
def system() -> Actor:
    return Actor.system()


@pytest.fixture
def other_agent(constellation: Any) -> Any:
    return AgentFactory(constellation=constellation, name="Flux")


@pytest.fixture
def make_block(agent: Any) -> Any:
    """Create a block (owned by ``agent`` unless told) as the system."""

    def make(label: str = "notes", **kwargs: Any) -> Any:
        kwargs.setdefault("owner", agent)
        return block_create(actor=Actor.system(), label=label, **kwargs)

    return make


@pytest.fixture(autouse=True)
def _empty_search_indexes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Django's flush leaves FTS5/vec0 tables alone (ARCHITECTURE fact 7)."""
    uses_db = {"db", "transactional_db"} & set(request.fixturenames)
    if not uses_db and not request.node.get_closest_marker("django_db"):
        yield
        return
    request.getfixturevalue("transactional_db" if _transactional(request) else "db")
    for table in search_tables():
        index = table.index
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
    saved = (settings.EMBEDDING_MODEL_DIR, embedder._model)
    settings.EMBEDDING_MODEL_DIR = str(path)
    embedder.embedding_reset()
    try:
        yield
    finally:
        embedder.embedding_reset()
        settings.EMBEDDING_MODEL_DIR, embedder._model = saved


@pytest.fixture
def no_embedding_model(settings: Any, tmp_path: Any) -> Iterator[None]:
    """No model: an empty model directory, and the process cache emptied."""
    with model_dir(settings, tmp_path):
        yield


@pytest.fixture(scope="session")
def embedding_model_loaded() -> Any:
    """The one model of this test process, which workers started by tests
    load too; a missing model skips (or fails in CI, like Redis)."""
    model = embedder.embedding_model()
    if model is None:
        missing(
            f"{embedder.embedding_status().reason} "
            "(set PATTERN_EMBEDDING_MODEL_DIR to a local all-MiniLM-L6-v2 ONNX model)"
        )
    return model


def run_in_another_process(script: str) -> str:
    """Run Python ``script`` in a new process on the test database (Django
    set up first); its stdout."""
    out = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + script],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout
