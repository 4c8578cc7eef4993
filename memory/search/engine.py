"""The search engine: FTS5 + sqlite-vec over any table of rows with text.

It knows no memory model.  A ``TextIndex`` (``memory.search.index``) names
the FTS5 and vec0 tables beside a base table, keyed by the base row's
primary key, with two filter columns: ``scope_id`` (the constellation) and
``owner_id`` (the agent).  This module never decides who may see what:
callers pass a queryset of the rows the caller may receive (``allowed``),
already narrowed by their filters, and candidates outside it are dropped
(``memory.search.permitted``).

Modes: ``fts`` (BM25 over a row's text and, at a lower weight, the text of
the rows before it), ``vector`` (KNN), ``hybrid`` (the top candidates of
both, fused by ``Fusion``: weighted scaled scores by default, or Reciprocal
Rank Fusion, k=60) and ``auto`` (hybrid when a query vector is available,
else fts).  Any text is a valid query
(``memory.search.query``).  Exact KNN is computed from vec0's chunks when
their layout is known (``memory.search.chunks``), else by vec0 itself.

On PostgreSQL the two candidate lists come from ``memory.search.postgres``
(tsvector with ts_rank_cd, pgvector's HNSW index); everything after them
is shared.  On any other database search falls back to a plain
``icontains`` keyword scan (``SearchOutcome.degraded`` says so).
"""

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import partial
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Model, Q, QuerySet

from memory.search.chunks import (
    chunks_exact_knn,
    chunks_readable,
    held_hamming_knn,
)
from memory.search.index import (
    TextIndex,
    as_blob,
    backend_available,
    cosine_from_l2,
    dated_match,
    index_dates,
    index_vectors,
    on_postgresql,
    owner_sql,
    unit_vector,
)
from memory.search.late import LateInteraction
from memory.search.pending import PendingRows, pending_rows
from memory.search.permitted import PermittedRows
from memory.search.postgres import pg_fts_candidates, pg_vector_candidates
from memory.search.query import (
    MARK_CLOSE,
    MARK_OPEN,
    MAX_QUERY_TERMS,
    SNIPPET_TOKENS,
    STOP_WORDS,
    TERM,
    fts_query,
    highlight,
    normalised_text,
    render_snippet,
)
from memory.search.rerank import RerankFailed, RerankStage
from memory.search.when import DateSpan, tells_time

SEARCH_MODES: tuple[str, ...] = ("fts", "vector", "hybrid", "auto")


RRF_K = 60


DEDUP_COSINE = 0.95


# Duplicates are looked for among the first ``limit`` times this many
# candidates: the rest never reach the results.
DEDUP_WINDOW = 3


MAX_CANDIDATES = 4000


@dataclass
class Hit:
    """One result: the row, where it came from and how it scored."""

    row: Any  # the row's id while ranking; the row once the head is fetched
    snippet_html: str
    fts_rank: int | None = None
    bm25: float | None = None
    vector_rank: int | None = None
    vector_distance: float | None = None
    keyword_part: float | None = None  # the keyword list's share of the fused
    vector_part: float | None = None  # the vector list's share
    time_part: float | None = None  # what the time stage added (dated within)
    late_part: float | None = None  # what the late-interaction stage added
    fused_score: float = 0.0
    relevance: float | None = None
    rerank_score: float | None = None  # the re-rank model's, when it ran
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
    # Why the re-rank stage kept the fusion order (empty: it ran, or was off).
    rerank_failed: str = ""
    # Rows the caller may see still waiting for their vector, when the
    # search used vectors (they were matched by keywords only).
    pending_embeddings: int = 0


FUSION_METHODS: tuple[str, ...] = ("weighted", "rrf")


