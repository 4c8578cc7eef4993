"""KNN read straight from vec0's chunk storage (version-gated): exact over
the float table, and the quantised path's coarse Hamming pass over the
binary one, whose bits a process holds in memory per scope."""

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection

from memory.search.index import TextIndex, vectors_generation

# sqlite-vec versions whose vec0 storage ``chunks_exact_knn`` reads, and
# the shadow-table columns it relies on (checked once per table and
# process; anything else falls back to vec0's own KNN).
CHUNK_LAYOUT_VERSIONS = frozenset({"v0.1.9"})


_CHUNK_COLUMNS = {
    "chunks": {"chunk_id", "size", "partition00", "validity", "rowids"},
    "vector_chunks00": {"rowid", "vectors"},
    "metadatachunks00": {"rowid", "data"},
}


@functools.cache
def chunks_readable(index: TextIndex, *, binary: bool = False) -> bool:
    """Whether this sqlite-vec stores ``index.vec_table`` (with ``binary``:
    ``index.bin_table``) the way ``chunks_exact_knn`` (``held_hamming_knn``)
    reads it."""
    table = index.bin_table if binary else index.vec_table
    with connection.cursor() as cur:
        cur.execute("SELECT vec_version()")
        if cur.fetchone()[0] not in CHUNK_LAYOUT_VERSIONS:
            return False
        # Incremental blob reads (sqlean's name for it; stdlib: blobopen).
        if not hasattr(connection.connection, "open_blob"):
            return False
        columns = {
            **_CHUNK_COLUMNS,
            **({"auxiliary": {"rowid", "value00"}} if binary else {}),
        }
        for suffix, needed in columns.items():
            cur.execute(f"PRAGMA table_info({table}_{suffix})")
            if not needed <= {row[1] for row in cur.fetchall()}:
                return False
    return True


def chunks_exact_knn(
    index: TextIndex,
    *,
    unit: np.ndarray,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    k: int,
) -> list[tuple[int, float, np.ndarray]]:
    """Exact KNN over the unit vectors vec0 stores, ranked here.

    vec0 (sqlite-vec 0.1.9) keeps a partition's vectors in chunks of
    ``chunk_size`` slots: ``<table>_chunks`` holds each chunk's partition
    value (``partition00``: scope_id), a validity bitmap (bit i of byte
    i // 8, low bit first) and the rowid of every slot (int64);
    ``<table>_vector_chunks00`` the slots' float32 vectors in one blob per
    chunk; ``<table>_metadatachunks00`` the slots' first metadata column
    (owner_id, int64).  For unit vectors the L2 order is the cosine order,
    so one matrix product per chunk ranks it (vec0's own KNN computes each
    distance in a scalar loop).

    A chunk's vectors are read through SQLite's incremental blob I/O, up to
    its last live slot: one copy straight from the pages (a SELECT of the
    blob copies it twice, and reads a mostly empty chunk whole).  The reads
    share one read transaction with the chunk list, so they see the same
    snapshot; memory stays at one chunk (1.5 MB) whatever the table's size.
    """
    row_bytes = index.dim * 4
    ids: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    vectors: list[np.ndarray] = []
    with connection.cursor() as cur, read_snapshot() as raw:
        chunks = _live_chunks(
            cur, raw, index.vec_table, scope_id, owner_ids, row_bytes=row_bytes
        )
        for slots, valid, live, data, _owners in chunks:
            used = len(valid)
            matrix = np.frombuffer(data, dtype=np.float32).reshape(used, index.dim)
            score = matrix @ unit
            if len(live) < used:
                score[~valid] = -np.inf
            top = live if len(live) <= k else np.argpartition(-score, k - 1)[:k]
            ids.append(slots[top])
            scores.append(score[top])
            vectors.append(matrix[top])
    if not ids:
        return []
    all_ids, all_scores = np.concatenate(ids), np.concatenate(scores)
    all_vectors = np.concatenate(vectors)
    order = np.argsort(-all_scores, kind="stable")[:k]
    return [
        (int(all_ids[i]), 1.0 - float(all_scores[i]), all_vectors[i]) for i in order
    ]


