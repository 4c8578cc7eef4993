"""How a block's document is stored: a snapshot plus a log of attributed
updates (``BlockUpdate``, one per version of the history).

Called under the block's row lock (:func:`_lock`): the locked document
(from the per-process cache when at the row's version), one INSERT for an
update and one UPDATE for the block's row, a burst of live edits grown into
one version, the log folded into the snapshot past the compaction
thresholds, and the entries a log block prunes moved to archival memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models.expressions import RawSQL
from django.db.models.functions import Length
from django.utils import timezone
from loro import LoroDoc, VersionVector

from memory.blocks import doc_cache, documents
from memory.blocks.models import BlockSnapshot, BlockUpdate, MemoryBlock
from memory.blocks.selectors import (
    block_log_pending,
    block_snapshot_data,
    block_snapshot_size,
)
from memory.blocks.services.rules import _summary
from memory.longterm.models import ArchivalSource
from memory.longterm.services import archival_entry_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.db.compiled import CompiledQuery, model_new
from pattern_site.kernel.db.rows import (
    row_insert,
    row_is_locked,
    row_lock,
    row_update,
    rows_set_in_range,
)
from pattern_site.kernel.errors import NotFound

# What a locked block's row is read without: a change writes its content
# (``rendered``) without reading it first, and no write needs the others.
# Read on first use should a caller want one.
_LOCK_DEFERRED = ("rendered", "description", "created_at")


def _lock(block: MemoryBlock) -> MemoryBlock:
    """The block's row, locked for this transaction (SQLite: the IMMEDIATE
    transaction's write lock; PostgreSQL: ``FOR UPDATE``): ``block`` itself
    when the caller read it under the lock in this transaction."""
    if row_is_locked(block):
        return block
    locked = row_lock(MemoryBlock, block.pk, defer=_LOCK_DEFERRED)
    if locked is None:
        raise NotFound(f"block {block.label!r} no longer exists")
    return locked


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


# block id -> (version, snapshot_upto, bytes in its snapshot), as of a
# change this process committed.  Every write of a snapshot moves the
# row's ``snapshot_upto`` (compaction folds the log up to a later update)
# and every change moves its ``version``, so an entry is used only while
# the locked row still has both: any other write makes it a miss.
_snapshot_sizes: dict[Any, tuple[int, int, int]] = {}
_SNAPSHOT_SIZES_MAX = 10_000


def _snapshot_bytes(locked: MemoryBlock) -> int:
    """Bytes in the locked block's snapshot: from the last change this
    process committed when the row has not moved since, else read."""
    entry = _snapshot_sizes.get(doc_cache.block_key(locked.pk))
    if entry is not None and entry[:2] == (locked.version, locked.snapshot_upto):
        return entry[2]
    return block_snapshot_size(block_id=locked.pk)


def _remember(table: dict[Any, Any], block_id: Any, entry: Any) -> None:
    """Keep ``entry`` for the block in one of the per-block tables (keyed
    as the document cache keys blocks), emptied whole once it holds
    ``_SNAPSHOT_SIZES_MAX`` blocks."""
    if len(table) >= _SNAPSHOT_SIZES_MAX:
        table.clear()
    table[doc_cache.block_key(block_id)] = entry


def _cache_on_commit(block: MemoryBlock, doc: LoroDoc) -> None:
    """Once committed, cache the document at the block's version."""
    transaction.on_commit(_cache_committed(block, doc))


