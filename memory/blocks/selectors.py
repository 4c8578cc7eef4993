"""Reads of memory blocks and every decision of who may do what with them.

Visibility: an agent sees its own blocks, blocks attached to it, and the
constellation-level blocks of its constellation; anything else does not
exist for it (``NotFound``).  Humans see every block of their
constellations; the system sees everything.

Rights (``block_access_for_actor``): an agent's right is the weaker of the
block's permission (seed 003) and, for a block shared with it, the
attachment's access.  Partner/Human blocks are read-only to agents except
through an approval request (``block_approval_needed``).  Log blocks are
system-maintained: read-only to agents.  Humans of the constellation may
edit any of its blocks; the system bypasses every check.

Every read of the memory app and every decision of who may see what.

Rows of another constellation, and for agents other agents' archival
entries and conversations, do not exist for the caller (``NotFound``).
"""

from __future__ import annotations

import uuid
from collections import namedtuple
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Literal

from django.db import connection, transaction
from django.db.models import CharField, Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Cast
from django.utils import timezone
from loro import LoroDoc

from coordination.actors import Actor
from coordination.errors import InvalidInput, NotFound, PermissionDenied
from coordination.models import Agent, Constellation
from coordination.selectors import (
    agent_get_for_actor,
    constellation_get_for_actor,
    constellation_list_for_actor,
)
from memory import doc_cache, documents
from memory.embeddings import embed_query, embedding_status
from memory.indexes import ARCHIVAL_INDEX, MESSAGE_INDEX
from memory.models import (
    ApprovalStatus,
    ArchivalEntry,
    BlockApproval,
    BlockAttachment,
    BlockSnapshot,
    BlockType,
    BlockUpdate,
    Conversation,
    MemoryBlock,
    Message,
    Permission,
    RetrievalConfig,
    SharedAccess,
)
from memory.retrieval import SEARCH_MODES, Hit, Rerank, SearchOutcome, search
from pattern_site.db.compiled import CompiledQuery

Access = Literal["read", "append", "write"]
_RANK: dict[str, int] = {"read": 0, "append": 1, "write": 2}
PERMISSION_ACCESS: dict[str, Access] = {
    Permission.READ_ONLY: "read",
    Permission.PARTNER: "read",
    Permission.HUMAN: "read",
    Permission.APPEND: "append",
    Permission.READ_WRITE: "write",
    Permission.ADMIN: "write",
}
SHARED_ACCESS: dict[str, Access] = {
    SharedAccess.READ_ONLY: "read",
    SharedAccess.APPEND_ONLY: "append",
    SharedAccess.READ_WRITE: "write",
}
# Prompt names of permissions and shared access (seed 001/003 spelling).
PERMISSION_LABEL = dict(Permission.choices)
SHARED_ACCESS_LABEL = dict(SharedAccess.choices)


def _parse_id(block_id: object) -> uuid.UUID:
    try:
        return uuid.UUID(str(block_id))
    except ValueError:
        raise NotFound(f"block {block_id} does not exist") from None


def block_list_for_actor(
    *, actor: Actor, agent_id: int | None = None
) -> QuerySet[MemoryBlock]:
    """Blocks ``actor`` may see; with ``agent_id``, those in that agent's memory.

    Agents get each block annotated with ``shared_access`` (their
    attachment's access, or None), so rights need no further query.
    """
    qs = MemoryBlock.objects.select_related("owner", "constellation")
    if actor.kind == "agent":
        assert actor.agent is not None
        agent = actor.agent
        attached = BlockAttachment.objects.filter(block=OuterRef("pk"), agent=agent)
        shared = BlockAttachment.objects.filter(agent=agent).values("block_id")
        qs = qs.filter(
            Q(owner=agent)
            | Q(owner__isnull=True, constellation_id=agent.constellation_id)
            | Q(pk__in=shared)
        ).annotate(shared_access=Subquery(attached.values("access")[:1]))
        if agent_id is not None and agent_id != agent.pk:
            return qs.none()
        return qs
    if actor.kind == "human":
        qs = qs.filter(constellation__in=constellation_list_for_actor(actor=actor))
    if agent_id is not None:
        qs = qs.filter(
            Q(owner_id=agent_id)
            | Q(attachments__agent_id=agent_id)
            | Q(owner__isnull=True, constellation__agents=agent_id)
        ).distinct()
    return qs


