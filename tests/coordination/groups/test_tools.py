"""The message_agent tool: an agent's message to another agent of its
constellation, delivered through the recipient's direct group (its inbox,
or its own turn when the LLM answers it), over HTTP and ``tool_call``."""

from typing import Any

import pytest
from django.test import Client

from coordination.groups.models import GroupRun, RunDelivery
from coordination.groups.services import delivery_take
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from pattern_site.kernel.tools import tool_call
from tests.factories import AgentFactory, ConstellationFactory

pytestmark = pytest.mark.django_db


def test_message_agent_lands_in_the_recipients_inbox(agents: dict[str, Any]):
    entropy = Client(
        HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=agents['Entropy']).raw}"
    )
    response = entropy.post(
        "/api/tools/message_agent",
        {"agent": "Archive", "message": "File the Lisbon receipts."},
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    archive = Client(
        HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=agents['Archive']).raw}"
    )
    inbox = archive.get("/api/inbox")
    assert inbox.status_code == 200, inbox.content
    (item,) = inbox.json()
    assert item["content"] == "Message from Entropy: File the Lisbon receipts."
    # The sender follows the run it started.
    run = entropy.get(f"/api/runs/{response.json()['id']}")
    assert run.status_code == 200


def test_message_agent_through_tool_call_reuses_the_recipients_group(agents):
    sender = Actor.for_agent(agents["Entropy"])
    for text in ("one", "two"):
        result = tool_call(
            actor=sender,
            name="message_agent",
            arguments={"agent": "Archive", "message": text},
        )
        assert result.ok, result.text
    assert GroupRun.objects.values("group").distinct().count() == 1
    taken = delivery_take(agent=agents["Archive"])
    assert [d.content for d in taken] == [
        "Message from Entropy: one",
        "Message from Entropy: two",
    ]


def test_message_agent_does_not_know_another_constellations_agents(agents):
    AgentFactory(constellation=ConstellationFactory(name="Elsewhere"), name="Stray")
    result = tool_call(
        actor=Actor.for_agent(agents["Entropy"]),
        name="message_agent",
        arguments={"agent": "Stray", "message": "hello"},
    )
    assert not result.ok
    assert "no agent named 'Stray' in your constellation" in result.text
    assert not RunDelivery.objects.exists()


def test_message_agent_over_http_answers_404_for_another_constellation(agents):
    AgentFactory(constellation=ConstellationFactory(name="Elsewhere"), name="Stray")
    client = Client(
        HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=agents['Entropy']).raw}"
    )
    response = client.post(
        "/api/tools/message_agent",
        {"agent": "Stray", "message": "hello"},
        content_type="application/json",
    )
    assert response.status_code == 404


def test_message_agent_refuses_a_message_to_oneself(agents):
    result = tool_call(
        actor=Actor.for_agent(agents["Entropy"]),
        name="message_agent",
        arguments={"agent": "Entropy", "message": "note to self"},
    )
    assert not result.ok
    assert not RunDelivery.objects.exists()
