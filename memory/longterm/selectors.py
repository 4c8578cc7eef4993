"""Reads of long-term memory: archival entries, conversations, messages."""

from __future__ import annotations

from django.db.models import QuerySet

from memory.longterm.models import (
    ArchivalEntry,
    Conversation,
    ConversationStatus,
    Message,
    RetrievalConfig,
)
from memory.longterm.permissions import longterm_rows_visible
from memory.search.registry import EmbeddingState
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.agents.selectors import agent_get_private
from pattern_site.kernel.errors import NotFound

SEARCH_DOMAINS = ("archival_memory", "conversations", "constellation_messages", "all")


# The recall tool's domain: the caller's archival memory and its conversations.
RECALL_DOMAIN = "recall"


MAX_SEARCH_LIMIT = 50


MAX_QUERY_CHARS = 10_000


MESSAGE_PAGE_MAX = 200


def _filter_agent_check(*, actor: Actor, agent_id: int | None) -> None:
    # A list filtered by an agent the actor cannot see answers 404, as
    # that agent's own resources do, rather than an empty page.
    if agent_id is not None:
        agent_get_private(actor=actor, agent_id=agent_id)


def archival_entry_list_for_actor(
    *, actor: Actor, agent_id: int | None = None
) -> QuerySet[ArchivalEntry]:
    """Agents see their own entries; humans those of their constellations.
    An ``agent_id`` whose memory the actor may not see is ``NotFound``."""
    _filter_agent_check(actor=actor, agent_id=agent_id)
    return longterm_rows_visible(
        ArchivalEntry.objects.select_related("agent"), actor=actor, agent_id=agent_id
    )


def archival_entry_get_for_actor(*, actor: Actor, entry_id: int) -> ArchivalEntry:
    entry = archival_entry_list_for_actor(actor=actor).filter(pk=entry_id).first()
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
