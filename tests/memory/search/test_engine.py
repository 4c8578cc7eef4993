"""The search engine on a labelled corpus, hostile queries and degradation."""

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.db import connection, transaction

from memory.longterm.indexes import ARCHIVAL_INDEX
from memory.longterm.search import memory_search
from memory.longterm.services import archival_entry_create
from memory.models import ArchivalEntry
from memory.search import chunks, permitted
from memory.search.chunks import chunks_readable
from memory.search.engine import (
    Fusion,
    Hit,
    Rerank,
    fts_candidates,
    vector_candidates,
    words_search,
)
from memory.search.index import (
    date_words,
    dated_match,
    index_clear,
    index_delete,
    index_put_texts,
    index_put_vectors,
    owner_sql,
)
from memory.search.pipeline import embedding_backfill
from memory.search.query import fts_query
from pattern_site.kernel.actors import Actor

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)

CORPUS = json.loads((Path(__file__).parent / "corpus.json").read_text())


@pytest.fixture
def corpus_agent(agent: Any, embedding_model_loaded: Any) -> Any:
    ids = {}
    for key, text in CORPUS["facts"].items():
        ids[archival_entry_create(agent=agent, content=text).pk] = key
    embedding_backfill(batch=len(ids))
    agent.corpus_ids = ids
    return agent


def _recall_at_5(agent: Any, mode: str, kind: str | None = None) -> float:
    queries = [q for q in CORPUS["queries"] if kind is None or q["kind"] == kind]
    found = 0
    for item in queries:
        result = memory_search(
            actor=Actor.for_agent(agent), query=item["q"], mode=mode, limit=5
        )
        keys = [agent.corpus_ids[hit.row.pk] for _kind, hit in result.hits]
        found += item["answer"] in keys
    return found / len(queries)


def test_hybrid_recall_at_5_is_at_least_the_best_single_mode(corpus_agent: Any):
    fts = _recall_at_5(corpus_agent, "fts")
    vector = _recall_at_5(corpus_agent, "vector")
    hybrid = _recall_at_5(corpus_agent, "hybrid")
    print(f"recall@5 fts={fts:.2f} vector={vector:.2f} hybrid={hybrid:.2f}")
    assert hybrid >= max(fts, vector)
    assert hybrid > 0.9


def test_meaning_queries_need_vectors_and_code_queries_need_keywords(
    corpus_agent: Any,
):
    assert _recall_at_5(corpus_agent, "fts", "meaning") < 0.5
    assert _recall_at_5(corpus_agent, "vector", "meaning") >= 0.8
    assert _recall_at_5(corpus_agent, "fts", "exact") == 1.0


@pytest.mark.parametrize("engine", ["numpy", "vec0"])
def test_exact_vector_search_ranks_and_scores_by_cosine_whatever_the_lengths(
    engine: str, settings: Any, agent: Any
):
    settings.SEARCH_EXACT_KNN = engine
    rng = np.random.default_rng(4)
    scales = [0.1, 1.0, 7.5, 0.5, 3.0, 42.0]
    vectors = [rng.standard_normal(384).astype(np.float32) * s for s in scales]
    entries = [
        archival_entry_create(agent=agent, content=f"vector {i}")
        for i in range(len(vectors))
    ]
    index_put_vectors(
        ARCHIVAL_INDEX,
        rows=[
            (e.pk, agent.constellation_id, agent.pk, v)
            for e, v in zip(entries, vectors, strict=True)
        ],
    )
    query = vectors[2] * 0.3 + rng.standard_normal(384).astype(np.float32)
    found = vector_candidates(
        ARCHIVAL_INDEX,
        vector=query,
        scope_id=agent.constellation_id,
        owner_ids=[agent.pk],
        k=len(entries),
    )
    stored = np.stack(vectors)
    norms = np.linalg.norm(stored, axis=1) * np.linalg.norm(query)
    cosine = 1 - stored @ query / norms
    expected = sorted(zip(cosine, (e.pk for e in entries), strict=True))
    assert [pk for pk, _d, _v in found] == [pk for _d, pk in expected]
    assert [d for _pk, d, _v in found] == pytest.approx(
        [d for d, _pk in expected], abs=1e-5
    )
    # The vectors handed on (dedup) point the way the stored ones do.
    by_pk = {pk: v for pk, _d, v in found}
    for entry, vector in zip(entries, vectors, strict=True):
        handed = by_pk[entry.pk]
        cosine = handed @ vector / np.linalg.norm(handed) / np.linalg.norm(vector)
        assert cosine == pytest.approx(1.0, abs=1e-5)