@dataclass(frozen=True)
class Fusion:
    """How the keyword and vector lists of a hybrid search become one.

    ``weighted``: each list's scores scaled to [0, 1] (BM25 over the best
    BM25 of the list; cosine similarity min-max over the list), then
    ``keyword_weight`` * keyword + (1 - ``keyword_weight``) * vector, so a
    strong match in one list outweighs a weak one in both.  ``rrf``:
    Reciprocal Rank Fusion (k=60), each list's term times its weight.
    ``depth``: how many candidates each list brings at least.  ``context_weight``: the
    BM25 weight of a match in the rows before a row (its ``context``).
    """

    method: str = "weighted"
    keyword_weight: float = 0.6
    context_weight: float = 0.2
    date_weight: float = 0.2
    depth: int = 40

    def fuse(self, hits: Iterable[Hit], *, both: bool) -> None:
        """Set each hit's ``keyword_part``, ``vector_part``, ``fused_score``."""
        hits = list(hits)
        kw = self.keyword_weight if both else 1.0
        vw = 1.0 - self.keyword_weight if both else 1.0
        if self.method == "rrf":
            for hit in hits:
                if hit.fts_rank is not None:
                    hit.keyword_part = kw / (RRF_K + hit.fts_rank)
                if hit.vector_rank is not None:
                    hit.vector_part = vw / (RRF_K + hit.vector_rank)
        else:
            best = max((-h.bm25 for h in hits if h.bm25 is not None), default=0.0)
            sims = [1.0 - h.vector_distance for h in hits if h.vector_rank]
            low, high = min(sims, default=0.0), max(sims, default=0.0)
            for hit in hits:
                if hit.bm25 is not None and best > 0:
                    hit.keyword_part = kw * max(0.0, -hit.bm25) / best
                if hit.vector_distance is not None and hit.vector_rank:
                    sim = 1.0 - hit.vector_distance
                    spread = (sim - low) / (high - low) if high > low else 1.0
                    hit.vector_part = vw * spread
        for hit in hits:
            hit.fused_score = (hit.keyword_part or 0.0) + (hit.vector_part or 0.0)

    def keyword_columns(self) -> str:
        """The BM25 weight of each column a keyword search matches, in words."""
        columns = ["own text 1"]
        if self.context_weight:
            columns.append(f"rows before it {self.context_weight:g}")
        if self.date_weight:
            columns.append(f"date in words {self.date_weight:g}")
        return ", ".join(columns)

    def describe(self) -> str:
        """The method, its weights and the depth, in words."""
        if self.method == "rrf":
            detail = f"reciprocal rank (k={RRF_K}), keywords {self.keyword_weight:g}"
        else:
            detail = (
                f"weighted: keywords {self.keyword_weight:g},"
                f" meaning {1 - self.keyword_weight:g}"
            )
        return f"{detail}; {self.depth} candidates a list"


@dataclass(frozen=True)
class Rerank:
    """Relevance: importance * rate^hours * (1 + ln(1 + accesses))."""

    decay_rate: float
    now: datetime

    def relevance(self, row: Any) -> float:
        importance = float(getattr(row, "importance", 0.5))
        last = getattr(row, "accessed_at", None) or row.created_at
        hours = max(0.0, (self.now - last).total_seconds() / 3600.0)
        accesses = int(getattr(row, "access_count", 0))
        return importance * self.decay_rate**hours * (1.0 + math.log1p(accesses))

    def describe(self) -> str:
        return f"importance, recency (decay {self.decay_rate:g}/h), use"


# Days after a span a row about it may be dated: a day is told of in the
# days that follow it ("yesterday I ...").
TOLD_AFTER_DAYS = 2


# Spans of more days than this favour the rows found but add no candidates
# (the keyword query would name every day).
MATCH_DAYS_MAX = 45


@dataclass(frozen=True)
class TimeStage:
    """Rows dated within the spans a question names (``memory.search.when``),
    or up to ``TOLD_AFTER_DAYS`` after one, gain ``weight`` times the best
    fused score; on SQLite the keyword matches dated within short spans
    join the candidates first.  When the question asks for a time
    (``asked``: ``memory.search.when.time_asked``), the rows whose text
    tells that kind of time (``tells_time``) gain ``told_weight`` times the
    best fused score."""

    spans: tuple[DateSpan, ...]
    weight: float
    asked: str = ""
    told_weight: float = 0.0

    def favours(self, day: date) -> bool:
        after = timedelta(days=TOLD_AFTER_DAYS)
        return any(span.start <= day <= span.end + after for span in self.spans)

    def favours_text(self, text: str) -> bool:
        return (
            bool(self.asked) and self.told_weight > 0 and tells_time(self.asked, text)
        )

    def match_days(self) -> list[date]:
        """The days whose rows are searched apart (none for long spans)."""
        days: list[date] = []
        for span in self.spans:
            count = (span.end - span.start).days + 1 + TOLD_AFTER_DAYS
            if count <= MATCH_DAYS_MAX:
                days += [span.start + timedelta(days=i) for i in range(count)]
        return list(dict.fromkeys(days))[:MATCH_DAYS_MAX]

    def describe(self) -> str:
        parts = []
        if self.spans:
            named = "; ".join(span.describe() for span in self.spans)
            parts.append(
                f"{named}; rows dated within (or {TOLD_AFTER_DAYS} days after)"
                f" +{self.weight:g} of the best score"
            )
        if self.asked and self.told_weight > 0:
            parts.append(
                f"asks {self.asked}: rows that tell one"
                f" +{self.told_weight:g} of the best score"
            )
        return "; ".join(parts)


