"""The PostgreSQL backend of the engine: tsvector ranking, pgvector's HNSW
path against exact, scoping inside the query, safe queries and snippets."""

import re
from typing import Any

import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memory.longterm.indexes import ARCHIVAL_INDEX
from memory.longterm.search import memory_search
from memory.longterm.services import archival_entry_create
from memory.search.engine import fts_candidates, vector_candidates
from memory.search.index import index_put_texts, index_put_vectors
from memory.search.postgres import pg_vector_candidates, tsquery_sql
from memory.search.query import fts_query
from pattern_site.kernel.actors import Actor
from tests.factories import AgentFactory

# Text, and whether it shares a word with "drop the table near the bar".
HOSTILE = [
    ('NEAR("x" -', True),
    ("foo & !bar | (baz <-> qux):*", True),
    ("'; DROP TABLE memory_archivalentry; --", True),
    ("a:* & b:A", False),
    ("\\ ' \" ( ) < > ! & | :", False),
    ("OR AND NOT", False),
    ("🦆🦆", False),
]

_TSQUERY_TEMPLATE = re.compile(
    r"^((plainto|phraseto)_tsquery\('english', %s\)( \|\| (?=\w))?)*$"
)

pgvector = pytest.mark.pgvector


@pytest.mark.parametrize(("text", "_finds"), HOSTILE)
def test_any_text_becomes_a_tsquery_of_parameters_only(text: str, _finds: bool):
    sql, params = tsquery_sql(fts_query(text))
    assert _TSQUERY_TEMPLATE.match(sql)
    assert sql.count("%s") == len(params)


@pgvector
@pytest.mark.parametrize(("text", "finds"), HOSTILE)
def test_hostile_queries_run_and_still_find_their_words(
    agent: Any, text: str, finds: bool
):
    archival_entry_create(agent=agent, content="drop the table near the bar")
    result = memory_search(actor=Actor.for_agent(agent), query=text, mode="fts")
    contents = [hit.row.content for _kind, hit in result.hits]
    assert contents == (["drop the table near the bar"] if finds else [])


@pgvector
def test_keyword_rank_prefers_denser_matches_and_marks_them(agent: Any):
    rows = [
        (1, 7, 70, "a heron, then another heron, heron everywhere"),
        (2, 7, 70, "one heron by a lake of many other birds and trees"),
        (3, 7, 70, "no birds here at all"),
        (4, 8, 70, "heron heron heron in another constellation"),
    ]
    index_put_texts(ARCHIVAL_INDEX, rows=rows)
    found = fts_candidates(
        ARCHIVAL_INDEX, query=fts_query("herons"), scope_id=7, owner_ids=None, k=10
    )
    assert [row_id for row_id, _r, _s in found] == [1, 2]
    assert found[0][1] < found[1][1] < 0  # negated ts_rank_cd: lower is better
    assert "\x02heron\x03" in found[1][2]


@pgvector
def test_snippets_keep_text_that_looks_like_html(agent: Any):
    archival_entry_create(agent=agent, content="The <b>heron</b> nests by a<b lake")
    result = memory_search(actor=Actor.for_agent(agent), query="heron", mode="fts")
    snippet = result.hits[0][1].snippet_html
    assert "&lt;b&gt;<mark>heron</mark>&lt;/b&gt;" in snippet
    assert "a&lt;b lake" in snippet


@pgvector
def test_vector_candidates_stay_inside_the_scope_and_the_owners(db: None):
    rng = np.random.default_rng(5)
    rows = [
        (row_id, 1 + row_id % 2, 10 + row_id % 3, rng.standard_normal(384))
        for row_id in range(1, 601)
    ]
    index_put_vectors(ARCHIVAL_INDEX, rows=rows)
    query = rng.standard_normal(384).astype(np.float32)
    for scope_id, owner_ids in ((1, None), (2, [10]), (1, [11, 12]), (2, [99])):
        found = vector_candidates(
            ARCHIVAL_INDEX, vector=query, scope_id=scope_id, owner_ids=owner_ids, k=30
        )
        ids = [row_id for row_id, _d, _v in found]
        assert all(row_id % 2 + 1 == scope_id for row_id in ids)
        if owner_ids is not None:
            assert all(10 + row_id % 3 in owner_ids for row_id in ids)
        assert len(ids) == (0 if owner_ids == [99] else 30)
        distances = [d for _r, d, _v in found]
        assert distances == sorted(distances)


