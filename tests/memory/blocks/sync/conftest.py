"""Fixtures of the tests driving real npm clients against the sync socket."""

import pytest

from memory.blocks.services import block_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue


@pytest.fixture
def text_block(agent):
    return block_create(
        actor=Actor.system(),
        label="shared_notes",
        owner=agent,
        content="start;",
        char_limit=100_000,
    )


@pytest.fixture
def token(agent) -> str:
    return agent_token_issue(agent=agent).raw