def fts_candidates(
    index: TextIndex,
    *,
    query: str,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    k: int,
    context_weight: float = 0.0,
    date_weight: float = 0.0,
    within: str = "",
) -> list[tuple[int, float, str]]:
    """(row_id, bm25, snippet) of the best ``k`` keyword matches.

    BM25 weighs a match in the row's own text 1, in its ``context`` column
    (the rows before it) ``context_weight`` and in its ``dated`` column
    (its date in words) ``date_weight``; a column of weight 0 is not
    searched (a match there alone would score 0).  ``within``: an FTS5
    expression the ``dated`` column must match too (``dated_match``;
    SQLite only).  On PostgreSQL ``ts_rank_cd`` weighs the same three texts
    with the same weights (``memory.search.postgres``).
    """
    if not query:
        return []
    if on_postgresql():
        return pg_fts_candidates(
            index,
            query=query,
            scope_id=scope_id,
            owner_ids=owner_ids,
            k=k,
            context_weight=context_weight,
            date_weight=date_weight,
        )
    columns = ["content"]
    columns += ["context"] if context_weight else []
    columns += ["dated"] if date_weight else []
    query = f"{{{' '.join(columns)}}} : ({query})"
    if within:
        query = f"({query}) AND ({{dated}} : ({within}))"
    weights = f"1.0, 0.0, 0.0, {float(context_weight)!r}, {float(date_weight)!r}"
    # ``ORDER BY rank`` with the ranking given by ``rank MATCH``: FTS5
    # sorts its matches by that BM25 itself and hands them over best
    # first, so SQLite stops at the limit: the scope and owner (UNINDEXED
    # columns, one content-table read each) are checked and the snippet
    # made only for the rows read until ``k`` pass, not for every match as
    # under ``ORDER BY bm25(...)``, which SQLite sorts after computing
    # every output column of every matching row.  Same scores, same order.
    sql = (
        f"SELECT rowid, rank,"
        f" snippet({index.fts_table}, 0, %s, %s, '…', {SNIPPET_TOKENS})"
        f" FROM {index.fts_table} WHERE {index.fts_table} MATCH %s"
        " AND rank MATCH %s AND scope_id = %s"
    )
    sql += owner_sql(owner_ids, "owner_id")
    params = [
        MARK_OPEN,
        MARK_CLOSE,
        query,
        f"bm25({weights})",
        scope_id,
        *(owner_ids or ()),
    ]
    if within:
        # Unordered, sorted here: under ``ORDER BY rank`` FTS5 scores
        # every match, of every scope, before the scope is checked, and
        # few of the matches dated within a few days are the caller's.
        # Unordered, SQLite checks the scope and owner first and computes
        # ``rank`` and the snippet only for the rows that pass.
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return sorted(cur.fetchall(), key=lambda hit: hit[1])[:k]
    with connection.cursor() as cur:
        cur.execute(sql + " ORDER BY rank LIMIT %s", [*params, k])
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
    chunks vec0 stores (``chunks_exact_knn``), or by vec0's own KNN (L2,
    turned into cosine distance) when ``SEARCH_EXACT_KNN`` is "vec0" or
    the storage is not one ``chunks_readable`` knows.
    Quantised: the ``k * SEARCH_QUANTISED_OVERSAMPLE`` rows nearest by
    Hamming distance over the binary vectors (ranked by numpy over the
    scope's bits held in memory, ``held_hamming_knn``; or with "vec0", a
    storage it does not know or a scope too large to hold, by vec0's KNNs,
    one per shard) are re-scored exactly against their float vectors; all
    re-scored ones are returned.
    On PostgreSQL: pgvector's HNSW index, re-scored exactly
    (``memory.search.postgres``); ``quantised`` has no meaning there.
    """
    if on_postgresql():
        return pg_vector_candidates(
            index, vector=vector, scope_id=scope_id, owner_ids=owner_ids, k=k
        )
    numpy_knn = settings.SEARCH_EXACT_KNN == "numpy" and chunks_readable(index)
    if not quantised and numpy_knn:
        return chunks_exact_knn(
            index, unit=unit_vector(vector), scope_id=scope_id, owner_ids=owner_ids, k=k
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
            f"{owner_sql(owner_ids, 'v.owner_id')} ORDER BY v.distance"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [as_blob(unit_vector(vector)), k, scope_id, *owner_params])
            return [
                (
                    row_id,
                    cosine_from_l2(distance),
                    None if blob is None else np.frombuffer(blob, dtype=np.float32),
                )
                for row_id, distance, blob in cur.fetchall()
            ]
    coarse_k = min(k * settings.SEARCH_QUANTISED_OVERSAMPLE, MAX_CANDIDATES)
    coarse = None
    if numpy_knn and chunks_readable(index, binary=True):
        coarse = held_hamming_knn(
            index, vector=vector, scope_id=scope_id, owner_ids=owner_ids, k=coarse_k
        )
    if coarse is None:
        coarse = _vec0_hamming_knn(
            index,
            blob=as_blob(vector),
            scope_id=scope_id,
            owner_ids=owner_ids,
            k=coarse_k,
        )
    if not coarse:
        return []
    keys = [row_id for row_id, _blob in coarse]
    matrix = np.frombuffer(b"".join(b for _id, b in coarse), dtype=np.float32).reshape(
        len(coarse), -1
    )
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(vector) or 1.0)
    distances = 1.0 - (matrix @ vector) / np.where(norms == 0, 1.0, norms)
    return [(keys[i], float(distances[i]), matrix[i]) for i in np.argsort(distances)]


def _vec0_hamming_knn(
    index: TextIndex,
    *,
    blob: bytes,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    k: int,
) -> list[tuple[int, bytes]]:
    """(row id, float vector blob) of about ``k`` rows nearest by Hamming
    distance, by vec0's KNN over each shard of the binary table."""
    per_shard = -(-k // index.shards)
    one = (
        f"SELECT rowid, vector FROM {index.bin_table}"
        " WHERE embedding MATCH vec_quantize_binary(%s) AND k = %s"
        f" AND scope_id = %s AND shard = %s{owner_sql(owner_ids, 'owner_id')}"
    )
    owner_params = list(owner_ids) if owner_ids is not None else []
    params: list[Any] = []
    for shard in range(index.shards):
        params += [blob, per_shard, scope_id, shard, *owner_params]
    with connection.cursor() as cur:
        cur.execute(" UNION ALL ".join([one] * index.shards), params)
        return list(cur.fetchall())


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
    allowed: QuerySet | PermittedRows,
    scope_id: int,
    owner_ids: Sequence[int] | None = None,
    mode: str = "auto",
    limit: int = 10,
    query_vector: Callable[[str], np.ndarray | None] | None = None,
    rerank: Rerank | None = None,
    fusion: Fusion | None = None,
    quantised: bool | None = None,
    degraded_reason: str = "",
    reranker: RerankStage | None = None,
    when: TimeStage | None = None,
    late: LateInteraction | None = None,
) -> SearchOutcome:
    """Search ``index`` for ``text`` among the rows of ``allowed`` (a
    queryset, or its ``PermittedRows`` compiled already).

    ``query_vector`` embeds the query (None when no model: vector and
    hybrid then fall back to fts, and ``degraded`` says why).  Candidates
    are the top of each list (a pool of ``4 * limit``, at least 40); when
    the caller's filters drop too many, the pool grows and is searched
    again, up to ``MAX_CANDIDATES``.  ``quantised`` None: the quantised
    path when ``SEARCH_VECTOR_QUANTISED`` is on, and for hybrid searches of
    scopes larger than ``SEARCH_QUANTISED_ABOVE`` rows.

    The stages, each timed in ``timings_ms``: embedding the query, the
    candidate lists within what the caller may see (:func:`_candidates`),
    the rows still waiting for their vector (``memory.search.pending``:
    counted in ``pending_embeddings``; a vector search matches them by
    keywords, :func:`_pending_keyword_hits`), fusing them
    (:func:`_fused`), the optional time stage favouring the rows dated
    within the spans the query names (:func:`_time_favoured`), the optional
    late interaction (:func:`_late_rescored`; its failure leaves the order
    as it was and says why in ``degraded``), the optional relevance rerank
    (:func:`_reranked`), the optional re-rank model
    (:func:`_model_reranked`, whose failure leaves the order as it was and
    says why in ``rerank_failed``), collapsing near-duplicates
    (:func:`_dedup`), and the rows and snippets of the results
    (:func:`_results`).
    """
    started = time.perf_counter()
    fusion = fusion or Fusion()
    if mode not in SEARCH_MODES:
        raise ValueError(f"unknown search mode {mode!r}")
    if not backend_available():
        if isinstance(allowed, PermittedRows):
            allowed = allowed.allowed()
        return _fallback_scan(allowed, text, limit, mode=mode)
    timings: dict[str, float] = {}
    vector, degraded = _query_embedding(
        text, mode, query_vector, degraded_reason, timings
    )
    used = "fts" if vector is None else ("hybrid" if mode == "auto" else mode)
    quantised = _quantised_path(index, used=used, scope_id=scope_id, asked=quantised)
    permitted_rows = (
        allowed if isinstance(allowed, PermittedRows) else PermittedRows(allowed)
    )
    fts_hits, vec_hits, texts = _candidates(
        index,
        text=text,
        vector=vector,
        used=used,
        scope_id=scope_id,
        owner_ids=owner_ids,
        limit=limit,
        fusion=fusion,
        quantised=quantised,
        permitted_rows=permitted_rows,
        timings=timings,
        when=when,
    )
    pending = PendingRows()
    if vector is not None and not permitted_rows.empty:
        t0 = time.perf_counter()
        pending = pending_rows(
            index, scope_id=scope_id, owner_ids=owner_ids, permitted_rows=permitted_rows
        )
        timings["pending"] = _ms(t0)
    if pending.count and used == "vector":
        fts_hits = _pending_keyword_hits(
            index,
            text=text,
            scope_id=scope_id,
            owner_ids=owner_ids,
            limit=limit,
            fusion=fusion,
            pending=pending,
            timings=timings,
        )
        texts.update({row_id: pending.texts[row_id] for row_id, *_ in fts_hits})
    ordered, vectors, snippets = _fused(fts_hits, vec_hits, texts, fusion=fusion)
    if when is not None:
        # Without a later stage re-ordering them, only the candidates that
        # can reach the duplicates' window matter.
        later = late is not None or rerank is not None or reranker is not None
        keep = None if later else limit * DEDUP_WINDOW
        _time_favoured(index, ordered, when, texts, timings, keep=keep)
    if late is not None:
        failed = _late_rescored(ordered, late, text=text, texts=texts, timings=timings)
        degraded = "; ".join(part for part in (degraded, failed) if part)
    rows: dict[int, Any] | None = None
    if rerank is not None:
        ordered, rows = _reranked(ordered, rerank, permitted_rows, timings)
    rerank_failed = ""
    if reranker is not None:
        rerank_failed = _model_reranked(
            ordered, reranker, text=text, texts=texts, timings=timings
        )
    t0 = time.perf_counter()
    # No query vector: duplicates by text only.
    known = vectors if vector is not None else None
    final = _dedup(index, ordered, limit, texts=texts, vectors=known)
    timings["dedup"] = _ms(t0)
    final = _results(
        final,
        text=text,
        rows=rows,
        snippets=snippets,
        texts=texts,
        permitted_rows=permitted_rows,
        timings=timings,
    )
    timings["total"] = _ms(started)
    return SearchOutcome(
        final,
        mode,
        used,
        degraded,
        timings,
        quantised=quantised and used != "fts",
        rerank_failed=rerank_failed,
        pending_embeddings=pending.count,
    )


