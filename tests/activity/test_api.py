from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from activity.stream.models import ActivityEvent, EventType, Importance
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.factories import AgentFactory, ConstellationFactory, UserFactory


@pytest.fixture
def human_client(partner: Any) -> Client:
    client = Client()
    client.force_login(partner)
    return client


@pytest.fixture
def stranger(db: None) -> Any:
    return AgentFactory(constellation=ConstellationFactory(), name="Stranger")


@pytest.fixture
def stranger_client(stranger: Any) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=stranger).raw}")


def _events(record: Any, agent: Any, flux: Any) -> None:
    record(
        actor=Actor.for_agent(flux),
        event_type=EventType.MESSAGE_SENT,
        details={"target": "Bluesky", "summary": "async Rust thread"},
        ago=timedelta(hours=2),
    )
    record(
        actor=Actor.for_agent(agent),
        event_type=EventType.NOTABLE,
        importance=Importance.HIGH,
        details={"description": "Partner paused project-X"},
        ago=timedelta(hours=1),
    )


def _sent_elsewhere(record: Any, stranger: Any, summary: str) -> None:
    """An event of another constellation."""
    record(
        actor=Actor.for_agent(stranger),
        event_type=EventType.MESSAGE_SENT,
        details={"target": "Bluesky", "summary": summary},
    )


def test_agent_lists_its_constellations_activity_newest_first(
    agent_client: Client, agent: Any, flux: Any, record: Any
) -> None:
    _events(record, agent, flux)
    body = agent_client.get("/api/activity").json()
    assert [e["text"] for e in body] == [
        "Entropy flagged: Partner paused project-X",
        "Flux sent a message to Bluesky: async Rust thread",
    ]
    high = agent_client.get("/api/activity?min_importance=high").json()
    assert [e["event_type"] for e in high] == ["notable"]
    assert agent_client.get(f"/api/activity?agent_id={flux.pk}").json()[0][
        "agent_id"
    ] == (flux.pk)


def test_bad_filters_get_a_clear_422(agent_client: Client) -> None:
    response = agent_client.get("/api/activity?event_type=lunch")
    assert response.status_code == 422
    assert "allowed: agent_activated" in response.json()["detail"]


def test_other_constellations_activity_is_404(
    agent_client: Client, stranger: Any, record: Any
) -> None:
    record(actor=Actor.for_agent(stranger), event_type=EventType.TOOL_EXECUTED)
    response = agent_client.get(
        f"/api/activity?constellation_id={stranger.constellation_id}"
    )
    assert response.status_code == 404
    assert agent_client.get("/api/activity").json() == []


def test_human_outside_the_constellation_gets_404(
    constellation: Any, agent: Any, record: Any
) -> None:
    record(actor=Actor.for_agent(agent), event_type=EventType.TOOL_EXECUTED)
    outsider = Client()
    outsider.force_login(UserFactory(username="outsider"))
    url = f"/api/activity?constellation_id={constellation.pk}"
    assert outsider.get(url).status_code == 404


def test_search_finds_events_by_every_word_within_the_constellation(
    agent_client: Client,
    agent: Any,
    flux: Any,
    stranger: Any,
    record: Any,
) -> None:
    _events(record, agent, flux)
    _sent_elsewhere(record, stranger, "async Rust elsewhere")
    body = agent_client.get("/api/activity/search?q=Rust async").json()
    assert [e["text"] for e in body] == [
        "Flux sent a message to Bluesky: async Rust thread"
    ]
    assert agent_client.get("/api/activity/search?q=rust+python").json() == []
    assert agent_client.get("/api/activity/search?q=!").status_code == 422