def block_get_for_actor(*, actor: Actor, block_id: object) -> MemoryBlock:
    block = block_list_for_actor(actor=actor).filter(pk=_parse_id(block_id)).first()
    if block is None:
        raise NotFound(f"block {block_id} does not exist")
    return block


_OWN_BLOCK_BY_LABEL = CompiledQuery(
    lambda owner_id, label: MemoryBlock.objects.filter(
        owner_id=owner_id, label=label
    ).order_by()[:1],
    owner_id=-7_406_193,
    label="\x00label",
)


def block_get_by_label_for_agent(*, agent: Agent, label: str) -> MemoryBlock:
    """The block an agent means by ``label``: its own, else shared, else the
    constellation's."""
    # The common case, answered by the unique index; no joins (the agent
    # and its constellation are at hand), no ordering, compiled once.
    own = _OWN_BLOCK_BY_LABEL.first(owner_id=agent.pk, label=label)
    if own is not None:
        own.owner = agent
        if Agent.constellation.is_cached(agent):
            own.constellation = agent.constellation
        return own
    candidates = list(
        block_list_for_actor(actor=Actor.for_agent(agent)).filter(label=label)
    )
    if not candidates:
        raise NotFound(f"you have no block labelled {label!r}")

    def rank(block: MemoryBlock) -> int:
        if block.owner_id == agent.pk:
            return 0
        return 1 if getattr(block, "shared_access", None) else 2

    return min(candidates, key=rank)


def _shared_access(*, agent: Agent, block: MemoryBlock) -> str | None:
    if hasattr(block, "shared_access"):
        return block.shared_access
    return (
        BlockAttachment.objects.filter(block=block, agent=agent)
        .values_list("access", flat=True)
        .first()
    )


def block_access_for_actor(*, actor: Actor, block: MemoryBlock) -> Access:
    """The actor's effective right on ``block`` (which it can see)."""
    if actor.kind == "system":
        return "write"
    if actor.kind == "human":
        return "write"
    assert actor.agent is not None
    agent = actor.agent
    if block.block_type == BlockType.LOG or block.schema.get("kind") == "log":
        return "read"
    access = PERMISSION_ACCESS[block.permission]
    if block.owner_id == agent.pk or block.owner_id is None:
        return access
    shared = _shared_access(agent=agent, block=block)
    if shared is None:
        raise NotFound(f"block {block.pk} does not exist")
    limit = SHARED_ACCESS[shared]
    return access if _RANK[access] <= _RANK[limit] else limit


def block_approval_needed(*, actor: Actor, block: MemoryBlock) -> bool:
    """Whether the actor's writes become approval requests (Partner/Human)."""
    if actor.kind != "agent" or block.permission not in (
        Permission.PARTNER,
        Permission.HUMAN,
    ):
        return False
    if block.block_type == BlockType.LOG or block.schema.get("kind") == "log":
        return False
    assert actor.agent is not None
    if block.owner_id in (None, actor.agent.pk):
        return True
    shared = _shared_access(agent=actor.agent, block=block)
    return shared in (SharedAccess.APPEND_ONLY, SharedAccess.READ_WRITE)


def block_permission_label(*, actor: Actor, block: MemoryBlock) -> str:
    """How the block's permission reads in the actor's prompt: the block's
    permission, or what a weaker attachment leaves of it."""
    label = PERMISSION_LABEL[block.permission]
    if actor.kind != "agent":
        return label
    access = block_access_for_actor(actor=actor, block=block)
    if _RANK[access] < _RANK[PERMISSION_ACCESS[block.permission]]:
        return {"read": "ReadOnly", "append": "Append"}[access]
    return label