def _query_embedding(
    text: str,
    mode: str,
    query_vector: Callable[[str], np.ndarray | None] | None,
    reason: str,
    timings: dict[str, float],
) -> tuple[np.ndarray | None, str]:
    """The query's vector for the modes that use one (None without a
    model), and why the search is degraded (empty: it is not)."""
    if mode not in ("vector", "hybrid", "auto"):
        return None, ""
    t0 = time.perf_counter()
    vector = query_vector(text[:4000]) if query_vector else None
    timings["embed"] = _ms(t0)
    if vector is None:
        return None, reason or "no query embedding; keyword search only"
    return vector, ""


def _quantised_path(
    index: TextIndex, *, used: str, scope_id: int, asked: bool | None
) -> bool:
    """Whether the vector list takes the quantised path (see :func:`search`)."""
    if on_postgresql():
        return False  # HNSW is PostgreSQL's one vector path
    if asked is not None:
        return asked
    return settings.SEARCH_VECTOR_QUANTISED or (
        used == "hybrid" and scope_is_large(index, scope_id=scope_id)
    )


def _candidates(
    index: TextIndex,
    *,
    text: str,
    vector: np.ndarray | None,
    used: str,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    limit: int,
    fusion: Fusion,
    quantised: bool,
    permitted_rows: PermittedRows,
    timings: dict[str, float],
    when: TimeStage | None = None,
) -> tuple[
    list[tuple[int, float, str]],
    list[tuple[int, float, np.ndarray | None]],
    dict[int, str],
]:
    """The keyword and vector candidate lists and the texts of the
    candidates the caller may see; the lists grow (fourfold a round, up to
    ``MAX_CANDIDATES``) while the caller's filters leave fewer than
    ``limit`` of full lists."""
    fts_q = fts_query(text)
    pool = max(limit * 4, fusion.depth)
    # The vector list fused is twice the limit deep on either path.  vec0's
    # KNN cost grows with k (steeply for the binary table): the quantised
    # coarse pass asks for the limit, times the oversample.
    vec_k = max(limit * 2, fusion.depth)
    knn_k = limit if quantised else vec_k
    fts_hits: list[tuple[int, float, str]] = []
    vec_hits: list[tuple[int, float, np.ndarray | None]] = []
    texts: dict[int, str] = {}
    while not permitted_rows.empty:
        if used in ("fts", "hybrid"):
            t0 = time.perf_counter()
            keywords = partial(
                fts_candidates,
                index,
                query=fts_q,
                scope_id=scope_id,
                owner_ids=owner_ids,
                k=pool,
                context_weight=fusion.context_weight,
                date_weight=fusion.date_weight,
            )
            fts_hits = keywords()
            days = when.match_days() if when is not None else []
            if days and not on_postgresql():
                fts_hits = _with_dated(fts_hits, keywords(within=dated_match(days)))
            timings["fts"] = _ms(t0)
        if vector is not None:
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
    return fts_hits, vec_hits, texts