@pytest.mark.sqlite
def test_numpy_and_vec0_exact_knn_agree_across_chunks_owners_and_deletes(
    db: None, settings: Any
):
    """The numpy KNN reads vec0's own storage: over several chunks (1,024
    slots each), two scopes and three owners, with deleted rows, it finds
    what vec0's KNN finds."""
    assert chunks_readable(ARCHIVAL_INDEX)
    rng = np.random.default_rng(11)
    rows = [
        (row_id, 1 + row_id % 2, 10 + row_id % 3, rng.standard_normal(384))
        for row_id in range(1, 2601)
    ]
    index_put_vectors(ARCHIVAL_INDEX, rows=rows)
    index_delete(ARCHIVAL_INDEX, row_ids=list(range(1, 2601, 7)))
    for query in rng.standard_normal((5, 384)).astype(np.float32):
        for scope_id, owner_ids in ((1, None), (2, [10]), (1, [11, 12]), (2, [99])):
            found = {}
            for engine in ("numpy", "vec0"):
                settings.SEARCH_EXACT_KNN = engine
                found[engine] = vector_candidates(
                    ARCHIVAL_INDEX,
                    vector=query,
                    scope_id=scope_id,
                    owner_ids=owner_ids,
                    k=25,
                )
            numpy_ids = [row_id for row_id, _d, _v in found["numpy"]]
            assert numpy_ids == [row_id for row_id, _d, _v in found["vec0"]]
            assert [d for _r, d, _v in found["numpy"]] == pytest.approx(
                [d for _r, d, _v in found["vec0"]], abs=1e-5
            )
            assert all(row_id % 7 != 1 for row_id in numpy_ids)
            assert all(row_id % 2 + 1 == scope_id for row_id in numpy_ids)
            if owner_ids is not None:
                assert all(10 + row_id % 3 in owner_ids for row_id in numpy_ids)
            assert len(numpy_ids) == (0 if owner_ids == [99] else 25)


@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
def test_exact_knn_outside_a_transaction_reads_in_its_own_and_ends_it(agent: Any):
    """Outside ``atomic`` the chunk list and the vector reads share a read
    transaction of their own, ended afterwards (no lock left behind)."""
    vectors = np.eye(3, 384, dtype=np.float32)
    index_put_vectors(
        ARCHIVAL_INDEX,
        rows=[
            (n + 1, agent.constellation_id, agent.pk, vector)
            for n, vector in enumerate(vectors)
        ],
    )
    try:
        assert not connection.connection.in_transaction
        found = vector_candidates(
            ARCHIVAL_INDEX,
            vector=vectors[1],
            scope_id=agent.constellation_id,
            owner_ids=[agent.pk],
            k=2,
        )
        assert [row_id for row_id, _d, _v in found] == [2, 1]
        assert not connection.connection.in_transaction
    finally:
        index_clear(ARCHIVAL_INDEX)  # the flush after this test leaves vec0 be


@pytest.mark.sqlite
def test_exact_knn_falls_back_to_vec0_on_a_storage_it_does_not_know(
    monkeypatch: Any, agent: Any
):
    monkeypatch.setattr(chunks, "CHUNK_LAYOUT_VERSIONS", frozenset({"v9.9"}))
    chunks_readable.cache_clear()
    try:
        assert not chunks_readable(ARCHIVAL_INDEX)
        vector = np.ones(384, dtype=np.float32)
        index_put_vectors(
            ARCHIVAL_INDEX, rows=[(5, agent.constellation_id, agent.pk, vector)]
        )
        found = vector_candidates(
            ARCHIVAL_INDEX,
            vector=vector,
            scope_id=agent.constellation_id,
            owner_ids=[agent.pk],
            k=3,
        )
        assert [(row_id, round(d, 5)) for row_id, d, _v in found] == [(5, 0.0)]
    finally:
        chunks_readable.cache_clear()


