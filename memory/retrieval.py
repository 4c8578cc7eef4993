"""The search engine: FTS5 + sqlite-vec over any table of rows with text.

A ``TextIndex`` names three virtual tables beside a base table whose rows
carry text: an FTS5 table (porter, unicode61) for keywords, a ``vec0``
table of float vectors for meaning, and a ``vec0`` table of binary
quantised vectors for the fast coarse pass.  All are keyed by the base
row's primary key and carry two filter columns: ``scope_id`` (the
constellation; a partition key of the vector tables) and ``owner_id`` (the
agent).  Services keep them in step with every write (``index_put_texts``,
``index_put_vectors``, ``index_delete``); this module never decides who may
see what: callers pass a queryset of the rows the caller may receive
(``allowed``), already narrowed by their filters, and candidates outside it
are dropped.

Modes: ``fts`` (BM25), ``vector`` (KNN), ``hybrid`` (Reciprocal Rank
Fusion, k=60, over the top candidates of both) and ``auto`` (hybrid when a
query vector is available, else fts).  Any text is a valid query: it is
turned into quoted FTS5 terms, never passed through as FTS5 syntax.

The virtual tables exist on SQLite only; elsewhere (PostgreSQL) the
index functions do nothing and search falls back to a plain
``icontains`` keyword scan (``SearchOutcome.degraded`` says so).
"""

import functools
import html
import json
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Exists, Model, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL

from pattern_site.db.compiled import RowReader

