"""Every read of the memory app and every decision of who may see what.

Rows of another constellation, and for agents other agents' archival
entries and conversations, do not exist for the caller (``NotFound``).
"""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from coordination.actors import Actor
from coordination.errors import InvalidInput, NotFound
from coordination.models import Constellation
from coordination.selectors import (
    agent_get_for_actor,
    constellation_get_for_actor,
    constellation_list_for_actor,
)

# --- Long-term memory: archival entries, conversations, search ----------------
from memory.embeddings import embed_query, embedding_status
from memory.indexes import ARCHIVAL_INDEX, MESSAGE_INDEX
from memory.models import ArchivalEntry, Conversation, Message, RetrievalConfig
from memory.retrieval import SEARCH_MODES, Hit, Rerank, SearchOutcome, search

SEARCH_DOMAINS = ("archival_memory", "conversations", "constellation_messages", "all")
# Seed 001's ``recall``: the caller's archival memory and its conversations.
RECALL_DOMAIN = "recall"
MAX_SEARCH_LIMIT = 50
MAX_QUERY_CHARS = 10_000
MESSAGE_PAGE_MAX = 200


def archival_entry_list_for_actor(
    *, actor: Actor, agent_id: int | None = None
) -> QuerySet[ArchivalEntry]:
    """Agents see their own entries; humans those of their constellations."""
    return _agent_owned(
        ArchivalEntry.objects.select_related("agent"), actor=actor, agent_id=agent_id
    )


def _agent_owned(qs: QuerySet, *, actor: Actor, agent_id: int | None) -> QuerySet:
    """Rows owned by an agent: an agent sees its own, a human those of the
    agents of their constellations (optionally one agent's)."""
    if actor.kind == "agent":
        assert actor.agent is not None
        if agent_id is not None and agent_id != actor.agent.pk:
            return qs.none()
        return qs.filter(agent=actor.agent)
    visible = constellation_list_for_actor(actor=actor).values("pk")
    qs = qs.filter(constellation__in=visible)
    if agent_id is not None:
        qs = qs.filter(agent_id=agent_id)
    return qs


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
    """Agents see their own conversations; humans their constellations'."""
    qs = Conversation.objects.select_related("agent")
    if status:
        qs = qs.filter(status=status)
    return _agent_owned(qs, actor=actor, agent_id=agent_id)


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


@dataclass(frozen=True)
class SearchFilters:
    agent_id: int | None = None
    tags: tuple[str, ...] = ()
    metadata_keys: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    role: str | None = None
    conversation_id: int | None = None


@dataclass
class SearchResult:
    """Results of a search over one or more domains, best first."""

    query: str
    domain: str
    mode_requested: str
    mode_used: str
    degraded: str
    hits: list[tuple[str, Hit]] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def archival_ids(self) -> list[int]:
        return [hit.row.pk for kind, hit in self.hits if kind == "archival"]


def _search_constellation(actor: Actor, constellation_id: int | None) -> Constellation:
    if actor.kind == "agent":
        assert actor.agent is not None
        return actor.agent.constellation
    if constellation_id is not None:
        return constellation_get_for_actor(
            actor=actor, constellation_id=constellation_id
        )
    visible = list(constellation_list_for_actor(actor=actor)[:2])
    if len(visible) != 1:
        raise InvalidInput(
            "say which constellation to search (constellation_id)"
            if visible
            else "you belong to no constellation"
        )
    return visible[0]


def _filtered(qs: QuerySet, filters: SearchFilters, *, messages: bool) -> QuerySet:
    if filters.agent_id is not None:
        qs = qs.filter(agent_id=filters.agent_id)
    if filters.since is not None:
        qs = qs.filter(created_at__gte=filters.since)
    if filters.until is not None:
        qs = qs.filter(created_at__lte=filters.until)
    if messages:
        if filters.role:
            qs = qs.filter(role=filters.role)
        if filters.conversation_id is not None:
            qs = qs.filter(conversation_id=filters.conversation_id)
        if filters.tags or filters.metadata_keys:
            return qs.none()  # messages carry neither tags nor metadata
    else:
        if filters.role or filters.conversation_id is not None:
            return qs.none()
        for tag in filters.tags:
            qs = qs.filter(tags__icontains=f'"{tag.strip().lower()}"')
        for key in filters.metadata_keys:
            qs = qs.filter(metadata__has_key=key)
    return qs


