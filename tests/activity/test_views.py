from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import transaction
from django.test import Client

from activity.stream.models import ActivityEvent, EventType, Importance
from activity.summaries.models import AgentSummary
from pattern_site.asgi import application
from pattern_site.kernel.actors import Actor
from tests.factories import AgentFactory, ConstellationFactory, UserFactory
from tests.pattern_site.kernel.agents.test_consumers import _session_headers


@pytest.fixture
def human(partner: Any) -> Client:
    client = Client()
    client.force_login(partner)
    return client


def test_feed_page_shows_events_filters_and_timeline(
    human: Client, constellation: Any, agent: Any, flux: Any, record: Any
) -> None:
    record(
        actor=Actor.for_agent(flux),
        event_type=EventType.MESSAGE_SENT,
        details={"target": "Bluesky", "summary": "async Rust"},
        ago=timedelta(hours=3),
    )
    record(
        actor=Actor.for_agent(agent),
        event_type=EventType.NOTABLE,
        importance=Importance.HIGH,
        details={"description": "Paused project-X"},
        ago=timedelta(hours=1),
    )
    page = human.get(f"/activity/constellations/{constellation.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Flux sent a message to Bluesky: async Rust" in html
    # Two events within six hours: the 6-hour span, one cell each.
    assert "Activity over the last 6 hours" in html
    assert html.count('class="timeline-cell"') == 2
    assert "extractive (sentences picked from the source" in html
    filtered = human.get(
        f"/activity/constellations/{constellation.pk}/?importance=high"
    ).content.decode()
    assert "Paused project-X" in filtered and "async Rust" not in filtered


def test_feed_page_of_another_constellation_is_404(human: Client, db: None) -> None:
    other = ConstellationFactory(partner=UserFactory(username="someone"))
    assert human.get(f"/activity/constellations/{other.pk}/").status_code == 404


def test_partner_flags_a_notable_event_from_the_dashboard(
    human: Client,
    constellation: Any,
    flux: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    url = f"/activity/constellations/{constellation.pk}/notable/"
    with django_capture_on_commit_callbacks(execute=True):
        response = human.post(
            url,
            {
                "description": "Medication review next week",
                "importance": "high",
                "agents_involved": [flux.pk],
            },
        )
        invalid = human.post(url, {"description": "", "importance": "high"})
    assert response.status_code == invalid.status_code == 302
    event = ActivityEvent.objects.get()
    assert event.actor_user.username == "partner"
    assert event.details["agents_involved"] == [flux.pk]
    page = human.get(response["Location"]).content.decode()
    assert "Medication review next week" in page


def test_constellation_page_shows_summaries_and_catch_up_links(
    human: Client, constellation: Any, agent: Any, flux: Any, now: Any
) -> None:
    AgentSummary.objects.create(
        agent=flux,
        recent_summary="Flux: handled Bluesky threads.",
        generated_at=now,
        model="extractive:lexical",
    )
    html = human.get(f"/constellations/{constellation.pk}/").content.decode()
    assert "Flux: handled Bluesky threads." in html
    assert f"/activity/agents/{flux.pk}/catch-up/" in html
    assert "catch-up for Entropy" in html
    assert "No constellation summary yet." in html


def test_catch_up_preview_as_if_away_a_week(
    human: Client, agent: Any, flux: Any, record: Any
) -> None:
    record(
        actor=Actor.for_agent(flux),
        event_type=EventType.NOTABLE,
        importance=Importance.MEDIUM,
        details={"description": "Memory redesign approved"},
        ago=timedelta(days=3),
    )
    record(
        actor=Actor.for_agent(flux),
        event_type=EventType.NOTABLE,
        importance=Importance.MEDIUM,
        details={"description": "<script>alert(1)</script> is not markup"},
        ago=timedelta(days=2),
    )
    html = human.get(f"/activity/agents/{agent.pk}/catch-up/?away=168").content.decode()
    # The digest's Markdown is rendered as a page, its raw HTML escaped.
    assert "Constellation Update (you were last active 7 days ago)" in html
    assert "<li>Memory redesign approved</li>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; is not markup" in html
    assert "<script>alert(1)" not in html
    recent = human.get(f"/activity/agents/{agent.pk}/catch-up/").content.decode()
    assert f"{agent.name} has not been active yet" in recent


def test_catch_up_preview_of_another_constellations_agent_is_404(
    human: Client, db: None
) -> None:
    other = AgentFactory(constellation=ConstellationFactory(name="Elsewhere"))
    assert human.get(f"/activity/agents/{other.pk}/catch-up/").status_code == 404


@pytest.mark.django_db(transaction=True)
async def test_live_feed_receives_events_over_the_constellation_websocket(
    partner: Any, constellation: Any, agent: Any
) -> None:
    communicator = WebsocketCommunicator(
        application,
        f"/ws/constellations/{constellation.pk}/",
        headers=await _session_headers(partner),
    )
    connected, _ = await communicator.connect()
    assert connected
    assert (await communicator.receive_json_from())["type"] == "presence.joined"

    def write() -> None:
        from activity.stream.services import activity_record

        with transaction.atomic():
            activity_record(
                actor=Actor.for_agent(agent),
                event_type=EventType.TOOL_EXECUTED,
                details={"tool": "recall"},
            )

    await sync_to_async(write)()
    event = await communicator.receive_json_from(timeout=5)
    assert event["type"] == "activity.events"
    assert [e["text"] for e in event["events"]] == ["Entropy ran recall"]
    await communicator.disconnect()
