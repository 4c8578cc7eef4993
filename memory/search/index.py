"""The index tables beside a searchable base table: FTS5 for keywords, vec0
for vectors (float, and binary-quantised for the coarse pass).

On PostgreSQL the same functions keep a table of ``tsvector`` text and one
of pgvector vectors instead (``memory.search.postgres_index``).
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np
from django.db import connection

from memory.search.postgres_index import (
    pg_clear,
    pg_delete,
    pg_put_texts,
    pg_put_vectors,
    pg_table,
    pg_vectors,
)


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
            # ``context``: the text of the rows just before this one (the
            # turns a short reply answers); ``dated``: the row's date in
            # words (``date_words``), for questions naming a day.  Both are
            # matched at lower weights than the row's own text.
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.fts_table} USING fts5("
            "content, scope_id UNINDEXED, owner_id UNINDEXED, context, dated, "
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
    """FTS5 and vec0 on the embedded SQLite engine, the ``_pgsearch`` (full
    text) and ``_pgvector`` tables on PostgreSQL."""
    return connection.vendor in ("sqlite", "postgresql")


def on_postgresql() -> bool:
    return connection.vendor == "postgresql"


def index_put_texts(
    index: TextIndex,
    *,
    rows: Sequence[tuple[int, int, int, str]],
    contexts: Mapping[int, str] | None = None,
    dates: Mapping[int, date] | None = None,
    new: bool = False,
) -> None:
    """Store (row_id, scope_id, owner_id, text) rows, replacing old ones.

    ``contexts``: each row's context text by row id (``context_text`` of the
    rows before it); ``dates``: each row's date.  Absent: none.  ``new``:
    the rows were just inserted under ids never used before (an
    autoincrement key), so there are no old ones to look for.
    """
    if not backend_available() or not rows:
        return
    contexts, dates = contexts or {}, dates or {}
    full = [
        (
            row_id,
            scope_id,
            owner_id,
            text,
            contexts.get(row_id, ""),
            date_words(dates.get(row_id)),
        )
        for row_id, scope_id, owner_id, text in rows
    ]
    if on_postgresql():
        pg_put_texts(index, rows=full)
        return
    with connection.cursor() as cur:
        if not new:
            cur.executemany(
                f"DELETE FROM {index.fts_table} WHERE rowid = %s",
                [[r[0]] for r in rows],
            )
        cur.executemany(
            f"INSERT INTO {index.fts_table}(rowid, scope_id, owner_id, content,"
            " context, dated) VALUES (%s, %s, %s, %s, %s, %s)",
            full,
        )


# How many rows before a row make its context, and how much of each.
CONTEXT_ROWS = 2


CONTEXT_CHARS = 1000


def context_text(before: Sequence[str]) -> str:
    """The context column of a row from the texts of the rows before it
    (oldest first): the last ``CONTEXT_ROWS``, each cut to ``CONTEXT_CHARS``."""
    return "\n".join(text[:CONTEXT_CHARS] for text in before[-CONTEXT_ROWS:])


def date_words(day: date | None) -> str:
    """A date as the words a question names it by ("29 December Dec Friday
    2023"), in English whatever the locale; "" for None."""
    if day is None:
        return ""
    month = _MONTHS[day.month - 1]
    weekday = _WEEKDAYS[day.weekday()]
    return f"{day.day} {month} {month[:3]} {weekday} {day.year}"


_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


_WEEKDAYS = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
]


def index_put_vectors(
    index: TextIndex, *, rows: Sequence[tuple[int, int, int, np.ndarray]]
) -> None:
    """Store (row_id, scope_id, owner_id, vector) rows, replacing old ones."""
    if not backend_available() or not rows:
        return
    if on_postgresql():
        pg_put_vectors(index, rows=rows)
        return
    ids = [[r[0]] for r in rows]
    with connection.cursor() as cur:
        for table in (index.vec_table, index.bin_table):
            cur.executemany(f"DELETE FROM {table} WHERE rowid = %s", ids)
        params = [
            (row_id, as_blob(vec), scope_id, owner_id)
            for row_id, scope_id, owner_id, vec in rows
        ]
        cur.executemany(
            f"INSERT INTO {index.vec_table}(rowid, embedding, scope_id, owner_id)"
            " VALUES (%s, %s, %s, %s)",
            [
                (row_id, as_blob(unit_vector(vec)), scope_id, owner_id)
                for row_id, scope_id, owner_id, vec in rows
            ],
        )
        cur.executemany(
            f"INSERT INTO {index.bin_table}"
            "(rowid, embedding, scope_id, owner_id, shard, vector)"
            " VALUES (%s, vec_quantize_binary(%s), %s, %s, %s, %s)",
            [(*p, p[0] % index.shards, p[1]) for p in params],
        )
        _vectors_changed(cur, index, scope_ids={r[1] for r in rows})


def index_delete(index: TextIndex, *, row_ids: Sequence[int]) -> None:
    if not backend_available() or not row_ids:
        return
    if on_postgresql():
        pg_delete(index, row_ids=row_ids)
        return
    ids = [[row_id] for row_id in row_ids]
    with connection.cursor() as cur:
        for table in (index.fts_table, index.vec_table, index.bin_table):
            cur.executemany(f"DELETE FROM {table} WHERE rowid = %s", ids)
        _vectors_changed(cur, index, scope_ids={EVERY_SCOPE})