def memory_search(
    *,
    actor: Actor,
    query: str,
    domain: str = "archival_memory",
    mode: str = "auto",
    limit: int = 10,
    filters: SearchFilters | None = None,
    constellation_id: int | None = None,
) -> SearchResult:
    """Search long-term memory as ``actor`` may see it.

    Domains: ``archival_memory`` (an agent's own entries; a human's
    constellation's), ``conversations`` (an agent's own messages),
    ``constellation_messages`` (every message of the constellation) and
    ``all`` (archival_memory plus constellation_messages); and
    ``recall`` (archival_memory plus conversations, seed 001's recall).
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("the search query is empty; give some words to look for")
    if len(query) > MAX_QUERY_CHARS:
        query = query[:MAX_QUERY_CHARS]
    if domain not in (*SEARCH_DOMAINS, RECALL_DOMAIN):
        raise InvalidInput(
            f"unknown domain {domain!r}; use one of {', '.join(SEARCH_DOMAINS)}"
        )
    if mode not in SEARCH_MODES:
        raise InvalidInput(
            f"unknown mode {mode!r}; use one of {', '.join(SEARCH_MODES)}"
        )
    limit = max(1, min(int(limit), MAX_SEARCH_LIMIT))
    filters = filters or SearchFilters()
    constellation = _search_constellation(actor, constellation_id)
    if filters.agent_id is not None and actor.kind != "agent":
        agent_get_for_actor(actor=actor, agent_id=filters.agent_id)

    own_only = actor.kind == "agent"
    agent_pk = actor.agent.pk if actor.agent is not None else None
    targets: list[tuple[str, Any, QuerySet, list[int] | None]] = []
    if domain in ("archival_memory", "all", RECALL_DOMAIN):
        qs = archival_entry_list_for_actor(actor=actor).filter(
            constellation=constellation
        )
        owners = [agent_pk] if own_only else _owner(filters)
        targets.append(
            ("archival", ARCHIVAL_INDEX, _filtered(qs, filters, messages=False), owners)
        )
    if domain in ("conversations", "constellation_messages", "all", RECALL_DOMAIN):
        qs = Message.objects.select_related("agent", "conversation").filter(
            constellation=constellation
        )
        owners = _owner(filters)
        if domain in ("conversations", RECALL_DOMAIN) and own_only:
            qs, owners = qs.filter(agent_id=agent_pk), [agent_pk]
        targets.append(
            ("message", MESSAGE_INDEX, _filtered(qs, filters, messages=True), owners)
        )

    status = embedding_status()
    cache: dict[str, Any] = {}

    def query_vector(text: str) -> Any:
        if "v" not in cache:
            cache["v"] = embed_query(text) if status.available else None
        return cache["v"]

    config = retrieval_config_for(constellation=constellation)
    rerank = (
        Rerank(decay_rate=config.decay_rate, now=timezone.now())
        if config.rerank_enabled
        else None
    )
    outcomes: list[tuple[str, SearchOutcome]] = []
    for kind, index, allowed, owners in targets:
        outcome = search(
            index,
            text=query,
            allowed=allowed,
            scope_id=constellation.pk,
            owner_ids=owners,
            mode=mode,
            limit=limit,
            query_vector=query_vector,
            rerank=rerank,
            degraded_reason=status.reason,
        )
        outcomes.append((kind, outcome))
    merged = sorted(
        ((kind, hit) for kind, outcome in outcomes for hit in outcome.hits),
        key=lambda pair: -pair[1].score,
    )[:limit]
    first = outcomes[0][1]
    degraded = first.degraded
    if degraded and degraded == status.reason:
        degraded = embedding_status().reason  # a failed load is known only now
    timings: dict[str, float] = {}
    for kind, outcome in outcomes:
        for key, value in outcome.timings_ms.items():
            timings[f"{kind}.{key}"] = value
    return SearchResult(
        query=query,
        domain=domain,
        mode_requested=mode,
        mode_used=first.mode_used,
        degraded=degraded,
        hits=merged,
        timings_ms=timings,
    )


def _owner(filters: SearchFilters) -> list[int] | None:
    return [filters.agent_id] if filters.agent_id is not None else None


def memory_agent_for_write(*, actor: Actor, agent_id: int | None) -> Any:
    """Whose long-term memory a write goes to: an agent's own, or (humans)
    any agent of their constellations."""
    if actor.kind == "agent":
        assert actor.agent is not None
        if agent_id is not None and agent_id != actor.agent.pk:
            raise NotFound(f"agent {agent_id} does not exist")
        return actor.agent
    if agent_id is None:
        raise InvalidInput("say whose memory this is (agent_id)")
    return agent_get_for_actor(actor=actor, agent_id=agent_id)


def search_hit_payload(kind: str, hit: Hit) -> dict[str, Any]:
    """One result as the API and the dashboard show it, with provenance."""
    row = hit.row
    payload: dict[str, Any] = {
        "kind": kind,
        "id": row.pk,
        "agent_id": row.agent_id,
        "agent_name": row.agent.name,
        "content": row.content,
        "snippet_html": hit.snippet_html,
        "created_at": row.created_at,
        "duplicates": hit.duplicates,
        "scores": {
            "fts_rank": hit.fts_rank,
            "bm25": hit.bm25,
            "vector_rank": hit.vector_rank,
            "vector_distance": hit.vector_distance,
            "fused": hit.fused_score,
            "relevance": hit.relevance,
            "score": hit.score,
        },
    }
    if kind == "archival":
        payload.update(
            label=row.label,
            tags=row.tags,
            provenance={
                "store": "archival_memory",
                "agent": row.agent.name,
                "source": row.source,
                "label": row.label,
                "entry_id": row.pk,
            },
        )
    else:
        payload.update(
            conversation_id=row.conversation_id,
            role=row.role,
            position=row.position,
            provenance={
                "store": "conversation",
                "agent": row.agent.name,
                "conversation_id": row.conversation_id,
                "conversation_title": row.conversation.title,
                "position": row.position,
                "author": row.author,
            },
        )
    return payload
