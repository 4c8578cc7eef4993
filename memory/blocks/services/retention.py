"""History retention: a block keeps the content of its recent versions and
folds older ones into a Loro shallow snapshot.

A version is kept while it is younger than its block type's
``settings.MEMORY_HISTORY_KEEP_DAYS`` or among the type's newest
``MEMORY_HISTORY_KEEP_VERSIONS``.  The newest version outside both windows
is the *horizon*: the stored document becomes a shallow snapshot starting
at its version (``MemoryBlock.history_from``), so that version's content
is still readable, and every version before it keeps its row (who, when,
why, its number) without its content.

A shallow document refuses an update that builds on history before its
horizon, so the horizon never passes the version a co-editing client
joined with while it was seen within ``MEMORY_HISTORY_PEER_HOURS``
(``BlockPeer``); it stops at the newest version every such client holds.
A client is seen when it joins, every
``MEMORY_HISTORY_PEER_REFRESH_SECONDS`` while its socket is open, and when
it leaves: a connected client never lapses, one whose server process died
lapses the peer hours after its last refresh.  Each refresh moves the
client's kept version up to the block's version at the refresh before,
relayed to it an interval ago, so a tab left open for weeks holds back
only the last interval's history.  A join records its version
under the block's row lock, the lock the fold holds while it reads the
versions to keep, so a fold never passes a version a client joined with as
it ran.  A client older than the horizon is told to start again from a
fresh snapshot when it joins (``memory.blocks.sync.consumer``).

Folding is idempotent: a block already folded to its window is left alone.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import connection, transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone
from loro import LoroDoc, VersionVector

from memory.blocks import documents
from memory.blocks.models import BlockPeer, BlockUpdate, MemoryBlock
from memory.blocks.selectors import block_document_load
from memory.blocks.services.storage import (
    _cache_on_commit,
    _lock,
    _locked_document,
    _log_fold,
    _snapshot_save,
)
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.db.rows import row_update
from pattern_site.kernel.errors import ApplicationError, InvalidInput


def history_window(block_type: str) -> tuple[timedelta, int] | None:
    """The block type's window (age, versions); None: it keeps everything."""
    days = settings.MEMORY_HISTORY_KEEP_DAYS.get(block_type)
    versions = settings.MEMORY_HISTORY_KEEP_VERSIONS.get(block_type)
    if days is None or versions is None:
        return None
    return timedelta(days=float(days)), max(int(versions), 1)


def _horizon_candidate(block: MemoryBlock, now: datetime) -> int | None:
    """The newest version outside the block's window, if it is not folded
    yet: outside the count (the newest but ``versions``) and the age."""
    window = history_window(block.block_type)
    if window is None:
        return None
    age, versions = window
    held = BlockUpdate.objects.filter(block=block, pk__gt=block.history_from)
    by_count = held.order_by("-pk").values_list("pk", flat=True)[versions:][:1]
    by_age = (
        held.filter(created_at__lt=now - age)
        .order_by("-pk")
        .values_list("pk", flat=True)[:1]
    )
    found = [*by_count, *by_age]
    return min(found) if len(found) == 2 else None


def block_history_fold_due(*, block: MemoryBlock, now: datetime | None = None) -> bool:
    """Whether the block has versions to fold (without its lock)."""
    return _horizon_candidate(block, now or timezone.now()) is not None


def _peer_versions(block: MemoryBlock, now: datetime) -> list[VersionVector]:
    """Versions co-editing clients of the block may still build on: those
    they joined with, while connected or seen lately."""
    since = now - timedelta(hours=settings.MEMORY_HISTORY_PEER_HOURS)
    rows = BlockPeer.objects.filter(block=block, seen_at__gte=since).values_list(
        "version", flat=True
    )
    found = []
    for data in rows:
        try:
            with documents.loro_guard("unreadable version"):
                found.append(VersionVector.decode(bytes(data)))
        except Exception:
            continue  # never stored so; nothing to protect
    return found


def _held_by_peers(
    doc: LoroDoc, rows: list[tuple[int, bytes]], peers: list[VersionVector]
) -> int | None:
    """The newest of ``rows`` (oldest first) whose version every one of
    ``peers`` holds: the rows' versions grow one into the next, so it is
    found by bisection."""

    def held(index: int) -> bool:
        vv = doc.frontiers_to_vv(documents.frontiers_decode(bytes(rows[index][1])))
        return vv is not None and all(peer.includes_vv(vv) for peer in peers)

    lo, hi = 0, len(rows)  # rows[:lo] held, rows[hi:] not
    while lo < hi:
        mid = (lo + hi) // 2
        if held(mid):
            lo = mid + 1
        else:
            hi = mid
    return lo - 1 if lo else None


