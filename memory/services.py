"""Every change to memory blocks.

One path changes a block's content, :func:`_block_change`: under the block's
row lock it loads the document (snapshot + log), applies the change, checks
the actor's rights and the character limit on the result, appends one
attributed ``BlockUpdate`` and compacts the log past the thresholds of
``settings.MEMORY_COMPACT_UPDATES`` / ``MEMORY_COMPACT_BYTES`` - all in one
transaction, so a concurrent change can never be lost.  After commit the
update is broadcast to the block's room (``memory.broadcast``).

Agents' changes to Partner/Human blocks become approval requests; approving
one applies it as the agent's change.

Every write of the memory app: keyword-only, typed, atomic.

Side effects (embedding tasks) are scheduled after commit.
"""

from __future__ import annotations

import atexit
import base64
import functools
import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import (
    DEFAULT_DB_ALIAS,
    IntegrityError,
    connection,
    connections,
    transaction,
)
from django.db.models import Case, DateTimeField, F, Field, Model, Value, When
from django.db.models.expressions import RawSQL
from django.utils import timezone
from loro import LoroDoc

from coordination.actors import Actor
from coordination.errors import (
    Conflict,
    InvalidInput,
    LimitExceeded,
    NotFound,
    PermissionDenied,
)
from coordination.models import Agent, Constellation
from memory import doc_cache, documents, selectors
from memory.broadcast import block_broadcast
from memory.indexes import ARCHIVAL_INDEX, EMBEDDED_HOOKS, INDEXED, MESSAGE_INDEX
from memory.models import (
    ApprovalStatus,
    ArchivalEntry,
    ArchivalSource,
    BlockApproval,
    BlockAttachment,
    BlockSnapshot,
    BlockType,
    BlockUpdate,
    Conversation,
    ConversationStatus,
    EmbeddingState,
    MemoryBlock,
    Message,
    MessageRole,
    Permission,
    RetrievalConfig,
    SharedAccess,
)
from memory.retrieval import index_delete, index_put_texts, index_put_vectors
from pattern_site.db.compiled import CompiledQuery

SUMMARY_MAX = 300
EXPORT_FORMAT = "pattern-site.memory"
EXPORT_VERSION = 1


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


# --- the one write path ----------


# The block's row by primary key, compiled once (pattern_site.db.compiled):
# on the write path the ORM's query building cost more than the query.  The
# key goes in as a raw parameter, already prepared for the database.
_LOCKED_BLOCK = CompiledQuery(
    lambda pk: (
        MemoryBlock.objects.select_for_update()
        .filter(pk=RawSQL("%s", (pk,)))
        .order_by()
    ),
    pk="\x00pk",
)


def _lock(block: MemoryBlock) -> MemoryBlock:
    """The block's row, locked for this transaction (SQLite: the IMMEDIATE
    transaction's write lock; PostgreSQL: ``FOR UPDATE``)."""
    conn = connections[DEFAULT_DB_ALIAS]
    locked = _LOCKED_BLOCK.first(
        pk=MemoryBlock._meta.pk.get_db_prep_value(block.pk, conn)
    )
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


def _check_rights(
    *, actor: Actor, block: MemoryBlock, access: str, old: Any, new: Any
) -> None:
    if access == "read":
        selectors.block_require_access(actor=actor, block=block, needed="append")
    if access == "append" and not documents.is_extension(old, new):
        raise PermissionDenied(
            f"you may only append to block {block.label!r}; this change would "
            "delete or rewrite existing content"
        )
    if actor.kind == "agent":
        changed = documents.read_only_changed(block.schema, old, new)
        if changed:
            raise PermissionDenied(f"{changed} of block {block.label!r} is read-only")


