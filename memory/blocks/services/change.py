"""The one path that changes a block's content, :func:`_block_change`.

Under the block's row lock it loads the document, decides the actor's right
and whether the actor's writes need approval on the locked row (never on
the caller's copy, which may predate a permission, a share or a token
change), applies the change, checks it (``services.rules``), stores it
(``services.storage``) and broadcasts it after commit
(``memory.blocks.sync.broadcast``), all in one transaction.  A change that
needs approval is filed as a ``BlockApproval`` instead, after a dry run that
refuses a request that could never apply.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from loro import LoroDoc

from memory.blocks import documents
from memory.blocks.models import BlockApproval, MemoryBlock
from memory.blocks.permissions import (
    block_access_for_actor,
    block_access_now,
    block_approval_needed,
    block_change_check,
    block_require_access,
    block_token_lock,
    read_only_binds,
)
from memory.blocks.selectors import block_document_load
from memory.blocks.services.events import _block_event
from memory.blocks.services.retention import block_history_fold_wanted
from memory.blocks.services.rules import (
    BlockChange,
    _check_bytes,
    _check_layout,
    _check_limit,
    _summary,
)
from memory.blocks.services.storage import (
    _block_record,
    _burst_extend,
    _burst_version,
    _cache_committed,
    _cache_on_commit,
    _Latest,
    _lock,
    _locked_document,
    _snapshot_bytes,
    log_entries_pruned,
)
from memory.blocks.sync.broadcast import (
    block_broadcast,
    block_relay_here,
    block_rooms_rejoin,
)
from memory.blocks.tasks import block_history_fold_task
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.db.rows import row_is_locked


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
    relay_early: bool = False,
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

    A block the caller found under its row lock, in the transaction it
    holds open for this change (``row_is_locked``), is not read again, and
    the change opens no block of its own in that transaction (a savepoint
    is two statements more): should it fail, the caller's whole
    transaction rolls back, as a nested ``atomic(savepoint=False)`` would
    have it, without that block's bookkeeping on the path of every tool
    call.

    With ``relay_early`` (a live edit from a room, ``origin``) the block's
    rooms in this process are sent the change as soon as it is accepted -
    the right, the containers and the limits checked on the locked row -
    while it is stored, so that the sender's peers do not wait for the
    history's bookkeeping and the commit; the sender's ack still waits for
    the commit.  Only in a transaction of the change's own (one the caller
    holds may yet roll back); should the store fail after the relay, every
    socket of those rooms is asked to join again
    (``memory.blocks.sync.broadcast.block_rooms_rejoin``).
    """
    relay = (
        _Relay()
        if relay_early
        and origin is not None
        and not transaction.get_connection().in_atomic_block
        else None
    )

    def run() -> BlockChange:
        return _block_change_locked(
            block=block,
            actor=actor,
            summary=summary,
            change=change,
            access=access,
            origin=origin,
            change_type=change_type,
            burst=burst,
            request=request,
            relay=relay,
        )

    if row_is_locked(block):  # in the caller's transaction: no early relay
        try:
            return run()
        except BaseException:
            transaction.set_rollback(True)
            raise
    try:
        with transaction.atomic():
            return run()
    except BaseException:
        if relay is not None and relay.sent:
            block_rooms_rejoin(
                block_id=block.pk,
                text="a change you were sent could not be stored; join again",
            )
        raise


def _lock_access_now(*, actor: Actor, block: MemoryBlock) -> tuple[MemoryBlock, str]:
    """The block's locked row and the actor's right on it as the database
    has it now (``block_access_now``): for an open socket's token, the lock
    and the token's check in one statement."""
    if actor.token_id is None or row_is_locked(block):
        locked = _lock(block)
        return locked, block_access_now(actor=actor, block=locked)
    locked = block_token_lock(actor=actor, block=block)
    return locked, block_access_for_actor(actor=actor, block=locked)


@dataclass
class _Relay:
    """A live edit to send to this process's rooms once it is accepted
    (``_block_change``'s ``relay_early``); ``sent`` once it was."""

    sent: bool = False


# What a change moves on the block's row, copied to the caller's instance
# when it is not the locked one.
_ROW_FIELDS_CHANGED = (
    "rendered",
    "size",
    "updated_at",
    "snapshot_upto",
    "version",
    "log_count",
    "log_bytes",
)
_row_fields_changed = operator.attrgetter(*_ROW_FIELDS_CHANGED)


def _block_change_locked(
    *,
    block: MemoryBlock,
    actor: Actor,
    summary: str,
    change: Callable[[LoroDoc], list[Any] | None],
    access: str | None,
    origin: str | None,
    change_type: str,
    burst: bool,
    request: list[dict[str, Any]] | None,
    relay: _Relay | None,
) -> BlockChange:
    if access is None:
        # From the locked row, never ``block``: a caller (an open socket)
        # may hold it from before a permission, a share or its token changed.
        locked, access = _lock_access_now(actor=actor, block=block)
        if request is not None and block_approval_needed(actor=actor, block=locked):
            return _approval_request(
                actor=actor, block=locked, operations=request, summary=summary
            )
    else:
        locked = _lock(block)
    if access == "read":
        block_require_access(actor=actor, block=locked, needed="append")
    doc = _locked_document(locked)
    before_version = locked.version
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
    snapshot, upto = _snapshot_bytes(locked), locked.snapshot_upto
    # Against the rendering before, as _check_limit.
    _check_bytes(
        block=locked,
        doc=doc,
        added=len(data),
        shrinks=held < locked.size,
        snapshot=snapshot,
    )
    # Accepted: what follows only stores it.  The version counter it will
    # have is the row's next (_block_row_refresh moves it by one).
    if relay is not None:
        assert origin is not None
        relay.sent = block_relay_here(
            block_id=locked.pk,
            updates=[data],
            origin=origin,
            version=before_version + 1,
        )
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
    # The frontiers of the version before the one this change wrote: the
    # burst's start, or the document's before this change (the latest
    # version's, as every version stores its document's frontiers).
    start = joined.start if update is not None else before_frontiers.encode()
    if update is None:
        update = _block_record(
            block=locked,
            doc=doc,
            actor=actor,
            summary=summary,
            data=data,
            rendered=rendered,
        )
    # A compaction wrote a new snapshot: its size is read on the next change.
    cache = _cache_committed(
        locked,
        doc,
        snapshot_bytes=snapshot if locked.snapshot_upto == upto else None,
        latest=_Latest.written(update, start),
    )
    block_id, version = locked.pk, locked.version
    assert relay is None or not relay.sent or version == before_version + 1
    here = relay is None or not relay.sent

    def committed() -> None:  # a def: Django's robust on_commit logs __qualname__
        cache()
        block_broadcast(
            block_id=block_id,
            updates=[data],
            origin=origin,
            version=version,
            here=here,
        )

    # One hook for both: each costs its registration and its run.
    transaction.on_commit(committed, robust=True)
    if not locked.log_count and block_history_fold_wanted(
        block=locked, now=update.created_at
    ):
        # Just compacted, and its history is well past its window.
        def fold() -> None:
            block_history_fold_task.delay(str(block_id))

        transaction.on_commit(fold, robust=True)
    _block_event(actor=actor, block=locked, change_type=change_type, summary=summary)
    if pruned:
        log_entries_pruned(block=locked, entries=pruned)
    if block is not locked:
        moved = _row_fields_changed(locked)
        block.__dict__.update(zip(_ROW_FIELDS_CHANGED, moved, strict=True))
    return BlockChange(block=locked, update=update, data=data, pruned=pruned)


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
