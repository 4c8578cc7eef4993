"""An activity event is read by those who may read what it is about: another
agent's conversation or a handoff to a third agent stays private through the
feed, its search, the search tool and the agent's context."""

from typing import Any

import pytest
from django.test import Client

from activity.stream.context import recent_activity_render
from activity.stream.selectors import _recent_for_agent, recent_activity_for_agent
from coordination.work.services import handoff_create, task_create
from memory.longterm.services import conversation_start, messages_append
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.factories import AgentFactory


@pytest.fixture
def anchor(constellation: Any) -> Any:
    return AgentFactory(constellation=constellation, name="Anchor")


def _client(agent: Any) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=agent).raw}")


@pytest.fixture
def private_events(
    agent: Any,
    flux: Any,
    anchor: Any,
    constellation: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Flux talks with the partner about a surprise party; Entropy hands a
    note about it to Flux alone; a task everyone may see mentions it too."""
    with django_capture_on_commit_callbacks(execute=True):
        messages_append(
            conversation=conversation_start(agent=flux, title="with Sam"),
            messages=[{"role": "user", "content": "plan the surprise party"}],
        )
        handoff_create(
            actor=Actor.for_agent(agent),
            to_agent=flux,
            content="surprise party venue is booked",
        )
        task_create(
            actor=Actor.for_agent(agent),
            constellation=constellation,
            title="order the surprise party cake",
        )


def _texts(events: list[dict[str, Any]]) -> set[str]:
    return {e["text"] for e in events if "surprise" in e["text"]}


@pytest.mark.usefixtures("private_events")
def test_a_third_agent_reads_only_what_it_may_read(anchor: Any) -> None:
    client = _client(anchor)
    listed = client.get("/api/activity").json()
    found = client.get("/api/activity/search", {"q": "surprise party"}).json()
    tool = client.post(
        "/api/tools/search",
        {"query": "surprise party", "domain": "activity"},
        "application/json",
    ).json()["results"]
    expected = {
        'Entropy created task "order the surprise party cake" (task-1)'.replace(
            "task-1", f"task-{_task_id()}"
        )
    }
    assert _texts(listed) == expected
    assert _texts(found) == expected
    assert {hit["content"] for hit in tool if "surprise" in hit["content"]} == expected
    context = recent_activity_render(anchor)
    assert "surprise party cake" in context
    assert "venue" not in context and "plan the surprise" not in context


@pytest.mark.usefixtures("private_events")
def test_the_agents_it_concerns_and_the_partner_read_it(
    flux: Any, agent: Any, partner: Any, constellation: Any
) -> None:
    flux_sees = _texts(_client(flux).get("/api/activity").json())
    assert any("venue is booked" in t for t in flux_sees)
    assert any("plan the surprise party" in t for t in flux_sees)
    # The sender reads its own handoff, not Flux's conversation.
    entropy_sees = _texts(_client(agent).get("/api/activity").json())
    assert any("venue is booked" in t for t in entropy_sees)
    assert not any("plan the surprise party" in t for t in entropy_sees)
    human = Client()
    human.force_login(partner)
    partner_sees = _texts(
        human.get("/api/activity", {"constellation_id": constellation.pk}).json()
    )
    assert len(partner_sees) == 3


def _task_id() -> int:
    from coordination.work.models import Task

    return Task.objects.get().pk


@pytest.mark.usefixtures("private_events")
def test_each_agents_context_reads_what_the_rule_built_for_it_gives(
    agent: Any, flux: Any, anchor: Any
) -> None:
    """The context's read is one statement for every agent: each gets the
    events the visibility rule built for that agent gives, no more."""
    seen = {}
    for who in (agent, flux, anchor):
        events = recent_activity_for_agent(agent=who, limit=50)
        assert events == list(_recent_for_agent(who, 50))
        seen[who.name] = {e.text for e in events if "surprise" in e.text}
    assert any("venue" in t for t in seen["Flux"])
    assert not any("venue" in t for t in seen["Anchor"])
    assert not any("plan the surprise" in t for t in seen["Entropy"])