def _summary(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_MAX else text[: SUMMARY_MAX - 1] + "…"


# Server-side edits all use this Loro peer.  Safe because they are
# serialised by the block's row lock and always start from the latest
# stored document, so the peer's op counter never repeats; and necessary
# for speed, because every new peer in a document makes each later load
# and edit slower (bench/blocks.py measured 0.5 ms vs 40+ ms per edit
# after 3,000 edits).  Browsers use their own random peers.
SERVER_PEER = 1


def _locked_document(locked: MemoryBlock) -> LoroDoc:
    """The document of a locked block: the cached one when it is at the
    row's version (taken out of the cache), else read from the database."""
    doc = doc_cache.take(locked.pk, locked.version)
    if doc is None:
        # Under the lock no compaction can interleave: the row and log agree.
        pending = selectors.block_log_pending(
            block_id=locked.pk, upto=locked.snapshot_upto
        )
        doc = documents.document_load(
            selectors.block_snapshot_data(block_id=locked.pk), pending
        )
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
) -> BlockChange:
    """Apply ``change`` to the block's document as ``actor``; see module doc.

    ``change`` mutates the (uncommitted) document and may return entries it
    pruned (log blocks).  ``access`` overrides the actor's right (approved
    requests were authorised by a human).

    The document comes from the per-process cache (``memory.doc_cache``)
    when it is at the locked row's version; it goes back into the cache only
    when this transaction commits, so a failed or rolled-back change never
    leaves a changed document behind.
    """
    if access is None:
        access = selectors.block_access_for_actor(actor=actor, block=block)
    if access == "read":
        selectors.block_require_access(actor=actor, block=block, needed="append")
    locked = _lock(block)
    doc = _locked_document(locked)
    before = doc.oplog_vv
    needs_old = access == "append" or (
        actor.kind == "agent" and documents.has_read_only(locked.schema)
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
    new_value = documents.document_value(doc, locked.schema)
    if needs_old:
        _check_rights(
            actor=actor, block=locked, access=access, old=old_value, new=new_value
        )
    rendered = documents.render_value(locked.schema, new_value)
    _check_limit(block=locked, old_size=locked.size, new_size=len(rendered))
    data = documents.updates_since(doc, before)
    update = _block_record(
        block=locked,
        doc=doc,
        actor=actor,
        summary=summary,
        data=data,
        rendered=rendered,
    )
    _cache_on_commit(locked, doc)
    block_id = locked.pk

    def broadcast() -> None:  # a def: Django's robust on_commit logs __qualname__
        block_broadcast(block_id=block_id, updates=[data], origin=origin)

    transaction.on_commit(broadcast, robust=True)
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
    update.pk = _sql_insert(update)
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
            _sql_log_fold(block=block, upto=update.pk)
        block.snapshot_upto = update.pk
        block.log_count = block.log_bytes = 0
        fields += ("snapshot_upto",)
    else:
        block.log_count += 1
        block.log_bytes += len(data)
    _sql_update(block, fields)
    return update


# The write path's statements in plain SQL, built once per model, fields and
# database vendor, with each field's own conversion (the ORM's statement
# building cost more than the statements).


@functools.cache
def _insert_statement(model: type[Model], vendor: str) -> tuple[str, list[Field]]:
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(meta.db_table)} "
        f"({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    if connection.features.can_return_columns_from_insert:
        sql += f" RETURNING {quote(meta.pk.column)}"
    return sql, fields


@functools.cache
def _update_statement(
    model: type[Model], names: tuple[str, ...], vendor: str
) -> tuple[str, list[Field]]:
    meta = model._meta
    fields = [meta.get_field(name) for name in names]
    quote = connection.ops.quote_name
    sets = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    sql = f"UPDATE {quote(meta.db_table)} SET {sets} WHERE {quote(meta.pk.column)} = %s"
    return sql, fields


def _sql_insert(instance: Any) -> int:
    """INSERT ``instance`` (every concrete field but the auto id); its id."""
    conn = connections[DEFAULT_DB_ALIAS]
    sql, fields = _insert_statement(type(instance), conn.vendor)
    values = [f.get_db_prep_save(getattr(instance, f.attname), conn) for f in fields]
    with conn.cursor() as cursor:
        cursor.execute(sql, values)
        if conn.features.can_return_columns_from_insert:
            return cursor.fetchone()[0]
        meta = instance._meta
        return conn.ops.last_insert_id(cursor, meta.db_table, meta.pk.column)


@functools.cache
def _log_fold_statement(vendor: str) -> tuple[str, Field]:
    meta = BlockUpdate._meta
    quote = connection.ops.quote_name
    pk, data = quote(meta.pk.column), meta.get_field("data")
    sql = (
        f"UPDATE {quote(meta.db_table)} SET {quote(data.column)} = %s "
        f"WHERE {quote(meta.get_field('block').column)} = %s "
        f"AND {pk} > %s AND {pk} <= %s"
    )
    return sql, data


def _sql_update(instance: Any, names: tuple[str, ...]) -> int:
    """UPDATE the named fields of ``instance``'s row to its values; the
    number of rows changed (0 or 1)."""
    conn = connections[DEFAULT_DB_ALIAS]
    sql, fields = _update_statement(type(instance), names, conn.vendor)
    values = [f.get_db_prep_save(getattr(instance, f.attname), conn) for f in fields]
    values.append(instance._meta.pk.get_db_prep_value(instance.pk, conn))
    with conn.cursor() as cursor:
        cursor.execute(sql, values)
        return cursor.rowcount


def _sql_log_fold(*, block: MemoryBlock, upto: int) -> None:
    """Drop the bytes of the block's log entries after its snapshot, up to
    and including ``upto``: the snapshot holds them now (the rows stay as
    history)."""
    conn = connections[DEFAULT_DB_ALIAS]
    sql, data = _log_fold_statement(conn.vendor)
    block_id = MemoryBlock._meta.pk.get_db_prep_value(block.pk, conn)
    with conn.cursor() as cursor:
        cursor.execute(
            sql,
            [data.get_db_prep_save(b"", conn), block_id, block.snapshot_upto, upto],
        )


def _snapshot_save(*, block_id: Any, data: bytes) -> None:
    """Store a block's snapshot (its row is made on first use)."""
    if not _sql_update(BlockSnapshot(block_id=block_id, data=data), ("data",)):
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
        doc = selectors.block_document_load(block=locked)
        _sql_log_fold(block=locked, upto=last)
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


# --- remote peers (the sync consumer) -------------------------------------------


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
    Attribution comes from ``actor``.
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
        block=block, actor=actor, summary=summary, change=apply, origin=origin
    )
    return [result.data] if result.update is not None else []