@dataclass(frozen=True)
class _HeldBits:
    """A scope's live binary vectors as read under ``generation``: their
    row ids, owners and bits (``words[i]``: the i-th 64 bits of every row,
    one contiguous array, so each word is one pass)."""

    generation: tuple
    ids: np.ndarray
    owners: np.ndarray
    words: np.ndarray


# Held scopes by (database, binary table, scope), least recently used
# first; at most ``HELD_ROWS_MAX`` rows in all (about 64 bytes a row at 384
# dimensions: 128 MB).  A larger scope is searched by vec0's KNN.
_HELD: OrderedDict[tuple[str, str, int], _HeldBits] = OrderedDict()


HELD_ROWS_MAX = 2_000_000


_HELD_LOCK = threading.Lock()


def held_forget() -> None:
    """Drop every held scope (tests, benchmarks)."""
    with _HELD_LOCK:
        _HELD.clear()


def held_hamming_knn(
    index: TextIndex,
    *,
    vector: np.ndarray,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    k: int,
) -> list[tuple[int, bytes]] | None:
    """(row id, float vector blob) of the ``k`` rows whose binary vectors
    are nearest ``vector``'s sign bits by Hamming distance, nearest first,
    over every shard of the scope; None when the scope is too large to
    hold (``HELD_ROWS_MAX``).

    The scope's bits are read from the binary table's chunks (laid out as
    the float table's, see :func:`chunks_exact_knn`, ``dim / 8`` bytes a
    slot) once, and held while the scope's vector generation
    (``memory.search.index.vectors_generation``) stays what it was: a
    search then costs an XOR and a popcount per 64 bits held and a
    histogram of the distances, in memory, whatever ``k`` (vec0's top-k
    selection grows with it, and reading the chunks costs more than the
    scan).  The float
    vectors of the ``k`` found are read from the auxiliary column in the
    same read transaction as the generation."""
    query = np.packbits(vector > 0, bitorder="little").view(np.uint64)
    with connection.cursor() as cur, read_snapshot() as raw:
        held = _held(cur, raw, index, scope_id=scope_id)
        if held is None:
            return None
        distance = np.bitwise_count(held.words[0] ^ query[0]).astype(np.int16)
        for column in range(1, len(query)):
            distance += np.bitwise_count(held.words[column] ^ query[column])
        # Rows of other owners lie beyond every real distance (0 to dim).
        beyond = index.dim + 1
        if owner_ids is not None:
            owners = np.asarray(list(owner_ids), dtype=np.int64)
            # One owner (the usual case): a comparison, far cheaper than np.isin.
            mask = (
                held.owners == owners[0]
                if len(owners) == 1
                else np.isin(held.owners, owners)
            )
            distance[~mask] = beyond
        # The k nearest without a partial sort: distances are small
        # integers, so a histogram gives the distance of the k-th, and the
        # rows up to it are few.
        counts = np.bincount(distance, minlength=beyond + 1)[:beyond]
        n = min(k, int(counts.sum()))
        if n == 0:
            return []
        cutoff = int(np.searchsorted(np.cumsum(counts), n))
        near = np.flatnonzero(distance <= cutoff)
        top = near[np.argsort(distance[near], kind="stable")[:n]]
        found = held.ids[top].tolist()
        cur.execute(
            f"SELECT rowid, value00 FROM {index.bin_table}_auxiliary"
            " WHERE rowid IN (SELECT value FROM json_each(%s))",
            [json.dumps(found)],
        )
        vectors = dict(cur.fetchall())
    return [(row_id, vectors[row_id]) for row_id in found if row_id in vectors]