def _pending_keyword_hits(
    index: TextIndex,
    *,
    text: str,
    scope_id: int,
    owner_ids: Sequence[int] | None,
    limit: int,
    fusion: Fusion,
    pending: PendingRows,
    timings: dict[str, float],
) -> list[tuple[int, float, str]]:
    """The keyword list of a vector search: the rows without a vector yet
    that match ``text`` by keywords, which the vector list cannot hold."""
    t0 = time.perf_counter()
    found = fts_candidates(
        index,
        query=fts_query(text),
        scope_id=scope_id,
        owner_ids=owner_ids,
        k=max(limit * 4, fusion.depth, pending.count),
        context_weight=fusion.context_weight,
        date_weight=fusion.date_weight,
    )
    timings["fts"] = _ms(t0)
    return [hit for hit in found if hit[0] in pending.texts]


def _with_dated(
    fts_hits: list[tuple[int, float, str]], dated: list[tuple[int, float, str]]
) -> list[tuple[int, float, str]]:
    """The keyword list with the matches dated within the time stage's
    days added, best BM25 first (their BM25 is on the same scale: the same
    query and weights, over fewer rows)."""
    known = {h[0] for h in fts_hits}
    merged = fts_hits + [h for h in dated if h[0] not in known]
    return sorted(merged, key=lambda h: h[1])