# --- operations (tool API, dashboard) ---------------------------------------------


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
    """Apply schema operations (seed 004) to a block as ``actor``.

    An agent's change to a Partner/Human block becomes a pending approval
    request instead (checked against the block first, so a request that
    could never apply is refused now).
    """
    summary = summary or ", ".join(_describe(op) for op in operations)[:SUMMARY_MAX]
    apply = _apply_operations(operations, block.schema, agent=actor.kind == "agent")
    if selectors.block_approval_needed(actor=actor, block=block):
        return _approval_request(
            actor=actor, block=block, operations=operations, summary=summary
        )
    return _block_change(
        block=block, actor=actor, summary=summary, change=apply, origin=origin
    )


def block_set_content(
    *, actor: Actor, block: MemoryBlock, value: Any, summary: str | None = None
) -> BlockChange:
    """Replace a block's whole content with ``value`` (shaped by its schema)."""
    op = {"op": "set_content", "value": value}
    if selectors.block_approval_needed(actor=actor, block=block):
        return _approval_request(
            actor=actor, block=block, operations=[op], summary=summary or "set content"
        )
    return _block_change(
        block=block,
        actor=actor,
        summary=summary or "set content",
        change=lambda doc: documents.document_set_value(doc, block.schema, value),
    )


def _run_operations(
    *, actor: Actor, block: MemoryBlock, operations: list[dict[str, Any]], **kw: Any
) -> BlockChange:
    """Apply stored operations, including the ``set_content`` pseudo-op."""
    agent = actor.kind == "agent"

    def apply(doc: LoroDoc) -> None:
        for op in operations:
            if op.get("op") == "set_content":
                documents.document_set_value(doc, block.schema, op.get("value"))
            else:
                documents.operation_apply(
                    doc, block.schema, op, enforce_read_only=agent
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
    return _block_change(block=block, actor=actor, summary=summary, change=apply)


def block_rollback(*, actor: Actor, block: MemoryBlock, version_id: int) -> BlockChange:
    """Make the block's content what it was after ``version_id``, as a new
    change (history is never rewritten)."""
    version = selectors.block_version_get(block=block, version_id=version_id)
    selectors.block_require_access(actor=actor, block=block, needed="write")
    frontiers = documents.frontiers_decode(bytes(version.frontiers))

    def apply(doc: LoroDoc) -> None:
        with documents.loro_guard("cannot roll back to this version"):
            doc.revert_to(frontiers)

    return _block_change(
        block=block,
        actor=actor,
        summary=f"rolled back to version {version.pk}",
        change=apply,
    )


# --- approvals ----------


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
    doc = selectors.block_document_load(block=block)
    old = documents.document_value(doc, block.schema)
    for op in operations:
        if op.get("op") == "set_content":
            documents.document_set_value(doc, block.schema, op.get("value"))
        else:
            documents.operation_apply(doc, block.schema, op, enforce_read_only=True)
    new = documents.document_value(doc, block.schema)
    _check_rights(actor=actor, block=block, access="write", old=old, new=new)
    rendered = documents.render_value(block.schema, new)
    _check_limit(block=block, old_size=block.size, new_size=len(rendered))


@transaction.atomic
def approval_decide(
    *, actor: Actor, approval: BlockApproval, approve: bool
) -> BlockApproval:
    """Approve (apply as the agent's change) or reject a pending request."""
    approval.decided_by = actor.display_name[:150]
    approval.decided_at = timezone.now()
    fields = ["status", "decided_by", "decided_at", "result"]
    if not approve:
        approval.status = ApprovalStatus.REJECTED
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
            f"version {change.update.pk}" if change.update else "no change"
        )
    approval.full_clean()
    approval.save(update_fields=fields)
    return approval


# --- blocks themselves ----------


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
    if actor.kind == "agent":
        assert actor.agent is not None
        if owner is None or owner.pk != actor.agent.pk:
            raise PermissionDenied("an agent may create blocks in its own memory only")
    if owner is not None:
        constellation = owner.constellation
    if constellation is None:
        raise InvalidInput("a constellation-level block needs a constellation")
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
        label=label.strip(),
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
        )
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
        raise Conflict(f"{where} already has a block labelled {block.label!r}")


def _block_adopt_snapshot(*, block: MemoryBlock, actor: Actor, snapshot: bytes) -> None:
    doc = documents.document_load(snapshot, [])
    rendered = documents.render(doc, block.schema)
    _check_limit(block=block, old_size=0, new_size=len(rendered))
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
    if not selectors.block_can_configure(actor=actor, block=block):
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
        if actor.kind == "agent" and _permission_rank(permission) > _permission_rank(
            block.permission
        ):
            raise PermissionDenied("agents cannot loosen a block's permission")
        block.permission = permission
        fields.append("permission")
    if char_limit is not None:
        if actor.kind == "agent":
            raise PermissionDenied("only a human can change a block's char limit")
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
        block.rendered = documents.render(
            selectors.block_document_load(block=block), new_schema
        )
        block.size = len(block.rendered)
        fields += ["schema", "rendered", "size"]
    if not fields:
        return block
    block.full_clean()
    block.save(update_fields=[*fields, "updated_at"])
    return block


_PERMISSION_ORDER = [
    Permission.READ_ONLY,
    Permission.PARTNER,
    Permission.HUMAN,
    Permission.APPEND,
    Permission.READ_WRITE,
    Permission.ADMIN,
]


def _permission_rank(permission: str) -> int:
    return _PERMISSION_ORDER.index(Permission(permission))


@transaction.atomic
def block_delete(*, actor: Actor, block: MemoryBlock) -> None:
    if not selectors.block_can_delete(actor=actor, block=block):
        raise PermissionDenied(
            f"deleting block {block.label!r} needs Admin permission on your own block"
        )
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