def _held(cur: Any, raw: Any, index: TextIndex, *, scope_id: int) -> _HeldBits | None:
    """The scope's held bits, read again when its generation has changed
    (inside the read transaction of ``cur`` and ``raw``)."""
    generation = vectors_generation(cur, index, scope_id=scope_id)
    key = (str(connection.settings_dict["NAME"]), index.bin_table, scope_id)
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is not None and held.generation == generation:
            _HELD.move_to_end(key)
            return held
    cur.execute(
        f"SELECT sum(size) FROM {index.bin_table}_chunks WHERE partition00 = %s",
        [scope_id],
    )
    if (cur.fetchone()[0] or 0) > HELD_ROWS_MAX:
        return None
    ids: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    bits: list[np.ndarray] = []
    words = index.dim // 64
    chunks = _live_chunks(
        cur, raw, index.bin_table, scope_id, None, row_bytes=index.dim // 8
    )
    for slots, valid, live, data, owner_column in chunks:
        ids.append(slots[live])
        owners.append(owner_column[live])
        slot_bits = np.frombuffer(data, dtype=np.uint64).reshape(len(valid), words)
        bits.append(slot_bits[live])
    held = _HeldBits(
        generation=generation,
        ids=np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64),
        owners=np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64),
        words=np.ascontiguousarray(
            (np.concatenate(bits) if bits else np.zeros((0, words), np.uint64)).T
        ),
    )
    with _HELD_LOCK:
        _HELD.pop(key, None)
        _HELD[key] = held
        total = sum(len(h.ids) for h in _HELD.values())
        while total > HELD_ROWS_MAX and len(_HELD) > 1:
            _key, dropped = _HELD.popitem(last=False)
            total -= len(dropped.ids)
    return held


def _live_chunks(
    cur: Any,
    raw: Any,
    table: str,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    *,
    row_bytes: int,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, bytes, np.ndarray]]:
    """The chunks of vec0 table ``table`` in scope ``scope_id`` holding a
    live row of ``owner_ids`` (None: any owner), each as (the rowid of
    every slot, which slots up to the last live one are live rows of those
    owners, their indexes, the vectors' bytes up to the last live slot, the
    owner of every slot),
    read inside the read transaction of ``cur`` and ``raw``
    (:func:`read_snapshot`).  Each vector is ``row_bytes`` long."""
    sql = (
        "SELECT c.validity, c.rowids, x._rowid_, m.data"
        f" FROM {table}_chunks c JOIN {table}_vector_chunks00 x"
        f" ON x.rowid = c.chunk_id JOIN {table}_metadatachunks00 m"
        " ON m.rowid = c.chunk_id WHERE c.partition00 = %s"
    )
    owners = np.asarray(list(owner_ids or ()), dtype=np.int64)
    cur.execute(sql, [scope_id])
    for validity, rowids, blob_rowid, meta in cur.fetchall():
        slots = np.frombuffer(rowids, dtype=np.int64)
        valid = np.unpackbits(
            np.frombuffer(validity, dtype=np.uint8),
            count=len(slots),
            bitorder="little",
        ).view(bool)
        column = np.frombuffer(meta, dtype=np.int64)[: len(slots)]
        if owner_ids is not None:
            # One owner (the usual case): a comparison, far cheaper than np.isin.
            valid &= (
                column == owners[0] if len(owners) == 1 else np.isin(column, owners)
            )
        live = np.flatnonzero(valid)
        if not len(live):
            continue
        used = int(live[-1]) + 1
        blob = raw.open_blob(
            f"{table}_vector_chunks00", "vectors", blob_rowid, readonly=True
        )
        try:
            data = blob.read(used * row_bytes)
        finally:
            blob.close()
        yield slots, valid[:used], live, data, column


@contextmanager
def read_snapshot() -> Iterator[Any]:
    """The raw SQLite connection inside a read transaction: the caller's
    transaction if there is one, else a DEFERRED one of its own (Django's
    ``atomic`` begins IMMEDIATE, which would wait for the write lock)."""
    connection.ensure_connection()
    raw = connection.connection
    if raw.in_transaction:
        yield raw
        return
    raw.execute("BEGIN DEFERRED")
    try:
        yield raw
    finally:
        raw.execute("COMMIT")
