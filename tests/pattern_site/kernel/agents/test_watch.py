"""Which open sockets' tokens died: revoked, rotated away, agent off."""

import pytest

from pattern_site.kernel.agents.services import (
    agent_token_issue,
    agent_token_revoke,
    agent_update,
)
from pattern_site.kernel.agents.watch import agent_tokens_dead
from tests.factories import AgentFactory


@pytest.mark.django_db
def test_dead_tokens_are_the_revoked_rotated_and_deactivated_ones(constellation):
    live, revoked, rotated, off = (
        AgentFactory(constellation=constellation, name=name)
        for name in ("Live", "Revoked", "Rotated", "Off")
    )
    tokens = {
        agent.name: agent_token_issue(agent=agent).token.pk
        for agent in (live, revoked, rotated, off)
    }
    agent_token_revoke(agent=revoked)
    agent_token_issue(agent=rotated)
    agent_update(agent=off, is_active=False)
    assert agent_tokens_dead(token_ids=list(tokens.values())) == {
        tokens["Revoked"],
        tokens["Rotated"],
        tokens["Off"],
    }
    assert agent_tokens_dead(token_ids=[tokens["Live"], 999_999]) == {999_999}
