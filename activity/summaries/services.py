"""Writes of summaries, and the retention fold of old events.

The summary services take plain inputs: ``agent_summary_refresh`` gets the
messages to summarise (speaker, text, time) from its caller, and an
optional ``embed`` callable for the extractive summarizer.  Fewer than
``ACTIVITY_SUMMARY_MIN_MESSAGES`` new messages since the last summary
write nothing (the cost guard).  An LLM that refuses (daily budget) or
fails leaves the extractive summarizer to write the summary instead.
"""

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from activity.llm.client import LLMUnavailable
from activity.stream.models import (
    IMPORTANCE_RANK,
    ActivityEvent,
    ActivityTerm,
    EventType,
    Importance,
)
from activity.summaries.models import AgentSummary, ConstellationSummary
from activity.summaries.summarizers import (
    Draft,
    Embed,
    ExtractiveSummarizer,
    Summarizer,
    SummaryMessage,
    summarizer_get,
)
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.errors import LimitExceeded

logger = logging.getLogger(__name__)

SUMMARY_EVENTS = (EventType.MESSAGE_RECEIVED, EventType.MESSAGE_SENT)
CONSTELLATION_EVENT_LINES = 400
FOLD_CHUNK = 2000


def embedder() -> Embed | None:
    """The configured embedding callable (``ACTIVITY_EMBEDDER``), if any."""
    path = settings.ACTIVITY_EMBEDDER
    return import_string(path) if path else None


def _draft(
    summarizer: Summarizer, embed: Embed | None, method: str, **kwargs: object
) -> Draft:
    try:
        return getattr(summarizer, method)(**kwargs)
    except (LimitExceeded, LLMUnavailable) as exc:
        if isinstance(summarizer, ExtractiveSummarizer):
            raise
        logger.warning("LLM summary refused or failed, extracting: %s", exc)
        return getattr(ExtractiveSummarizer(embed), method)(**kwargs)


def conversation_summary_draft(
    *,
    constellation_id: int,
    agent_name: str,
    previous: str,
    messages: Sequence[SummaryMessage],
    model: str = "",
) -> Draft:
    """A summary of ``messages`` folding in the ``previous`` one: by
    ``model`` when an LLM is configured (extracted when it fails or the
    budget is spent), else extracted, the previous summary being one of the
    texts sentences are picked from."""
    embed = embedder()
    summarizer = summarizer_get(embed, model=model)
    if isinstance(summarizer, ExtractiveSummarizer) and previous:
        earlier = SummaryMessage(speaker="earlier", text=previous, at=messages[0].at)
        messages = [earlier, *messages]
    return _draft(
        summarizer,
        embed,
        "agent",
        constellation_id=constellation_id,
        agent_name=agent_name,
        previous=previous,
        messages=messages,
    )


def agent_summary_refresh(
    *,
    agent: Agent,
    messages: Sequence[SummaryMessage],
    embed: Embed | None = None,
) -> AgentSummary | None:
    """Summarise ``agent``'s messages newer than its last summary; None
    when there are too few of them to be worth a summary."""
    existing = AgentSummary.objects.filter(agent=agent).first()
    since = existing.covered_until if existing else None
    new = sorted(
        (m for m in messages if since is None or m.at > since), key=lambda m: m.at
    )
    if len(new) < settings.ACTIVITY_SUMMARY_MIN_MESSAGES:
        return None
    draft = _draft(
        summarizer_get(embed),
        embed,
        "agent",
        constellation_id=agent.constellation_id,
        agent_name=agent.name,
        previous=existing.recent_summary if existing else "",
        messages=new,
    )
    with transaction.atomic():
        summary = existing or AgentSummary(agent=agent)
        summary.recent_summary = draft.summary
        summary.messages_covered = (existing.messages_covered if existing else 0) + len(
            new
        )
        summary.covered_until = new[-1].at
        summary.generated_at = timezone.now()
        summary.last_active = agent.last_active_at or new[-1].at
        summary.model = draft.model[:100]
        summary.tokens_used = draft.tokens
        summary.full_clean()
        summary.save()
    return summary


