"""Reads of memory blocks: lookups, documents, history, versions, diffs,
sharing and approvals.  Who may see and do what is decided by
``memory.blocks.permissions``; every lookup goes through it.
"""

from __future__ import annotations

import uuid
from collections import namedtuple
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import CharField, Count, Max, Q, QuerySet
from django.db.models.functions import Cast
from loro import LoroDoc

from memory.blocks import diffs, doc_cache, documents
from memory.blocks.models import (
    ApprovalStatus,
    BlockApproval,
    BlockAttachment,
    BlockSnapshot,
    BlockUpdate,
    MemoryBlock,
)
from memory.blocks.permissions import (
    approval_decide_check,
    approvals_decidable,
    approvals_visible,
    block_access_for_actor,
    block_approval_needed,
    blocks_visible,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.selectors import agent_get_private
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.db.rows import (
    row_field_size,
    row_lock,
    row_mark_locked,
    rows_fetch,
)
from pattern_site.kernel.errors import HistoryFolded, InvalidInput, NotFound


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
    return blocks_visible(qs, actor=actor, agent_id=agent_id)


# An agent's blocks, compiled once: the permission filter's subqueries cost
# its every context build several times the query itself to put together.
_AGENT_BLOCKS = CompiledQuery(
    lambda agent_id, constellation_id: block_list_for_actor(
        actor=Actor.for_agent(Agent(pk=agent_id, constellation_id=constellation_id))
    ).order_by("block_type", "label"),
    agent_id=-7_406_301,
    constellation_id=-7_406_302,
)


def block_list_for_agent(*, agent: Agent) -> list[MemoryBlock]:
    """The blocks ``agent`` may see, as ``block_list_for_actor`` gives an
    agent (``shared_access`` set), by type then label."""
    return _AGENT_BLOCKS.all(agent_id=agent.pk, constellation_id=agent.constellation_id)


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
_OWN_BLOCK_BY_LABEL_LOCKED = CompiledQuery(
    lambda owner_id, label: (
        MemoryBlock.objects.select_for_update()
        .filter(owner_id=owner_id, label=label)
        .order_by()[:1]
    ),
    owner_id=-7_406_194,
    label="\x00label",
)


def block_get_by_label_for_agent(
    *, agent: Agent, label: str, lock: bool = False
) -> MemoryBlock:
    """The block an agent means by ``label``: its own, else shared, else the
    constellation's.

    With ``lock`` (in a transaction) the block is read under its row lock
    and marked so (``row_is_locked``): a change in the same transaction
    takes it as the locked row, with no second read.
    """
    # The common case, answered by the unique index; no joins (the agent
    # and its constellation are at hand), no ordering, compiled once.
    query = _OWN_BLOCK_BY_LABEL_LOCKED if lock else _OWN_BLOCK_BY_LABEL
    own = query.first(owner_id=agent.pk, label=label)
    if own is not None:
        own.owner = agent
        if Agent.constellation.is_cached(agent):
            own.constellation = agent.constellation
        return row_mark_locked(own) if lock else own
    candidates = list(
        block_list_for_actor(actor=Actor.for_agent(agent)).filter(label=label)
    )
    if not candidates:
        raise NotFound(f"you have no block labelled {label!r}")

    def rank(block: MemoryBlock) -> int:
        if block.owner_id == agent.pk:
            return 0
        return 1 if getattr(block, "shared_access", None) else 2

    found = min(candidates, key=rank)
    if not lock:
        return found
    locked = row_lock(MemoryBlock, found.pk)
    if locked is None:
        raise NotFound(f"you have no block labelled {label!r}")
    return locked


def block_get_by_label_for_actor(
    *, actor: Actor, label: str, agent_id: int | None
) -> MemoryBlock:
    """The block ``label`` names in an agent's memory (its own, else shared,
    else the constellation's, as :func:`block_get_by_label_for_agent`): the
    calling agent's, or for a human the memory of agent ``agent_id``."""
    agent = agent_get_private(actor=actor, agent_id=agent_id)
    block = block_get_by_label_for_agent(agent=agent, label=label)
    if actor.agent is not None and actor.agent.pk == agent.pk:
        return block
    # A human sees the block only where their own rights reach it.
    return block_get_for_actor(actor=actor, block_id=block.pk)


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


def block_snapshot_size(*, block_id: Any) -> int:
    """Bytes of a block's stored snapshot (0 before its first compaction).
    On every write: a statement built once, not the ORM's."""
    return row_field_size(BlockSnapshot, key="block", value=block_id, field="data")


def block_document_load(*, block: MemoryBlock) -> LoroDoc:
    """The block's Loro document (a private copy the caller may change).

    Checked against the database (never ``block``'s cached fields): the
    per-process cache answers when its entry is at the row's ``version``
    (one small query); otherwise the snapshot plus the updates after it
    are read and cached.  An emptied update row means a compaction
    committed between the two reads; the snapshot then holds it, so read
    again.
    """
    return block_document_versioned(block=block)[0]


def block_document_versioned(*, block: MemoryBlock) -> tuple[LoroDoc, int]:
    """:func:`block_document_load`, with the block's ``version`` counter
    the document holds at least (a commit read along with the log may be
    in it too: the row has moved past that counter then)."""
    version = (
        MemoryBlock.objects.filter(pk=block.pk)
        .values_list("version", flat=True)
        .first()
    )
    if version is None:
        raise NotFound(f"block {block.label!r} no longer exists")
    cached = doc_cache.fork(block.pk, version)
    if cached is not None:
        return cached, version
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
            return doc.fork(), version
    raise RuntimeError(f"block {block.pk} kept compacting while being read")


def block_history_document(*, block: MemoryBlock, upto: bytes) -> LoroDoc:
    """A document holding the block's history up to version ``upto``
    (frontiers), for reading past versions only, never to be changed: the
    cached one itself when it holds that version (no copy, no query), else
    the block's document, loaded."""
    doc = doc_cache.history(block.pk)
    if doc is not None:
        with documents.loro_guard("not a valid version"):
            if doc.frontiers_to_vv(documents.frontiers_decode(upto)) is not None:
                return doc
    return block_document_load(block=block)


def block_value(*, block: MemoryBlock, doc: LoroDoc | None = None) -> Any:
    doc = doc or block_document_load(block=block)
    return documents.document_value(doc, block.schema)


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
    rows = rows_fetch(
        qs.order_by("-pk")
        .annotate(created_text=Cast("created_at", CharField()))
        .values_list("id", "created_text", *HISTORY_FIELDS[2:])[:limit]
    )
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


@dataclass(frozen=True)
class NumberedVersion:
    """A history row with its number in the block's history (1 = oldest);
    versions are never deleted, so a number always names the same one."""

    number: int
    row: Any


def block_version_number(*, block: MemoryBlock, version_id: int) -> int:
    """The number of the block's version ``version_id`` (1 = its first)."""
    return BlockUpdate.objects.filter(block=block, pk__lte=version_id).count()


def block_version_by_number(*, block: MemoryBlock, number: int) -> BlockUpdate:
    """The block's ``number``-th version (1 = its first)."""
    version = None
    if number >= 1:
        version = (
            BlockUpdate.objects.filter(block=block).order_by("pk")[number - 1 :].first()
        )
    if version is None:
        raise NotFound(
            f"block {block.label!r} has no version {number}; its versions are "
            f"1 to {block_history_count(block=block)}"
        )
    return version


def block_history_numbered(
    *,
    block: MemoryBlock,
    limit: int = 50,
    before: int | None = None,
    before_id: int | None = None,
) -> list[NumberedVersion]:
    """Versions newest first with their numbers, ``limit`` of them older
    than version number ``before`` or version id ``before_id`` (neither:
    from the newest)."""
    if before is not None:
        before_id = block_version_by_number(block=block, number=before).pk
    rows = block_history(block=block, limit=limit, before=before_id)
    if not rows:
        return []
    newest = block_version_number(block=block, version_id=rows[0].id)
    return [NumberedVersion(newest - n, row) for n, row in enumerate(rows)]


def block_version_get(*, block: MemoryBlock, version_id: int) -> BlockUpdate:
    version = BlockUpdate.objects.filter(block=block, pk=version_id).first()
    if version is None:
        raise NotFound(
            f"block {block.label!r} has no version with id {version_id}; its "
            f"versions are numbered 1 to {block_history_count(block=block)} "
            "(give the number as `version`, or an `id` from its history)"
        )
    return version


@dataclass(frozen=True)
class BlockVersionView:
    version: BlockUpdate
    value: Any
    rendered: str


def block_version_view(*, block: MemoryBlock, version_id: int) -> BlockVersionView:
    """The block as it was after ``version_id`` (read-only; the live document
    is untouched).  ``HistoryFolded`` for a version retention folded."""
    version = block_version_get(block=block, version_id=version_id)
    block_version_held_check(block=block, version=version, doing="shown")
    value = _value_at(block, bytes(version.frontiers))
    return BlockVersionView(version, value, documents.render_value(block.schema, value))


def block_history_from(*, block: MemoryBlock) -> int:
    """Id of the block's oldest version whose content is held (0: all are),
    from the database (a fold may have committed since ``block`` was
    read)."""
    found = (
        MemoryBlock.objects.filter(pk=block.pk)
        .values_list("history_from", flat=True)
        .first()
    )
    return found or 0


def block_folded_before(*, block_id: Any, history_from: int) -> datetime | None:
    """When the first version after the oldest held one (``history_from``)
    was made: what the folded history wrote was written before it (the
    oldest held itself, when no version followed)."""
    times = list(
        BlockUpdate.objects.filter(block_id=block_id, pk__gte=history_from)
        .order_by("pk")
        .values_list("created_at", flat=True)[:2]
    )
    return times[-1] if times else None


def block_version_held_check(
    *, block: MemoryBlock, version: BlockUpdate, doing: str
) -> None:
    """``HistoryFolded`` when history retention folded ``version``'s content:
    it can be listed, not ``doing`` (shown, compared, rolled back to)."""
    history_from = block_history_from(block=block)
    if version.pk >= history_from:
        return
    number = block_version_number(block=block, version_id=version.pk)
    oldest = block_version_number(block=block, version_id=history_from)
    raise HistoryFolded(
        f"version {number} of block {block.label!r} "
        f"({version.created_at:%Y-%m-%d %H:%M} UTC, by {version.actor_name}) "
        f"cannot be {doing}: its content was folded into the block's snapshot "
        f"by history retention. Its who, when and why are still listed; "
        f"content is kept from version {oldest} on.",
        extra={
            "block": block.label,
            "version": number,
            "oldest_held_version": oldest,
        },
    )


def _value_at(block: MemoryBlock, frontiers: bytes) -> Any:
    """The block's content at the document version ``frontiers``."""
    doc = block_document_load(block=block)
    with documents.loro_guard("cannot check out this version"):
        past = documents.document_at(doc, documents.frontiers_decode(frontiers))
    return documents.document_value(past, block.schema)


@dataclass(frozen=True)
class BlockText:
    """A block's rendered text at one of its versions."""

    block: MemoryBlock
    text: str
    version_id: int
    created_at: datetime  # when that version was made
    number: int | None = None  # its number (1 = the block's first), if asked
    # History retention folded that version's content: ``text`` is empty,
    # and the block's content is kept from ``held_since`` on.
    folded: bool = False
    held_since: datetime | None = None


def block_texts_at(
    *, blocks: Sequence[MemoryBlock], moment: datetime | None = None
) -> list[BlockText]:
    """Each of ``blocks`` rendered as it was at ``moment`` (None: now), with
    the version it was at then: its newest version made at or before
    ``moment``.  A block without a version by then is left out (it did not
    exist yet, or held nothing).  The text now is the block's stored
    rendering; a past one is rendered from the document checked out at
    that version.  A version whose content history retention folded comes
    back ``folded``, without text, with the time its held history starts."""
    updates = BlockUpdate.objects.filter(block_id__in=[b.pk for b in blocks])
    if moment is not None:
        updates = updates.filter(created_at__lte=moment)
    latest = dict(
        updates.order_by()
        .values("block_id")
        .annotate(last=Max("id"))
        .values_list("block_id", "last")
    )
    columns = ["pk", "created_at"] + (["frontiers"] if moment is not None else [])
    rows = {
        row[0]: row
        for row in BlockUpdate.objects.filter(pk__in=latest.values()).values_list(
            *columns
        )
    }
    found = []
    for block in blocks:
        row = rows.get(latest.get(block.pk, 0))
        if row is None:
            continue
        if moment is None:
            text = block.rendered
        elif row[0] < block.history_from:
            held = (
                BlockUpdate.objects.filter(pk=block.history_from)
                .values_list("created_at", flat=True)
                .first()
            )
            found.append(BlockText(block, "", row[0], row[1], None, True, held))
            continue
        else:
            text = documents.render_value(block.schema, _value_at(block, bytes(row[2])))
        found.append(BlockText(block, text, row[0], row[1]))
    return found


def block_version_numbers(*, versions: dict[Any, int]) -> dict[Any, int]:
    """The number of each block's version (``{block_id: version_id}``) in
    its block's history (1 = its first), in one query: for a handful of
    blocks (each adds a condition to the statement)."""
    if not versions:
        return {}
    condition = Q()
    for block_id, version_id in versions.items():
        condition |= Q(block_id=block_id, pk__lte=version_id)
    return dict(
        BlockUpdate.objects.filter(condition)
        .order_by()
        .values("block_id")
        .annotate(n=Count("id"))
        .values_list("block_id", "n")
    )


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


@dataclass(frozen=True)
class BlockComparison:
    """Two versions of a block side by side: ``parts`` from
    ``memory.blocks.diffs.value_diff``; ``new`` None is the live block."""

    old: NumberedVersion
    new: NumberedVersion | None
    parts: list[Any]


def block_compare(
    *, block: MemoryBlock, old_number: int, new_number: int | None = None
) -> BlockComparison:
    """What changed from version ``old_number`` to ``new_number`` (None:
    to the block as it is now)."""
    old = block_version_by_number(block=block, number=old_number)
    old_value = block_version_view(block=block, version_id=old.pk).value
    new = None
    if new_number is None:
        new_value = block_value(block=block)
    else:
        new = block_version_by_number(block=block, number=new_number)
        new_value = block_version_view(block=block, version_id=new.pk).value
    return BlockComparison(
        NumberedVersion(old_number, old),
        NumberedVersion(new_number, new) if new is not None else None,
        diffs.value_diff(block.schema, old_value, new_value),
    )


def block_attachment_list(*, block: MemoryBlock) -> QuerySet[BlockAttachment]:
    return BlockAttachment.objects.filter(block=block).select_related("agent")


def approval_list_for_actor(
    *, actor: Actor, block: MemoryBlock | None = None, status: str | None = None
) -> QuerySet[BlockApproval]:
    """Approval requests the actor may see: an agent its own, humans those
    of their constellations."""
    qs = approvals_visible(
        BlockApproval.objects.select_related("block", "agent", "block__constellation"),
        actor=actor,
    )
    if block is not None:
        qs = qs.filter(block=block)
    if status is not None:
        if status not in ApprovalStatus.values:
            raise InvalidInput(
                f"status is one of {', '.join(ApprovalStatus.values)}; got {status!r}"
            )
        qs = qs.filter(status=status)
    return qs


def approval_preview(*, approval: BlockApproval) -> list[Any]:
    """What approving ``approval`` would change in its block now, as
    ``memory.blocks.diffs`` parts (the live document is untouched); an
    empty list when it would change nothing."""
    block = approval.block
    doc = block_document_load(block=block)
    old = documents.document_value(doc, block.schema)
    preview = doc.fork()
    documents.operations_apply(
        preview, block.schema, approval.operations, enforce_read_only=False
    )
    return diffs.value_diff(
        block.schema, old, documents.document_value(preview, block.schema)
    )


def approval_pending_count_for_actor(*, actor: Actor) -> int:
    """Pending requests ``actor`` may decide (the top bar's badge)."""
    return approvals_decidable(
        BlockApproval.objects.filter(status=ApprovalStatus.PENDING), actor=actor
    ).count()


def approval_get_for_decision(*, actor: Actor, approval_id: int) -> BlockApproval:
    """A pending request the actor may decide: the partner for Partner
    blocks, any human of the constellation for Human blocks."""
    approval = approval_list_for_actor(actor=actor).filter(pk=approval_id).first()
    if approval is None:
        raise NotFound(f"approval request {approval_id} does not exist")
    approval_decide_check(actor=actor, approval=approval)
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


@dataclass(frozen=True)
class TextPresence:
    """A version where ``contains`` came into the block's rendered text
    (``appeared`` True) or left it (False)."""

    number: int
    row: Any
    appeared: bool


def block_history_containing(*, block: MemoryBlock, contains: str) -> list[Any]:
    """The versions, oldest first, in which the text ``contains`` appeared
    in the block's rendering (as the LLM sees it) and in which it
    disappeared again: the history is walked once, a detached copy of the
    document checked out at each version in turn (Loro applies only the
    difference from the version before).  Versions whose content history
    retention folded are not walked: the walk starts at the oldest held."""
    if not contains:
        raise InvalidInput("'contains' needs some text to look for")
    doc = block_document_load(block=block)
    rows = block_history(block=block, limit=block_history_count(block=block))
    rows.reverse()
    frontiers = dict(
        BlockUpdate.objects.filter(block=block).values_list("pk", "frontiers")
    )
    history_from = block_history_from(block=block)
    found: list[TextPresence] = []
    present = False
    with documents.loro_guard("cannot check out a past version"):
        for number, row in enumerate(rows, 1):
            if row.id < history_from:
                continue
            doc.checkout(documents.frontiers_decode(bytes(frontiers[row.id])))
            now = contains in documents.render(doc, block.schema)
            if now != present:
                found.append(TextPresence(number, row, now))
                present = now
    return found