def test_agent_flags_a_notable_event_with_agents_involved(
    agent_client: Client,
    agent: Any,
    flux: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = agent_client.post(
            "/api/tools/notable",
            {
                "description": "New policy: no political content",
                "importance": "medium",
                "agents_involved": [flux.pk],
            },
            content_type="application/json",
        )
    assert response.status_code == 201
    event = ActivityEvent.objects.get(event_type=EventType.NOTABLE)
    assert event.agent == agent
    assert event.details["agents_involved"] == [flux.pk]


def test_notable_with_a_foreign_agent_or_bad_importance_stores_nothing(
    agent_client: Client, stranger: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        foreign = agent_client.post(
            "/api/tools/notable",
            {"description": "x", "agents_involved": [stranger.pk]},
            content_type="application/json",
        )
        bad = agent_client.post(
            "/api/tools/notable",
            {"description": "x", "importance": "urgent"},
            content_type="application/json",
        )
        empty = agent_client.post(
            "/api/tools/notable",
            {"description": "   "},
            content_type="application/json",
        )
    assert foreign.status_code == 404
    assert bad.status_code == 422
    assert empty.status_code == 422
    assert not ActivityEvent.objects.filter(event_type=EventType.NOTABLE).exists()


def test_catch_up_for_the_agent_itself(
    agent_client: Client, agent: Any, flux: Any, record: Any
) -> None:
    _events(record, agent, flux)
    recent = agent_client.get("/api/context/catch-up").json()
    assert recent["due"] is False  # its token was just used
    away = agent_client.get("/api/context/catch-up?away_hours=24").json()
    assert away["due"] is True
    assert away["text"].startswith(
        "## Constellation Update (you were last active yesterday)"
    )
    assert "- Partner paused project-X" in away["text"]
    assert away["summarizer"] == "extractive"
    assert away["tokens"] <= away["budget_tokens"]


def test_catch_up_of_another_agent(
    agent_client: Client, human_client: Client, flux: Any, stranger: Any
) -> None:
    assert agent_client.get(
        f"/api/context/catch-up?agent_id={flux.pk}"
    ).status_code == (403)
    assert agent_client.get(
        f"/api/context/catch-up?agent_id={stranger.pk}"
    ).status_code == (404)
    response = human_client.get(f"/api/context/catch-up?agent_id={flux.pk}")
    assert response.status_code == 200 and response.json()["agent_id"] == flux.pk
    assert human_client.get(
        f"/api/context/catch-up?agent_id={stranger.pk}"
    ).status_code == (404)
    assert human_client.get("/api/context/catch-up").status_code == 404


def test_health_names_the_summarizer(client: Client, db: None) -> None:
    body = client.get("/api/health").json()
    assert body["summarizer"]["kind"] == "extractive"


def test_catch_up_refuses_a_negative_time_away(agent_client: Client) -> None:
    assert agent_client.get("/api/context/catch-up?away_hours=-3").status_code == 422


# --- found by Schemathesis (tests/pattern_site/test_schemathesis.py) --------


@pytest.mark.parametrize("since", ["0.5", "1700000000", "-1"])
def test_since_is_an_iso_time_not_seconds_since_1970(
    agent_client: Client, since: str
) -> None:
    response = agent_client.get("/api/activity", {"since": since})
    assert response.status_code == 422, response.content
    assert "ISO 8601" in response.json()["detail"]


def test_since_takes_an_iso_time(
    agent_client: Client, agent: Any, flux: Any, record: Any
) -> None:
    _events(record, agent, flux)
    response = agent_client.get("/api/activity", {"since": "1970-01-02T00:00:00Z"})
    assert response.status_code == 200, response.content
    assert len(response.json()) == ActivityEvent.objects.count()


@pytest.mark.parametrize(
    "body",
    [
        {"description": "Chose Lisbon", "importance": 2},
        {"description": "Chose Lisbon", "agents_involved": ["1"]},
        {"description": "Chose Lisbon", "constellation_id": 2**63},
    ],
)
def test_notable_values_of_the_wrong_type_or_range_are_refused(
    agent_client: Client, body: dict[str, Any]
) -> None:
    response = agent_client.post(
        "/api/tools/notable", body, content_type="application/json"
    )
    assert response.status_code == 422, response.content
    assert not ActivityEvent.objects.filter(event_type=EventType.NOTABLE).exists()


def test_search_tool_finds_activity_of_the_callers_constellation_only(
    agent_client: Client,
    stranger_client: Client,
    agent: Any,
    flux: Any,
    stranger: Any,
    record: Any,
) -> None:
    _events(record, agent, flux)
    _sent_elsewhere(record, stranger, "Rust project elsewhere")

    def search(client: Client, body: dict[str, Any]) -> list[dict[str, Any]]:
        response = client.post(
            "/api/tools/search",
            {"domain": "activity", **body},
            content_type="application/json",
        )
        assert response.status_code == 200, response.content
        return response.json()["results"]

    found = search(agent_client, {"query": "async Rust project"})
    # Holding more of the words ranks first; nothing of the other constellation.
    assert [h["content"] for h in found] == [
        "Flux sent a message to Bluesky: async Rust thread",
        "Entropy flagged: Partner paused project-X",
    ]
    assert {h["kind"] for h in found} == {"activity"}
    assert all("elsewhere" not in h["content"] for h in found)
    by_flux = search(
        agent_client, {"query": "Rust project", "filters": {"agent_id": flux.pk}}
    )
    assert [h["agent_name"] for h in by_flux] == ["Flux"]
    assert search(agent_client, {"query": "Rust", "filters": {"tags": ["x"]}}) == []
    theirs = search(stranger_client, {"query": "Rust project"})
    assert [h["content"] for h in theirs] == [
        "Stranger sent a message to Bluesky: Rust project elsewhere"
    ]