def index_clear(index: TextIndex) -> None:
    """Empty the index (Django's flush leaves virtual tables alone)."""
    if not backend_available():
        return
    if on_postgresql():
        pg_clear(index)
        return
    with connection.cursor() as cur:
        for table in (index.fts_table, index.vec_table, index.bin_table):
            cur.execute(f"DELETE FROM {table}")
        _vectors_changed(cur, index, scope_ids={EVERY_SCOPE})


# Vector generations (SQLite): one random token per index and scope, and
# one for the whole index (``EVERY_SCOPE``: deletes, by row id, do not know
# the scope), replaced in the transaction of every write to the vectors.
# A token names one committed state of the scope's vectors (a rolled-back
# write leaves the token it replaced), so what was read under it may be
# kept while it is current (``memory.search.chunks.held_hamming_knn``).
GENERATION_TABLE = "memory_search_generation"


EVERY_SCOPE = -1


def _vectors_changed(cur: Any, index: TextIndex, *, scope_ids: set[int]) -> None:
    cur.executemany(
        f"INSERT INTO {GENERATION_TABLE}(table_name, scope_id, token)"
        " VALUES (%s, %s, random()) ON CONFLICT (table_name, scope_id)"
        " DO UPDATE SET token = excluded.token",
        [(index.bin_table, scope_id) for scope_id in sorted(scope_ids)],
    )


def vectors_generation(cur: Any, index: TextIndex, *, scope_id: int) -> tuple:
    """The tokens of ``index``'s vectors in ``scope_id`` as they stand in
    the cursor's snapshot (see ``GENERATION_TABLE``)."""
    cur.execute(
        f"SELECT scope_id, token FROM {GENERATION_TABLE}"
        " WHERE table_name = %s AND scope_id IN (%s, %s) ORDER BY scope_id",
        [index.bin_table, EVERY_SCOPE, scope_id],
    )
    return tuple(cur.fetchall())


def index_vectors(index: TextIndex, *, row_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """The stored float vectors of ``row_ids`` (rows without one are absent).

    Read straight from the shadow table holding the binary table's
    ``+vector`` auxiliary column (sqlite-vec 0.1.9 names it
    ``<table>_auxiliary``, first column ``value00``): a primary-key lookup
    per id, much faster than ``rowid = ?`` through vec0, which answers
    ``rowid IN (...)`` with a scan of the whole table.
    """
    if not backend_available() or not row_ids:
        return {}
    if on_postgresql():
        return pg_vectors(index, row_ids=row_ids)
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


def index_dates(index: TextIndex, *, row_ids: Sequence[int]) -> dict[int, date]:
    """The date each of ``row_ids`` is indexed under (its ``dated`` words
    read back; rows without one are absent)."""
    if not backend_available() or not row_ids:
        return {}
    if on_postgresql():
        sql = f"SELECT row_id, dated FROM {pg_table(index)} WHERE row_id = ANY(%s)"
        params: list[object] = [list(row_ids)]
    else:
        sql = (
            f"SELECT rowid, dated FROM {index.fts_table}"
            " WHERE rowid IN (SELECT value FROM json_each(%s))"
        )
        params = [json.dumps(list(row_ids))]
    with connection.cursor() as cur:
        cur.execute(sql, params)
        found = {row_id: words_date(words) for row_id, words in cur.fetchall()}
    return {row_id: day for row_id, day in found.items() if day is not None}


def words_date(words: str | None) -> date | None:
    """The date ``date_words`` wrote (None for "" or other text)."""
    parts = (words or "").split()
    if len(parts) != 5 or parts[1] not in _MONTHS:
        return None
    try:
        return date(int(parts[4]), _MONTHS.index(parts[1]) + 1, int(parts[0]))
    except ValueError:
        return None


def dated_match(days: Sequence[date]) -> str:
    """An FTS5 expression matching the ``dated`` words of any of ``days``:
    per year, one phrase of day and month per day, and the year once, not
    once per day (FTS5 matches each phrase of the expression, and counts
    the rows holding it for BM25's weights, over the whole table)."""
    years: dict[int, list[str]] = {}
    for day in days:
        years.setdefault(day.year, []).append(f'"{day.day} {_MONTHS[day.month - 1]}"')
    return " OR ".join(
        f'(({" OR ".join(phrases)}) AND "{year}")' for year, phrases in years.items()
    )


def as_blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def unit_vector(vector: np.ndarray) -> np.ndarray:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    vector = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def cosine_from_l2(distance: float) -> float:
    """The cosine distance of two unit vectors ``distance`` apart."""
    return distance * distance / 2.0


def owner_sql(owner_ids: Sequence[int] | None, column: str) -> str:
    """`` AND column IN (%s, ...)`` for ``owner_ids`` (None: no condition)."""
    if owner_ids is None:
        return ""
    return f" AND {column} IN ({','.join(['%s'] * len(owner_ids))})"
