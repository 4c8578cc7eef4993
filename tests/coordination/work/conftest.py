from typing import Any

import pytest
from django.test import Client

from coordination.work.services import task_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.factories import AgentFactory, ConstellationFactory


@pytest.fixture
def flux(constellation: Any) -> Any:
    return AgentFactory(constellation=constellation, name="Flux")


@pytest.fixture
def elsewhere(db: None) -> Any:
    """An agent of another constellation."""
    return AgentFactory(constellation=ConstellationFactory(name="Other"), name="Stray")


@pytest.fixture
def make_task(constellation: Any, partner: Any) -> Any:
    def make(title: str = "fix bug", **kwargs: Any) -> Any:
        kwargs.setdefault("actor", Actor.for_user(partner))
        return task_create(constellation=constellation, title=title, **kwargs)

    return make


@pytest.fixture
def human_client(partner: Any) -> Client:
    """The partner's session (CSRF is covered by tests/coordination)."""
    client = Client()
    client.force_login(partner)
    return client


@pytest.fixture
def stray_client(elsewhere: Any) -> Client:
    """An agent of another constellation, with its bearer token."""
    return Client(HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=elsewhere).raw}")