def block_shared_from(*, actor: Actor, block: MemoryBlock) -> str | None:
    """Whose block this is, for an agent that does not own it."""
    if actor.kind != "agent":
        return None
    if block.owner_id is None:
        return "constellation"
    assert actor.agent is not None
    return None if block.owner_id == actor.agent.pk else block.owner.name


def block_facts_for_actor(*, actor: Actor, block: MemoryBlock) -> dict[str, Any]:
    """A block's settings with the actor's view of it (for lists and pages)."""
    return {
        "id": block.pk,
        "label": block.label,
        "description": block.description,
        "block_type": block.block_type,
        "permission": block.permission,
        "access": block_access_for_actor(actor=actor, block=block),
        "approval_required": block_approval_needed(actor=actor, block=block),
        "owner_id": block.owner_id,
        "owner": block.owner.name if block.owner_id else None,
        "shared_from": block_shared_from(actor=actor, block=block),
        "pinned": block.pinned,
        "size": block.size,
        "char_limit": block.char_limit,
        "updated_at": block.updated_at,
    }


def block_require_access(*, actor: Actor, block: MemoryBlock, needed: Access) -> None:
    access = block_access_for_actor(actor=actor, block=block)
    if _RANK[access] < _RANK[needed]:
        raise PermissionDenied(
            f"block {block.label!r} is {access}-only for you; this needs {needed}"
            + (
                " (log blocks are maintained by the system)"
                if block.block_type == BlockType.LOG
                else ""
            )
        )


def block_can_delete(*, actor: Actor, block: MemoryBlock) -> bool:
    if actor.kind != "agent":
        return True
    assert actor.agent is not None
    return block.owner_id == actor.agent.pk and block.permission == Permission.ADMIN


def block_can_configure(*, actor: Actor, block: MemoryBlock) -> bool:
    """Description/schema/pinned/type: the owner with write access, or a human."""
    if actor.kind != "agent":
        return True
    assert actor.agent is not None
    return (
        block.owner_id == actor.agent.pk
        and block_access_for_actor(actor=actor, block=block) == "write"
    )


def block_can_share(*, actor: Actor, block: MemoryBlock) -> bool:
    """Humans, or the owner agent with write access."""
    return block.owner_id is not None and block_can_configure(actor=actor, block=block)


def block_log_pending(*, block_id: Any, upto: int) -> list[bytes]:
    """The update log after the snapshot (``upto``), oldest first."""
    return [
        bytes(d)
        for d in BlockUpdate.objects.filter(block_id=block_id, pk__gt=upto)
        .order_by("pk")
        .values_list("data", flat=True)
    ]


def block_snapshot_data(*, block_id: Any) -> bytes:
    """A block's stored snapshot (empty before its first compaction)."""
    data = (
        BlockSnapshot.objects.filter(block_id=block_id)
        .values_list("data", flat=True)
        .first()
    )
    return bytes(data or b"")


