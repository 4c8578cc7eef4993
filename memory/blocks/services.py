"""Every change to memory blocks.

One path changes a block's content, :func:`_block_change`: under the block's
row lock it loads the document (snapshot + log), applies the change, checks
the actor's rights (``memory.blocks.permissions``), that the change wrote
only to the containers of the block's schema, the character limit on
everything the result holds and the byte cap on the whole stored document
(``settings.MEMORY_BLOCK_MAX_BYTES``, history included), appends one
attributed ``BlockUpdate`` and compacts the log past the thresholds of
``settings.MEMORY_COMPACT_UPDATES`` / ``MEMORY_COMPACT_BYTES`` - all in
one transaction, so a concurrent change can never be lost.  After commit
the update is broadcast to the block's room (``memory.blocks.sync.broadcast``).

Agents' changes to Partner/Human blocks become approval requests; approving
one applies it as the agent's change.  Services are keyword-only, typed and
atomic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import (
    IntegrityError,
    transaction,
)
from django.db.models.functions import Length
from django.utils import timezone
from loro import Frontiers, LoroDoc, VersionVector

from memory.blocks import doc_cache, documents
from memory.blocks.models import (
    ApprovalStatus,
    BlockApproval,
    BlockAttachment,
    BlockSnapshot,
    BlockType,
    BlockUpdate,
    MemoryBlock,
    Permission,
    SharedAccess,
)
from memory.blocks.permissions import (
    block_access_now,
    block_approval_needed,
    block_can_configure,
    block_can_delete,
    block_can_share,
    block_change_check,
    block_configure_check,
    block_create_check,
    block_require_access,
    read_only_binds,
)
from memory.blocks.selectors import (
    block_document_load,
    block_log_pending,
    block_snapshot_data,
    block_snapshot_size,
    block_value,
    block_version_get,
    block_version_number,
)
from memory.blocks.sync.broadcast import block_broadcast
from memory.longterm.models import ArchivalSource
from memory.longterm.services import archival_entry_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.apitypes import label_check
from pattern_site.kernel.db.rows import (
    row_insert,
    row_lock,
    row_update,
    rows_set_in_range,
)
from pattern_site.kernel.errors import (
    Conflict,
    InvalidInput,
    LimitExceeded,
    NotFound,
    PermissionDenied,
)
from pattern_site.kernel.events import EventType, event_record
from pattern_site.kernel.rights import rights_revoke_send

SUMMARY_MAX = 300


@dataclass
class BlockChange:
    """What a change did: the stored update, or the approval it now waits on."""

    block: MemoryBlock
    update: BlockUpdate | None = None
    approval: BlockApproval | None = None
    data: bytes = b""
    pruned: list[Any] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.approval is not None:
            return "pending_approval"
        return "applied" if self.update is not None else "unchanged"


def _lock(block: MemoryBlock) -> MemoryBlock:
    """The block's row, locked for this transaction (SQLite: the IMMEDIATE
    transaction's write lock; PostgreSQL: ``FOR UPDATE``)."""
    locked = row_lock(MemoryBlock, block.pk)
    if locked is None:
        raise NotFound(f"block {block.label!r} no longer exists")
    return locked


def _check_limit(*, block: MemoryBlock, old_size: int, new_size: int) -> None:
    if new_size > block.char_limit and new_size > old_size:
        change = new_size - old_size
        raise LimitExceeded(
            f"block {block.label!r} is {old_size}/{block.char_limit} chars; "
            f"this change adds {change}",
            extra={
                "block": block.label,
                "size": old_size,
                "limit": block.char_limit,
                "change_size": change,
            },
        )


def _check_layout(*, block: MemoryBlock, doc: LoroDoc, since: Any) -> None:
    foreign = documents.foreign_roots(doc, block.schema, since)
    if foreign:
        allowed = ", ".join(
            f"{name} ({ctype})"
            for name, ctype in sorted(documents.schema_roots(block.schema))
        )
        raise InvalidInput(
            f"block {block.label!r} holds only {allowed}; this change writes to "
            + ", ".join(foreign)
        )


def _check_bytes(*, block: MemoryBlock, added: int, shrinks: bool) -> None:
    """The stored document (snapshot, log and this change) within the cap,
    unless the change ``shrinks`` what the block holds.

    History only grows, so a block at its cap would otherwise refuse every
    change, deleting a wrong or secret line included.  Each change let
    through must shrink the content: a block over its cap cannot gather
    history without end (rewriting the same text over and over)."""
    cap = settings.MEMORY_BLOCK_MAX_BYTES
    stored = block_snapshot_size(block_id=block.pk) + block.log_bytes
    if stored + added > cap and not shrinks:
        raise LimitExceeded(
            f"block {block.label!r} stores {stored} bytes with its history; "
            f"this change adds {added} and a block may store at most {cap} "
            "(a change that shrinks its content is still accepted)",
            extra={"block": block.label, "bytes": stored, "max_bytes": cap},
        )