# --- sharing ----------


@transaction.atomic
def block_share(
    *, actor: Actor, block: MemoryBlock, agent: Agent, access: str
) -> BlockAttachment:
    """Attach ``block`` to ``agent`` with ReadOnly/AppendOnly/ReadWrite access
    (again: changes the access)."""
    if not selectors.block_can_share(actor=actor, block=block):
        raise PermissionDenied(f"you cannot share block {block.label!r}")
    _choice(access, SharedAccess, "access")
    if agent.constellation_id != block.constellation_id:
        raise NotFound(f"agent {agent.pk} does not exist")
    if agent.pk == block.owner_id:
        raise InvalidInput("a block is not shared with its own owner")
    attachment = BlockAttachment.objects.filter(block=block, agent=agent).first()
    if attachment is None:
        attachment = BlockAttachment(block=block, agent=agent, access=access)
    attachment.access = access
    attachment.full_clean(validate_unique=False)
    try:
        attachment.save()
    except IntegrityError:
        raise Conflict("this block was just shared with that agent") from None
    return attachment


@transaction.atomic
def block_unshare(*, actor: Actor, block: MemoryBlock, agent: Agent) -> bool:
    if not selectors.block_can_share(actor=actor, block=block):
        raise PermissionDenied(f"you cannot unshare block {block.label!r}")
    deleted, _ = BlockAttachment.objects.filter(block=block, agent=agent).delete()
    return bool(deleted)


# --- export and import ----------


def blocks_export(*, actor: Actor, agent: Agent) -> dict[str, Any]:
    """An agent's own blocks as JSON, each with its Loro snapshot (base64)."""
    blocks = []
    for block in selectors.block_list_for_actor(actor=actor).filter(owner=agent):
        doc = selectors.block_document_load(block=block)
        blocks.append(
            {
                "label": block.label,
                "description": block.description,
                "block_type": block.block_type,
                "schema": block.schema,
                "char_limit": block.char_limit,
                "permission": block.permission,
                "pinned": block.pinned,
                "content": documents.document_value(doc, block.schema),
                "loro_snapshot": base64.b64encode(documents.snapshot(doc)).decode(),
            }
        )
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "agent": agent.name,
        "exported_at": timezone.now().isoformat(),
        "blocks": blocks,
    }


V1_TYPES = {"core": BlockType.CORE, "working": BlockType.WORKING}
V1_PERMISSIONS = {
    "read_only": Permission.READ_ONLY,
    "readonly": Permission.READ_ONLY,
    "partner": Permission.PARTNER,
    "human": Permission.HUMAN,
    "append": Permission.APPEND,
    "read_write": Permission.READ_WRITE,
    "readwrite": Permission.READ_WRITE,
    "admin": Permission.ADMIN,
}


@transaction.atomic
def blocks_import(
    *, actor: Actor, agent: Agent, data: dict[str, Any]
) -> list[MemoryBlock]:
    """Import an export (``version`` 1) or v1-style blocks into ``agent``.

    v1 blocks (``content``, ``label``, ``memory_type``, ``pinned``,
    ``permission``) become new Loro documents: pinned maps to a core block,
    the description is generated from the label when missing.  All or
    nothing: one bad block imports none.
    """
    if not isinstance(data, dict) or not isinstance(data.get("blocks"), list):
        raise InvalidInput("expected a JSON object with a 'blocks' list")
    if data.get("format") == EXPORT_FORMAT:
        if data.get("version") != EXPORT_VERSION:
            raise InvalidInput(
                f"export version {data.get('version')!r} is not supported "
                f"(this server reads version {EXPORT_VERSION})"
            )
        make = _import_current
    else:
        make = _import_v1
    created = []
    for n, item in enumerate(data["blocks"]):
        if not isinstance(item, dict) or not isinstance(item.get("label"), str):
            raise InvalidInput(f"block {n} needs a 'label'")
        created.append(make(actor=actor, agent=agent, item=item))
    return created


def _import_current(*, actor: Actor, agent: Agent, item: dict[str, Any]) -> MemoryBlock:
    try:
        snapshot = base64.b64decode(item.get("loro_snapshot") or "", validate=True)
    except ValueError:
        raise InvalidInput(
            f"block {item['label']!r}: loro_snapshot is not base64"
        ) from None
    return block_create(
        actor=actor,
        owner=agent,
        label=item["label"],
        schema=item.get("schema") or {"kind": "text"},
        description=item.get("description"),
        block_type=item.get("block_type"),
        permission=item.get("permission", Permission.READ_WRITE),
        char_limit=item.get("char_limit"),
        pinned=bool(item.get("pinned", False)),
        snapshot=snapshot,
    )