def block_history_fold(*, block: MemoryBlock, now: datetime | None = None) -> int:
    """Fold the block's history before its window into a shallow snapshot;
    how many versions the horizon moved on (0: nothing to do, or a client
    still builds on them)."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _lock(block)
        candidate = _horizon_candidate(locked, now)
        if candidate is None:
            return 0
        rows = [
            (pk, bytes(frontiers))
            for pk, frontiers in BlockUpdate.objects.filter(
                block=locked, pk__gt=locked.history_from, pk__lte=candidate
            )
            .order_by("pk")
            .values_list("pk", "frontiers")
        ]
        doc = _locked_document(locked)
        peers = _peer_versions(locked, now)
        with documents.loro_guard("cannot fold the block's history"):
            index = _held_by_peers(doc, rows, peers) if peers else len(rows) - 1
            if index is None:
                _cache_on_commit(locked, doc)
                return 0
            horizon, frontiers = rows[index]
            data = documents.shallow_snapshot(
                doc, documents.frontiers_decode(frontiers)
            )
            folded = documents.document_load(data, [])
        _fold_store(block=locked, data=data, horizon=horizon)
        _cache_on_commit(locked, folded)
        BlockPeer.objects.filter(
            block=locked,
            seen_at__lt=now - timedelta(hours=settings.MEMORY_HISTORY_PEER_HOURS),
        ).delete()
        return index + 1


def _fold_store(*, block: MemoryBlock, data: bytes, horizon: int) -> None:
    """Store the shallow snapshot as the block's snapshot, the whole log
    folded into it, and move the block's ``version`` on: a document cached
    anywhere still holds the folded history, and would write it back."""
    last = (
        BlockUpdate.objects.filter(block=block)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
    )
    _snapshot_save(block_id=block.pk, data=data)
    if last is not None and last > block.snapshot_upto:
        _log_fold(block=block, upto=last)
        block.snapshot_upto = last
    block.log_count = block.log_bytes = 0
    block.history_from = horizon
    block.version += 1
    row_update(
        block,
        ("snapshot_upto", "log_count", "log_bytes", "history_from", "version"),
    )


def blocks_history_fold_due(*, now: datetime | None = None) -> int:
    """Fold every block with versions past its window; the versions folded."""
    now = now or timezone.now()
    folded = 0
    for block in MemoryBlock.objects.only(
        "pk", "block_type", "history_from", "label"
    ).iterator():
        if block_history_fold_due(block=block, now=now):
            folded += block_history_fold(block=block, now=now)
    return folded


def block_history_fold_wanted(*, block: MemoryBlock, now: datetime) -> bool:
    """Whether a write should ask for a fold: the block's held history went
    a quarter past its window, in age and in versions.  Asked on compaction
    only (one write in ``MEMORY_COMPACT_UPDATES``), and with that margin,
    so that a busy block does not ask on every write."""
    window = history_window(block.block_type)
    if window is None:
        return False
    age, versions = window
    key = MemoryBlock._meta.pk.get_db_prep_value(block.pk, connection)
    oldest = _OLDEST_HELD.first_row(block_key=key, after=block.history_from)
    if oldest is None or oldest[0] >= now - age * 1.25:
        return False
    past = _held_past(versions + versions // 4)
    return past.first_row(block_key=key, after=block.history_from) is not None


# Asked on every compaction of every block: compiled once (see
# pattern_site.kernel.db.compiled); the block's key goes in prepared.
_OLDEST_HELD = CompiledQuery(
    lambda block_key, after: (
        BlockUpdate.objects.filter(block_id=RawSQL("%s", (block_key,)), pk__gt=after)
        .order_by("pk")
        .values_list("created_at")[:1]
    ),
    block_key="\x00block_key",
    after=-7_000_001,
)


@functools.cache
def _held_past(skip: int) -> CompiledQuery:
    """The held version ``skip`` places before the newest (an offset is
    written into the statement, not passed: one per block type's window)."""
    return CompiledQuery(
        lambda block_key, after: (
            BlockUpdate.objects.filter(
                block_id=RawSQL("%s", (block_key,)), pk__gt=after
            )
            .order_by("-pk")
            .values_list("pk")[skip : skip + 1]
        ),
        block_key="\x00block_key",
        after=-7_000_001,
    )


def peer_record(*, block_id: Any, socket: str, version: bytes) -> None:
    """A co-editing client joined the block with ``version``: keep it from
    being folded away while the client is connected or lately seen.  Called
    with the block's row locked (``_lock``) where the block folds, after
    reading the document the version was checked against."""
    BlockPeer.objects.update_or_create(
        block_id=block_id,
        socket=socket,
        defaults={"version": version, "seen_at": timezone.now()},
    )


def peer_left(*, block_id: Any, socket: str) -> None:
    """The client left: its version is kept for the peer hours from now."""
    BlockPeer.objects.filter(block_id=block_id, socket=socket).update(
        seen_at=timezone.now()
    )


def peers_seen(
    *, socket: str, blocks: list[tuple[MemoryBlock, bytes | None]]
) -> dict[Any, bytes]:
    """The socket is still connected to these blocks: their clients' versions
    stay kept the peer hours from now.  Each block comes with the version the
    server held at the socket's previous refresh (None at the first): every
    change in it was relayed to the client a refresh interval ago, so its
    edits build on that version at least, and the client's kept version
    moves up to it (never back).  Answers each block's version now, for the
    next refresh."""
    now = timezone.now()
    held = {block.pk: version for block, version in blocks}
    for row in BlockPeer.objects.filter(socket=socket, block_id__in=list(held)):
        fields = ["seen_at"]
        row.seen_at = now
        newer = held[row.block_id]
        if newer is not None and newer != bytes(row.version):
            try:
                with documents.loro_guard("unreadable version"):
                    moved = VersionVector.decode(newer).includes_vv(
                        VersionVector.decode(bytes(row.version))
                    )
            except InvalidInput:
                moved = True  # an unreadable kept version protects nothing
            if moved:
                row.version = newer
                fields.append("version")
        row.save(update_fields=fields)
    versions = {}
    for block, _version in blocks:
        try:
            versions[block.pk] = block_document_load(block=block).oplog_vv.encode()
        except (ObjectDoesNotExist, ApplicationError):
            continue  # deleted meanwhile: its rooms are closing
    return versions


@contextmanager
def peer_join_lock(*, block: MemoryBlock) -> Iterator[None]:
    """A transaction holding the block's row lock, the fold's own, for a join
    to read the document, check its version against the horizon and record
    it (``peer_record``) with no fold in between; nothing for a block whose
    type keeps its whole history (it never folds)."""
    if history_window(block.block_type) is None:
        yield
        return
    with transaction.atomic():
        _lock(block)
        yield