SEARCH_MODES: tuple[str, ...] = ("fts", "vector", "hybrid", "auto")
RRF_K = 60
DEDUP_COSINE = 0.95
MAX_QUERY_TERMS = 64
MAX_CANDIDATES = 4000
SNIPPET_TOKENS = 24
_MARK_OPEN, _MARK_CLOSE = "\x02", "\x03"
# Stands for the candidate ids in a compiled statement (PermittedRows).
_IDS_PARAM = object()
# A match, between the marks (a template: no Python call per match).
_MARKED = _MARK_OPEN + r"\g<0>" + _MARK_CLOSE
_TERM = re.compile(r"\w+", re.UNICODE)
_PHRASE = re.compile(r'"([^"]+)"')
_SPACES = re.compile(r"\s+")
# FTS5 has no stop words: OR-ing "is" or "the" into a query would let every
# row match and crowd out the vector results in hybrid mode.  Dropped from
# the keyword query unless the query has nothing else.
_STOP_WORDS_TEXT = """
a an and are as at be been being but by can could did do does for from had
has have he her hers him his how i if in into is it its me my no not of on
or our she so than that the their them then there these they this to was
we were what when where which who whom why will with would you your
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


@dataclass(frozen=True)
class TextIndex:
    """The FTS5 and vec0 tables that index the text of one base table."""

    base_table: str
    dim: int = 384
    # The base table's column holding the ``scope_id`` of the index rows.
    scope_column: str = "constellation_id"
    # The base table's column holding the ``owner_id`` of the index rows.
    owner_column: str = "agent_id"
    # The binary table is split into shards (rowid % shards, a partition
    # key): sqlite-vec's top-k selection costs rows * k, so k/shards from
    # each shard is several times cheaper than k from all rows at once.
    shards: int = 4

    @property
    def fts_table(self) -> str:
        return f"{self.base_table}_fts"

    @property
    def vec_table(self) -> str:
        return f"{self.base_table}_vec"

    @property
    def bin_table(self) -> str:
        return f"{self.base_table}_vbin"

    def create_sql(self) -> list[str]:
        filters = "scope_id integer partition key, owner_id integer"
        return [
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.fts_table} USING fts5("
            "content, scope_id UNINDEXED, owner_id UNINDEXED, "
            "tokenize='porter unicode61')",
            # Unit vectors under vec0's default L2 metric: the same order as
            # cosine (|a - b|^2 = 2 - 2 cos for unit a, b) at ~10% less
            # per-row cost than ``distance_metric=cosine``, which works out
            # both norms of every stored vector on every search.
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.vec_table} USING vec0("
            f"embedding float[{self.dim}], {filters})",
            # ``+vector``: an auxiliary copy of the float vector, read by rowid
            # from a plain shadow table.  vec0 reads a float vector back by
            # loading its whole chunk; the re-scoring and dedup need dozens.
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.bin_table} USING vec0("
            f"embedding bit[{self.dim}], {filters}, shard integer partition key,"
            " +vector blob)",
        ]

    def drop_sql(self) -> list[str]:
        return [
            f"DROP TABLE IF EXISTS {t}"
            for t in (self.fts_table, self.vec_table, self.bin_table)
        ]


def backend_available() -> bool:
    """FTS5 and vec0 exist only on the embedded SQLite engine."""
    return connection.vendor == "sqlite"


# --- keeping the index in step (called by services, inside their atomic) ---


def index_put_texts(
    index: TextIndex, *, rows: Sequence[tuple[int, int, int, str]]
) -> None:
    """Store (row_id, scope_id, owner_id, text) rows, replacing old ones."""
    if not backend_available() or not rows:
        return
    with connection.cursor() as cur:
        cur.executemany(
            f"DELETE FROM {index.fts_table} WHERE rowid = %s", [[r[0]] for r in rows]
        )
        cur.executemany(
            f"INSERT INTO {index.fts_table}(rowid, content, scope_id, owner_id)"
            " VALUES (%s, %s, %s, %s)",
            [
                [row_id, text, scope_id, owner_id]
                for row_id, scope_id, owner_id, text in rows
            ],
        )


def index_put_vectors(
    index: TextIndex, *, rows: Sequence[tuple[int, int, int, np.ndarray]]
) -> None:
    """Store (row_id, scope_id, owner_id, vector) rows, replacing old ones."""
    if not backend_available() or not rows:
        return
    ids = [[r[0]] for r in rows]
    with connection.cursor() as cur:
        for table in (index.vec_table, index.bin_table):
            cur.executemany(f"DELETE FROM {table} WHERE rowid = %s", ids)
        params = [
            (row_id, _as_blob(vec), scope_id, owner_id)
            for row_id, scope_id, owner_id, vec in rows
        ]
        cur.executemany(
            f"INSERT INTO {index.vec_table}(rowid, embedding, scope_id, owner_id)"
            " VALUES (%s, %s, %s, %s)",
            [
                (row_id, _as_blob(_unit(vec)), scope_id, owner_id)
                for row_id, scope_id, owner_id, vec in rows
            ],
        )
        cur.executemany(
            f"INSERT INTO {index.bin_table}"
            "(rowid, embedding, scope_id, owner_id, shard, vector)"
            " VALUES (%s, vec_quantize_binary(%s), %s, %s, %s, %s)",
            [(*p, p[0] % index.shards, p[1]) for p in params],
        )


def index_delete(index: TextIndex, *, row_ids: Sequence[int]) -> None:
    if not backend_available() or not row_ids:
        return
    ids = [[row_id] for row_id in row_ids]
    with connection.cursor() as cur:
        for table in (index.fts_table, index.vec_table, index.bin_table):
            cur.executemany(f"DELETE FROM {table} WHERE rowid = %s", ids)


def index_clear(index: TextIndex) -> None:
    """Empty the index (Django's flush leaves virtual tables alone)."""
    if not backend_available():
        return
    with connection.cursor() as cur:
        for table in (index.fts_table, index.vec_table, index.bin_table):
            cur.execute(f"DELETE FROM {table}")


def index_vectors(index: TextIndex, *, row_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """The stored float vectors of ``row_ids`` (rows without one are absent).

    Read straight from the shadow table holding the binary table's
    ``+vector`` auxiliary column (sqlite-vec 0.1.9 names it
    ``<table>_auxiliary``, first column ``value00``): a primary-key lookup
    per id, ~8x faster than ``rowid = ?`` through vec0, which answers
    ``rowid IN (...)`` with a scan of the whole table.
    """
    if not backend_available() or not row_ids:
        return {}
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT rowid, value00 FROM {index.bin_table}_auxiliary"
            " WHERE rowid IN (SELECT value FROM json_each(%s))",
            [json.dumps(list(row_ids))],
        )
        return {
            row_id: np.frombuffer(blob, dtype=np.float32)
            for row_id, blob in cur.fetchall()
        }


def _as_blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def _unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    vector = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def cosine_from_l2(distance: float) -> float:
    """The cosine distance of two unit vectors ``distance`` apart."""
    return distance * distance / 2.0


# --- queries ------------------------------------------------------------------


def fts_query(text: str) -> str:
    """Any user text as a safe FTS5 query: quoted phrases and terms, OR-ed.

    FTS5 operators, parentheses, ``NEAR``, ``*`` and ``-`` lose their
    meaning (they are punctuation or quoted words); an empty string means
    nothing in the text can match by keywords (e.g. emoji only).
    """
    parts: list[str] = []
    seen: set[str] = set()
    for phrase in _PHRASE.findall(text):
        words = _TERM.findall(phrase)
        if len(words) > 1:
            parts.append('"' + " ".join(words) + '"')
    words = _TERM.findall(_PHRASE.sub(" ", text))
    content_words = [w for w in words if w.casefold() not in STOP_WORDS]
    for word in content_words or words:
        key = word.casefold()
        if key not in seen:
            seen.add(key)
            parts.append(f'"{word}"')
    return " OR ".join(parts[:MAX_QUERY_TERMS])


def normalised_text(text: str) -> str:
    """Text compared for duplicates when there are no vectors."""
    return " ".join(_TERM.findall(text.casefold()))


@dataclass
class Hit:
    """One result: the row, where it came from and how it scored."""

    row: Any  # the row's id while ranking; the row once the head is fetched
    snippet_html: str
    fts_rank: int | None = None
    bm25: float | None = None
    vector_rank: int | None = None
    vector_distance: float | None = None
    fused_score: float = 0.0
    relevance: float | None = None
    score: float = 0.0
    duplicates: list[int] = field(default_factory=list)


@dataclass
class SearchOutcome:
    hits: list[Hit]
    mode_requested: str
    mode_used: str
    degraded: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict)
    quantised: bool = False  # the vector side took the quantised path