def test_a_row_deleted_between_the_candidates_and_the_rows_is_left_out(
    agent: Any, monkeypatch: Any
):
    """Candidates' texts and the results' whole rows are two statements: a
    row deleted in between drops out of the results (no KeyError)."""
    kept = archival_entry_create(agent=agent, content="harbour lights at dusk")
    gone = archival_entry_create(agent=agent, content="harbour cranes at dawn")
    fetch = permitted.PermittedRows.fetch

    def fetch_then_delete(self: Any, ids: Any) -> dict[int, str]:
        texts = fetch(self, ids)
        ArchivalEntry.objects.filter(pk=gone.pk).delete()
        return texts

    monkeypatch.setattr(permitted.PermittedRows, "fetch", fetch_then_delete)
    result = memory_search(actor=Actor.for_agent(agent), query="harbour", mode="fts")
    assert [hit.row.pk for _kind, hit in result.hits] == [kept.pk]


def _hits(*rows: tuple[int, float | None, float | None]) -> list[Hit]:
    """Hits of (id, bm25, cosine distance); ranks follow the given order."""
    hits = [Hit(row=row_id, snippet_html="") for row_id, _b, _d in rows]
    by_bm25 = sorted((r for r in rows if r[1] is not None), key=lambda r: r[1])
    by_distance = sorted((r for r in rows if r[2] is not None), key=lambda r: r[2])
    for hit, (_row_id, bm25, distance) in zip(hits, rows, strict=True):
        if bm25 is not None:
            hit.bm25 = bm25
            hit.fts_rank = [r[0] for r in by_bm25].index(hit.row) + 1
        if distance is not None:
            hit.vector_distance = distance
            hit.vector_rank = [r[0] for r in by_distance].index(hit.row) + 1
    return hits


def _fused_order(fusion: Fusion, hits: list[Hit]) -> list[int]:
    fusion.fuse(hits, both=True)
    return [h.row for h in sorted(hits, key=lambda h: -h.fused_score)]


def test_weighted_fusion_lets_a_strong_keyword_match_beat_weak_matches_in_both():
    # 1: the only strong keyword match; 2: weak in both lists; 3, 4: vectors.
    rows = [(1, -12.0, None), (2, -1.0, 0.55), (3, None, 0.30), (4, None, 0.50)]
    weighted = _fused_order(Fusion(method="weighted", keyword_weight=0.6), _hits(*rows))
    rrf = _fused_order(Fusion(method="rrf", keyword_weight=0.6), _hits(*rows))
    assert weighted[0] == 1
    assert rrf[0] == 2  # rank fusion rewards being in both lists, however weakly


def test_keyword_weight_moves_the_fusion_between_the_two_lists():
    rows = [(1, -10.0, 0.60), (2, -2.0, 0.20)]
    keywords = _fused_order(Fusion(keyword_weight=0.9), _hits(*rows))
    vectors = _fused_order(Fusion(keyword_weight=0.1), _hits(*rows))
    assert keywords == [1, 2] and vectors == [2, 1]


def test_fused_score_is_the_sum_of_the_two_parts_and_one_list_keeps_its_order():
    hits = _hits((1, -3.0, 0.4), (2, -6.0, None), (3, None, 0.1))
    Fusion(keyword_weight=0.3).fuse(hits, both=True)
    for hit in hits:
        parts = (hit.keyword_part or 0.0) + (hit.vector_part or 0.0)
        assert hit.fused_score == pytest.approx(parts)
    alone = _hits((1, -3.0, None), (2, -6.0, None), (3, -1.0, None))
    Fusion(keyword_weight=0.3).fuse(alone, both=False)
    assert [h.row for h in sorted(alone, key=lambda h: -h.fused_score)] == [2, 1, 3]
    assert max(h.fused_score for h in alone) == pytest.approx(1.0)


def test_date_words_name_a_day_as_questions_do():
    assert date_words(date(2024, 1, 7)) == "7 January Jan Sunday 2024"
    assert date_words(datetime(2023, 12, 29, 22, 42)) == "29 December Dec Friday 2023"
    assert date_words(None) == ""


def test_words_search_ranks_by_the_share_of_query_words_a_row_holds():
    rows = [
        ("weather", "Rain is expected on the weekend."),
        ("visit", "Ana is visiting in June; her flight lands at noon."),
        ("flight", "The flight to Lisbon was cancelled."),
        ("nothing", "Shopping list: tea, rice."),
    ]
    hits = words_search(rows, text="When is Ana's flight?", limit=10)
    # "when" and "is" are stop words, the "s" of "Ana's" a single letter.
    assert [h.row for h in hits] == ["visit", "flight"]
    assert [h.fts_rank for h in hits] == [1, 2]
    assert hits[0].score == 1.0 and 0 < hits[1].score < hits[0].score
    assert "<mark>Ana</mark>" in hits[0].snippet_html
    # A query word matches the words starting with it, as snippets mark them.
    prefixed = words_search(rows, text="visit", limit=10)
    assert [h.row for h in prefixed] == ["visit"]
    assert "<mark>visiting</mark>" in prefixed[0].snippet_html
    assert words_search(rows, text="🦊 ((", limit=10) == []
    assert len(words_search(rows, text="the flight", limit=1)) == 1