def _time_favoured(
    index: TextIndex,
    ordered: list[Hit],
    when: TimeStage,
    texts: dict[int, str],
    timings: dict[str, float],
    *,
    keep: int | None = None,
) -> None:
    """Add the time stage's shares to the candidates it favours (their
    ``time_part``, in the fused score) and re-order ``ordered`` in place.

    ``keep``: only the first ``keep`` candidates after the stage matter;
    a candidate that could not reach them with every share added is left
    as it is (its dates and text not read): the first ``keep`` come out
    the same.  ``ordered`` arrives best fused score first.
    """
    if not ordered:
        return
    t0 = time.perf_counter()
    best = max(h.fused_score for h in ordered)
    reach = len(ordered)
    if (
        keep is not None
        and len(ordered) > keep
        and min(when.weight, when.told_weight) >= 0
    ):
        most = when.weight * best if when.spans else 0.0
        if when.asked and when.told_weight > 0:
            most += when.told_weight * best
        # Each of the first ``keep`` ends at least at its fused score, so
        # at least ``keep`` candidates end at ``floor`` or above, ahead of
        # any that end below it.
        floor = ordered[keep - 1].fused_score
        while reach > keep and ordered[reach - 1].fused_score + most < floor:
            reach -= 1
    considered = ordered[:reach]
    dates = (
        index_dates(index, row_ids=[h.row for h in considered]) if when.spans else {}
    )
    for hit in considered:
        day = dates.get(hit.row)
        share = when.weight * best if day is not None and when.favours(day) else 0.0
        if when.favours_text(texts[hit.row]):
            share += when.told_weight * best
        if share:
            hit.time_part = share
            hit.fused_score += share
            hit.score = hit.fused_score
    ordered.sort(key=lambda h: -h.score)
    timings["time"] = _ms(t0)