@dataclass(frozen=True)
class Rerank:
    """Seed 002's relevance: importance * rate^hours * (1 + ln(1 + accesses))."""

    decay_rate: float
    now: datetime

    def relevance(self, row: Any) -> float:
        importance = float(getattr(row, "importance", 0.5))
        last = getattr(row, "accessed_at", None) or row.created_at
        hours = max(0.0, (self.now - last).total_seconds() / 3600.0)
        accesses = int(getattr(row, "access_count", 0))
        return importance * self.decay_rate**hours * (1.0 + math.log1p(accesses))


def fts_candidates(
    index: TextIndex,
    *,
    query: str,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    k: int,
) -> list[tuple[int, float, str]]:
    """(row_id, bm25, snippet) of the best ``k`` keyword matches."""
    if not query:
        return []
    sql = (
        f"SELECT rowid, bm25({index.fts_table}),"
        f" snippet({index.fts_table}, 0, %s, %s, '…', {SNIPPET_TOKENS})"
        f" FROM {index.fts_table} WHERE {index.fts_table} MATCH %s"
        " AND scope_id = %s"
    )
    sql += _owner_sql(owner_ids, "owner_id") + " ORDER BY rank LIMIT %s"
    params = [_MARK_OPEN, _MARK_CLOSE, query, scope_id, *(owner_ids or ()), k]
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


