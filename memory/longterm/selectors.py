"""Reads of long-term memory: archival entries, conversations, messages."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q, QuerySet

from memory.longterm.models import (
    ArchivalEntry,
    ArchivalLifetime,
    ArchivalSource,
    ArchivalTier,
    ConsolidationRun,
    Conversation,
    ConversationStatus,
    Message,
    MessageRole,
    RetrievalConfig,
)
from memory.longterm.permissions import (
    archival_rows_all_agents,
    longterm_rows_visible,
)
from memory.search.registry import EmbeddingState
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.agents.selectors import (
    agent_get_private,
    constellation_list_for_actor,
)
from pattern_site.kernel.errors import InvalidInput, NotFound

SEARCH_DOMAINS = ("archival_memory", "conversations", "constellation_messages", "all")


# The recall tool's domain: the caller's archival memory and its conversations.
RECALL_DOMAIN = "recall"


MAX_SEARCH_LIMIT = 50


MAX_QUERY_CHARS = 10_000
# Phrasings one search may fuse (each is a whole search).
MAX_QUERIES = 5


MESSAGE_PAGE_MAX = 200


def _filter_agent_check(*, actor: Actor, agent_id: int | None) -> None:
    # A list filtered by an agent the actor cannot see answers 404, as
    # that agent's own resources do, rather than an empty page.
    if agent_id is not None:
        agent_get_private(actor=actor, agent_id=agent_id)


def _choice(value: str | None, choices: type, what: str) -> str | None:
    if value in (None, ""):
        return None
    if value not in choices.values:
        raise InvalidInput(
            f"unknown {what} {value!r}; use one of {', '.join(choices.values)}",
            extra={"field": what},
        )
    return value


def archival_entry_list_for_actor(
    *,
    actor: Actor,
    agent_id: int | None = None,
    include_superseded: bool = False,
    source: str | None = None,
    tier: str | None = None,
    lifetime: str | None = None,
) -> QuerySet[ArchivalEntry]:
    """Agents see their own entries; humans those of their constellations.
    An ``agent_id`` whose memory the actor may not see is ``NotFound``.
    Entries consolidation merged or pruned are left out unless
    ``include_superseded``; ``source``, ``tier`` and ``lifetime`` filter."""
    _filter_agent_check(actor=actor, agent_id=agent_id)
    qs = longterm_rows_visible(
        ArchivalEntry.objects.select_related("agent"), actor=actor, agent_id=agent_id
    )
    if not include_superseded:
        qs = qs.filter(superseded_at__isnull=True)
    wanted = {
        "source": _choice(source, ArchivalSource, "source"),
        "tier": _choice(tier, ArchivalTier, "tier"),
        "lifetime": _choice(lifetime, ArchivalLifetime, "lifetime"),
    }
    return qs.filter(**{k: v for k, v in wanted.items() if v is not None})


def archival_observations_for_actor(
    *,
    actor: Actor,
    since: datetime,
    domain: str | None = None,
    ids: list[int] | None = None,
    limit: int = 20,
) -> list[ArchivalEntry]:
    """The archival entries of every agent ``actor`` may consolidate (the
    permission module decides: a consolidator's constellation), created
    since ``since``, newest first; ``domain``: only those stored with it,
    ``ids``: only these."""
    qs = archival_rows_all_agents(
        ArchivalEntry.objects.select_related("agent").filter(
            superseded_at__isnull=True, created_at__gte=since
        ),
        actor=actor,
    )
    if domain:
        qs = qs.filter(metadata__domain=domain)
    if ids is not None:
        qs = qs.filter(pk__in=ids)
    return list(qs.order_by("-created_at", "-id")[: max(1, min(limit, 100))])


def archival_entry_get_for_actor(*, actor: Actor, entry_id: int) -> ArchivalEntry:
    """One entry the actor may see, superseded or not."""
    entry = (
        archival_entry_list_for_actor(actor=actor, include_superseded=True)
        .filter(pk=entry_id)
        .first()
    )
    if entry is None:
        raise NotFound(f"archival entry {entry_id} does not exist")
    return entry


def archival_entry_get_by_label(
    *, actor: Actor, label: str, agent_id: int | None = None
) -> ArchivalEntry:
    entry = (
        archival_entry_list_for_actor(actor=actor, agent_id=agent_id)
        .filter(label=label)
        .first()
    )
    if entry is None:
        raise NotFound(f"no archival entry labelled {label!r}")
    return entry


def archival_merge_history(*, entry: ArchivalEntry) -> list[dict]:
    """What consolidation did to ``entry``, oldest first: its earlier texts
    and the entries merged into it (with whether each is still merged)."""
    events = [dict(item) for item in entry.history]
    merged = {
        row.pk: row
        for row in ArchivalEntry.objects.filter(superseded_by=entry).order_by(
            "superseded_at", "pk"
        )
    }
    for event in events:
        row = merged.get(event.get("entry_id"))  # type: ignore[arg-type]
        event["still_superseded"] = row is not None
    return events


def consolidation_runs_for_actor(
    *,
    actor: Actor,
    constellation_id: int,
    agent_id: int | None = None,
    limit: int = 10,
) -> list[ConsolidationRun]:
    """The newest consolidation runs of a constellation's scopes the actor
    may see (an agent: its own); with ``agent_id``, that agent's and the
    constellation's own."""
    qs = ConsolidationRun.objects.select_related("agent").filter(
        constellation_id=constellation_id
    )
    if agent_id is not None:
        qs = qs.filter(Q(agent_id=agent_id) | Q(agent__isnull=True))
    if actor.kind == "agent":
        assert actor.agent is not None
        qs = qs.filter(agent_id=actor.agent.pk)
    else:
        visible = constellation_list_for_actor(actor=actor).values("pk")
        qs = qs.filter(constellation__in=visible)
    return list(qs[: max(1, min(limit, 100))])


def conversation_list_for_actor(
    *, actor: Actor, agent_id: int | None = None, status: str | None = None
) -> QuerySet[Conversation]:
    """Agents see their own conversations; humans their constellations'.
    An ``agent_id`` whose memory the actor may not see is ``NotFound``."""
    _filter_agent_check(actor=actor, agent_id=agent_id)
    qs = Conversation.objects.select_related("agent")
    if status:
        qs = qs.filter(status=status)
    return longterm_rows_visible(qs, actor=actor, agent_id=agent_id)


# The kind of object a message's activity event is about.
CONVERSATION = "conversation"


def conversation_ids_readable(actor: Actor) -> QuerySet:
    """The conversations ``actor`` may read: who reads the activity events
    of their messages (an agent its own; humans their constellations')."""
    return longterm_rows_visible(
        Conversation.objects.all(), actor=actor, agent_id=None
    ).values("pk")


def conversation_get_for_actor(*, actor: Actor, conversation_id: int) -> Conversation:
    conversation = (
        conversation_list_for_actor(actor=actor).filter(pk=conversation_id).first()
    )
    if conversation is None:
        raise NotFound(f"conversation {conversation_id} does not exist")
    return conversation


def message_page_for_actor(
    *, actor: Actor, conversation_id: int, after: int = 0, limit: int = 50
) -> tuple[Conversation, list[Message], int | None]:
    """(conversation, messages after position ``after``, next cursor or None)."""
    conversation = conversation_get_for_actor(
        actor=actor, conversation_id=conversation_id
    )
    limit = max(1, min(limit, MESSAGE_PAGE_MAX))
    page = list(
        Message.objects.filter(conversation=conversation, position__gt=after).order_by(
            "position"
        )[: limit + 1]
    )
    more = len(page) > limit
    page = page[:limit]
    return conversation, page, (page[-1].position if more else None)


def retrieval_config_for(*, constellation: Constellation) -> RetrievalConfig:
    """The constellation's settings, or the defaults (not saved)."""
    config = RetrievalConfig.objects.filter(constellation=constellation).first()
    return config or RetrievalConfig(constellation=constellation)


def longterm_unindexed_count(*, actor: Actor, constellation_id: int) -> int:
    """Archival entries and messages of the constellation, visible to
    ``actor``, still waiting for their embedding (search by meaning does
    not find them yet; keyword search does)."""
    total = 0
    for model in (ArchivalEntry, Message):
        total += (
            longterm_rows_visible(model.objects.all(), actor=actor, agent_id=None)
            .filter(
                constellation_id=constellation_id,
                embedding_state=EmbeddingState.PENDING,
            )
            .count()
        )
    return total


def conversation_latest(*, agent: Agent) -> Conversation | None:
    """The conversation the agent's turns go to now: its newest one that is
    not archived (``conversation_current`` starts one when there is none)."""
    return (
        Conversation.objects.filter(agent=agent)
        .exclude(status=ConversationStatus.ARCHIVED)
        .order_by("-started_at", "-id")
        .first()
    )


def batch_answers_count(*, conversation_id: int, batch_id: str) -> int:
    """How many assistant messages the batch holds."""
    return Message.objects.filter(
        conversation_id=conversation_id, batch_id=batch_id, role=MessageRole.ASSISTANT
    ).count()
