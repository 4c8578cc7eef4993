import subprocess
import sys
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from activity.stream.models import ActivityEvent, ActivityTerm, EventType, Importance
from activity.stream.recorder import recorder
from activity.stream.services import (
    PendingEvent,
    activity_events_store,
    activity_flush,
    activity_record,
    activity_recording,
    notable_flag,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    agent_token_issue,
    agent_token_revoke,
    agent_update,
)
from pattern_site.kernel.errors import InvalidInput
from tests.conftest import READY_SECONDS, REPO, subprocess_env
from tests.factories import AgentFactory, ConstellationFactory


def test_agent_create_records_one_activation(
    constellation: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        agent, _ = agent_create(constellation=constellation, name="Momentum")
    activated = ActivityEvent.objects.filter(event_type=EventType.AGENT_ACTIVATED)
    assert activated.count() == 1
    event = activated.get()
    assert event.text == "Momentum was activated: created"
    assert event.agent is None  # the system acted
    assert event.details["agent_id"] == agent.pk


def test_token_rotation_records_one_event_per_call(
    agent: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        agent_token_issue(agent=agent)
        agent_token_issue(agent=agent)
        agent_token_revoke(agent=agent)
        agent_token_revoke(agent=agent)  # nothing left to revoke: no event
    texts = list(
        ActivityEvent.objects.filter(details__agent_id=agent.pk)
        .order_by("id")
        .values_list("text", flat=True)
    )
    assert len(texts) == 3
    assert texts[0].startswith("System flagged: new API token pat_")
    assert "issued to Entropy" in texts[0] and "earlier revoked" not in texts[0]
    assert "1 earlier revoked" in texts[1]
    assert texts[2].endswith("1 API token(s) of Entropy revoked")


def test_human_deactivating_an_agent_is_recorded_as_that_human(
    agent: Any, partner: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        agent_update(agent=agent, actor=Actor.for_user(partner), is_active=False)
        agent_update(agent=agent, actor=Actor.for_user(partner), role="unchanged")
    event = ActivityEvent.objects.get(agent=agent)
    assert event.event_type == EventType.AGENT_DEACTIVATED
    assert event.actor_user == partner
    assert event.text == "Entropy was deactivated by partner"


def test_rolled_back_transaction_records_nothing(
    constellation: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        agent_create(constellation=constellation, name="Anchor")
        raise RuntimeError("abort")
    assert not ActivityEvent.objects.exists()


def test_recording_disabled_records_nothing(
    agent: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with (
        django_capture_on_commit_callbacks(execute=True),
        activity_recording(enabled=False),
    ):
        activity_record(actor=Actor.for_agent(agent), event_type=EventType.NOTABLE)
    assert not ActivityEvent.objects.exists()


def test_unknown_event_type_is_refused(agent: Any) -> None:
    with pytest.raises(InvalidInput, match="allowed: agent_activated"):
        activity_record(actor=Actor.for_agent(agent), event_type="coffee_break")


def test_batched_events_wait_in_memory_until_flushed(
    agent: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.ACTIVITY_BATCH_SIZE = 1000
    settings.ACTIVITY_FLUSH_SECONDS = 3600
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(3):
            activity_record(
                actor=Actor.for_agent(agent),
                event_type=EventType.TOOL_EXECUTED,
                details={"tool": f"tool{n}"},
            )
    assert recorder().pending() == 3
    assert not ActivityEvent.objects.exists()
    assert activity_flush() == 3
    assert ActivityEvent.objects.count() == 3
    assert recorder().pending() == 0


def test_stored_events_are_indexed_by_their_words(agent: Any, record: Any) -> None:
    record(
        actor=Actor.for_agent(agent),
        event_type=EventType.MESSAGE_SENT,
        details={"target": "Partner", "summary": "Medication reminder moved"},
    )
    terms = set(ActivityTerm.objects.values_list("term", flat=True))
    assert {"entropy", "partner", "medication", "reminder", "moved"} <= terms


def test_stored_events_are_pushed_to_the_constellation_group(
    agent: Any, record: Any
) -> None:
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(f"constellation.{agent.constellation_id}", channel)
    record(actor=Actor.for_agent(agent), event_type=EventType.TOOL_EXECUTED)
    message = async_to_sync(layer.receive)(channel)
    assert message["type"] == "constellation.event"
    assert message["event"]["type"] == "activity.events"
    assert [e["text"] for e in message["event"]["events"]] == ["Entropy ran a tool"]


def test_notable_flag_records_description_and_agents(
    agent: Any, flux: Any, partner: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        notable_flag(
            actor=Actor.for_user(partner),
            constellation=agent.constellation,
            description="Pause project-X until next month",
            importance=Importance.HIGH,
            agents_involved=[agent, flux],
        )
    event = ActivityEvent.objects.get()
    assert event.importance == Importance.HIGH
    assert event.details["agents_involved"] == [agent.pk, flux.pk]
    assert event.text == "partner flagged: Pause project-X until next month"


def test_notable_flag_refuses_agents_of_another_constellation(
    agent: Any, partner: Any
) -> None:
    stranger = AgentFactory(constellation=ConstellationFactory())
    with pytest.raises(InvalidInput, match="same constellation"):
        notable_flag(
            actor=Actor.for_user(partner),
            constellation=agent.constellation,
            description="x",
            importance=Importance.LOW,
            agents_involved=[stranger],
        )
    assert not ActivityEvent.objects.exists()


SCRIPT = """
import django
django.setup()
from django.db import transaction
from activity.stream.services import activity_record
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
agent = Agent.objects.get(pk={agent_id})
for n in range(5):
    with transaction.atomic():
        activity_record(actor=Actor.for_agent(agent), event_type="tool_executed")
"""


@pytest.mark.slow
def test_clean_exit_stores_every_batched_event(transactional_db: None) -> None:
    agent = AgentFactory(name="Archive")
    # Eager: the exit flush stores the batch itself instead of sending it
    # to a worker, so the database shows what the flush handed over.
    env = subprocess_env(
        PATTERN_ACTIVITY_BATCH_SIZE="1000",
        PATTERN_ACTIVITY_FLUSH_SECONDS="3600",
        PATTERN_CELERY_EAGER="true",
    )
    subprocess.run(
        [sys.executable, "-c", SCRIPT.format(agent_id=agent.pk)],
        cwd=REPO,
        env=env,
        check=True,
        timeout=READY_SECONDS,
    )
    assert ActivityEvent.objects.filter(agent=agent).count() == 5


def test_a_batch_past_one_statements_parameters_stores_every_event(
    agent: Any,
) -> None:
    # 11 columns an event: 300 events are more parameters than one SQLite
    # statement takes (999), so the insert goes in several.
    at = timezone.now()
    pending = [
        PendingEvent(
            constellation_id=agent.constellation_id,
            agent_id=agent.pk,
            actor_user_id=None,
            who=agent.name,
            subject=agent.name,
            event_type=EventType.MESSAGE_SENT,
            details={"target": "Partner", "summary": f"word{n}"},
            importance=Importance.LOW,
            object_kind="",
            object_id=None,
            at=at,
        )
        for n in range(300)
    ]
    events = activity_events_store(pending)
    assert len({e.pk for e in events}) == 300
    stored = dict(ActivityEvent.objects.values_list("pk", "details__summary"))
    assert [stored[e.pk] for e in events] == [f"word{n}" for n in range(300)]
    terms = dict(
        ActivityTerm.objects.filter(term__startswith="word").values_list(
            "term", "event_id"
        )
    )
    assert terms == {f"word{n}": e.pk for n, e in enumerate(events)}