def vector_candidates(
    index: TextIndex,
    *,
    vector: np.ndarray,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    k: int,
    quantised: bool = False,
) -> list[tuple[int, float, np.ndarray | None]]:
    """(row_id, cosine distance, vector or None) of the nearest rows.

    Exact: the ``k`` nearest unit float vectors, ranked by numpy over the
    chunks vec0 stores (``_exact_from_chunks``), or by vec0's own KNN (L2,
    turned into cosine distance) when ``SEARCH_EXACT_KNN`` is "vec0" or
    the storage is not one ``chunks_readable`` knows.
    Quantised: vec0 KNNs over the binary vectors (Hamming distance), one per
    shard, give ``k * SEARCH_QUANTISED_OVERSAMPLE`` coarse candidates in
    all, re-scored exactly against their float vectors; all re-scored ones
    are returned.
    """
    numpy_knn = settings.SEARCH_EXACT_KNN == "numpy" and chunks_readable(index)
    if not quantised and numpy_knn:
        return _exact_from_chunks(
            index, unit=_unit(vector), scope_id=scope_id, owner_ids=owner_ids, k=k
        )
    owner_params = list(owner_ids) if owner_ids is not None else []
    if not quantised:
        # The float vectors come from the binary table's auxiliary column,
        # joined by rowid (selecting vec0's own ``embedding`` would load a
        # whole chunk per result).  ``v`` must stay the outer loop: a LEFT
        # JOIN keeps it there and keeps a row whose copy is missing.
        sql = (
            f"SELECT v.rowid, v.distance, a.value00 FROM {index.vec_table} v"
            f" LEFT JOIN {index.bin_table}_auxiliary a ON a.rowid = v.rowid"
            " WHERE v.embedding MATCH %s AND v.k = %s AND v.scope_id = %s"
            f"{_owner_sql(owner_ids, 'v.owner_id')} ORDER BY v.distance"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [_as_blob(_unit(vector)), k, scope_id, *owner_params])
            return [
                (
                    row_id,
                    cosine_from_l2(distance),
                    None if blob is None else np.frombuffer(blob, dtype=np.float32),
                )
                for row_id, distance, blob in cur.fetchall()
            ]
    blob = _as_blob(vector)
    coarse_k = min(k * settings.SEARCH_QUANTISED_OVERSAMPLE, MAX_CANDIDATES)
    per_shard = -(-coarse_k // index.shards)
    one = (
        f"SELECT rowid, vector FROM {index.bin_table}"
        " WHERE embedding MATCH vec_quantize_binary(%s) AND k = %s"
        f" AND scope_id = %s AND shard = %s{_owner_sql(owner_ids, 'owner_id')}"
    )
    params: list[Any] = []
    for shard in range(index.shards):
        params += [blob, per_shard, scope_id, shard, *owner_params]
    with connection.cursor() as cur:
        cur.execute(" UNION ALL ".join([one] * index.shards), params)
        coarse = cur.fetchall()
    if not coarse:
        return []
    keys = [row_id for row_id, _blob in coarse]
    matrix = np.stack([np.frombuffer(b, dtype=np.float32) for _id, b in coarse])
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(vector) or 1.0)
    distances = 1.0 - (matrix @ vector) / np.where(norms == 0, 1.0, norms)
    return [(keys[i], float(distances[i]), matrix[i]) for i in np.argsort(distances)]


# sqlite-vec versions whose vec0 storage ``_exact_from_chunks`` reads, and
# the shadow-table columns it relies on (checked once per table and
# process; anything else falls back to vec0's own KNN).
CHUNK_LAYOUT_VERSIONS = frozenset({"v0.1.9"})
_CHUNK_COLUMNS = {
    "chunks": {"chunk_id", "partition00", "validity", "rowids"},
    "vector_chunks00": {"rowid", "vectors"},
    "metadatachunks00": {"rowid", "data"},
}


@functools.cache
def chunks_readable(index: TextIndex) -> bool:
    """Whether this sqlite-vec stores ``index.vec_table`` the way
    ``_exact_from_chunks`` reads it."""
    with connection.cursor() as cur:
        cur.execute("SELECT vec_version()")
        if cur.fetchone()[0] not in CHUNK_LAYOUT_VERSIONS:
            return False
        # Incremental blob reads (sqlean's name for it; stdlib: blobopen).
        if not hasattr(connection.connection, "open_blob"):
            return False
        for suffix, needed in _CHUNK_COLUMNS.items():
            cur.execute(f"PRAGMA table_info({index.vec_table}_{suffix})")
            if not needed <= {row[1] for row in cur.fetchall()}:
                return False
    return True