def test_words_search_scores_on_the_fusion_scale_and_reranks_by_age():
    rows = [("a", "budget review"), ("b", "budget")]
    rrf = words_search(rows, text="budget review", limit=5, fusion=Fusion("rrf"))
    assert [round(h.score, 5) for h in rrf] == [round(1 / 61, 5), round(1 / 62, 5)]

    class Dated:
        def __init__(self, name: str, hours: int) -> None:
            self.name = name
            self.created_at = NOW - timedelta(hours=hours)

    old, new = Dated("old", 500), Dated("new", 1)
    ranked = words_search(
        [(old, "budget review"), (new, "budget review")],
        text="budget review",
        limit=5,
        rerank=Rerank(decay_rate=0.99, now=NOW),
    )
    assert [h.row.name for h in ranked] == ["new", "old"]
    assert ranked[0].relevance > ranked[1].relevance


@pytest.mark.parametrize(
    ("context_weight", "date_weight", "expected"),
    [
        (0.5, 0.1, [1, 2, 3]),
        (0.1, 0.5, [1, 3, 2]),
        (0.5, 0.0, [1, 2]),
        (0.0, 0.5, [1, 3]),
        (0.0, 0.0, [1]),
    ],
)
def test_column_weights_rank_text_context_and_date_the_same_on_either_database(
    db: None, context_weight: float, date_weight: float, expected: list[int]
):
    """1 names the heron, 2 follows an entry that did (its context), 3 is
    dated a Sunday: the row's own text first, then the context and the
    date in the order of their weights; a weight of 0 leaves its column
    unsearched.  The filler rows give BM25 a corpus to weigh terms in, in
    which both words are as rare (PostgreSQL's ranking has no IDF)."""
    wednesday, sunday = date(2020, 1, 1), date(2024, 1, 7)
    rows = [
        (1, 7, 70, "the heron"),
        (2, 7, 70, "a quiet morning"),
        (3, 7, 70, "a quiet evening"),
        (4, 8, 70, "the heron"),
        (5, 8, 70, "nothing to see"),
        *((row_id, 7, 70, "nothing to see") for row_id in range(6, 16)),
    ]
    index_put_texts(
        ARCHIVAL_INDEX,
        rows=rows,
        contexts={2: "a grey heron landed"},
        dates={
            row_id: sunday if row_id in (3, 4, 5) else wednesday for row_id, *_ in rows
        },
    )
    found = fts_candidates(
        ARCHIVAL_INDEX,
        query=fts_query("heron on Sunday"),
        scope_id=7,
        owner_ids=[70],
        k=10,
        context_weight=context_weight,
        date_weight=date_weight,
    )
    assert [row_id for row_id, _score, _snippet in found] == expected
    assert "\x02heron\x03" in found[0][2]


