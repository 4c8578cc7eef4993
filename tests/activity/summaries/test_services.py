from datetime import datetime, timedelta
from typing import Any

import pytest

from activity.stream.models import ActivityEvent, ActivityTerm, EventType, Importance
from activity.summaries.models import AgentSummary, ConstellationSummary
from activity.summaries.services import (
    activity_retention_fold,
    agent_summary_refresh,
    agent_summary_refresh_from_activity,
    constellation_summary_generate,
)
from activity.summaries.summarizers import ExtractiveSummarizer, SummaryMessage
from memory.search.embedder import embed_texts, embedding_status
from pattern_site.kernel.actors import Actor

# A real exchange between the partner and an agent (kept verbatim).
CONVERSATION = [
    ("Partner", "Morning. I slept badly and the tax forms are due Friday."),
    (
        "Entropy",
        "Let's split the tax forms into small steps. First, find last year's "
        "return. Second, gather the income statements.",
    ),
    ("Partner", "I found last year's return in the blue folder."),
    (
        "Entropy",
        "Great. The income statements are the next step for the tax forms. "
        "Do you have the statements from both employers?",
    ),
    ("Partner", "Only one. The second employer never sent theirs."),
    (
        "Entropy",
        "I drafted an email asking the second employer for the income "
        "statement. Shall I schedule it for 9am?",
    ),
    ("Partner", "Yes please. Also remind me to drink water."),
    (
        "Entropy",
        "Scheduled the email to the employer and asked Anchor to add a water "
        "reminder. The tax forms now need only the missing statement.",
    ),
]


def _messages(now: datetime, start: timedelta = timedelta(hours=3)) -> list[Any]:
    return [
        SummaryMessage(
            speaker=speaker, text=text, at=now - start + timedelta(minutes=i)
        )
        for i, (speaker, text) in enumerate(CONVERSATION)
    ]


def test_extractive_summary_of_a_real_conversation_keeps_its_thread(
    now: datetime,
) -> None:
    draft = ExtractiveSummarizer().agent(
        constellation_id=1, agent_name="Entropy", previous="", messages=_messages(now)
    )
    assert draft.model == "extractive:lexical"
    assert draft.tokens == 0
    assert "tax forms" in draft.summary
    assert "drink water" not in draft.summary
    assert draft.summary.count(": ") == 3  # three picked sentences, by speaker


def test_extractive_summary_ranks_by_embeddings_when_a_model_is_given(
    now: datetime,
) -> None:
    if not embedding_status().available:
        pytest.skip("the local embedding model is not installed")
    draft = ExtractiveSummarizer(embed_texts).agent(
        constellation_id=1, agent_name="Entropy", previous="", messages=_messages(now)
    )
    assert draft.model == "extractive:embedding"
    assert "tax forms" in draft.summary or "income statement" in draft.summary


def test_fewer_than_five_new_messages_write_no_summary(
    agent: Any, now: datetime
) -> None:
    assert agent_summary_refresh(agent=agent, messages=_messages(now)[:4]) is None
    assert not AgentSummary.objects.exists()


def test_refresh_counts_only_messages_newer_than_the_last_summary(
    agent: Any, now: datetime
) -> None:
    first = agent_summary_refresh(agent=agent, messages=_messages(now))
    assert first is not None and first.messages_covered == 8
    again = _messages(now) + _messages(now, start=timedelta(minutes=30))[:3]
    assert agent_summary_refresh(agent=agent, messages=again) is None  # 3 new
    more = again + _messages(now, start=timedelta(minutes=20))[:5]
    refreshed = agent_summary_refresh(agent=agent, messages=more)
    assert refreshed is not None
    assert refreshed.messages_covered == 16
    assert refreshed.covered_until == more[-1].at


def test_beat_refresh_summarises_an_agent_from_its_message_events(
    agent: Any, record: Any, settings: Any
) -> None:
    settings.ACTIVITY_EMBEDDER = ""
    for speaker, text in CONVERSATION[:6]:
        record(
            actor=Actor.for_agent(agent),
            event_type=EventType.MESSAGE_SENT,
            details={"target": "Partner", "summary": f"{speaker} said {text}"},
        )
    summary = agent_summary_refresh_from_activity(agent_id=agent.pk)
    assert summary is not None
    assert summary.model == "extractive:lexical"
    assert summary.messages_covered == 6


def test_constellation_summary_takes_decisions_from_notable_events(
    agent: Any, record: Any, now: datetime, settings: Any
) -> None:
    settings.ACTIVITY_EMBEDDER = ""
    record(
        actor=Actor.for_agent(agent),
        event_type=EventType.NOTABLE,
        importance=Importance.HIGH,
        details={"description": "Tax forms go out Thursday"},
        ago=timedelta(hours=2),
    )
    record(
        actor=Actor.for_agent(agent),
        event_type=EventType.MESSAGE_RECEIVED,
        details={"source": "Partner", "summary": "Should we move the dentist?"},
        ago=timedelta(hours=1),
    )
    summary = constellation_summary_generate(
        constellation=agent.constellation,
        period_start=now - timedelta(days=1),
        period_end=now,
    )
    assert summary is not None
    assert summary.key_decisions == ["Tax forms go out Thursday"]
    assert summary.open_threads == [
        "Entropy received a message from Partner: Should we move the dentist?"
    ]
    assert summary.is_extractive


def test_retention_folds_old_events_into_a_summary_and_deletes_them(
    agent: Any, record: Any, now: datetime, settings: Any
) -> None:
    settings.ACTIVITY_EMBEDDER = ""
    settings.ACTIVITY_RETENTION_DAYS = 30
    for days in (40, 35, 1):
        record(
            actor=Actor.for_agent(agent),
            event_type=EventType.MESSAGE_SENT,
            details={"target": "Partner", "summary": f"note from {days} days ago"},
            ago=timedelta(days=days),
        )
    assert activity_retention_fold(now=now) == 2
    remaining = ActivityEvent.objects.get()
    assert "1 days ago" in remaining.text
    assert ActivityTerm.objects.exclude(event=remaining).count() == 0
    folded = ConstellationSummary.objects.get()
    assert folded.period_end == now - timedelta(days=30)
    assert "40 days ago" in folded.summary and "35 days ago" in folded.summary