def _exact_from_chunks(
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
    table = index.vec_table
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
    row_bytes = index.dim * 4
    ids: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    vectors: list[np.ndarray] = []
    with connection.cursor() as cur, _read_snapshot() as raw:
        cur.execute(sql, [scope_id])
        chunks = cur.fetchall()
        for validity, rowids, blob_rowid, *meta in chunks:
            slots = np.frombuffer(rowids, dtype=np.int64)
            valid = np.unpackbits(
                np.frombuffer(validity, dtype=np.uint8),
                count=len(slots),
                bitorder="little",
            ).view(bool)
            if by_owner:
                column = np.frombuffer(meta[0], dtype=np.int64)[: len(slots)]
                # One owner (the usual case): a comparison, 20x np.isin's cost.
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
            matrix = np.frombuffer(data, dtype=np.float32).reshape(used, index.dim)
            score = matrix @ unit
            if len(live) < used:
                score[~valid[:used]] = -np.inf
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


@contextmanager
def _read_snapshot() -> Iterator[Any]:
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


def _owner_sql(owner_ids: Sequence[int] | None, column: str) -> str:
    """`` AND column IN (%s, ...)`` for ``owner_ids`` (None: no condition)."""
    if owner_ids is None:
        return ""
    return f" AND {column} IN ({','.join(['%s'] * len(owner_ids))})"


@dataclass(frozen=True)
class _PermittedStatement:
    """The compiled ``PermittedRows`` statements and how to read their rows:
    ``texts_sql`` selects (pk, content), ``rows_sql`` whole rows with their
    ``select_related`` rows; both take the same parameters."""

    texts_sql: str
    rows_sql: str
    params: tuple
    reader: RowReader


# Compiled statements by the SQL of the allowed queryset (the same
# permission and filters give the same statement); at most 256.
_STATEMENTS: dict[tuple, _PermittedStatement] = {}
_STATEMENTS_MAX = 256


def _permitted_statement(allowed: QuerySet) -> _PermittedStatement:
    """Compile ``pk IN (json_each(ids)) AND EXISTS (allowed row)``."""
    model = allowed.model
    inner = allowed.filter(pk=OuterRef("pk")).order_by().values("pk")
    outer = (
        model._default_manager.filter(
            pk__in=RawSQL("SELECT value FROM json_each(%s)", (_IDS_PARAM,))
        )
        .filter(Exists(inner))
        .order_by()
    )
    texts_sql, texts_params = outer.values_list("pk", "content").query.sql_with_params()
    outer.query.select_related = allowed.query.select_related
    compiler = outer.query.get_compiler(using=outer.db)
    rows_sql, params = compiler.as_sql()  # EmptyResultSet: nothing is allowed
    if tuple(texts_params) != tuple(params):
        raise ValueError("the permitted texts and rows statements differ")
    return _PermittedStatement(
        texts_sql=texts_sql,
        rows_sql=rows_sql,
        params=tuple(params),
        reader=RowReader.of(compiler, outer.db),
    )


class PermittedRows:
    """The rows of ``allowed`` among candidate ids.

    ``pk IN (json_each(ids)) AND EXISTS (allowed row with that pk)``.  The
    ``EXISTS`` form keeps SQLite on the primary key
    (``allowed.filter(pk__in=ids)`` may make it walk an index of all the
    owner's rows when it has no stats), and ``json_each`` keeps the SQL
    text the same whatever the number of ids, so the statements are
    compiled once per permission and filters and SQLite's statement cache
    reuses them.  ``fetch`` reads the candidates' text only; ``instances``
    reads the whole rows (and their ``select_related`` rows) of those that
    reach the results and builds them the way Django's ``ModelIterable``
    does (Django 5.2): whole rows of all candidates cost four times their
    text.
    """

    def __init__(self, allowed: QuerySet):
        self._statement: _PermittedStatement | None = None
        self.empty = allowed.query.is_empty()
        if self.empty:
            return
        try:
            # The key is the SQL of the allowed rows' ids: their filters and
            # joins, without the columns and ordering (a third of the cost
            # of compiling the whole queryset on every search).
            ids_query = allowed.order_by().values("pk").query
            inner_sql, inner_params = ids_query.sql_with_params()
            key: tuple | None = (
                allowed.model,
                allowed.db,
                repr(allowed.query.select_related),
                inner_sql,
                tuple(inner_params),
            )
            hash(key)
        except EmptyResultSet:
            self.empty = True
            return
        except TypeError:  # a parameter that cannot be a key: no caching
            key = None
        statement = _STATEMENTS.get(key) if key is not None else None
        if statement is None:
            try:
                statement = _permitted_statement(allowed)
            except EmptyResultSet:
                self.empty = True
                return
            if key is not None:
                if len(_STATEMENTS) >= _STATEMENTS_MAX:
                    _STATEMENTS.pop(next(iter(_STATEMENTS)))
                _STATEMENTS[key] = statement
        self._statement = statement

    def _run(self, sql: str, ids: Sequence[int]) -> list[tuple]:
        st = self._statement
        assert st is not None
        ids_json = json.dumps(list(ids))
        params = [ids_json if p is _IDS_PARAM else p for p in st.params]
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def fetch(self, ids: Sequence[int]) -> dict[int, str]:
        """The content of each permitted row among ``ids``, by id."""
        if self._statement is None or not ids:
            return {}
        return dict(self._run(self._statement.texts_sql, ids))

    def instances(self, ids: Sequence[int]) -> dict[int, Any]:
        """Model instances (with their related rows) of the permitted rows
        among ``ids``, by id: the same permission, checked again."""
        st = self._statement
        if st is None or not ids:
            return {}
        return {obj.pk: obj for obj in st.reader.instances(self._run(st.rows_sql, ids))}


_LARGE_SCOPES: dict[tuple[str, int, int], tuple[float, bool]] = {}
LARGE_SCOPE_TTL = 60.0


def scope_sizes_forget() -> None:
    """Count every scope again on its next search (tests, benchmarks)."""
    _LARGE_SCOPES.clear()


def scope_is_large(index: TextIndex, *, scope_id: int) -> bool:
    """Whether the scope has more than ``SEARCH_QUANTISED_ABOVE`` rows.

    Counted (up to the threshold) at most once a minute per process: the
    answer only picks the faster of two correct paths, so a scope that has
    just crossed the threshold may take the exact path a little longer.
    """
    threshold = settings.SEARCH_QUANTISED_ABOVE
    if threshold <= 0:
        return False
    key = (index.base_table, scope_id, threshold)
    now = time.monotonic()
    cached = _LARGE_SCOPES.get(key)
    if cached is not None and cached[0] > now:
        return cached[1]
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {index.base_table}"
            f" WHERE {index.scope_column} = %s LIMIT %s)",
            [scope_id, threshold + 1],
        )
        large = cur.fetchone()[0] > threshold
    _LARGE_SCOPES[key] = (now + LARGE_SCOPE_TTL, large)
    return large


