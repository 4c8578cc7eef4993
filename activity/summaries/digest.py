"""The catch-up digest of an agent returning after time away.

Sections: What's Happened (event counts by kind, then by agent and human),
Key Decisions (notable events of at least medium importance), Open Threads
(from constellation summaries of the period), Agent Activity (each other
agent's latest summary and last-active time), and the sections capabilities
above this one register (:func:`catch_up_section_register`: memory adds the
blocks others changed while the agent was away).  Nothing is returned for an
absence shorter than ``ACTIVITY_CATCH_UP_AFTER_MINUTES``.  The digest
fits a token budget that grows with time away, from
``ACTIVITY_CATCH_UP_MIN_TOKENS`` (an hour) to
``ACTIVITY_CATCH_UP_MAX_TOKENS`` (a week or more); lines past the budget
are left out and counted.
"""

import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from activity.llm.client import estimate_tokens
from activity.stream.models import ActivityEvent, EventType, Importance
from activity.stream.selectors import activity_counts
from activity.summaries.models import AgentSummary, ConstellationSummary
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.humanize import ago, ago_at

WEEK = timedelta(days=7)
KIND_LABELS = {
    EventType.AGENT_ACTIVATED: ("activation", "activations"),
    EventType.AGENT_DEACTIVATED: ("deactivation", "deactivations"),
    EventType.MESSAGE_RECEIVED: ("message received", "messages received"),
    EventType.MESSAGE_SENT: ("message sent", "messages sent"),
    EventType.TOOL_EXECUTED: ("tool run", "tool runs"),
    EventType.MEMORY_BLOCK_UPDATED: ("memory update", "memory updates"),
    EventType.FILE_ACCESSED: ("file access", "file accesses"),
    EventType.TASK_ASSIGNED: ("task assigned", "tasks assigned"),
    EventType.TASK_CREATED: ("task created", "tasks created"),
    EventType.TASK_COMPLETED: ("task completed", "tasks completed"),
    EventType.TASK_BLOCKED: ("task blocked", "tasks blocked"),
    EventType.TASK_CANCELLED: ("task cancelled", "tasks cancelled"),
    EventType.HANDOFF_INITIATED: ("handoff", "handoffs"),
    EventType.GROUP_RUN_STARTED: ("group run started", "group runs started"),
    EventType.GROUP_RUN_COMPLETED: ("group run completed", "group runs completed"),
    EventType.AGENT_TURN: ("turn", "turns"),
    EventType.CONSOLIDATION_RUN: ("consolidation", "consolidations"),
    EventType.NOTABLE: ("notable event", "notable events"),
}
DECISION_IMPORTANCE = [Importance.MEDIUM, Importance.HIGH, Importance.CRITICAL]
MAX_DECISIONS = 20
EXTRACTIVE_NOTE = "(extractive: sentences picked from its messages, not written)"


@dataclass(frozen=True)
class CatchUp:
    agent_id: int
    since: datetime
    away: timedelta
    text: str
    budget_tokens: int
    tokens: int
    omitted_lines: int


@dataclass(frozen=True)
class CatchUpSection:
    """A section of the digest: ``lines(agent, since, now)`` gives its
    lines (none: the section is left out); sections come by ``order``."""

    title: str
    lines: Callable[[Agent, datetime, datetime], list[str]]
    order: int
    joiner: str = "\n"


_SECTIONS: dict[str, CatchUpSection] = {}


def catch_up_section_register(
    *, title: str, lines: Callable[[Agent, datetime, datetime], list[str]], order: int
) -> None:
    """Add a section to every digest (from the registering app's
    ``AppConfig.ready``).  The digest's own sections are ordered 10 (What's
    Happened), 20 (Key Decisions), 30 (Open Threads) and 40 (Agent
    Activity); lines past the token budget go from the last section first."""
    _SECTIONS[title] = CatchUpSection(title=title, lines=lines, order=order)


def catch_up_budget(away: timedelta) -> int:
    """Tokens the digest may use: grows with the log of time away."""
    low, high = (
        settings.ACTIVITY_CATCH_UP_MIN_TOKENS,
        settings.ACTIVITY_CATCH_UP_MAX_TOKENS,
    )
    hours = max(1.0, away.total_seconds() / 3600)
    share = min(1.0, math.log(hours) / math.log(WEEK.total_seconds() / 3600))
    return int(low + (high - low) * share)


def _counted(n: int, kind: str) -> str:
    one, many = KIND_LABELS.get(kind, (kind, kind))
    return f"{n} {one if n == 1 else many}"