def _import_v1(*, actor: Actor, agent: Agent, item: dict[str, Any]) -> MemoryBlock:
    content = item.get("content", item.get("value", ""))
    if not isinstance(content, str):
        raise InvalidInput(f"block {item['label']!r}: v1 content must be text")
    pinned = bool(item.get("pinned", False))
    memory_type = str(item.get("memory_type", "core")).lower()
    if memory_type not in (*V1_TYPES, "archival"):
        raise InvalidInput(
            f"block {item['label']!r}: unknown memory_type {memory_type!r}"
        )
    block_type = (
        BlockType.CORE if pinned else V1_TYPES.get(memory_type, BlockType.ARCHIVAL)
    )
    permission = V1_PERMISSIONS.get(
        str(item.get("permission", "read_write")).lower().replace("-", "_")
    )
    if permission is None:
        raise InvalidInput(f"block {item['label']!r}: unknown permission")
    label = item["label"]
    tpl = documents.TEMPLATES.get(label)
    return block_create(
        actor=actor,
        owner=agent,
        label=label,
        schema={"kind": "text"},
        description=item.get("description")
        or (tpl.description if tpl and tpl.description else None),
        block_type=block_type,
        permission=permission,
        char_limit=max(int(item.get("char_limit") or 0), len(content)) or None,
        pinned=pinned,
        content=content,
    )


# --- the agent tools (context, Letta core_memory_*) -----------------


def _text_target(block: MemoryBlock, section: str | None) -> tuple[str, str | None]:
    """The schema kind an append/replace lands in, and the section."""
    schema = block.schema
    if schema["kind"] != "composite":
        return schema["kind"], None
    if section is None:
        writable = [
            s["name"]
            for s in schema["sections"]
            if s["schema"]["kind"] in ("text", "list") and not s["read_only"]
        ]
        if len(writable) != 1:
            names = ", ".join(s["name"] for s in schema["sections"])
            raise InvalidInput(
                f"block {block.label!r} has sections {names}; name the 'section'"
            )
        section = writable[0]
    for sec in schema["sections"]:
        if sec["name"] == section:
            return sec["schema"]["kind"], section
    raise InvalidInput(f"block {block.label!r} has no section {section!r}")


def tool_append(
    *, actor: Actor, block: MemoryBlock, content: str, section: str | None = None
) -> BlockChange:
    """Append ``content`` on a new line (text) or as a new item (list)."""
    if not content:
        raise InvalidInput("nothing to append: 'content' is empty")
    kind, section = _text_target(block, section)
    if kind == "text":
        op: dict[str, Any] = {"op": "append_text", "text": content, "separator": "\n"}
    elif kind == "list":
        op = {"op": "push_item", "item": content}
    else:
        raise InvalidInput(
            f"block {block.label!r} is a {kind} block; use its structured "
            "operations (POST /api/blocks/{id}/operations)"
        )
    return _tool_operate(
        actor=actor, block=block, op=op, section=section, summary=f"append: {content}"
    )


def tool_replace(
    *, actor: Actor, block: MemoryBlock, old: str, new: str, section: str | None = None
) -> BlockChange:
    kind, section = _text_target(block, section)
    if kind != "text":
        raise InvalidInput(f"replace works on text; block {block.label!r} is {kind}")
    return _tool_operate(
        actor=actor,
        block=block,
        op={"op": "replace_text", "old": old, "new": new},
        section=section,
        summary=f"replace {old!r} with {new!r}",
    )


def _tool_operate(
    *,
    actor: Actor,
    block: MemoryBlock,
    op: dict[str, Any],
    section: str | None,
    summary: str,
) -> BlockChange:
    if section is not None:
        op["section"] = section
    return block_operate(
        actor=actor, block=block, operations=[op], summary=_summary(summary)
    )


def tool_update(*, actor: Actor, block: MemoryBlock, content: str) -> BlockChange:
    """Letta's ``core_memory_update``: the block's whole content becomes
    ``content``."""
    value = documents.value_from_text(block.schema, content)
    return block_set_content(
        actor=actor, block=block, value=value, summary=_summary(f"update: {content}")
    )


logger = logging.getLogger(__name__)

ARCHIVAL_MAX_CHARS = 20_000
MESSAGE_MAX_CHARS = 100_000
MESSAGES_PER_APPEND = 200
MAX_TAGS = 20
MAX_TAG_CHARS = 50


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _clean_content(content: str, *, what: str, max_chars: int) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput(f"{what} content must not be empty")
    if len(content) > max_chars:
        raise LimitExceeded(
            f"{what} content is {len(content)} chars; at most {max_chars} allowed"
        )
    return content


def _clean_tags(tags: Iterable[str]) -> list[str]:
    cleaned: list[str] = []
    for tag in tags:
        tag = str(tag).strip().lower()
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS or '"' in tag or "\\" in tag:
            raise InvalidInput(
                f"tag {tag[:60]!r} is invalid: at most {MAX_TAG_CHARS} chars,"
                " no quotes or backslashes"
            )
        if tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > MAX_TAGS:
        raise LimitExceeded(f"{len(cleaned)} tags given; at most {MAX_TAGS} allowed")
    return cleaned


def _full_clean(obj: Any, **kwargs: Any) -> None:
    try:
        obj.full_clean(**kwargs)
    except ValidationError as exc:
        raise InvalidInput(
            "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
        ) from exc


class _EmbeddingBatch:
    """One after-commit callback per transaction enqueuing its rows' embeds."""

    def __init__(self) -> None:
        self.ids: dict[str, set[int]] = {}

    def __call__(self) -> None:
        from memory.tasks import embed_rows

        size = settings.EMBEDDING_BATCH_SIZE
        for kind, ids in self.ids.items():
            ordered = sorted(ids)
            for start in range(0, len(ordered), size):
                embed_rows.delay(kind, ordered[start : start + size])