def search(
    index: TextIndex,
    *,
    text: str,
    allowed: QuerySet,
    scope_id: int,
    owner_ids: Sequence[int] | None = None,
    mode: str = "auto",
    limit: int = 10,
    query_vector: Callable[[str], np.ndarray | None] | None = None,
    rerank: Rerank | None = None,
    quantised: bool | None = None,
    degraded_reason: str = "",
) -> SearchOutcome:
    """Search ``index`` for ``text`` among the rows of ``allowed``.

    ``query_vector`` embeds the query (None when no model: vector and
    hybrid then fall back to fts, and ``degraded`` says why).  Candidates
    are the top of each list (a pool of ``4 * limit``, at least 40); when
    the caller's filters drop too many, the pool grows and is searched
    again, up to ``MAX_CANDIDATES``.  ``quantised`` None: the quantised
    path when ``SEARCH_VECTOR_QUANTISED`` is on, and for hybrid searches of
    scopes larger than ``SEARCH_QUANTISED_ABOVE`` rows.
    """
    started = time.perf_counter()
    if mode not in SEARCH_MODES:
        raise ValueError(f"unknown search mode {mode!r}")
    if not backend_available():
        hits = _fallback_scan(allowed, text, limit)
        return SearchOutcome(
            hits,
            mode,
            "fts",
            f"search index unavailable on {connection.vendor}; plain keyword scan",
        )
    timings: dict[str, float] = {}
    vector: np.ndarray | None = None
    degraded = ""
    if mode in ("vector", "hybrid", "auto"):
        t0 = time.perf_counter()
        vector = query_vector(text[:4000]) if query_vector else None
        timings["embed"] = _ms(t0)
        if vector is None:
            degraded = degraded_reason or "no query embedding; keyword search only"
    used = mode
    if vector is None:
        used = "fts"
    elif mode == "auto":
        used = "hybrid"
    if quantised is None:
        quantised = settings.SEARCH_VECTOR_QUANTISED or (
            used == "hybrid" and scope_is_large(index, scope_id=scope_id)
        )

    fts_q = fts_query(text)
    pool = max(limit * 4, 40)
    # The vector list fused is twice the limit deep on either path.  vec0's
    # KNN cost grows with k (steeply for the binary table): the quantised
    # coarse pass asks for the limit, times the oversample.
    vec_k = max(limit * 2, 20)
    knn_k = limit if quantised else vec_k
    permitted_rows = PermittedRows(allowed)
    fts_hits: list[tuple[int, float, str]] = []
    vec_hits: list[tuple[int, float, np.ndarray | None]] = []
    texts: dict[int, str] = {}
    while not permitted_rows.empty:
        if used in ("fts", "hybrid"):
            t0 = time.perf_counter()
            fts_hits = fts_candidates(
                index, query=fts_q, scope_id=scope_id, owner_ids=owner_ids, k=pool
            )
            timings["fts"] = _ms(t0)
        if used in ("vector", "hybrid") and vector is not None:
            t0 = time.perf_counter()
            vec_hits = vector_candidates(
                index,
                vector=vector,
                scope_id=scope_id,
                owner_ids=owner_ids,
                k=knn_k,
                quantised=quantised,
            )[:vec_k]
            timings["vector"] = _ms(t0)
        t0 = time.perf_counter()
        ids = {h[0] for h in fts_hits} | {h[0] for h in vec_hits}
        texts = permitted_rows.fetch(list(ids))
        timings["allowed"] = _ms(t0)
        full = len(fts_hits) >= pool or len(vec_hits) >= vec_k
        if len(texts) >= limit or not full or pool >= MAX_CANDIDATES:
            break
        pool = min(pool * 4, MAX_CANDIDATES)
        vec_k = min(vec_k * 4, MAX_CANDIDATES)
        knn_k = min(knn_k * 4, MAX_CANDIDATES)

    hits: dict[int, Hit] = {}
    vectors: dict[int, np.ndarray] = {}
    snippets: dict[int, str] = {}
    for rank, (row_id, bm25, snippet) in enumerate(
        (h for h in fts_hits if h[0] in texts), start=1
    ):
        hit = hits[row_id] = Hit(row=row_id, snippet_html="")
        hit.fts_rank, hit.bm25 = rank, float(bm25)
        hit.fused_score += 1.0 / (RRF_K + rank)
        snippets[row_id] = snippet
    for rank, (row_id, distance, emb) in enumerate(
        (h for h in vec_hits if h[0] in texts), start=1
    ):
        hit = hits.setdefault(row_id, Hit(row=row_id, snippet_html=""))
        hit.vector_rank, hit.vector_distance = rank, distance
        hit.fused_score += 1.0 / (RRF_K + rank)
        if emb is not None:
            vectors[row_id] = emb
    ordered = sorted(hits.values(), key=lambda h: -h.fused_score)
    rows: dict[int, Any] = {}
    for hit in ordered:
        hit.score = hit.fused_score
    if rerank is not None:
        # The relevance needs every candidate's row.
        t0 = time.perf_counter()
        rows = permitted_rows.instances([h.row for h in ordered])
        timings["rows"] = _ms(t0)
        ordered = [h for h in ordered if h.row in rows]  # deleted meanwhile
        for hit in ordered:
            hit.relevance = rerank.relevance(rows[hit.row])
            hit.score = hit.fused_score * hit.relevance
        ordered.sort(key=lambda h: -h.score)
    t0 = time.perf_counter()
    final = _dedup(
        index,
        ordered,
        limit,
        texts=texts,
        vectors=vectors if vector is not None else None,
    )
    timings["dedup"] = _ms(t0)
    if rerank is None:
        # Only the rows that reach the results become model instances.
        t0 = time.perf_counter()
        rows = permitted_rows.instances([h.row for h in final])
        timings["rows"] = _ms(t0)
        final = [h for h in final if h.row in rows]  # deleted meanwhile
    terms = _TERM.findall(text)[:MAX_QUERY_TERMS]
    for hit in final:
        snippet = snippets.get(hit.row)
        hit.snippet_html = (
            _render_snippet(snippet)
            if snippet is not None
            else highlight(texts[hit.row], terms)
        )
        hit.row = rows[hit.row]
    timings["total"] = _ms(started)
    return SearchOutcome(
        final, mode, used, degraded, timings, quantised=quantised and used != "fts"
    )


