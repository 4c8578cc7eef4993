"""Coordination services."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from pattern_site.kernel import rights
from pattern_site.kernel.agents.services import (
    agent_token_authenticate,
    agent_token_issue,
    agent_update,
)
from pattern_site.kernel.agents.tasks import agent_touch_task


@pytest.mark.django_db
def test_busy_agent_asks_the_worker_to_record_activity_once_a_minute(
    agent, agent_token, monkeypatch, django_capture_on_commit_callbacks
):
    enqueued = []
    monkeypatch.setattr(
        agent_touch_task,
        "apply_async",
        lambda args, **options: enqueued.append(args),
    )

    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(5):
            assert agent_token_authenticate(raw=agent_token.raw) == agent

    assert len(enqueued) == 1
    assert enqueued[0][0] == agent.pk


def test_authentication_goes_on_when_the_broker_is_down(
    agent, agent_token, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    def broker_down(*args, **options):
        raise OSError("Error 111 connecting to the broker")

    monkeypatch.setattr(agent_touch_task, "apply_async", broker_down)
    with (
        caplog.at_level("WARNING", logger="pattern_site.kernel.agents.services"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        assert agent_token_authenticate(raw=agent_token.raw) == agent
    assert "activity not queued" in caplog.text


@pytest.mark.parametrize("how", ["rotate", "deactivate"])
@pytest.mark.django_db(transaction=True)
def test_rotating_or_deactivating_tells_open_sockets_at_once(agent, how):
    """The fast path: the rights message reaches every process's rooms."""
    agent_token_issue(agent=agent)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(rights.RIGHTS_GROUP, channel)
    if how == "rotate":
        agent_token_issue(agent=agent)
    else:
        agent_update(agent=agent, is_active=False)

    async def told() -> dict:
        return await asyncio.wait_for(layer.receive(channel), timeout=2)

    message = async_to_sync(told)()
    assert (message["type"], message["agent_id"]) == (rights.MESSAGE_TYPE, agent.pk)