def embedding_schedule(*, kind: str, row_ids: Iterable[int]) -> None:
    """Embed these rows after the current transaction commits (batched).

    The transaction's pending callbacks (Django's ``run_on_commit``) are
    searched for its batch, so a callback rolled back with a savepoint
    takes its rows with it and a new transaction starts a new batch.
    """
    batch = next(
        (
            func
            for _sids, func, _robust in connection.run_on_commit
            if isinstance(func, _EmbeddingBatch)
        ),
        None,
    )
    if batch is None or not connection.in_atomic_block:
        batch = _EmbeddingBatch()
        batch.ids.setdefault(kind, set()).update(row_ids)
        transaction.on_commit(batch)
        return
    batch.ids.setdefault(kind, set()).update(row_ids)


@transaction.atomic
def archival_entry_create(
    *,
    agent: Agent,
    content: str,
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    importance: float = 0.5,
    source: str = ArchivalSource.AGENT,
    label: str | None = None,
) -> ArchivalEntry:
    content = _clean_content(content, what="archival", max_chars=ARCHIVAL_MAX_CHARS)
    label = label.strip() if label else None
    if label and ArchivalEntry.objects.filter(agent=agent, label=label).exists():
        raise Conflict(f"agent {agent.name} already has an archival entry {label!r}")
    entry = ArchivalEntry(
        agent=agent,
        constellation_id=agent.constellation_id,
        label=label or None,
        content=content,
        tags=_clean_tags(tags),
        metadata=metadata or {},
        importance=importance,
        source=source,
        content_hash=content_hash(content),
    )
    _full_clean(entry, validate_constraints=False)
    entry.save()
    _index_archival(entry)
    return entry


def _index_archival(entry: ArchivalEntry) -> None:
    index_put_texts(
        ARCHIVAL_INDEX,
        rows=[(entry.pk, entry.constellation_id, entry.agent_id, entry.content)],
    )
    embedding_schedule(kind="archival", row_ids=[entry.pk])


_UNSET: Any = object()


@transaction.atomic
def archival_entry_update(
    *,
    entry: ArchivalEntry,
    content: str | None = None,
    tags: Sequence[str] | None = None,
    metadata: dict[str, Any] | None = None,
    importance: float | None = None,
    label: str | None = _UNSET,
) -> ArchivalEntry:
    fields: list[str] = []
    if content is not None and content != entry.content:
        entry.content = _clean_content(
            content, what="archival", max_chars=ARCHIVAL_MAX_CHARS
        )
        entry.content_hash = content_hash(entry.content)
        entry.embedding_state = EmbeddingState.PENDING
        fields += ["content", "content_hash", "embedding_state"]
    if tags is not None:
        entry.tags = _clean_tags(tags)
        fields.append("tags")
    if metadata is not None:
        entry.metadata = metadata
        fields.append("metadata")
    if importance is not None:
        entry.importance = importance
        fields.append("importance")
    if label is not _UNSET:
        new_label = label.strip() if label else None
        if new_label and (
            ArchivalEntry.objects.filter(agent_id=entry.agent_id, label=new_label)
            .exclude(pk=entry.pk)
            .exists()
        ):
            raise Conflict(f"this agent already has an archival entry {new_label!r}")
        entry.label = new_label
        fields.append("label")
    if not fields:
        return entry
    _full_clean(entry, validate_constraints=False)
    entry.save(update_fields=[*fields, "updated_at"])
    if "content" in fields:
        _index_archival(entry)
    return entry


def archival_entry_append(*, entry: ArchivalEntry, content: str) -> ArchivalEntry:
    """The v1 ``recall append``: add text on a new line of an entry."""
    _clean_content(content, what="appended", max_chars=ARCHIVAL_MAX_CHARS)
    return archival_entry_update(entry=entry, content=f"{entry.content}\n{content}")


@transaction.atomic
def archival_entry_delete(*, entry: ArchivalEntry) -> None:
    index_delete(ARCHIVAL_INDEX, row_ids=[entry.pk])
    entry.delete()


def archival_entries_record_access(
    *, accesses: Sequence[tuple[int, int, datetime]]
) -> int:
    """Count retrievals of entries (search hits, reads), given as
    (entry id, times retrieved, last time) in one statement; returns rows
    touched."""
    if not accesses:
        return 0
    times = Case(
        *[When(pk=entry_id, then=Value(n)) for entry_id, n, _at in accesses],
        default=Value(0),
    )
    last = Case(
        *[When(pk=entry_id, then=Value(at)) for entry_id, _n, at in accesses],
        default=F("accessed_at"),
        output_field=DateTimeField(),
    )
    return ArchivalEntry.objects.filter(pk__in=[a[0] for a in accesses]).update(
        access_count=F("access_count") + times, accessed_at=last
    )


# Retrievals counted in this process are recorded by one task per this many
# seconds, or as soon as this many entries are waiting.
ACCESS_FLUSH_SECONDS = 1.0
ACCESS_FLUSH_ENTRIES = 500


