"""Coordination services."""

import pytest

from coordination.agents.services import agent_token_authenticate
from coordination.agents.tasks import agent_touch_task


@pytest.mark.django_db
def test_busy_agent_asks_the_worker_to_record_activity_once_a_minute(
    agent, agent_token, monkeypatch
):
    enqueued = []
    monkeypatch.setattr(
        agent_touch_task, "delay_on_commit", lambda *args: enqueued.append(args)
    )

    for _ in range(5):
        assert agent_token_authenticate(raw=agent_token.raw) == agent

    assert len(enqueued) == 1
    assert enqueued[0][0] == agent.pk
