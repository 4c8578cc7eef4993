"""Fixtures of the memory tests: blocks made through the services."""

from typing import Any

import pytest

from coordination.actors import Actor
from memory.services import block_create
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