class _AccessCounter:
    """Archival retrievals counted in this process, recorded in batches.

    A search used to enqueue its own task (one broker write, ~0.5 ms, on
    every search's path).  Now it adds its hits here and one task per
    ``ACCESS_FLUSH_SECONDS`` records all of them (a timer thread sends it;
    at exit the rest is sent).  A process killed outright loses at most
    that window of counts.  When tasks run inline (eager Celery, i.e. the
    tests) the hits are recorded at once, never on a timer thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[int, datetime]] = {}
        self._timer: threading.Timer | None = None

    def add(self, entry_ids: Sequence[int], at: datetime) -> None:
        from memory.tasks import archival_record_accesses

        with self._lock:
            for entry_id in entry_ids:
                times, _last = self._pending.get(entry_id, (0, at))
                self._pending[entry_id] = (times + 1, at)
            now = (
                len(self._pending) >= ACCESS_FLUSH_ENTRIES
                or archival_record_accesses.app.conf.task_always_eager
            )
            if not now and self._timer is None:
                self._timer = threading.Timer(ACCESS_FLUSH_SECONDS, self._flush_logged)
                self._timer.daemon = True
                self._timer.start()
        if now:
            self.flush()

    def flush(self) -> int:
        """Send the waiting counts as one task; returns how many entries."""
        from memory.tasks import archival_record_accesses

        with self._lock:
            pending, self._pending = self._pending, {}
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if pending:
            archival_record_accesses.delay(
                [[pk, n, at.isoformat()] for pk, (n, at) in pending.items()]
            )
        return len(pending)

    def _flush_logged(self) -> None:
        try:
            self.flush()
        except Exception:  # timer thread or exit: nobody else would see it
            logger.exception("could not send archival access counts")


_ACCESSES = _AccessCounter()
atexit.register(_ACCESSES._flush_logged)


def archival_access_record_later(*, entry_ids: Sequence[int]) -> None:
    """Count a retrieval of each entry after commit, off the search's path
    (``_AccessCounter``)."""
    if not entry_ids:
        return
    ids, at = list(entry_ids), timezone.now()
    transaction.on_commit(lambda: _ACCESSES.add(ids, at))


def archival_access_flush() -> int:
    """Send this process's waiting access counts now (tests, shutdown)."""
    return _ACCESSES.flush()


# --- embeddings ---------------------------------------------------------------


# The columns embedding a row reads (the rest would only be converted).
_EMBED_FIELDS = ("content", "content_hash", "embedded_hash", "embedding_state")


def embeddings_refresh(*, kind: str, row_ids: Sequence[int]) -> int:
    """Embed rows whose vector is missing or stale; returns how many got one.

    Idempotent: rows already embedded from their current content are
    skipped, and a row changed while its text was being embedded keeps the
    state pending (its own task will follow).
    """
    from memory.embeddings import embed_texts

    model, index = INDEXED[kind]
    rows = [
        row
        for row in model.objects.filter(pk__in=list(row_ids)).only(
            *_EMBED_FIELDS, index.scope_column, index.owner_column
        )
        if row.embedded_hash != row.content_hash
        or row.embedding_state != EmbeddingState.READY
    ]
    if not rows:
        return 0
    vectors = embed_texts([row.content for row in rows])
    if vectors is None:
        return 0
    if vectors and vectors[0].shape != (index.dim,):
        # The vec0 tables were created for index.dim; a model of another
        # size must not half-fill them.  Rows stay pending (and searchable
        # by keywords) until the configuration matches.
        logger.error(
            "embedding model gives %s-d vectors; the search index holds %s-d",
            vectors[0].shape[0],
            index.dim,
        )
        return 0
    with transaction.atomic():
        current = dict(
            model.objects.filter(pk__in=[r.pk for r in rows]).values_list(
                "pk", "content_hash"
            )
        )
        fresh = [
            (row, vec)
            for row, vec in zip(rows, vectors, strict=True)
            if current.get(row.pk) == row.content_hash
        ]
        index_put_vectors(
            index,
            rows=[
                (
                    row.pk,
                    getattr(row, index.scope_column),
                    getattr(row, index.owner_column),
                    vec,
                )
                for row, vec in fresh
            ],
        )
        # The write lock is held: content_hash cannot change under us.
        model.objects.filter(pk__in=[row.pk for row, _vec in fresh]).update(
            embedding_state=EmbeddingState.READY, embedded_hash=F("content_hash")
        )
    hook = EMBEDDED_HOOKS.get(kind)
    if hook is not None and fresh:
        hook([row.pk for row, _vec in fresh])
    return len(fresh)


def embedding_backfill(*, batch: int | None = None) -> dict[str, int]:
    """Embed up to ``batch`` rows of each kind that still have no vector."""
    from memory.embeddings import embedding_status

    if not embedding_status().available:
        return {kind: 0 for kind in INDEXED}
    size = batch or settings.EMBEDDING_BACKFILL_BATCH
    done: dict[str, int] = {}
    for kind, (model, _index) in INDEXED.items():
        ids = list(
            model.objects.filter(embedding_state=EmbeddingState.PENDING)
            .order_by("pk")
            .values_list("pk", flat=True)[:size]
        )
        done[kind] = embeddings_refresh(kind=kind, row_ids=ids) if ids else 0
    return done


# --- conversations and messages ---------------------------------------------------

CONVERSATION_TRANSITIONS: dict[str, set[str]] = {
    ConversationStatus.ACTIVE: {ConversationStatus.IDLE, ConversationStatus.ARCHIVED},
    ConversationStatus.IDLE: {ConversationStatus.ACTIVE, ConversationStatus.ARCHIVED},
    ConversationStatus.ARCHIVED: set(),
}


@transaction.atomic
def conversation_start(*, agent: Agent, title: str = "") -> Conversation:
    conversation = Conversation(
        agent=agent, constellation_id=agent.constellation_id, title=title.strip()
    )
    _full_clean(conversation)
    conversation.save()
    return conversation