def _late_rescored(
    ordered: list[Hit],
    late: LateInteraction,
    *,
    text: str,
    texts: dict[int, str],
    timings: dict[str, float],
) -> str:
    """Add ``late.weight`` times the best fused score times each of the
    first ``late.depth`` candidates' MaxSim, scaled min-max over them, to
    its fused score and re-order ``ordered`` in place; why not (empty: it
    ran)."""
    head = ordered[: late.depth]
    if not head:
        return ""
    t0 = time.perf_counter()
    try:
        sims = late.scores(text, [texts[h.row] for h in head])
    except Exception as exc:  # no token vectors must not break search
        timings["late"] = _ms(t0)
        return f"late interaction failed: {exc}; fusion order"
    low, high = min(sims), max(sims)
    share = late.weight * max(h.fused_score for h in head)
    for hit, sim in zip(head, sims, strict=True):
        hit.late_part = share * ((sim - low) / (high - low) if high > low else 1.0)
        hit.fused_score += hit.late_part
        hit.score = hit.fused_score
    ordered.sort(key=lambda h: -h.score)
    timings["late"] = _ms(t0)
    return ""


def _fused(
    fts_hits: list[tuple[int, float, str]],
    vec_hits: list[tuple[int, float, np.ndarray | None]],
    texts: dict[int, str],
    *,
    fusion: Fusion,
) -> tuple[list[Hit], dict[int, np.ndarray], dict[int, str]]:
    """The permitted candidates (``texts``) as hits, best fused score first
    (their ``score`` the fused score), with the vectors the KNN returned and
    the keyword list's snippets, by row id."""
    hits: dict[int, Hit] = {}
    vectors: dict[int, np.ndarray] = {}
    snippets: dict[int, str] = {}
    kept_fts = [h for h in fts_hits if h[0] in texts]
    kept_vec = [h for h in vec_hits if h[0] in texts]
    for rank, (row_id, bm25, snippet) in enumerate(kept_fts, start=1):
        hit = hits[row_id] = Hit(row=row_id, snippet_html="")
        hit.fts_rank, hit.bm25 = rank, float(bm25)
        snippets[row_id] = snippet
    for rank, (row_id, distance, emb) in enumerate(kept_vec, start=1):
        hit = hits.setdefault(row_id, Hit(row=row_id, snippet_html=""))
        hit.vector_rank, hit.vector_distance = rank, distance
        if emb is not None:
            vectors[row_id] = emb
    fusion.fuse(hits.values(), both=bool(kept_fts) and bool(kept_vec))
    ordered = sorted(hits.values(), key=lambda h: -h.fused_score)
    for hit in ordered:
        hit.score = hit.fused_score
    return ordered, vectors, snippets


def _reranked(
    ordered: list[Hit],
    rerank: Rerank,
    permitted_rows: PermittedRows,
    timings: dict[str, float],
) -> tuple[list[Hit], dict[int, Any]]:
    """``ordered`` by fused score times relevance, and every candidate's row
    (the relevance needs them all); rows deleted meanwhile are left out."""
    t0 = time.perf_counter()
    rows = permitted_rows.instances([h.row for h in ordered])
    timings["rows"] = _ms(t0)
    ordered = [h for h in ordered if h.row in rows]  # deleted meanwhile
    for hit in ordered:
        hit.relevance = rerank.relevance(rows[hit.row])
        hit.score = hit.fused_score * hit.relevance
    ordered.sort(key=lambda h: -h.score)
    return ordered, rows


def _model_reranked(
    ordered: list[Hit],
    stage: RerankStage,
    *,
    text: str,
    texts: dict[int, str],
    timings: dict[str, float],
) -> str:
    """Re-order the first ``stage.depth`` of ``ordered`` (in place) as the
    re-rank model scores them; the rest follow as they were.  The scores
    those places had move with the places, so a re-ranked list still merges
    with other lists on the fused scale.  Whatever the model does wrong
    (fails, times out, answers nonsense) leaves the order as it was and
    returns why (empty: it ran)."""
    head = ordered[: stage.depth]
    if not head:
        return ""
    t0 = time.perf_counter()
    try:
        scores = stage.reranker.scores(text, [texts[h.row] for h in head])
        if len(scores) != len(head):
            raise RerankFailed(f"{len(scores)} scores for {len(head)} candidates")
    except Exception as exc:  # a broken backend must not break search
        timings["rerank"] = _ms(t0)
        reason = str(exc) if isinstance(exc, RerankFailed) else repr(exc)
        return f"re-rank ({stage.reranker.backend}) failed: {reason}; fusion order"
    places = sorted((h.score for h in head), reverse=True)
    # Stable: equal scores keep the fusion order.
    ranked = sorted(zip(scores, head, strict=True), key=lambda pair: -pair[0])
    for (score, hit), place in zip(ranked, places, strict=True):
        hit.rerank_score, hit.score = score, place
    ordered[: len(head)] = [hit for _score, hit in ranked]
    timings["rerank"] = _ms(t0)
    return ""


