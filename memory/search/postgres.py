"""The candidate lists of the search engine, on PostgreSQL.

Same contract as ``memory.search.engine.fts_candidates`` and
``vector_candidates`` (the engine calls these on PostgreSQL; fusion, dedup,
filters and the score breakdown are the engine's, shared by both vendors).

Keywords: the terms and phrases of the engine's safe query
(``memory.search.query.fts_query``), each turned into a tsquery by
``plainto_tsquery``/``phraseto_tsquery`` (which accept any text) and OR-ed,
matched against the GIN-indexed ``tsv`` column (the row's text, its context
and its date in words, told apart by weight labels), ranked by
``ts_rank_cd`` with the engine's column weights, snippets from
``ts_headline``.  The ``bm25`` slot of a candidate holds the
negated ``ts_rank_cd`` (lower is better, as FTS5's bm25).

Vectors: pgvector's HNSW index (cosine distance) gives
``SEARCH_PG_OVERSAMPLE * k`` candidates, searched with ``hnsw.ef_search``
from ``SEARCH_PG_EF_SEARCH`` and iterative scans so that the scope and
owner filters inside the query still return enough rows; their distances
are computed exactly again and the best ``k`` returned.  ``exact=True``
ranks every row of the scope without the index (the reference of the
recall checks).
"""

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection

from memory.search.index import TextIndex, owner_sql
from memory.search.postgres_index import (
    TS_CONFIG,
    pg_table,
    pg_vector_table,
    tsv_weights,
    vector_from_binary,
    vector_literal,
)
from memory.search.query import MARK_CLOSE, MARK_OPEN, SNIPPET_TOKENS, TERM

_QUOTED = re.compile(r'"([^"]*)"')


def tsquery_sql(fts_q: str) -> tuple[str, list[str]]:
    """A tsquery expression (SQL and parameters) for an engine query.

    ``fts_q`` is ``fts_query``'s output: double-quoted terms and phrases,
    OR-ed.  Only the words inside the quotes are kept, each part a
    parameter of ``plainto_tsquery``/``phraseto_tsquery``: no user text
    reaches the tsquery syntax.  ``("", [])`` when nothing is left.
    """
    parts: list[str] = []
    params: list[str] = []
    for quoted in _QUOTED.findall(fts_q):
        words = TERM.findall(quoted)
        if not words:
            continue
        function = "phraseto_tsquery" if len(words) > 1 else "plainto_tsquery"
        parts.append(f"{function}('{TS_CONFIG}', %s)")
        params.append(" ".join(words))
    return " || ".join(parts), params


# ts_headline drops what its parser takes for an HTML tag: ``<`` is swapped
# for this character in the text it is given, and back in its output, so
# the snippet shows the stored text (escaped later, like every snippet).
_LT_STAND_IN = "\x01"


def _headline_options() -> str:
    return (
        f"StartSel={MARK_OPEN}, StopSel={MARK_CLOSE}, MaxWords={SNIPPET_TOKENS},"
        f" MinWords={SNIPPET_TOKENS // 2}, ShortWord=2"
    )


def pg_fts_candidates(
    index: TextIndex,
    *,
    query: str,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    k: int,
    context_weight: float = 0.0,
    date_weight: float = 0.0,
) -> list[tuple[int, float, str]]:
    """(row_id, -ts_rank_cd, snippet) of the best ``k`` keyword matches.

    ``ts_rank_cd`` weighs a match in the row's text 1, in its context
    ``context_weight``, in its date ``date_weight`` (the labels of ``tsv``,
    ``TSV_LABELS``).  A row matched only where the weight is 0 ranks 0 and
    is left out, as FTS5 leaves a column of weight 0 unsearched.  Snippets
    come from the row's own text, for the returned rows only.
    """
    tsquery, terms = tsquery_sql(query)
    if not tsquery:
        return []
    table = pg_table(index)
    weights = tsv_weights(context_weight=context_weight, date_weight=date_weight)
    # The tsquery is written out where it is used, not taken from a CTE:
    # only a tsquery the planner sees as a constant uses the GIN index.
    # Every match is ranked (the order needs it), the headline is made for
    # the returned rows only.  Rows ranked 0 (matched only in a column of
    # weight 0) sort last and are dropped here: a ``rank > 0`` condition in
    # the query would have ``ts_rank_cd`` computed twice per match.
    sql = (
        f"SELECT row_id, -rank, ts_headline('{TS_CONFIG}',"
        f" replace(content, '<', %s), {tsquery}, %s)"
        f" FROM (SELECT row_id, content, ts_rank_cd(%s::float4[], tsv, {tsquery})"
        f" AS rank FROM {table} WHERE tsv @@ ({tsquery}) AND scope_id = %s"
        f"{owner_sql(owner_ids, 'owner_id')}"
        " ORDER BY rank DESC, row_id LIMIT %s) top ORDER BY rank DESC, row_id"
    )
    params: list[Any] = [_LT_STAND_IN, *terms, _headline_options(), weights]
    params += [*terms, *terms, scope_id, *(owner_ids or ()), k]
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return [
            (row_id, float(negated), snippet.replace(_LT_STAND_IN, "<"))
            for row_id, negated, snippet in cur.fetchall()
            if negated < 0
        ]


def pg_vector_candidates(
    index: TextIndex,
    *,
    vector: np.ndarray,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    k: int,
    exact: bool = False,
) -> list[tuple[int, float, np.ndarray | None]]:
    """(row_id, cosine distance, vector) of the nearest rows, nearest first."""
    if k <= 0:
        return []
    table = pg_vector_table(index)
    query = vector_literal(vector)
    wanted = k if exact else max(k * settings.SEARCH_PG_OVERSAMPLE, k)
    inner = (
        f"SELECT row_id, embedding FROM {table} WHERE scope_id = %s"
        f"{owner_sql(owner_ids, 'owner_id')}"
        " ORDER BY embedding <=> %s::vector LIMIT %s"
    )
    sql = (
        "SELECT row_id, embedding <=> %s::vector AS distance,"
        " vector_send(embedding)"
        f" FROM ({inner}) candidates ORDER BY distance, row_id LIMIT %s"
    )
    params = [query, scope_id, *(owner_ids or ()), query, wanted, k]
    if exact:
        local = {"enable_indexscan": "off"}
    else:
        ef_search = max(settings.SEARCH_PG_EF_SEARCH, wanted)
        local = {
            "hnsw.ef_search": str(min(ef_search, 1000)),
            "hnsw.iterative_scan": "relaxed_order",
        }
    with connection.cursor() as cur:
        _execute_with_local_settings(cur, local, sql, params)
        return [
            (row_id, float(distance), vector_from_binary(data))
            for row_id, distance, data in cur.fetchall()
        ]


def _execute_with_local_settings(
    cur: Any, local: dict[str, str], sql: str, params: Sequence[Any]
) -> None:
    """Run ``sql`` with ``local`` settings, in one round trip to the server.

    The settings are made by ``set_config(..., true)`` in a statement sent
    with the query (Django's psycopg cursors bind parameters on the client,
    so one execute may carry two statements): both run in one transaction,
    the caller's or the implicit one of a multi-statement query, and the
    settings end with it.  A transaction of its own (BEGIN, the settings,
    the query, COMMIT) would cost three more round trips per search.  The
    cursor is left on the query's rows.
    """
    configs = ", ".join(["set_config(%s, %s, true)"] * len(local))
    cur.execute(
        f"SELECT {configs}; {sql}",
        [value for pair in local.items() for value in pair] + list(params),
    )
    cur.nextset()