def agent_summary_refresh_from_activity(*, agent_id: int) -> AgentSummary | None:
    """Refresh a summary from the agent's message events alone."""
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        return None
    existing = AgentSummary.objects.filter(agent=agent).first()
    events = ActivityEvent.objects.filter(agent=agent, event_type__in=SUMMARY_EVENTS)
    if existing is not None and existing.covered_until is not None:
        events = events.filter(created_at__gt=existing.covered_until)
    messages = [
        SummaryMessage(speaker=agent.name, text=e.text, at=e.created_at)
        for e in events.order_by("-created_at")[:200]
    ]
    return agent_summary_refresh(agent=agent, messages=messages, embed=embedder())


def agent_summaries_refresh() -> int:
    """The beat: refresh every active agent's summary; returns how many."""
    ids = Agent.objects.filter(is_active=True).values_list("pk", flat=True)
    return sum(
        1 for agent_id in ids if agent_summary_refresh_from_activity(agent_id=agent_id)
    )


def constellation_summary_generate(
    *, constellation: Constellation, period_start: datetime, period_end: datetime
) -> ConstellationSummary | None:
    """Summarise the constellation's events of a period; None if it had none."""
    events = ActivityEvent.objects.filter(
        constellation=constellation,
        created_at__gte=period_start,
        created_at__lt=period_end,
    )
    lines = [
        e.text
        for e in events.exclude(event_type=EventType.TOOL_EXECUTED).order_by(
            "-created_at"
        )[:CONSTELLATION_EVENT_LINES]
    ][::-1]
    if not lines:
        return None
    floor = IMPORTANCE_RANK[Importance.MEDIUM]
    notables = [
        e.details.get("description", e.text)
        for e in events.filter(event_type=EventType.NOTABLE).order_by("created_at")
        if IMPORTANCE_RANK.get(e.importance, 0) >= floor
    ]
    agent_summaries = [
        f"{s.agent.name}: {s.recent_summary}"
        for s in AgentSummary.objects.filter(
            agent__constellation=constellation
        ).select_related("agent")
    ]
    embed = embedder()
    draft = _draft(
        summarizer_get(embed),
        embed,
        "constellation",
        constellation_id=constellation.pk,
        period=(period_start, period_end),
        events=lines,
        notables=notables,
        agent_summaries=agent_summaries,
    )
    summary = ConstellationSummary(
        constellation=constellation,
        period_start=period_start,
        period_end=period_end,
        summary=draft.summary,
        key_decisions=draft.key_decisions,
        open_threads=draft.open_threads,
        model=draft.model[:100],
        tokens_used=draft.tokens,
    )
    summary.full_clean()
    summary.save()
    return summary


def constellation_summaries_generate(*, now: datetime | None = None) -> int:
    """The beat: one summary per constellation since its last one."""
    now = now or timezone.now()
    period = timedelta(hours=settings.ACTIVITY_CONSTELLATION_SUMMARY_HOURS)
    made = 0
    for constellation in Constellation.objects.all():
        last = ConstellationSummary.objects.filter(constellation=constellation).first()
        start = last.period_end if last else now - period
        if now - start < period:
            continue
        if constellation_summary_generate(
            constellation=constellation, period_start=start, period_end=now
        ):
            made += 1
    return made


def activity_retention_fold(*, now: datetime | None = None) -> int:
    """Fold events older than ``ACTIVITY_RETENTION_DAYS`` into a summary of
    their period, then delete them; returns how many were deleted."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.ACTIVITY_RETENTION_DAYS)
    deleted = 0
    for constellation in Constellation.objects.all():
        old = ActivityEvent.objects.filter(
            constellation=constellation, created_at__lt=cutoff
        )
        oldest = old.order_by("created_at").values_list("created_at", flat=True)
        start = oldest.first()
        if start is None:
            continue
        constellation_summary_generate(
            constellation=constellation, period_start=start, period_end=cutoff
        )
        while True:
            ids = list(old.values_list("pk", flat=True)[:FOLD_CHUNK])
            if not ids:
                break
            with transaction.atomic():
                ActivityTerm.objects.filter(event_id__in=ids).delete()
                deleted += ActivityEvent.objects.filter(pk__in=ids).delete()[0]
    return deleted
