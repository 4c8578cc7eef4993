"""Fixtures of the folders tests: folders, attachments, clean indexes."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection

from folders.files import services
from folders.files.index import FILE_PASSAGE_INDEX
from folders.models import Folder
from memory.search.index import index_clear
from pattern_site.kernel.actors import Actor
from tests.factories import AgentFactory


@pytest.fixture(autouse=True)
def _empty_passage_index(request: pytest.FixtureRequest) -> Iterator[None]:
    """Django's flush leaves the FTS5/vec0 tables alone."""
    uses = {"db", "transactional_db"} & set(request.fixturenames)
    marker = request.node.get_closest_marker("django_db")
    if not uses and not marker:
        yield
        return
    transactional = "transactional_db" in uses or bool(
        marker and marker.kwargs.get("transaction")
    )
    request.getfixturevalue("transactional_db" if transactional else "db")
    index_clear(FILE_PASSAGE_INDEX)
    yield


@pytest.fixture
def human(partner: Any) -> Actor:
    return Actor.for_user(partner)


@pytest.fixture
def folder(constellation: Any, human: Actor) -> Folder:
    return services.folder_create(
        actor=human,
        constellation_id=constellation.pk,
        name="docs",
        description="Project documents",
    )


@pytest.fixture
def reader(constellation: Any, folder: Folder, human: Actor) -> Any:
    """An agent the folder is attached to read-only."""
    agent = AgentFactory(constellation=constellation, name="Reader")
    services.folder_attach(actor=human, folder=folder, agent_id=agent.pk, access="read")
    return agent


@pytest.fixture
def writer(agent: Any, folder: Folder, human: Actor) -> Any:
    """``agent``, with the folder attached read_write."""
    services.folder_attach(
        actor=human, folder=folder, agent_id=agent.pk, access="read_write"
    )
    return agent


@pytest.fixture
def upload(
    human: Actor, django_capture_on_commit_callbacks: Any
) -> Callable[..., list[services.FileChange]]:
    """Upload (name, bytes) pairs as the partner and run the indexing that
    follows the commit."""

    def run(folder: Folder, *files: tuple[str, bytes]) -> list[services.FileChange]:
        with committed(django_capture_on_commit_callbacks):
            return services.files_upload(actor=human, folder=folder, uploads=files)

    return run


@contextmanager
def committed(capture: Any) -> Iterator[None]:
    """Run the block's after-commit callbacks, then forget them as a real
    commit does: the embedding pipeline looks for its pending batch among
    the connection's callbacks, and must not find one already run."""
    start = len(connection.run_on_commit)
    with capture(execute=True):
        yield
    del connection.run_on_commit[start:]