def _whats_happened(agent: Agent, since: datetime, now: datetime) -> list[str]:
    rows = activity_counts(
        constellation_id=agent.constellation_id, since=since, until=now
    )
    by_kind: Counter[str] = Counter()
    by_agent: dict[int, Counter[str]] = defaultdict(Counter)
    by_human: dict[int, Counter[str]] = defaultdict(Counter)
    for agent_id, user_id, kind, n in rows:
        by_kind[kind] += n
        if user_id is not None:
            by_human[user_id][kind] += n
        elif agent_id is not None and agent_id != agent.pk:
            by_agent[agent_id][kind] += n
    if not by_kind:
        return ["- Nothing was recorded in the constellation."]
    messages = by_kind[EventType.MESSAGE_RECEIVED] + by_kind[EventType.MESSAGE_SENT]
    lines = [f"- {sum(by_kind.values())} events across the constellation"]
    if messages:
        lines.append(f"- {messages} messages processed across the constellation")
    names = dict(Agent.objects.filter(pk__in=by_agent).values_list("pk", "name"))
    users = dict(
        get_user_model()
        .objects.filter(pk__in=by_human)
        .values_list("pk", get_user_model().USERNAME_FIELD)
    )

    def counts(kinds: Counter[str]) -> str:
        return ", ".join(_counted(n, k) for k, n in kinds.most_common())

    for agent_id, kinds in sorted(by_agent.items(), key=lambda i: -i[1].total()):
        lines.append(f"- {names.get(agent_id, agent_id)}: {counts(kinds)}")
    for user_id, kinds in sorted(by_human.items(), key=lambda i: -i[1].total()):
        lines.append(f"- {users.get(user_id, user_id)} (human): {counts(kinds)}")
    return lines


def _key_decisions(agent: Agent, since: datetime, now: datetime) -> list[str]:
    notables = ActivityEvent.objects.filter(
        constellation_id=agent.constellation_id,
        event_type=EventType.NOTABLE,
        importance__in=DECISION_IMPORTANCE,
        created_at__gte=since,
    ).order_by("-created_at")[:MAX_DECISIONS]
    descriptions = (e.details.get("description", e.text) for e in notables)
    return [f"- {d}" for d in dict.fromkeys(descriptions)]


def _open_threads(agent: Agent, since: datetime, now: datetime) -> list[str]:
    summaries = list(
        ConstellationSummary.objects.filter(
            constellation_id=agent.constellation_id, period_end__gte=since
        )[:5]
    )
    threads = dict.fromkeys(t for s in summaries for t in s.open_threads)
    return [f"- {t}" for t in threads]


def _agent_activity(agent: Agent, since: datetime, now: datetime) -> list[str]:
    others = Agent.objects.filter(constellation_id=agent.constellation_id).exclude(
        pk=agent.pk
    )
    summaries = {s.agent_id: s for s in AgentSummary.objects.filter(agent__in=others)}
    entries = []
    for other in sorted(
        others,
        key=lambda a: a.last_active_at or datetime.min.replace(tzinfo=now.tzinfo),
        reverse=True,
    ):
        summary = summaries.get(other.pk)
        # The agent's own last request is the one "last active" every page
        # shows; a summary's time is when its events were, not the agent.
        head = f"**{other.name}** (last active: {ago_at(other.last_active_at, now)})"
        if summary is None:
            entries.append(f"{head}\nNo summary yet.")
        elif summary.is_extractive:
            entries.append(f"{head} {EXTRACTIVE_NOTE}\n{summary.recent_summary}")
        else:
            entries.append(f"{head}\n{summary.recent_summary}")
    return entries


_OWN_SECTIONS = (
    CatchUpSection("What's Happened", _whats_happened, 10),
    CatchUpSection("Key Decisions", _key_decisions, 20),
    CatchUpSection("Open Threads", _open_threads, 30),
    CatchUpSection("Agent Activity", _agent_activity, 40, joiner="\n\n"),
)


def catch_up_build(
    *, agent: Agent, since: datetime | None = None, now: datetime | None = None
) -> CatchUp | None:
    """The digest for ``agent`` away since ``since`` (default: its last
    activity); None when it was away too briefly to need one."""
    now = now or timezone.now()
    since = since or agent.last_active_at or agent.created_at
    away = now - since
    if away < timedelta(minutes=settings.ACTIVITY_CATCH_UP_AFTER_MINUTES):
        return None
    budget = catch_up_budget(away)
    out = [f"## Constellation Update (you were last active {ago(away)})"]
    used = estimate_tokens(out[0])
    omitted = 0
    sections = sorted(
        [*_OWN_SECTIONS, *_SECTIONS.values()], key=lambda section: section.order
    )
    for section in sections:
        title, joiner = section.title, section.joiner
        items = section.lines(agent, since, now)
        if not items:
            continue
        heading = f"\n### {title}"
        cost = estimate_tokens(heading)
        kept: list[str] = []
        for item in items:
            item_cost = estimate_tokens(item) + 1
            if used + cost + item_cost > budget:
                omitted += len(items) - len(kept)
                break
            kept.append(item)
            cost += item_cost
        if kept:
            out.append(heading + "\n" + joiner.join(kept))
            used += cost
    if omitted:
        out.append(f"\n({omitted} more lines left out to fit {budget} tokens)")
    text = "\n".join(out) + "\n"
    return CatchUp(
        agent_id=agent.pk,
        since=since,
        away=away,
        text=text,
        budget_tokens=budget,
        tokens=estimate_tokens(text),
        omitted_lines=omitted,
    )


def catch_up_render(agent: Agent) -> str:
    """The digest text for the context builder ("" when none is due)."""
    catch_up = catch_up_build(agent=agent)
    return catch_up.text if catch_up else ""
