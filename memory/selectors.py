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
"""

from __future__ import annotations

import uuid
from collections import namedtuple
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Literal

from django.db import connection, transaction
from django.db.models import CharField, Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Cast
from loro import LoroDoc

from coordination.actors import Actor
from coordination.errors import InvalidInput, NotFound, PermissionDenied
from coordination.models import Agent
from coordination.selectors import constellation_list_for_actor
from memory import doc_cache, documents
from memory.models import (
    ApprovalStatus,
    BlockApproval,
    BlockAttachment,
    BlockType,
    BlockUpdate,
    MemoryBlock,
    Permission,
    SharedAccess,
)

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
    qs = MemoryBlock.objects.select_related("owner", "constellation").defer("snapshot")
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


def block_get_by_label_for_agent(*, agent: Agent, label: str) -> MemoryBlock:
    """The block an agent means by ``label``: its own, else shared, else the
    constellation's."""
    # The common case, answered by the unique index; no joins (the agent
    # and its constellation are at hand) and no ordering.
    own = next(
        iter(
            MemoryBlock.objects.defer("snapshot")
            .filter(owner=agent, label=label)
            .order_by()[:1]
        ),
        None,
    )
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
            "snapshot", "snapshot_upto", "version"
        )
        if not row:
            raise NotFound(f"block {block.label!r} no longer exists")
        snapshot, upto, version = row[0]
        data = block_log_pending(block_id=block.pk, upto=upto)
        if all(data):
            doc = documents.document_load(bytes(snapshot), data)
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
