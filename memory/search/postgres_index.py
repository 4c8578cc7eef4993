"""The index tables beside a searchable base table, on PostgreSQL.

Two plain tables per base table, keyed like the SQLite index tables by the
base row's primary key, each with the two filter columns ``scope_id`` and
``owner_id`` under a B-tree.  ``<base_table>_pgsearch`` (``pg_table``)
holds the text in the three columns of the SQLite FTS5 table
(``content``; ``context``: the rows before it; ``dated``: its date in
words) and ``tsv``, a generated ``tsvector`` of the three told apart by
weight labels (``TSV_LABELS``) under a GIN index, so that one index
matches all three and the ranking weighs each as FTS5's column weights
do.  ``<base_table>_pgvector`` (``pg_vector_table``) holds the vector, a
pgvector ``vector(384)`` under an HNSW index (cosine distance).

The vectors have a table of their own so that a keyword search, which
reads the row of every match, reads narrow rows (a vector is 1.5 kB), and
so that storing a vector leaves the text row and its GIN entries alone.
A row may have a text and no vector or the reverse, as on SQLite.  The
migrations create the tables (``memory/migrations/0010``, ``0011``); the
functions here are the PostgreSQL side of ``memory.search.index``.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from django.db import connection

if TYPE_CHECKING:
    from memory.search.index import TextIndex

# Text search configuration of the ``tsv`` column and of every query: the
# same stemming as the SQLite side's porter tokenizer.
TS_CONFIG = "english"


# The weight label of each text column inside ``tsv``.  The row's own text
# keeps ``to_tsvector``'s default label, D: a ``tsvector`` made from the
# content alone ranks the same.  ``ts_rank_cd`` takes its weights in the
# order D, C, B, A (``tsv_weights``).
TSV_LABELS = {"content": "D", "context": "C", "dated": "B"}


def tsv_weights(*, context_weight: float, date_weight: float) -> list[float]:
    """The ``ts_rank_cd`` weights for these column weights (the content's
    is 1, as in the engine's BM25; the unused label A gets 0)."""
    return [1.0, float(context_weight), float(date_weight), 0.0]


def pg_table(index: "TextIndex") -> str:
    """The text table of ``index``."""
    return f"{index.base_table}_pgsearch"


def pg_vector_table(index: "TextIndex") -> str:
    """The vector table of ``index``."""
    return f"{index.base_table}_pgvector"


def vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form of ``vector`` (sent as a parameter, cast)."""
    values = np.asarray(vector, dtype=np.float32)
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def vector_from_binary(data: bytes) -> np.ndarray:
    """A vector read as ``vector_send(embedding)``: pgvector's binary form
    (dimensions and a spare int16, then big-endian float4s), parsed in one
    step rather than as text or a float array, which costs milliseconds."""
    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)


def pg_put_texts(
    index: "TextIndex", *, rows: Sequence[tuple[int, int, int, str, str, str]]
) -> None:
    """Store (row_id, scope_id, owner_id, content, context, dated) rows."""
    with connection.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {pg_table(index)}"
            " (row_id, scope_id, owner_id, content, context, dated)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (row_id) DO UPDATE SET"
            " scope_id = EXCLUDED.scope_id, owner_id = EXCLUDED.owner_id,"
            " content = EXCLUDED.content, context = EXCLUDED.context,"
            " dated = EXCLUDED.dated",
            [list(row) for row in rows],
        )


def pg_put_vectors(
    index: "TextIndex", *, rows: Sequence[tuple[int, int, int, np.ndarray]]
) -> None:
    """Vectors are stored as given; cosine distance ignores their length."""
    with connection.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {pg_vector_table(index)}"
            " (row_id, scope_id, owner_id, embedding)"
            " VALUES (%s, %s, %s, %s::vector) ON CONFLICT (row_id) DO UPDATE SET"
            " scope_id = EXCLUDED.scope_id, owner_id = EXCLUDED.owner_id,"
            " embedding = EXCLUDED.embedding",
            [
                (row_id, scope_id, owner_id, vector_literal(vector))
                for row_id, scope_id, owner_id, vector in rows
            ],
        )


def pg_delete(index: "TextIndex", *, row_ids: Sequence[int]) -> None:
    with connection.cursor() as cur:
        for table in (pg_table(index), pg_vector_table(index)):
            cur.execute(f"DELETE FROM {table} WHERE row_id = ANY(%s)", [list(row_ids)])


def pg_clear(index: "TextIndex") -> None:
    with connection.cursor() as cur:
        for table in (pg_table(index), pg_vector_table(index)):
            cur.execute(f"DELETE FROM {table}")


def pg_vectors(index: "TextIndex", *, row_ids: Sequence[int]) -> dict[int, np.ndarray]:
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT row_id, vector_send(embedding) FROM {pg_vector_table(index)}"
            " WHERE row_id = ANY(%s)",
            [list(row_ids)],
        )
        return {row_id: vector_from_binary(data) for row_id, data in cur.fetchall()}