@pgvector
def test_hnsw_recall_at_10_against_exact_is_at_least_095(db: None, settings: Any):
    """Clustered vectors (as text embeddings are), two scopes: the HNSW
    path with its iterative filtered scan finds what the exact scan finds,
    with exact distances."""
    settings.SEARCH_PG_EF_SEARCH = 100
    rng = np.random.default_rng(9)
    centres = rng.standard_normal((40, 384)).astype(np.float32)
    n = 4000
    vectors = centres[rng.integers(0, 40, n)] + 0.6 * rng.standard_normal((n, 384))
    index_put_vectors(
        ARCHIVAL_INDEX,
        rows=[(i + 1, 1 + i % 2, 10, v) for i, v in enumerate(vectors)],
    )
    with connection.cursor() as cur:
        # At this size the planner would rightly scan the table or the
        # scope's rows, which is exact: the HNSW path under test must be the
        # plan (the test's transaction rolls both back).
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("DROP INDEX memory_archivalentry_pgvector_scope")
    queries = centres[rng.integers(0, 40, 40)] + 0.6 * rng.standard_normal((40, 384))
    found = total = 0
    for query in queries:
        args = {"vector": query, "scope_id": 1, "owner_ids": None, "k": 10}
        exact = pg_vector_candidates(ARCHIVAL_INDEX, exact=True, **args)
        approx = pg_vector_candidates(ARCHIVAL_INDEX, **args)
        found += len({r for r, _d, _v in exact} & {r for r, _d, _v in approx})
        total += len(exact)
        for _row_id, distance, vector in approx:
            cosine = vector @ query / np.linalg.norm(vector) / np.linalg.norm(query)
            assert distance == pytest.approx(1 - cosine, abs=1e-4)
    assert total == 400
    assert "_hnsw" in _plan(vector=queries[0], scope_id=1, owner_ids=None, k=10)
    print(f"HNSW recall@10 against exact: {found / total:.3f}")
    assert found / total >= 0.95


@pgvector
def test_the_hnsw_settings_reach_the_search_they_are_sent_with(db: None):
    """Ten rows of one scope among 3,000 of another, the HNSW path forced:
    only the iterative scan set with the query finds all ten (a single
    pass of the index yields ``ef_search`` rows, nearly all filtered out)."""
    rng = np.random.default_rng(2)
    index_put_vectors(
        ARCHIVAL_INDEX,
        rows=[
            (i, 2 if i % 300 == 0 else 1, 10, rng.standard_normal(384))
            for i in range(1, 3001)
        ],
    )
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("DROP INDEX memory_archivalentry_pgvector_scope")
    query = rng.standard_normal(384)
    found = pg_vector_candidates(
        ARCHIVAL_INDEX, vector=query, scope_id=2, owner_ids=None, k=10
    )
    assert sorted(row_id for row_id, _d, _v in found) == list(range(300, 3001, 300))
    assert "_hnsw" in _plan(vector=query, scope_id=2, owner_ids=None, k=10)
    with connection.cursor() as cur:
        cur.execute("SELECT current_setting('hnsw.iterative_scan')")
        assert cur.fetchone()[0] == "relaxed_order"  # local to this transaction


def _plan(**args: Any) -> str:
    """The plan of the approximate vector query made with ``args``."""
    with CaptureQueriesContext(connection) as queries:
        pg_vector_candidates(ARCHIVAL_INDEX, **args)
    # One statement: the local settings, then the search.
    settings_sql, search_sql = queries.captured_queries[-1]["sql"].split("; ", 1)
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(settings_sql)
        cur.execute("EXPLAIN " + search_sql)
        return "\n".join(row[0] for row in cur.fetchall())


@pgvector
def test_another_constellations_entries_are_never_found(agent: Any):
    stranger = AgentFactory(name="Stranger")
    archival_entry_create(agent=stranger, content="secret heron location")
    archival_entry_create(agent=agent, content="my heron notes")
    for mode in ("fts", "auto"):
        result = memory_search(actor=Actor.for_agent(agent), query="heron", mode=mode)
        assert [h.row.content for _k, h in result.hits] == ["my heron notes"]
