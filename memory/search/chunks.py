"""KNN read straight from vec0's chunk storage (version-gated): exact over
the float table, and the quantised path's coarse Hamming pass over the
binary one."""

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from django.db import connection

from memory.search.index import TextIndex

# sqlite-vec versions whose vec0 storage ``chunks_exact_knn`` reads, and
# the shadow-table columns it relies on (checked once per table and
# process; anything else falls back to vec0's own KNN).
CHUNK_LAYOUT_VERSIONS = frozenset({"v0.1.9"})


_CHUNK_COLUMNS = {
    "chunks": {"chunk_id", "partition00", "validity", "rowids"},
    "vector_chunks00": {"rowid", "vectors"},
    "metadatachunks00": {"rowid", "data"},
}


@functools.cache
def chunks_readable(index: TextIndex, *, binary: bool = False) -> bool:
    """Whether this sqlite-vec stores ``index.vec_table`` (with ``binary``:
    ``index.bin_table``) the way ``chunks_exact_knn`` (``chunks_hamming_knn``)
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
        for slots, valid, live, data in chunks:
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


def chunks_hamming_knn(
    index: TextIndex,
    *,
    query: bytes,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    k: int,
) -> list[tuple[int, bytes]]:
    """(row id, float vector blob) of the ``k`` rows whose binary vectors
    are nearest ``query`` (a vector as ``vec_quantize_binary`` makes it)
    by Hamming distance, nearest first, over every shard of the scope.

    The binary table's chunks are laid out as the float table's (see
    :func:`chunks_exact_knn`), ``dim / 8`` bytes a slot; the scope's chunks
    are read whole (48 KB each at 384 dimensions) into one array and
    compared at once: an XOR and a popcount per 64 bits, so the cost
    hardly depends on ``k`` (vec0's own top-k selection grows with it).
    The float vectors of the ``k`` found are read from the auxiliary
    column in the same read transaction."""
    table = index.bin_table
    words = np.frombuffer(query, dtype=np.uint64)
    ids: list[np.ndarray] = []
    blobs: list[bytes] = []
    masks: list[np.ndarray] = []
    with connection.cursor() as cur, read_snapshot() as raw:
        chunks = _live_chunks(
            cur, raw, table, scope_id, owner_ids, row_bytes=index.dim // 8
        )
        for slots, valid, _live, data in chunks:
            blobs.append(data)
            ids.append(slots[: len(valid)])
            masks.append(valid)
        if not ids:
            return []
        bits = np.frombuffer(b"".join(blobs), dtype=np.uint64)
        # XOR against the query repeated (a flat operation, faster than a
        # broadcast over rows of 6 words), and the popcounts summed column
        # by column (a reduction along rows this short is slower).
        counts = np.bitwise_count(bits ^ np.tile(words, len(bits) // len(words)))
        counts = counts.reshape(-1, len(words))
        distance = counts[:, 0].astype(np.int32)
        for column in range(1, len(words)):
            distance += counts[:, column]
        mask = np.concatenate(masks)
        distance[~mask] = np.iinfo(np.int32).max
        all_ids = np.concatenate(ids)
        n = min(k, int(mask.sum()))
        top = np.argpartition(distance, n - 1)[:n] if n < len(distance) else None
        if top is None:
            top = np.flatnonzero(mask)
        top = top[np.argsort(distance[top], kind="stable")]
        found = [int(i) for i in all_ids[top]]
        marks = ", ".join(["%s"] * len(found))
        cur.execute(
            f"SELECT rowid, value00 FROM {table}_auxiliary WHERE rowid IN ({marks})",
            found,
        )
        vectors = dict(cur.fetchall())
    return [(row_id, vectors[row_id]) for row_id in found if row_id in vectors]


def _live_chunks(
    cur: Any,
    raw: Any,
    table: str,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    *,
    row_bytes: int,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, bytes]]:
    """The chunks of vec0 table ``table`` in scope ``scope_id`` holding a
    live row of ``owner_ids`` (None: any owner), each as (the rowid of
    every slot, which slots up to the last live one are live rows of those
    owners, their indexes, the vectors' bytes up to the last live slot),
    read inside the read transaction of ``cur`` and ``raw``
    (:func:`read_snapshot`).  Each vector is ``row_bytes`` long."""
    by_owner = owner_ids is not None
    sql = (
        f"SELECT c.validity, c.rowids, x._rowid_{', m.data' if by_owner else ''}"
        f" FROM {table}_chunks c JOIN {table}_vector_chunks00 x"
        " ON x.rowid = c.chunk_id"
    )
    if by_owner:
        sql += f" JOIN {table}_metadatachunks00 m ON m.rowid = c.chunk_id"
    sql += " WHERE c.partition00 = %s"
    owners = np.asarray(list(owner_ids or ()), dtype=np.int64)
    cur.execute(sql, [scope_id])
    for validity, rowids, blob_rowid, *meta in cur.fetchall():
        slots = np.frombuffer(rowids, dtype=np.int64)
        valid = np.unpackbits(
            np.frombuffer(validity, dtype=np.uint8),
            count=len(slots),
            bitorder="little",
        ).view(bool)
        if by_owner:
            column = np.frombuffer(meta[0], dtype=np.int64)[: len(slots)]
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
        yield slots, valid[:used], live, data


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