def _results(
    final: list[Hit],
    *,
    text: str,
    rows: dict[int, Any] | None,
    snippets: dict[int, str],
    texts: dict[int, str],
    permitted_rows: PermittedRows,
    timings: dict[str, float],
) -> list[Hit]:
    """The results with their rows (fetched now unless the rerank did:
    only the rows that reach the results become model instances) and their
    snippets (the keyword list's, else the text with the query's words
    marked)."""
    if rows is None:
        t0 = time.perf_counter()
        rows = permitted_rows.instances([h.row for h in final])
        timings["rows"] = _ms(t0)
        final = [h for h in final if h.row in rows]  # deleted meanwhile
    terms = TERM.findall(text)[:MAX_QUERY_TERMS]
    for hit in final:
        snippet = snippets.get(hit.row)
        hit.snippet_html = (
            render_snippet(snippet)
            if snippet is not None
            else highlight(texts[hit.row], terms)
        )
        hit.row = rows[hit.row]
    return final


def words_search(
    rows: Iterable[tuple[Any, str]],
    *,
    text: str,
    limit: int,
    fusion: Fusion | None = None,
    rerank: Rerank | None = None,
) -> list[Hit]:
    """The ``limit`` rows of ``rows`` (each with its text) best matching the
    words of ``text``, for rows with no index of their own (read from
    elsewhere, or few).

    A row scores by the share of the query's words it holds (stop words
    and single letters left out unless the query has nothing else; a query
    word matches the words that start with it, as snippets mark them);
    ties keep the order of ``rows``.  Each hit's ``fts_rank`` is its rank
    and its ``bm25`` minus that share, so ``fusion`` scales them as it
    scales an index's keyword list and the scores merge with the index
    searches'.  Rows holding none of the words are left out; ``rerank``
    weighs the rest by importance, recency and accesses as for an index
    search.
    """
    fusion = fusion or Fusion()
    words = [w.casefold() for w in TERM.findall(text)[:MAX_QUERY_TERMS]]
    # A one-letter word ("s" of "Ana's") would match most rows as a prefix.
    meaningful = [w for w in words if len(w) > 1 and w not in STOP_WORDS]
    terms = list(dict.fromkeys(meaningful or words))
    if not terms:
        return []
    scored: list[tuple[float, int, Any, str]] = []
    for position, (row, row_text) in enumerate(rows):
        held = set(TERM.findall(row_text.casefold()))
        found = sum(1 for t in terms if any(w.startswith(t) for w in held))
        if found:
            scored.append((found / len(terms), position, row, row_text))
    scored.sort(key=lambda item: (-item[0], item[1]))
    ranked = [
        (Hit(row=row, snippet_html="", fts_rank=rank, bm25=-share), row_text)
        for rank, (share, _position, row, row_text) in enumerate(scored, start=1)
    ]
    fusion.fuse((hit for hit, _text in ranked), both=False)
    for hit, _text in ranked:
        hit.score = hit.fused_score
        if rerank is not None:
            hit.relevance = rerank.relevance(hit.row)
            hit.score *= hit.relevance
    ranked.sort(key=lambda pair: -pair[0].score)
    for hit, row_text in ranked[:limit]:
        hit.snippet_html = highlight(row_text, terms)
    return [hit for hit, _text in ranked[:limit]]


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
    window = ordered[: limit * DEDUP_WINDOW]
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


def _fallback_scan(
    allowed: QuerySet, text: str, limit: int, *, mode: str
) -> SearchOutcome:
    """Without the search index: a plain keyword scan, said to be degraded."""
    degraded = f"search index unavailable on {connection.vendor}; plain keyword scan"
    terms = TERM.findall(text)[:8]
    if not terms:
        return SearchOutcome([], mode, "fts", degraded)
    condition = Q()
    for term in terms:
        condition |= Q(content__icontains=term)
    rows: list[Model] = list(allowed.filter(condition)[:limit])
    hits = [
        Hit(row, highlight(row.content, terms), score=1.0 / (RRF_K + i))
        for i, row in enumerate(rows, start=1)
    ]
    return SearchOutcome(hits, mode, "fts", degraded)


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)