def _summary(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_MAX else text[: SUMMARY_MAX - 1] + "…"


# Server-side edits all use this Loro peer.  Safe because they are
# serialised by the block's row lock and always start from the latest
# stored document, so the peer's op counter never repeats; and necessary
# for speed, because every new peer in a document makes each later load
# and edit slower (by an order of magnitude after a few thousand edits).
# Browsers use their own random peers.
SERVER_PEER = 1


def _locked_document(locked: MemoryBlock) -> LoroDoc:
    """The document of a locked block: the cached one when it is at the
    row's version (taken out of the cache), else read from the database."""
    doc = doc_cache.take(locked.pk, locked.version)
    if doc is None:
        # Under the lock no compaction can interleave: the row and log agree.
        pending = block_log_pending(block_id=locked.pk, upto=locked.snapshot_upto)
        doc = documents.document_load(block_snapshot_data(block_id=locked.pk), pending)
    doc.peer_id = SERVER_PEER
    return doc


@transaction.atomic
def _block_change(
    *,
    block: MemoryBlock,
    actor: Actor,
    summary: str,
    change: Callable[[LoroDoc], list[Any] | None],
    access: str | None = None,
    origin: str | None = None,
    change_type: str = "edit",
    burst: bool = False,
    request: list[dict[str, Any]] | None = None,
) -> BlockChange:
    """Apply ``change`` to the block's document as ``actor``; see module doc.

    ``change`` mutates the (uncommitted) document and may return entries it
    pruned (log blocks).  ``access`` overrides the actor's right (approved
    requests were authorised by a human); otherwise the right is decided on
    the locked row, and so is whether the actor's writes need approval:
    then ``request`` (the operations ``change`` applies) is filed as an
    approval request instead, and nothing changes.  With ``burst`` the
    change joins the actor's latest version when :func:`_burst_version`
    finds one, so a burst of live edits is one version of the history.

    The document comes from the per-process cache (``memory.blocks.doc_cache``)
    when it is at the locked row's version; it goes back into the cache only
    when this transaction commits, so a failed or rolled-back change never
    leaves a changed document behind.
    """
    locked = _lock(block)
    if access is None:
        # From the locked row, never ``block``: a caller (an open socket)
        # may hold it from before a permission, a share or its token changed.
        access = block_access_now(actor=actor, block=locked)
        if request is not None and block_approval_needed(actor=actor, block=locked):
            return _approval_request(
                actor=actor, block=locked, operations=request, summary=summary
            )
    if access == "read":
        block_require_access(actor=actor, block=locked, needed="append")
    doc = _locked_document(locked)
    before = doc.oplog_vv
    before_frontiers = doc.oplog_frontiers
    needs_old = access == "append" or (
        read_only_binds(actor) and documents.has_read_only(locked.schema)
    )
    old_value = documents.document_value(doc, locked.schema) if needs_old else None
    doc.set_next_commit_message(
        documents.commit_message(actor_ref=actor.ref, summary=summary)
    )
    pruned = change(doc) or []
    doc.commit()
    if doc.oplog_vv.encode() == before.encode():
        _cache_on_commit(locked, doc)
        return BlockChange(block=locked)
    _check_layout(block=locked, doc=doc, since=before_frontiers)
    new_value = documents.document_value(doc, locked.schema)
    if needs_old:
        block_change_check(
            actor=actor, block=locked, access=access, old=old_value, new=new_value
        )
    rendered = documents.render_value(locked.schema, new_value)
    held = documents.held_size(doc, locked.schema, rendered)
    _check_limit(block=locked, old_size=locked.size, new_size=held)
    data = documents.updates_since(doc, before)
    # Against the rendering before, as _check_limit.
    _check_bytes(block=locked, added=len(data), shrinks=held < locked.size)
    joined = (
        _burst_version(block=locked, actor=actor, summary=summary) if burst else None
    )
    update = (
        _burst_extend(
            block=locked,
            doc=doc,
            burst=joined,
            actor=actor,
            summary=summary,
            rendered=rendered,
        )
        if joined is not None
        else None
    )
    if update is None:
        update = _block_record(
            block=locked,
            doc=doc,
            actor=actor,
            summary=summary,
            data=data,
            rendered=rendered,
        )
    _cache_on_commit(locked, doc)
    block_id, version = locked.pk, locked.version

    def broadcast() -> None:  # a def: Django's robust on_commit logs __qualname__
        block_broadcast(
            block_id=block_id, updates=[data], origin=origin, version=version
        )

    transaction.on_commit(broadcast, robust=True)
    _block_event(actor=actor, block=locked, change_type=change_type, summary=summary)
    if pruned:
        log_entries_pruned(block=locked, entries=pruned)
    block.__dict__.update(
        {
            k: getattr(locked, k)
            for k in (
                "rendered",
                "size",
                "updated_at",
                "snapshot_upto",
                "version",
                "log_count",
                "log_bytes",
            )
        }
    )
    return BlockChange(block=locked, update=update, data=data, pruned=pruned)


# Live co-editing sends an update per keystroke or so: one event per block
# and person per this many seconds says as much to the activity stream.
CO_EDIT_EVENT_SECONDS = 60.0
_co_edit_recorded: dict[tuple[Any, str], float] = {}


def _block_event(
    *, actor: Actor, block: MemoryBlock, change_type: str, summary: str
) -> None:
    """Record a change of ``block`` in the activity stream (after commit)."""
    if change_type == "co-edit":
        key, now = (block.pk, actor.ref), time.monotonic()
        if now - _co_edit_recorded.get(key, -CO_EDIT_EVENT_SECONDS) < (
            CO_EDIT_EVENT_SECONDS
        ):
            return
        if len(_co_edit_recorded) > 10_000:
            _co_edit_recorded.clear()
        _co_edit_recorded[key] = now
    details = {"label": block.label, "change_type": change_type}
    # Every agent of the constellation reads its activity, but only a
    # constellation block's content is theirs to read: an agent's own block
    # (shared or not) is named without the words of its change.
    if block.owner_id is None:
        details["summary"] = summary[:160]
    event_record(
        actor=actor,
        agent=block.owner if actor.agent is None else None,
        constellation_id=block.constellation_id,
        event_type=EventType.MEMORY_BLOCK_UPDATED,
        details=details,
    )


def _cache_on_commit(block: MemoryBlock, doc: LoroDoc) -> None:
    block_id, version = block.pk, block.version

    def cache() -> None:
        doc_cache.put(block_id, version, doc)

    transaction.on_commit(cache)


def _block_record(
    *,
    block: MemoryBlock,
    doc: LoroDoc,
    actor: Actor,
    summary: str,
    data: bytes,
    rendered: str,
) -> BlockUpdate:
    """Append the update row and refresh the locked block's row: content,
    version and log counters (compacting if due) in one UPDATE."""
    compact = (
        block.log_count + 1 >= settings.MEMORY_COMPACT_UPDATES
        or block.log_bytes + len(data) >= settings.MEMORY_COMPACT_BYTES
    )
    update = BlockUpdate(
        block=block,
        # Folded into the snapshot right away: no need to store it twice.
        data=b"" if compact else data,
        frontiers=doc.oplog_frontiers.encode(),
        actor_kind=actor.kind,
        actor_id=actor.id,
        actor_name=actor.display_name[:150],
        summary=_summary(summary),
        size=len(rendered),
    )
    # No full_clean: every field comes from server code, cut to its length.
    update.created_at = timezone.now()
    update.pk = row_insert(update)
    _block_row_refresh(
        block=block,
        doc=doc,
        update=update,
        rendered=rendered,
        compact=compact,
        added=(1, len(data)),
    )
    return update


def _block_row_refresh(
    *,
    block: MemoryBlock,
    doc: LoroDoc,
    update: BlockUpdate,
    rendered: str,
    compact: bool,
    added: tuple[int, int],
) -> None:
    """Write the locked block's row after ``update`` was stored: content,
    version and log counters (``added``: log rows and bytes this change
    added), folding the log into a new snapshot when ``compact``."""
    block.rendered = rendered
    block.size = len(rendered)
    block.updated_at = update.created_at
    block.version += 1
    fields: tuple[str, ...] = (
        "rendered",
        "size",
        "updated_at",
        "version",
        "log_count",
        "log_bytes",
    )
    if compact:
        _snapshot_save(block_id=block.pk, data=documents.snapshot(doc))
        if block.log_count:
            _log_fold(block=block, upto=update.pk)
        block.snapshot_upto = update.pk
        block.log_count = block.log_bytes = 0
        fields += ("snapshot_upto",)
    else:
        block.log_count += added[0]
        block.log_bytes += added[1]
    row_update(block, fields)


@dataclass(frozen=True)
class _Burst:
    """The version a live edit may join: its id, its stored bytes' length and
    the frontiers of the version before it (None: it is the first)."""

    version_id: int
    stored: int
    start: bytes | None


def _burst_version(*, block: MemoryBlock, actor: Actor, summary: str) -> _Burst | None:
    """The version a live edit joins: the block's latest one, when the same
    actor made it with the same summary less than
    ``settings.MEMORY_HISTORY_BURST_SECONDS`` ago and its bytes are still in
    the log (a version folded into the snapshot cannot grow: the snapshot
    would not hold the rest of the burst).  One query, for the last two
    versions, on the path of every keystroke."""
    window = timedelta(seconds=settings.MEMORY_HISTORY_BURST_SECONDS)
    now = timezone.now()
    # The locked row says when the block last changed: a quiet block needs
    # no look at its history.
    if not window or not block.log_count or now - block.updated_at > window:
        return None
    rows = list(
        BlockUpdate.objects.filter(block=block)
        .order_by("-pk")
        .values_list(
            "pk", "actor_kind", "actor_id", "summary", "created_at", "frontiers"
        )
        .annotate(stored=Length("data"))[:2]
    )
    if not rows:
        return None
    pk, kind, actor_id, latest_summary, created_at, _, stored = rows[0]
    if (
        pk <= block.snapshot_upto
        or (kind, actor_id) != (actor.kind, actor.id)
        or latest_summary != _summary(summary)
        or now - created_at > window
    ):
        return None
    return _Burst(pk, stored or 0, bytes(rows[1][5]) if len(rows) > 1 else None)


# A burst's row is rewritten whole with each edit it takes in; past this
# size the next edit starts a new version, so that a long burst does not
# rewrite kilobytes per keystroke (a typed paragraph fits well within it).
BURST_MAX_BYTES = 4096


def _burst_extend(
    *,
    block: MemoryBlock,
    doc: LoroDoc,
    burst: _Burst,
    actor: Actor,
    summary: str,
    rendered: str,
) -> BlockUpdate | None:
    """Grow the burst's version (see :func:`_burst_version`) to include the
    change just made to ``doc``: its bytes become every change since the
    version before it, its frontiers and size the document's now, and its
    time the time of this change, so that the burst lasts while edits keep
    coming.  None, changing nothing, when the grown version would pass
    ``BURST_MAX_BYTES``."""
    start = (
        doc.frontiers_to_vv(documents.frontiers_decode(burst.start))
        if burst.start is not None
        else VersionVector()
    )
    data = documents.updates_since(doc, start)
    if len(data) > BURST_MAX_BYTES:
        return None
    version = BlockUpdate(
        pk=burst.version_id,
        block=block,
        actor_kind=actor.kind,
        actor_id=actor.id,
        actor_name=actor.display_name[:150],
        summary=_summary(summary),
    )
    grown = len(data) - burst.stored
    compact = block.log_bytes + grown >= settings.MEMORY_COMPACT_BYTES
    version.data = b"" if compact else data
    version.frontiers = doc.oplog_frontiers.encode()
    version.size = len(rendered)
    version.created_at = timezone.now()
    row_update(version, ("data", "frontiers", "size", "created_at"))
    _block_row_refresh(
        block=block,
        doc=doc,
        update=version,
        rendered=rendered,
        compact=compact,
        added=(0, grown),
    )
    return version


def _log_fold(*, block: MemoryBlock, upto: int) -> None:
    """Drop the bytes of the block's log entries after its snapshot, up to
    and including ``upto``: the snapshot holds them now (the rows stay as
    history)."""
    rows_set_in_range(
        BlockUpdate,
        parent="block",
        parent_id=block.pk,
        field="data",
        value=b"",
        after=block.snapshot_upto,
        upto=upto,
    )


def _snapshot_save(*, block_id: Any, data: bytes) -> None:
    """Store a block's snapshot (its row is made on first use)."""
    if not row_update(BlockSnapshot(block_id=block_id, data=data), ("data",)):
        BlockSnapshot.objects.create(block_id=block_id, data=data)


def block_compact(*, block: MemoryBlock) -> bool:
    """Fold a block's whole log into its snapshot now; False if nothing to do."""
    with transaction.atomic():
        locked = _lock(block)
        last = (
            BlockUpdate.objects.filter(block=locked, pk__gt=locked.snapshot_upto)
            .order_by("-pk")
            .values_list("pk", flat=True)
            .first()
        )
        if last is None:
            return False
        doc = block_document_load(block=locked)
        _log_fold(block=locked, upto=last)
        _snapshot_save(block_id=locked.pk, data=documents.snapshot(doc))
        MemoryBlock.objects.filter(pk=locked.pk).update(
            snapshot_upto=last, log_count=0, log_bytes=0
        )
        return True


def log_entries_pruned(*, block: MemoryBlock, entries: list[Any]) -> list[Any]:
    """The one place entries pruned from a log block leave it.

    They stay in the block's history and move into the owner's archival
    memory, tagged with the log's label, so they remain searchable.  A
    constellation-level log has no owner agent: its entries stay in history
    only.  Returns the entries.
    """
    if block.owner_id is None:
        return entries
    for entry in entries:
        archival_entry_create(
            agent=block.owner,
            content=documents.log_entry_render(entry),
            tags=[block.label, "log"],
            metadata={"block_id": str(block.pk), "log_entry": entry},
            importance=0.3,
            source=ArchivalSource.SYSTEM,
        )
    return entries


def block_update_import(
    *,
    block: MemoryBlock,
    actor: Actor,
    updates: list[bytes],
    origin: str | None = None,
) -> list[bytes]:
    """Validate and store Loro updates sent by a remote peer.

    Corrupt bytes or updates depending on unknown changes are
    ``InvalidInput``; the actor's right and the char limit are checked on
    the result.  Returns the stored update (empty when nothing was new).
    Attribution comes from ``actor``; a burst of updates by one actor is one
    version of the history (:func:`_burst_version`).
    """
    if not updates or not all(isinstance(u, bytes | bytearray) for u in updates):
        raise InvalidInput("expected one or more Loro updates as bytes")

    def apply(doc: LoroDoc) -> None:
        with documents.loro_guard("invalid Loro update"):
            status = doc.import_batch([bytes(u) for u in updates])
        if status.pending is not None:
            raise InvalidInput(
                "this update depends on changes the server does not have; "
                "sync the document first"
            )

    summary = f"live edit by {actor.display_name}"
    result = _block_change(
        block=block,
        actor=actor,
        summary=summary,
        change=apply,
        origin=origin,
        change_type="co-edit",
        burst=True,
    )
    return [result.data] if result.update is not None else []


def _describe(op: dict[str, Any]) -> str:
    name = op.get("op", "?")
    target = op.get("field") or op.get("section") or ""
    return f"{name} {target}".strip()


def _apply_operations(
    operations: list[dict[str, Any]], schema: dict[str, Any], *, agent: bool
) -> Callable[[LoroDoc], None]:
    if not operations or not all(isinstance(op, dict) for op in operations):
        raise InvalidInput("expected a list of operations ({'op': name, ...})")

    def apply(doc: LoroDoc) -> None:
        for op in operations:
            documents.operation_apply(doc, schema, op, enforce_read_only=agent)

    return apply


def block_operate(
    *,
    actor: Actor,
    block: MemoryBlock,
    operations: list[dict[str, Any]],
    summary: str | None = None,
    origin: str | None = None,
) -> BlockChange:
    """Apply schema operations to a block as ``actor``.

    An agent's change to a Partner/Human block becomes a pending approval
    request instead (checked against the block first, so a request that
    could never apply is refused now).
    """
    summary = summary or ", ".join(_describe(op) for op in operations)[:SUMMARY_MAX]
    apply = _apply_operations(operations, block.schema, agent=read_only_binds(actor))
    return _block_change(
        block=block,
        actor=actor,
        summary=summary,
        change=apply,
        origin=origin,
        request=operations,
    )


def block_set_content(
    *, actor: Actor, block: MemoryBlock, value: Any, summary: str | None = None
) -> BlockChange:
    """Replace a block's whole content with ``value`` (shaped by its schema)."""
    return _block_change(
        block=block,
        actor=actor,
        summary=summary or "set content",
        change=lambda doc: documents.document_set_value(doc, block.schema, value),
        request=[{"op": "set_content", "value": value}],
    )


def _run_operations(
    *, actor: Actor, block: MemoryBlock, operations: list[dict[str, Any]], **kw: Any
) -> BlockChange:
    """Apply stored operations, including the ``set_content`` pseudo-op."""
    agent = read_only_binds(actor)

    def apply(doc: LoroDoc) -> None:
        documents.operations_apply(
            doc, block.schema, operations, enforce_read_only=agent
        )

    return _block_change(block=block, actor=actor, change=apply, **kw)


def block_log_append(
    *, block: MemoryBlock, entry: dict[str, Any], actor: Actor | None = None
) -> BlockChange:
    """Append an entry to a log block (system-maintained) and prune it.

    Entries past the schema's ``max_entries`` leave the block through
    :func:`log_entries_pruned` (they stay in its history).
    """
    if block.schema.get("kind") != "log":
        raise InvalidInput(f"block {block.label!r} is not a log block")
    actor = actor or Actor.system()
    entry = {"timestamp": timezone.now().isoformat(timespec="seconds"), **entry}

    def apply(doc: LoroDoc) -> list[Any]:
        documents.operation_apply(
            doc,
            block.schema,
            {"op": "append_log_entry", "entry": entry},
            enforce_read_only=False,
        )
        return documents.log_prune(doc, block.schema)

    summary = _summary(f"log: {entry.get('message', entry)}")
    return _block_change(
        block=block,
        actor=actor,
        summary=summary,
        change=apply,
        change_type="log_append",
    )


def block_rollback(*, actor: Actor, block: MemoryBlock, version_id: int) -> BlockChange:
    """Make the block's content what it was after ``version_id``, as a new
    change (history is never rewritten)."""
    version = block_version_get(block=block, version_id=version_id)
    block_require_access(actor=actor, block=block, needed="write")
    frontiers = documents.frontiers_decode(bytes(version.frontiers))

    def apply(doc: LoroDoc) -> None:
        with documents.loro_guard("cannot roll back to this version"):
            doc.revert_to(frontiers)

    return _block_change(
        change_type="rollback",
        block=block,
        actor=actor,
        summary="rolled back to version "
        f"{block_version_number(block=block, version_id=version.pk)}",
        change=apply,
    )


@transaction.atomic
def _approval_request(
    *,
    actor: Actor,
    block: MemoryBlock,
    operations: list[dict[str, Any]],
    summary: str,
) -> BlockChange:
    assert actor.agent is not None
    _dry_run(actor=actor, block=block, operations=operations)
    approval = BlockApproval(
        block=block, agent=actor.agent, operations=operations, summary=_summary(summary)
    )
    approval.full_clean()
    approval.save()
    return BlockChange(block=block, approval=approval)


def _dry_run(
    *, actor: Actor, block: MemoryBlock, operations: list[dict[str, Any]]
) -> None:
    """Refuse a request now if it could not apply (bad op, over the limit)."""
    doc = block_document_load(block=block)
    old = documents.document_value(doc, block.schema)
    documents.operations_apply(doc, block.schema, operations, enforce_read_only=True)
    new = documents.document_value(doc, block.schema)
    block_change_check(actor=actor, block=block, access="write", old=old, new=new)
    rendered = documents.render_value(block.schema, new)
    _check_limit(block=block, old_size=block.size, new_size=len(rendered))


@transaction.atomic
def approval_decide(
    *, actor: Actor, approval: BlockApproval, approve: bool, reason: str = ""
) -> BlockApproval:
    """Approve (apply as the agent's change) or reject a pending request;
    a rejection's ``reason`` is kept as its result, for the agent to read."""
    approval.decided_by = actor.display_name[:150]
    approval.decided_at = timezone.now()
    fields = ["status", "decided_by", "decided_at", "result"]
    if not approve:
        approval.status = ApprovalStatus.REJECTED
        approval.result = " ".join(reason.split())[:SUMMARY_MAX]
        approval.full_clean()
        approval.save(update_fields=fields)
        return approval
    agent_actor = Actor.for_agent(approval.agent)
    try:
        with transaction.atomic():
            change = _run_operations(
                actor=agent_actor,
                block=approval.block,
                operations=approval.operations,
                summary=f"{approval.summary} (approved by {actor.display_name})",
                access="write",
            )
    except (InvalidInput, LimitExceeded, PermissionDenied) as exc:
        approval.status = ApprovalStatus.FAILED
        approval.result = exc.message
    else:
        approval.status = ApprovalStatus.APPROVED
        approval.result = (
            "version "
            f"{block_version_number(block=approval.block, version_id=change.update.pk)}"
            if change.update
            else "no change"
        )
    approval.full_clean()
    approval.save(update_fields=fields)
    return approval


def _choice(value: str, choices: Any, what: str) -> str:
    if value not in choices.values:
        raise InvalidInput(
            f"{what} is one of {', '.join(choices.values)}; got {value!r}"
        )
    return value


@transaction.atomic
def block_create(
    *,
    actor: Actor,
    label: str,
    owner: Agent | None = None,
    constellation: Constellation | None = None,
    template: str | None = None,
    schema: dict[str, Any] | None = None,
    description: str | None = None,
    block_type: str | None = None,
    permission: str = Permission.READ_WRITE,
    char_limit: int | None = None,
    pinned: bool = False,
    content: Any = None,
    snapshot: bytes | None = None,
) -> MemoryBlock:
    """Create a block for ``owner`` (or the constellation when None).

    ``template`` (persona, human, scratchpad, organization, custom) gives the
    schema, description and type unless they are given.  ``content`` is its
    initial content (shaped by the schema); ``snapshot`` (imports) a whole
    Loro document with its history instead.
    """
    block_create_check(actor=actor, owner=owner)
    if not isinstance(label, str) or not label.strip():
        raise InvalidInput(
            "a block needs a label (up to 100 characters, unique per owner)",
            extra={"field": "label"},
        )
    if owner is not None:
        constellation = owner.constellation
    if constellation is None:
        raise InvalidInput("a constellation-level block needs a constellation")
    label = label_check(label.strip())
    tpl = documents.template_get(template) if template else None
    schema = documents.schema_validate(
        schema if schema is not None else (tpl.schema if tpl else {"kind": "text"})
    )
    if block_type is None:
        block_type = tpl.block_type if tpl else BlockType.WORKING
    if schema["kind"] == "log":
        block_type = BlockType.LOG
    block = MemoryBlock(
        constellation=constellation,
        owner=owner,
        label=label,
        description=description
        if description is not None
        else (tpl.description if tpl else ""),
        block_type=_choice(block_type, BlockType, "block_type"),
        schema=schema,
        char_limit=char_limit or settings.MEMORY_DEFAULT_CHAR_LIMIT,
        permission=_choice(permission, Permission, "permission"),
        pinned=pinned,
    )
    if not block.description:
        block.description = f"Memory block '{block.label}'"
    block.rendered = documents.render(LoroDoc(), schema)
    block.size = len(block.rendered)
    _label_free(block)
    block.full_clean()
    block.save()
    if snapshot is not None:
        _block_adopt_snapshot(block=block, actor=actor, snapshot=snapshot)
    elif content not in (None, "", {}, []):
        _block_change(
            block=block,
            actor=actor,
            summary="created",
            change=lambda doc: documents.document_set_value(doc, schema, content),
            access="write",
            change_type="create",
        )
    else:
        _block_event(actor=actor, block=block, change_type="create", summary="created")
    return block


def _label_free(block: MemoryBlock, *, exclude: Any = None) -> None:
    qs = MemoryBlock.objects.filter(label=block.label)
    if block.owner_id is not None:
        qs = qs.filter(owner_id=block.owner_id)
    else:
        qs = qs.filter(owner__isnull=True, constellation_id=block.constellation_id)
    if exclude is not None:
        qs = qs.exclude(pk=exclude)
    if qs.exists():
        where = "this agent" if block.owner_id else "this constellation"
        raise Conflict(
            f"{where} already has a block labelled {block.label!r}",
            extra={"field": "label"},
        )


def _block_adopt_snapshot(*, block: MemoryBlock, actor: Actor, snapshot: bytes) -> None:
    doc = documents.document_load(snapshot, [])
    _check_layout(block=block, doc=doc, since=Frontiers())
    rendered = documents.render(doc, block.schema)
    held = documents.held_size(doc, block.schema, rendered)
    _check_limit(block=block, old_size=0, new_size=held)
    _check_bytes(block=block, added=len(snapshot), shrinks=False)
    update = _block_record(
        block=block,
        doc=doc,
        actor=actor,
        summary="imported with its history",
        data=b"",
        rendered=rendered,
    )
    _snapshot_save(block_id=block.pk, data=documents.snapshot(doc))
    MemoryBlock.objects.filter(pk=block.pk).update(
        snapshot_upto=update.pk,
        log_count=0,
        log_bytes=0,
    )


@transaction.atomic
def block_configure(
    *,
    actor: Actor,
    block: MemoryBlock,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    permission: str | None = None,
    pinned: bool | None = None,
    block_type: str | None = None,
    char_limit: int | None = None,
) -> MemoryBlock:
    """Change a block's settings (not its content).

    The owner agent with write access, or a human.  An agent may make the
    permission stricter but never looser, and cannot change the limit.
    """
    if not block_can_configure(actor=actor, block=block):
        raise PermissionDenied(
            f"only the owner with write access or a human can configure {block.label!r}"
        )
    fields: list[str] = []
    if description is not None:
        block.description = description
        fields.append("description")
    if pinned is not None:
        block.pinned = pinned
        fields.append("pinned")
    if block_type is not None:
        new_type = _choice(block_type, BlockType, "block_type")
        if (new_type == BlockType.LOG) != (block.schema.get("kind") == "log"):
            raise InvalidInput("only log-schema blocks are log blocks")
        block.block_type = new_type
        fields.append("block_type")
    if permission is not None:
        _choice(permission, Permission, "permission")
        block_configure_check(actor=actor, block=block, permission=permission)
        if permission != block.permission:
            # Open sockets check their right again (looser: nothing happens).
            rights_revoke_send(block_id=block.pk)
        block.permission = permission
        fields.append("permission")
    if char_limit is not None:
        block_configure_check(actor=actor, block=block, char_limit=char_limit)
        block.char_limit = char_limit
        fields.append("char_limit")
    if schema is not None:
        new_schema = documents.schema_validate(schema)
        if new_schema["kind"] != block.schema["kind"] and block.size:
            raise InvalidInput(
                f"block {block.label!r} has content; its schema kind stays "
                f"{block.schema['kind']}"
            )
        block.schema = new_schema
        block.rendered = documents.render(block_document_load(block=block), new_schema)
        block.size = len(block.rendered)
        fields += ["schema", "rendered", "size"]
    if not fields:
        return block
    block.full_clean()
    block.save(update_fields=[*fields, "updated_at"])
    _block_event(
        actor=actor,
        block=block,
        change_type="configure",
        summary=f"changed {', '.join(fields)}",
    )
    return block


@transaction.atomic
def block_delete(*, actor: Actor, block: MemoryBlock) -> None:
    if not block_can_delete(actor=actor, block=block):
        raise PermissionDenied(
            f"deleting block {block.label!r} needs Admin permission on your own block"
        )
    rights_revoke_send(block_id=block.pk)
    _block_event(actor=actor, block=block, change_type="delete", summary="deleted")
    block.delete()


def block_move(*, actor: Actor, block: MemoryBlock, to_type: str) -> MemoryBlock:
    """Move a block between working and archival memory (context tool)."""
    if block.block_type == BlockType.CORE:
        raise InvalidInput(f"block {block.label!r} is core memory and stays in context")
    if block.block_type == BlockType.LOG:
        raise InvalidInput(f"block {block.label!r} is a log block")
    if block.block_type == to_type:
        where = "working" if to_type == BlockType.WORKING else "archival"
        raise InvalidInput(f"block {block.label!r} is already in {where} memory")
    pinned = False if to_type == BlockType.ARCHIVAL else None
    return block_configure(actor=actor, block=block, block_type=to_type, pinned=pinned)


@transaction.atomic
def block_swap(
    *, actor: Actor, working: MemoryBlock, archival: MemoryBlock
) -> tuple[MemoryBlock, MemoryBlock]:
    if working.block_type != BlockType.WORKING:
        raise InvalidInput(f"block {working.label!r} is not in working memory")
    if archival.block_type != BlockType.ARCHIVAL:
        raise InvalidInput(f"block {archival.label!r} is not in archival memory")
    return (
        block_move(actor=actor, block=working, to_type=BlockType.ARCHIVAL),
        block_move(actor=actor, block=archival, to_type=BlockType.WORKING),
    )


@transaction.atomic
def block_share(
    *, actor: Actor, block: MemoryBlock, agent: Agent, access: str
) -> BlockAttachment:
    """Attach ``block`` to ``agent`` with ReadOnly/AppendOnly/ReadWrite access
    (again: changes the access)."""
    if not block_can_share(actor=actor, block=block):
        raise PermissionDenied(f"you cannot share block {block.label!r}")
    _choice(access, SharedAccess, "access")
    if agent.constellation_id != block.constellation_id:
        raise NotFound(f"agent {agent.pk} does not exist")
    if agent.pk == block.owner_id:
        raise InvalidInput("a block is not shared with its own owner")
    attachment = BlockAttachment.objects.filter(block=block, agent=agent).first()
    if attachment is None:
        attachment = BlockAttachment(block=block, agent=agent, access=access)
    elif attachment.access != access:
        rights_revoke_send(agent_id=agent.pk, block_id=block.pk)
    attachment.access = access
    attachment.full_clean(validate_unique=False)
    try:
        attachment.save()
    except IntegrityError:
        raise Conflict("this block was just shared with that agent") from None
    _block_event(
        actor=actor,
        block=block,
        change_type="share",
        summary=f"shared with {agent.name} ({access})",
    )
    return attachment


@transaction.atomic
def block_unshare(*, actor: Actor, block: MemoryBlock, agent: Agent) -> bool:
    if not block_can_share(actor=actor, block=block):
        raise PermissionDenied(f"you cannot unshare block {block.label!r}")
    deleted, _ = BlockAttachment.objects.filter(block=block, agent=agent).delete()
    if deleted:
        rights_revoke_send(agent_id=agent.pk, block_id=block.pk)
        _block_event(
            actor=actor,
            block=block,
            change_type="unshare",
            summary=f"no longer shared with {agent.name}",
        )
    return bool(deleted)


def _text_place(
    *, block: MemoryBlock, section: str | None, places: list[documents.TextPlace]
) -> documents.TextPlace:
    """The place ``section`` names, or the block's last writable one."""
    names = ", ".join(str(p.name) for p in places)
    if not places:
        raise InvalidInput(
            f"block {block.label!r} ({block.schema['kind']}) has no text you can "
            "change; use its structured operations (POST /api/blocks/{id}/operations)"
        )
    if section is None:
        return places[-1]
    for place in places:
        if place.name == section:
            return place
    where = f"; its text is in: {names}" if places[0].name else ""
    raise InvalidInput(f"block {block.label!r} has no text at {section!r}{where}")


def block_append(
    *, actor: Actor, block: MemoryBlock, content: str, section: str | None = None
) -> BlockChange:
    """Append ``content`` on a new line (text) or as a new item (list).

    On a structured block it lands in ``section`` (a composite section, a
    map field, or ``section/field``), by default the last text or list
    place the actor may write."""
    if not content:
        raise InvalidInput("nothing to append: 'content' is empty")
    places = documents.text_places(block.schema, agent=read_only_binds(actor))
    place = _text_place(block=block, section=section, places=places)
    return _block_operate_one(
        actor=actor,
        block=block,
        op=documents.text_place_operation(place, "append", text=content),
        summary=f"append: {content}",
    )


def block_replace(
    *,
    actor: Actor,
    block: MemoryBlock,
    old: str,
    new: str,
    section: str | None = None,
    every: bool = False,
) -> BlockChange:
    """Replace the exact text ``old`` with ``new`` (its first occurrence, or
    with ``every`` all of them): in ``section`` when named, else in the one
    text place of the block that holds ``old``."""
    if not old:
        raise InvalidInput("'old' is empty; give the exact text to replace")
    places = [
        p
        for p in documents.text_places(block.schema, agent=read_only_binds(actor))
        if p.kind == "text"
    ]
    if section is None and len(places) > 1:
        value = block_value(block=block)
        holding = [
            p
            for p in places
            if old in documents.text_place_value(block.schema, value, p)
        ]
        if len(holding) > 1:
            names = ", ".join(str(p.name) for p in holding)
            raise InvalidInput(
                f"{old!r} is in several places of block {block.label!r} ({names}); "
                "name the 'section'"
            )
        if not holding:
            raise InvalidInput(
                f"the text to replace was not found in block {block.label!r}: {old!r}"
            )
        places = holding
    place = _text_place(block=block, section=section, places=places)
    return _block_operate_one(
        actor=actor,
        block=block,
        op=documents.text_place_operation(
            place, "replace", old=old, new=new, every=every
        ),
        summary=f"replace {old!r} with {new!r}",
    )


def _block_operate_one(
    *, actor: Actor, block: MemoryBlock, op: dict[str, Any], summary: str
) -> BlockChange:
    return block_operate(
        actor=actor, block=block, operations=[op], summary=_summary(summary)
    )


def block_rewrite(*, actor: Actor, block: MemoryBlock, content: str) -> BlockChange:
    """Letta's ``core_memory_update``: the block's whole content becomes
    ``content``."""
    value = documents.value_from_text(block.schema, content)
    return block_set_content(
        actor=actor, block=block, value=value, summary=_summary(f"update: {content}")
    )