def _cache_committed(
    block: MemoryBlock,
    doc: LoroDoc,
    *,
    snapshot_bytes: int | None = None,
    latest: _Latest | None = None,
) -> Callable[[], None]:
    """What to run once the change is committed: cache the document at the
    block's version and, when given, the size of its snapshot and the
    block's latest version (the one this change wrote), both at that version
    and ``snapshot_upto``."""
    block_id, version, upto = block.pk, block.version, block.snapshot_upto

    def cache() -> None:
        doc_cache.put(block_id, version, doc)
        if latest is not None:
            _remember(_latest_versions, block_id, (version, upto, latest))
        if snapshot_bytes is not None:
            _remember(_snapshot_sizes, block_id, (version, upto, snapshot_bytes))

    return cache


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
    # No full_clean: every field comes from server code, cut to its length.
    update = model_new(
        BlockUpdate,
        {
            "id": None,
            "block_id": block.pk,
            # Folded into the snapshot right away: no need to store it twice.
            "data": b"" if compact else data,
            "frontiers": doc.oplog_frontiers.encode(),
            "actor_kind": actor.kind,
            "actor_id": actor.id,
            "actor_name": actor.display_name[:150],
            "summary": _summary(summary),
            "size": len(rendered),
            "created_at": timezone.now(),
        },
    )
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
class _Latest:
    """What :func:`_burst_version` reads of a block's latest version: who
    made it, with what summary and when, its stored bytes' length and the
    frontiers of the version before it (None: it is the first)."""

    version_id: int
    actor_kind: str
    actor_id: int | None
    summary: str
    created_at: datetime
    stored: int
    start: bytes | None

    @classmethod
    def written(cls, update: BlockUpdate, start: bytes | None) -> _Latest:
        """The version a change just stored (``start``: the frontiers of the
        version before it)."""
        return cls(
            update.pk,
            update.actor_kind,
            update.actor_id,
            update.summary,
            update.created_at,
            len(update.data),
            start,
        )


# block id -> (version, snapshot_upto, its latest version), as of a change
# this process committed, used on the same terms as ``_snapshot_sizes``:
# every write to a block's versions (a change, a fold of its history, a
# compaction) moves the row's ``version`` or ``snapshot_upto``.  A burst of
# live edits from one process reads its history only on its first edit.
_latest_versions: dict[Any, tuple[int, int, _Latest]] = {}


@dataclass(frozen=True)
class _Burst:
    """The version a live edit may join: its id, its stored bytes' length and
    the frontiers of the version before it (None: it is the first)."""

    version_id: int
    stored: int
    start: bytes | None


# On the path of every live edit: compiled once (see
# pattern_site.kernel.db.compiled); the block's key goes in prepared.
_LATEST_VERSIONS = CompiledQuery(
    lambda block_key: (
        BlockUpdate.objects.filter(block_id=RawSQL("%s", (block_key,)))
        .order_by("-pk")
        .values_list(
            "pk", "actor_kind", "actor_id", "summary", "created_at", "frontiers"
        )
        .annotate(stored=Length("data"))[:2]
    ),
    block_key="\x00block_key",
)


def _burst_version(*, block: MemoryBlock, actor: Actor, summary: str) -> _Burst | None:
    """The version a live edit joins: the block's latest one, when the same
    actor made it with the same summary less than
    ``settings.MEMORY_HISTORY_BURST_SECONDS`` ago and its bytes are still in
    the log (a version folded into the snapshot cannot grow: the snapshot
    would not hold the rest of the burst).  On the path of every keystroke:
    at most one query, for the last two versions, and none while the block
    is at the version this process's last change left it
    (:func:`_latest_version`)."""
    window = timedelta(seconds=settings.MEMORY_HISTORY_BURST_SECONDS)
    now = timezone.now()
    # The locked row says when the block last changed: a quiet block needs
    # no look at its history.
    if not window or not block.log_count or now - block.updated_at > window:
        return None
    latest = _latest_version(block)
    if latest is None or (
        latest.version_id <= block.snapshot_upto
        or (latest.actor_kind, latest.actor_id) != (actor.kind, actor.id)
        or latest.summary != _summary(summary)
        or now - latest.created_at > window
    ):
        return None
    return _Burst(latest.version_id, latest.stored, latest.start)


def _latest_version(block: MemoryBlock) -> _Latest | None:
    """The locked block's latest version: from the last change this process
    committed when the row has not moved since, else read."""
    entry = _latest_versions.get(doc_cache.block_key(block.pk))
    if entry is not None and entry[:2] == (block.version, block.snapshot_upto):
        return entry[2]
    rows = _LATEST_VERSIONS.rows(
        block_key=MemoryBlock._meta.pk.get_db_prep_value(block.pk, connection)
    )
    if not rows:
        return None
    pk, kind, actor_id, latest_summary, created_at, _, stored = rows[0]
    start = bytes(rows[1][5]) if len(rows) > 1 else None
    return _Latest(pk, kind, actor_id, latest_summary, created_at, stored or 0, start)


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
