"""The search engine on a labelled corpus, hostile queries and degradation."""

import json
from pathlib import Path
from typing import Any

import pytest

from coordination.actors import Actor
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