@pytest.mark.sqlite
def test_keyword_candidates_are_those_of_sorting_every_match_by_bm25(db: None):
    """FTS5 sorts the matches itself (``ORDER BY rank``) and the scope and
    owner are checked on its sorted output: the same rows, scores, order and
    snippets as a plain ``ORDER BY bm25(...)`` over every match that passes
    the filters, with ties across the limit (rows of equal length holding
    the same word once), other scopes and owners, and the dated form."""
    rng = np.random.default_rng(5)
    words = ["heron", "kestrel", "wren", "finch", "plover", "tern", "rook", "crow"]
    rows = [
        (row_id, 1 + row_id % 3, 10 + row_id % 4, " ".join(rng.choice(words, 4)))
        for row_id in range(1, 601)
    ]
    days = {row_id: date(2024, 1, 1 + row_id % 20) for row_id, *_ in rows}
    index_put_texts(
        ARCHIVAL_INDEX,
        rows=rows,
        contexts={row_id: "a heron" for row_id in range(1, 601, 9)},
        dates=days,
    )
    table = ARCHIVAL_INDEX.fts_table
    weights = "1.0, 0.0, 0.0, 0.2, 0.2"
    bm25 = f"bm25({table}, {weights})"
    cases = [
        ("heron", 1, [10], 5, ""),
        ("heron kestrel", 2, None, 40, ""),
        ("wren", 3, [10, 11, 12], 7, ""),
        ("tern plover", 1, [99], 40, ""),
        ("finch", 2, None, 3, dated_match([date(2024, 1, 3), date(2024, 1, 9)])),
        ("wren rook", 1, [10, 12], 3, dated_match([date(2024, 1, 5)])),
        ("heron", 3, None, 40, dated_match([date(2024, 1, d) for d in range(1, 21)])),
    ]
    for text, scope_id, owner_ids, k, within in cases:
        query = f"{{content context dated}} : ({fts_query(text)})"
        if within:
            query = f"({query}) AND ({{dated}} : ({within}))"
        owners = owner_sql(owner_ids, "owner_id")
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT rowid, {bm25}, snippet({table}, 0, %s, %s, '…', 24)"
                f" FROM {table} WHERE {table} MATCH %s AND scope_id = %s{owners}"
                f" ORDER BY {bm25} LIMIT %s",
                ["\x02", "\x03", query, scope_id, *(owner_ids or ()), k],
            )
            expected = list(cur.fetchall())
        found = fts_candidates(
            ARCHIVAL_INDEX,
            query=fts_query(text),
            scope_id=scope_id,
            owner_ids=owner_ids,
            k=k,
            context_weight=0.2,
            date_weight=0.2,
            within=within,
        )
        assert found == expected, text
        assert len(found) == (0 if owner_ids == [99] else k), text


@pytest.mark.sqlite
def test_dated_match_finds_the_days_of_each_year_named(db: None):
    """Days of two years match the rows dated on them, not the same days of
    another year, and a row's score does not change with the other days
    named (matched by rows of another scope)."""
    dates = {
        1: date(2023, 12, 31),
        2: date(2024, 1, 1),
        3: date(2023, 1, 1),
        4: date(2024, 12, 31),
    }
    dates |= {row_id: date(2022, 5, row_id) for row_id in range(5, 13)}
    rows = [(row_id, 1, 10, "a finch") for row_id in dates]
    # Rows of another scope on the other days named below.
    dates |= {20 + d: date(2024, 1, d) for d in range(2, 6)}
    rows += [(20 + d, 2, 10, "a finch") for d in range(2, 6)]
    index_put_texts(ARCHIVAL_INDEX, rows=rows, dates=dates)

    def found(days: list[date]) -> dict[int, float]:
        hits = fts_candidates(
            ARCHIVAL_INDEX,
            query=fts_query("finch"),
            scope_id=1,
            owner_ids=None,
            k=10,
            date_weight=0.2,
            within=dated_match(days),
        )
        return {row_id: score for row_id, score, _snippet in hits}

    two = found([date(2023, 12, 31), date(2024, 1, 1)])
    assert set(two) == {1, 2}
    more = found([date(2023, 12, 31)] + [date(2024, 1, d) for d in range(1, 6)])
    assert more == two


@pytest.mark.sqlite
def test_quantised_knn_finds_the_nearest_by_hamming_across_shards_owners_and_deletes(
    db: None, settings: Any
):
    """The quantised path's coarse pass scans the bits read from vec0's
    binary chunks: over several chunks of every shard, two scopes and three
    owners, with deleted rows, it re-scores the rows whose sign bits are
    nearest the query's (vec0's KNN, one per shard, may miss some of them)."""
    assert chunks_readable(ARCHIVAL_INDEX, binary=True)
    settings.SEARCH_QUANTISED_OVERSAMPLE = 4
    rng = np.random.default_rng(12)
    vectors = {row_id: rng.standard_normal(384) for row_id in range(1, 9001)}
    rows = [(r, 1 + r % 2, 10 + r % 3, v) for r, v in vectors.items()]
    index_put_vectors(ARCHIVAL_INDEX, rows=rows)
    index_delete(ARCHIVAL_INDEX, row_ids=list(range(1, 9001, 7)))
    for query in rng.standard_normal((3, 384)).astype(np.float32):
        for scope_id, owner_ids in ((1, None), (2, [10]), (1, [11, 12]), (2, [99])):
            found = vector_candidates(
                ARCHIVAL_INDEX,
                vector=query,
                scope_id=scope_id,
                owner_ids=owner_ids,
                k=10,
                quantised=True,
            )
            eligible = [
                r
                for r in vectors
                if r % 7 != 1
                and r % 2 + 1 == scope_id
                and (owner_ids is None or 10 + r % 3 in owner_ids)
            ]
            if not eligible:
                assert found == []
                continue

            def hamming(r: int, query: np.ndarray = query) -> int:
                return int(np.count_nonzero((vectors[r] > 0) != (query > 0)))

            nearest = sorted(hamming(r) for r in eligible)[:40]
            assert sorted(hamming(r) for r, _d, _v in found) == nearest
            assert all(r in eligible for r, _d, _v in found)
            # Re-scored by cosine, nearest first.
            distances = [d for _r, d, _v in found]
            assert distances == sorted(distances)