def block_document_load(*, block: MemoryBlock) -> LoroDoc:
    """The block's Loro document (a private copy the caller may change).

    Checked against the database (never ``block``'s cached fields): the
    per-process cache answers when its entry is at the row's ``version``
    (one small query); otherwise the snapshot plus the updates after it
    are read and cached.  An emptied update row means a compaction
    committed between the two reads; the snapshot then holds it, so read
    again.
    """
    version = (
        MemoryBlock.objects.filter(pk=block.pk)
        .values_list("version", flat=True)
        .first()
    )
    if version is None:
        raise NotFound(f"block {block.label!r} no longer exists")
    cached = doc_cache.fork(block.pk, version)
    if cached is not None:
        return cached
    for _ in range(5):
        row = MemoryBlock.objects.filter(pk=block.pk).values_list(
            "snapshot_row__data", "snapshot_upto", "version"
        )
        if not row:
            raise NotFound(f"block {block.label!r} no longer exists")
        snapshot, upto, version = row[0]
        data = block_log_pending(block_id=block.pk, upto=upto)
        if all(data):
            doc = documents.document_load(bytes(snapshot or b""), data)
            # The document holds at least ``version`` (it may hold a later
            # commit read with the log: then the row has moved on and the
            # entry never matches).  Cached once committed: a rolled-back
            # transaction's content must never be cached under a version
            # number that a later write will reuse.
            transaction.on_commit(partial(doc_cache.put, block.pk, version, doc))
            return doc.fork()
    raise RuntimeError(f"block {block.pk} kept compacting while being read")


def block_value(*, block: MemoryBlock, doc: LoroDoc | None = None) -> Any:
    doc = doc or block_document_load(block=block)
    return documents.document_value(doc, block.schema)


# --- history ----------


HISTORY_FIELDS = (
    "id",
    "created_at",
    "actor_kind",
    "actor_id",
    "actor_name",
    "summary",
    "size",
)


HistoryRow = namedtuple("HistoryRow", HISTORY_FIELDS)


def block_history(
    *, block: MemoryBlock, limit: int = 50, before: int | None = None
) -> list[Any]:
    """Versions of a block, newest first (``before`` pages to older ones).

    Light rows (named tuples of ``HISTORY_FIELDS``), so listing thousands
    of versions stays fast: ``created_at`` is read as text and converted by
    ``datetime.fromisoformat`` (C) instead of the backend's per-row parser,
    which cost most of the listing.
    """
    qs = BlockUpdate.objects.filter(block=block)
    if before is not None:
        qs = qs.filter(pk__lt=before)
    query = (
        qs.order_by("-pk")
        .annotate(created_text=Cast("created_at", CharField()))
        .values_list("id", "created_text", *HISTORY_FIELDS[2:])[:limit]
        .query
    )
    # The ORM's SQL, fetched in one go: none of these columns needs a
    # converter, and the chunked iterator cost a third of the listing.
    sql, params = query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    make, timestamp = HistoryRow._make, _timestamp
    return [make((r[0], timestamp(r[1]), *r[2:])) for r in rows]


def _timestamp(text: str) -> datetime:
    """A stored UTC timestamp as text (SQLite's naive text, or PostgreSQL's
    with ``+00``); parsing with the offset is ~5x cheaper than
    ``.replace(tzinfo=...)`` afterwards."""
    if text[-3] in "+-" or text[-6] in "+-":
        return datetime.fromisoformat(text)
    return datetime.fromisoformat(text + "+00:00")


def block_history_count(*, block: MemoryBlock) -> int:
    return BlockUpdate.objects.filter(block=block).count()


def block_version_get(*, block: MemoryBlock, version_id: int) -> BlockUpdate:
    version = BlockUpdate.objects.filter(block=block, pk=version_id).first()
    if version is None:
        raise NotFound(f"block {block.label!r} has no version {version_id}")
    return version


@dataclass(frozen=True)
class BlockVersionView:
    version: BlockUpdate
    value: Any
    rendered: str


def block_version_view(*, block: MemoryBlock, version_id: int) -> BlockVersionView:
    """The block as it was after ``version_id`` (read-only; the live document
    is untouched)."""
    version = block_version_get(block=block, version_id=version_id)
    doc = block_document_load(block=block)
    with documents.loro_guard("cannot check out this version"):
        past = doc.fork_at(documents.frontiers_decode(bytes(version.frontiers)))
    value = documents.document_value(past, block.schema)
    return BlockVersionView(version, value, documents.render_value(block.schema, value))