@transaction.atomic
def conversation_set_status(*, conversation: Conversation, status: str) -> Conversation:
    allowed = CONVERSATION_TRANSITIONS.get(conversation.status, set())
    if status == conversation.status:
        return conversation
    if status not in allowed:
        raise Conflict(
            f"conversation {conversation.pk} is {conversation.status}; it can move"
            f" to {', '.join(sorted(allowed)) or 'nothing (archived is final)'},"
            f" not {status}"
        )
    conversation.status = status
    fields = ["status", "updated_at"]
    if status == ConversationStatus.ARCHIVED:
        conversation.ended_at = timezone.now()
        fields.append("ended_at")
    conversation.save(update_fields=fields)
    return conversation


@transaction.atomic
def messages_append(
    *,
    conversation: Conversation,
    messages: Sequence[dict[str, str]],
    author: str = "",
    batch_id: str = "",
) -> list[Message]:
    """Append messages in order; an idle conversation becomes active again."""
    if not messages:
        raise InvalidInput("give at least one message")
    if len(messages) > MESSAGES_PER_APPEND:
        raise LimitExceeded(
            f"{len(messages)} messages in one append; at most {MESSAGES_PER_APPEND}"
        )
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
    if locked.status == ConversationStatus.ARCHIVED:
        raise Conflict(f"conversation {locked.pk} is archived; start a new one")
    created: list[Message] = []
    for offset, item in enumerate(messages, start=1):
        role = item.get("role", "")
        if role not in MessageRole.values:
            raise InvalidInput(
                f"message role {role!r} is invalid; use one of"
                f" {', '.join(MessageRole.values)}"
            )
        content = _clean_content(
            item.get("content", ""), what="message", max_chars=MESSAGE_MAX_CHARS
        )
        message = Message(
            conversation=locked,
            agent_id=locked.agent_id,
            constellation_id=locked.constellation_id,
            role=role,
            author=(item.get("author") or author)[:200],
            content=content,
            position=locked.message_count + offset,
            batch_id=batch_id,
            content_hash=content_hash(content),
        )
        _full_clean(message, validate_constraints=False)
        created.append(message)
    try:
        Message.objects.bulk_create(created)
    except IntegrityError as exc:  # pragma: no cover - guarded by the lock
        raise Conflict(f"concurrent append to conversation {locked.pk}") from exc
    if not created[0].pk:  # backends without RETURNING
        created = list(
            Message.objects.filter(
                conversation=locked, position__gt=locked.message_count
            )
        )
    index_put_texts(
        MESSAGE_INDEX,
        rows=[(m.pk, m.constellation_id, m.agent_id, m.content) for m in created],
    )
    embedding_schedule(kind="message", row_ids=[m.pk for m in created])
    locked.message_count += len(created)
    fields = ["message_count", "updated_at"]
    if locked.status == ConversationStatus.IDLE:
        locked.status = ConversationStatus.ACTIVE
        fields.append("status")
    locked.save(update_fields=fields)
    conversation.message_count, conversation.status = (
        locked.message_count,
        locked.status,
    )
    return created


@transaction.atomic
def retrieval_config_update(
    *,
    constellation: Constellation,
    rerank_enabled: bool | None = None,
    decay_rate: float | None = None,
) -> RetrievalConfig:
    config, _ = RetrievalConfig.objects.get_or_create(constellation=constellation)
    fields = []
    if rerank_enabled is not None:
        config.rerank_enabled = rerank_enabled
        fields.append("rerank_enabled")
    if decay_rate is not None:
        config.decay_rate = decay_rate
        fields.append("decay_rate")
    _full_clean(config)
    if fields:
        config.save(update_fields=fields)
    return config


# --- demo data ------------------------------------------------------------------


DEMO_ORGANIZATION_POLICIES = (
    "Be kind and direct. Small steps beat big plans. Ask before committing "
    "the partner's time. Never shame missed tasks; adjust the plan instead."
)


@transaction.atomic
def memory_demo_seed(*, constellation: Constellation) -> int:
    """Give a freshly seeded demo constellation's agents their first blocks.

    Each agent gets a persona, a human block and a pinned scratchpad; the
    constellation gets a read-only organization block and a shared task
    board.  Returns how many blocks were made.
    """
    system = Actor.system()
    made = 0
    block_create(
        actor=system,
        constellation=constellation,
        label="organization",
        template="organization",
        permission=Permission.READ_ONLY,
        content={"name": constellation.name, "policies": DEMO_ORGANIZATION_POLICIES},
    )
    block_create(
        actor=system,
        constellation=constellation,
        label="task_board",
        description="Shared task tracking for the whole constellation",
        schema={"kind": "list", "max_items": 50},
        block_type=BlockType.WORKING,
        pinned=True,
        content=["[ ] Morning check-in with the partner"],
    )
    made += 2
    for agent in constellation.agents.all():
        block_create(
            actor=system,
            owner=agent,
            label="persona",
            template="persona",
            content={"name": agent.name, "style": agent.role, "traits": []},
        )
        block_create(actor=system, owner=agent, label="human", template="human")
        block_create(
            actor=system,
            owner=agent,
            label="scratchpad",
            template="scratchpad",
            pinned=True,
        )
        made += 3
    return made
