"""The search engine on a labelled corpus, hostile queries and degradation."""

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coordination.actors import Actor
from memory.indexes import ARCHIVAL_INDEX
from memory.retrieval import index_put_vectors, vector_candidates
from memory.selectors import memory_search
from memory.services import archival_entry_create, embedding_backfill

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


def test_exact_vector_search_ranks_and_scores_by_cosine_whatever_the_lengths(
    agent: Any,
):
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
    # The vectors handed on (dedup) are the stored ones, not their units.
    by_pk = {pk: v for pk, _d, v in found}
    assert np.allclose(by_pk[entries[5].pk], vectors[5])