def block_diff(
    *, block: MemoryBlock, from_version: int, to_version: int | None = None
) -> dict[str, Any]:
    """Differences between two versions (``to_version`` None = current)."""
    old = block_version_view(block=block, version_id=from_version).value
    if to_version is None:
        new = block_value(block=block)
    else:
        new = block_version_view(block=block, version_id=to_version).value
    return documents.diff_values(block.schema, old, new)


# --- sharing and approvals ----------


def block_attachment_list(*, block: MemoryBlock) -> QuerySet[BlockAttachment]:
    return BlockAttachment.objects.filter(block=block).select_related("agent")


def approval_list_for_actor(
    *, actor: Actor, block: MemoryBlock | None = None, status: str | None = None
) -> QuerySet[BlockApproval]:
    """Approval requests the actor may see: an agent its own, humans those
    of their constellations."""
    qs = BlockApproval.objects.select_related("block", "agent", "block__constellation")
    if actor.kind == "agent":
        assert actor.agent is not None
        qs = qs.filter(agent=actor.agent)
    elif actor.kind == "human":
        visible = constellation_list_for_actor(actor=actor).values("pk")
        qs = qs.filter(block__constellation__in=visible)
    if block is not None:
        qs = qs.filter(block=block)
    if status is not None:
        if status not in ApprovalStatus.values:
            raise InvalidInput(
                f"status is one of {', '.join(ApprovalStatus.values)}; got {status!r}"
            )
        qs = qs.filter(status=status)
    return qs


def approval_get_for_decision(*, actor: Actor, approval_id: int) -> BlockApproval:
    """A pending request the actor may decide: the partner for Partner
    blocks, any human of the constellation for Human blocks."""
    approval = approval_list_for_actor(actor=actor).filter(pk=approval_id).first()
    if approval is None:
        raise NotFound(f"approval request {approval_id} does not exist")
    if actor.kind == "agent":
        raise PermissionDenied("agents cannot decide approval requests")
    if actor.kind == "human" and approval.block.permission == Permission.PARTNER:
        assert actor.user is not None
        if approval.block.constellation.partner_id != actor.user.pk:
            raise PermissionDenied(
                f"block {approval.block.label!r} needs the partner's approval"
            )
    if approval.status != ApprovalStatus.PENDING:
        raise InvalidInput(f"this request was already {approval.status}")
    return approval


def block_counts_by_owner(*, actor: Actor, constellation_id: int) -> dict[Any, int]:
    """Blocks per owner agent id (None: constellation-level) in one query."""
    rows = (
        block_list_for_actor(actor=actor)
        .filter(constellation_id=constellation_id)
        .order_by()
        .values_list("owner_id")
        .annotate(n=Count("pk", distinct=True))
    )
    return dict(rows)


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
        return qs.filter(agent_id=actor.agent.pk)
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
    quantised: bool = False  # vectors were searched by the quantised path

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
            constellation_id=constellation.pk
        )
        owners = [agent_pk] if own_only else _owner(filters)
        targets.append(
            ("archival", ARCHIVAL_INDEX, _filtered(qs, filters, messages=False), owners)
        )
    if domain in ("conversations", "constellation_messages", "all", RECALL_DOMAIN):
        qs = Message.objects.select_related("agent", "conversation").filter(
            constellation_id=constellation.pk
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

    rerank = _rerank_for(constellation)
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
        quantised=any(outcome.quantised for _kind, outcome in outcomes),
    )


def _rerank_for(constellation: Constellation) -> Rerank | None:
    """The constellation's re-rank, if enabled (``retrieval_config_for``'s
    row, read by one plain statement: the ORM's compile costs ten times
    the read on every search)."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT decay_rate FROM {RetrievalConfig._meta.db_table}"
            " WHERE constellation_id = %s AND rerank_enabled",
            [constellation.pk],
        )
        row = cur.fetchone()
    return Rerank(decay_rate=row[0], now=timezone.now()) if row else None


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