def _dedup(
    index: TextIndex,
    ordered: list[Hit],
    limit: int,
    *,
    texts: dict[int, str],
    vectors: dict[int, np.ndarray] | None,
) -> list[Hit]:
    """Collapse near-duplicates into the best-ranked one (which lists them).

    Cosine > 0.95 between stored vectors, or the same normalised text.
    ``hit.row`` is still the row's id; ``texts`` holds each one's content.
    ``vectors`` holds those the KNN already returned; the rest of the
    window is looked up (None: no vectors, text only).
    """
    window = ordered[: limit * 3]
    # Without duplicates the loop stops after limit + 1 hits: look those up
    # first, the rest of the window only if duplicates need it.
    head = len(window) if vectors is None else min(len(window), limit + 1)
    if vectors is not None:
        vectors = dict(vectors)
        vectors.update(_missing_vectors(index, window[:head], vectors))
    close = _near_pairs(window[:head], vectors)
    kept: list[Hit] = []
    kept_at: list[int] = []
    kept_texts: list[str] = []
    for position, hit in enumerate(window):
        if position == head:
            if vectors is not None:
                vectors.update(_missing_vectors(index, window[head:], vectors))
            close = _near_pairs(window, vectors)
        text = normalised_text(texts[hit.row])
        near = close[position] if close is not None else None
        twin = next(
            (
                other
                for other, at, other_text in zip(kept, kept_at, kept_texts, strict=True)
                if other_text == text or (near is not None and near[at])
            ),
            None,
        )
        if twin is not None:
            twin.duplicates.append(hit.row)
            continue
        if len(kept) >= limit:
            break
        kept.append(hit)
        kept_at.append(position)
        kept_texts.append(text)
    return kept