@pytest.mark.sqlite
def test_held_bits_follow_every_write_to_the_scope_even_one_rolled_back(
    db: None, settings: Any, monkeypatch: pytest.MonkeyPatch
):
    """The quantised coarse pass holds a scope's bits between searches: a
    vector replaced, a row deleted, a scope cleared and a write rolled back
    are each seen by the next search, and a scope larger than the process
    may hold is searched by vec0's KNN with the same answer."""
    assert chunks_readable(ARCHIVAL_INDEX, binary=True)
    settings.SEARCH_QUANTISED_OVERSAMPLE = 4
    rng = np.random.default_rng(5)
    rows = [(r, 1, 10, rng.standard_normal(384)) for r in range(1, 3001)]
    index_put_vectors(ARCHIVAL_INDEX, rows=rows)
    query = rng.standard_normal(384).astype(np.float32)

    def first() -> int | None:
        found = vector_candidates(
            ARCHIVAL_INDEX,
            vector=query,
            scope_id=1,
            owner_ids=[10],
            k=10,
            quantised=True,
        )
        return found[0][0] if found else None

    before = first()
    assert before is not None and chunks._HELD
    # Row 77 takes the query's own vector: the nearest by any measure.
    index_put_vectors(ARCHIVAL_INDEX, rows=[(77, 1, 10, query)])
    assert first() == 77
    with pytest.raises(RuntimeError), transaction.atomic():
        index_delete(ARCHIVAL_INDEX, row_ids=[77])
        assert first() != 77
        raise RuntimeError("roll back")
    assert first() == 77
    # A write to another scope leaves this one's held bits as they were.
    held = dict(chunks._HELD)
    index_put_vectors(ARCHIVAL_INDEX, rows=[(5001, 2, 10, query)])
    assert first() == 77
    assert all(chunks._HELD[key] is kept for key, kept in held.items())
    monkeypatch.setattr(chunks, "HELD_ROWS_MAX", 100)
    chunks.held_forget()
    assert first() == 77  # by vec0's KNN, one per shard
    assert not chunks._HELD
    monkeypatch.undo()
    index_delete(ARCHIVAL_INDEX, row_ids=[77])
    assert first() not in (None, 77)
    index_clear(ARCHIVAL_INDEX)
    assert first() is None


def test_a_compiled_permission_lets_through_the_rows_of_the_values_given(
    agent: Any, other_agent: Any
):
    mine = archival_entry_create(agent=agent, content="the kestrel nests high")
    theirs = archival_entry_create(agent=other_agent, content="the kestrel hunts")
    own = permitted.PermittedQuery(
        lambda agent_id: ArchivalEntry.objects.select_related("agent").filter(
            agent_id=agent_id
        ),
        agent_id=-7_321_457,
    )
    ids = [mine.pk, theirs.pk]
    assert own.rows(agent_id=agent.pk).fetch(ids) == {mine.pk: mine.content}
    rows = own.rows(agent_id=other_agent.pk).instances(ids)
    assert list(rows) == [theirs.pk]
    assert rows[theirs.pk].agent.name == other_agent.name
    assert list(own.rows(agent_id=agent.pk).allowed()) == [mine]


def test_an_agents_search_never_finds_its_superseded_entries(agent: Any):
    kept = archival_entry_create(agent=agent, content="the otter sleeps at noon")
    merged = archival_entry_create(agent=agent, content="the otter sleeps late")
    ArchivalEntry.objects.filter(pk=merged.pk).update(superseded_at=datetime.now(UTC))
    result = memory_search(actor=Actor.for_agent(agent), query="otter", mode="fts")
    assert [hit.row.pk for _kind, hit in result.hits] == [kept.pk]