def _near_pairs(
    hits: list[Hit], vectors: dict[int, np.ndarray] | None
) -> list[list[bool]] | None:
    """Which pairs of ``hits`` have a cosine above ``DEDUP_COSINE`` (one
    matrix product; a hit without a vector is near none), or None."""
    found = [vectors.get(h.row) for h in hits] if vectors is not None else []
    present = [i for i, vec in enumerate(found) if vec is not None]
    if not present:
        return None
    stacked = np.stack([found[i] for i in present]).astype(np.float32, copy=False)
    gram = stacked @ stacked.T
    norms = np.sqrt(np.maximum(gram.diagonal(), 0.0))
    norms[norms == 0] = 1.0
    close = gram / np.outer(norms, norms) > DEDUP_COSINE
    if len(present) == len(hits):
        return close.tolist()
    near = np.zeros((len(hits), len(hits)), dtype=bool)
    near[np.ix_(present, present)] = close
    return near.tolist()


def _missing_vectors(
    index: TextIndex, hits: list[Hit], known: dict[int, np.ndarray]
) -> dict[int, np.ndarray]:
    return index_vectors(index, row_ids=[h.row for h in hits if h.row not in known])


def _fallback_scan(allowed: QuerySet, text: str, limit: int) -> list[Hit]:
    terms = _TERM.findall(text)[:8]
    if not terms:
        return []
    condition = Q()
    for term in terms:
        condition |= Q(content__icontains=term)
    rows: list[Model] = list(allowed.filter(condition)[:limit])
    return [
        Hit(row, highlight(row.content, terms), score=1.0 / (RRF_K + i))
        for i, row in enumerate(rows, start=1)
    ]


def highlight(content: str, terms: Sequence[str], width: int = 200) -> str:
    """An escaped excerpt of ``content`` around the first term, terms marked."""
    if not terms:
        return html.escape(content[:width])
    pattern = _terms_pattern(tuple(terms))
    found = pattern.search(content)
    start = max(0, found.start() - width // 3) if found else 0
    excerpt = content[start : start + width]
    marked = pattern.sub(_MARKED, excerpt)
    prefix = "…" if start else ""
    suffix = "…" if start + width < len(content) else ""
    return _render_snippet(prefix + marked + suffix)


@functools.lru_cache(maxsize=256)
def _terms_pattern(terms: tuple[str, ...]) -> re.Pattern[str]:
    """Words starting with any of ``terms`` (compiled once per query)."""
    return re.compile(
        r"\b(" + "|".join(re.escape(t) for t in terms) + r")\w*", re.IGNORECASE
    )


def _render_snippet(marked: str) -> str:
    escaped = html.escape(_SPACES.sub(" ", marked))
    return escaped.replace(_MARK_OPEN, "<mark>").replace(_MARK_CLOSE, "</mark>")


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)
