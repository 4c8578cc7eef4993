"""Long-term memory services: index kept in step, dedup, filters, embeddings."""

import time
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.db import connection, transaction
from django.utils import timezone

from memory.longterm.indexes import ARCHIVAL_INDEX
from memory.longterm.search import SearchFilters, memory_search
from memory.longterm.services import (
    archival_entry_create,
    archival_entry_delete,
    archival_entry_update,
    conversation_start,
    messages_append,
    retrieval_config_update,
)
from memory.models import ArchivalEntry, EmbeddingState, RetrievalConfig
from memory.search import pipeline
from memory.search.embedder import embedding_status
from memory.search.index import index_vectors
from memory.search.pipeline import (
    embedding_backfill,
    embedding_flush,
    embeddings_refresh,
)
from memory.search.postgres_index import pg_table
from memory.search.tasks import embeddings_refresh_task
from pattern_site.health import health_report
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import Conflict, InvalidInput, LimitExceeded
from tests.memory.conftest import model_dir


def search(agent: Any, query: str, **kwargs: Any) -> list[str]:
    result = memory_search(actor=Actor.for_agent(agent), query=query, **kwargs)
    return [hit.row.content for _kind, hit in result.hits]


def fts_count(text: str) -> int:
    """Rows of the keyword index matching ``text``, on either vendor."""
    if connection.vendor == "postgresql":
        sql = (
            f"SELECT count(*) FROM {pg_table(ARCHIVAL_INDEX)}"
            " WHERE tsv @@ plainto_tsquery('english', %s)"
        )
    else:
        table = ARCHIVAL_INDEX.fts_table
        sql = f"SELECT count(*) FROM {table} WHERE {table} MATCH %s"
    with connection.cursor() as cur:
        cur.execute(sql, [text])
        return cur.fetchone()[0]


def test_archival_entry_create_is_keyword_only_and_validates(agent: Any):
    with pytest.raises(TypeError):
        archival_entry_create(agent, "positional")  # type: ignore[misc]
    with pytest.raises(InvalidInput, match="importance"):
        archival_entry_create(agent=agent, content="x", importance=1.5)
    with pytest.raises(InvalidInput, match="source"):
        archival_entry_create(agent=agent, content="x", source="oracle")
    entry = archival_entry_create(
        agent=agent,
        content="pruned log line",
        tags=["log:events"],
        metadata={"from": "log"},
        importance=0.2,
        source="system",
        label="log-1",
    )
    assert entry.tags == ["log:events"] and entry.source == "system"
    with pytest.raises(Conflict):
        archival_entry_create(agent=agent, content="y", label="log-1")


def test_update_of_content_reindexes_keywords_and_refreshes_the_vector(
    agent: Any, embedding_model_loaded: Any
):
    entry = archival_entry_create(agent=agent, content="the kayak is red")
    embeddings_refresh(kind="archival", row_ids=[entry.pk])
    before = index_vectors(ARCHIVAL_INDEX, row_ids=[entry.pk])[entry.pk]
    archival_entry_update(entry=entry, content="the bicycle is green")
    entry.refresh_from_db()
    assert entry.embedding_state == EmbeddingState.PENDING
    assert fts_count("kayak") == 0 and fts_count("bicycle") == 1
    assert embeddings_refresh(kind="archival", row_ids=[entry.pk]) == 1
    after = index_vectors(ARCHIVAL_INDEX, row_ids=[entry.pk])[entry.pk]
    assert float(before @ after) < 0.9
    entry.refresh_from_db()
    assert entry.embedding_state == EmbeddingState.READY
    assert embeddings_refresh(kind="archival", row_ids=[entry.pk]) == 0  # idempotent


def test_delete_removes_the_row_from_every_index(
    agent: Any, embedding_model_loaded: Any
):
    entry = archival_entry_create(agent=agent, content="delete me soon")
    embeddings_refresh(kind="archival", row_ids=[entry.pk])
    pk = entry.pk
    archival_entry_delete(entry=entry)
    assert fts_count("delete") == 0
    assert index_vectors(ARCHIVAL_INDEX, row_ids=[pk]) == {}
    assert search(agent, "delete me soon", mode="hybrid") == []


def test_near_duplicates_collapse_into_one_result(
    agent: Any, embedding_model_loaded: Any
):
    first = archival_entry_create(agent=agent, content="The partner loves jazz music.")
    twin = archival_entry_create(agent=agent, content="The partner loves jazz music!")
    archival_entry_create(agent=agent, content="Jazz concert tickets are booked.")
    embedding_backfill(batch=10)
    result = memory_search(
        actor=Actor.for_agent(agent), query="jazz", mode="hybrid", limit=5
    )
    contents = [hit.row.content for _k, hit in result.hits]
    assert len(contents) == 2
    kept = (
        result.hits[0][1]
        if result.hits[0][1].row.pk in (first.pk, twin.pk)
        else (result.hits[1][1])
    )
    assert kept.duplicates and kept.duplicates[0] in (first.pk, twin.pk)


def test_identical_text_collapses_without_vectors(agent: Any, no_embedding_model):
    archival_entry_create(agent=agent, content="Call  the plumber on Monday")
    archival_entry_create(agent=agent, content="call the plumber on monday.")
    assert len(search(agent, "plumber", mode="auto")) == 1


def test_filters_by_tags_metadata_time_and_role(agent: Any):
    archival_entry_create(agent=agent, content="lemon tart", tags=["recipe"])
    archival_entry_create(
        agent=agent, content="lemon tree", tags=["garden"], metadata={"plot": 3}
    )
    assert search(agent, "lemon", mode="fts", filters=SearchFilters(tags=("recipe",)))[
        0
    ] == ("lemon tart")
    assert search(
        agent, "lemon", mode="fts", filters=SearchFilters(metadata_keys=("plot",))
    ) == ["lemon tree"]
    future = timezone.now() + timedelta(hours=1)
    assert search(agent, "lemon", mode="fts", filters=SearchFilters(since=future)) == []
    assert (
        len(search(agent, "lemon", mode="fts", filters=SearchFilters(until=future)))
        == 2
    )
    conversation = conversation_start(agent=agent)
    messages_append(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "lemon please"},
            {"role": "assistant", "content": "lemon noted"},
        ],
    )
    assert search(
        agent,
        "lemon",
        mode="fts",
        domain="conversations",
        filters=SearchFilters(roles=("assistant",)),
    ) == ["lemon noted"]


def test_restrictive_filter_still_finds_matches_beyond_the_first_pool(agent: Any):
    for i in range(60):
        archival_entry_create(agent=agent, content=f"walrus fact number {i}")
    archival_entry_create(agent=agent, content="walrus rare", tags=["rare"])
    found = search(agent, "walrus", mode="fts", filters=SearchFilters(tags=("rare",)))
    assert found == ["walrus rare"]


def test_rerank_prefers_important_recent_entries_when_enabled(agent: Any):
    dull = archival_entry_create(agent=agent, content="owl owl owl", importance=0.05)
    keen = archival_entry_create(agent=agent, content="owl sighting", importance=1.0)
    assert search(agent, "owl", mode="fts")[0] == dull.content  # bm25 alone
    retrieval_config_update(constellation=agent.constellation, rerank_enabled=True)
    assert search(agent, "owl", mode="fts")[0] == keen.content


def test_quantised_vector_search_agrees_with_exact_on_the_top_hit(
    agent: Any, embedding_model_loaded: Any, settings: Any
):
    for text in ("sailing boats", "mountain hiking", "baking bread", "tax forms"):
        archival_entry_create(agent=agent, content=text)
    embedding_backfill(batch=10)
    exact = search(agent, "yacht on the sea", mode="vector")
    settings.SEARCH_VECTOR_QUANTISED = True
    quantised = search(agent, "yacht on the sea", mode="vector")
    assert exact[0] == quantised[0] == "sailing boats"


def test_without_a_model_search_degrades_to_keywords_and_health_says_why(
    agent: Any, no_embedding_model: Any
):
    archival_entry_create(agent=agent, content="gooseberry jam")
    result = memory_search(
        actor=Actor.for_agent(agent), query="gooseberry", mode="vector"
    )
    assert result.mode_used == "fts"
    assert "no ONNX model" in result.degraded
    assert [h.row.content for _k, h in result.hits] == ["gooseberry jam"]
    _healthy, report = health_report()
    assert report["embeddings"]["ok"] is False
    assert "keywords only" in report["embeddings"]["detail"]
    assert set(embedding_backfill().values()) == {0}
    assert ArchivalEntry.objects.get().embedding_state == EmbeddingState.PENDING


def test_rows_committed_together_are_embedded_by_one_batched_task(
    agent: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
):
    sent: list[tuple[str, list[int]]] = []
    monkeypatch.setitem(embeddings_refresh_task.app.conf, "task_always_eager", False)
    monkeypatch.setattr(pipeline._EMBEDS, "_delay", 600.0)  # sent by flush only
    monkeypatch.setattr(
        embeddings_refresh_task, "delay", lambda k, ids: sent.append((k, ids))
    )
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        a = archival_entry_create(agent=agent, content="one")
        b = archival_entry_create(agent=agent, content="two")
        (message,) = messages_append(
            conversation=conversation_start(agent=agent),
            messages=[{"role": "user", "content": "three"}],
        )
    assert sent == []  # sent by the batcher, not on the writer's path
    assert embedding_flush() == 3
    assert sorted(sent) == [("archival", [a.pk, b.pk]), ("message", [message.pk])]


def test_rows_of_a_rolled_back_savepoint_are_never_sent_to_embed(
    agent: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
):
    sent: list[tuple[str, list[int]]] = []
    monkeypatch.setitem(embeddings_refresh_task.app.conf, "task_always_eager", False)
    monkeypatch.setattr(pipeline._EMBEDS, "_delay", 600.0)  # sent by flush only
    monkeypatch.setattr(
        embeddings_refresh_task, "delay", lambda k, ids: sent.append((k, ids))
    )
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        kept = archival_entry_create(agent=agent, content="kept")
        try:
            with transaction.atomic():
                archival_entry_create(agent=agent, content="rolled back")
                raise RuntimeError
        except RuntimeError:
            pass
    embedding_flush()
    assert sent == [("archival", [kept.pk])]


def test_backfill_embeds_rows_written_while_no_model_was_available(
    agent: Any, settings: Any, tmp_path: Any, embedding_model_loaded: Any
):
    with model_dir(settings, tmp_path):
        archival_entry_create(agent=agent, content="written without a model")
        assert set(embedding_backfill().values()) == {0}
    assert embedding_status().available
    done = embedding_backfill()
    assert (done["archival"], done["message"]) == (1, 0)
    entry = ArchivalEntry.objects.get()
    vector = index_vectors(ARCHIVAL_INDEX, row_ids=[entry.pk])[entry.pk]
    assert vector.shape == (384,) and abs(float(np.linalg.norm(vector)) - 1) < 1e-3


def test_without_the_sqlite_index_search_falls_back_to_a_keyword_scan(
    agent: Any, monkeypatch: Any
):
    from memory.search import engine

    archival_entry_create(agent=agent, content="quince paste in the pantry")
    monkeypatch.setattr(engine, "backend_available", lambda: False)
    result = memory_search(actor=Actor.for_agent(agent), query="quince", mode="auto")
    assert result.mode_used == "fts" and "unavailable" in result.degraded
    assert [h.row.content for _k, h in result.hits] == ["quince paste in the pantry"]
    assert "<mark>quince</mark>" in result.hits[0][1].snippet_html


def test_vectors_of_the_wrong_size_are_not_stored(agent: Any, monkeypatch: Any):
    from memory.search import pipeline

    monkeypatch.setattr(
        pipeline, "embed_texts", lambda texts: [np.ones(16, np.float32)] * len(texts)
    )
    entry = archival_entry_create(agent=agent, content="sixteen dims")
    assert embeddings_refresh(kind="archival", row_ids=[entry.pk]) == 0
    entry.refresh_from_db()
    assert entry.embedding_state == EmbeddingState.PENDING
    assert index_vectors(ARCHIVAL_INDEX, row_ids=[entry.pk]) == {}


def test_a_broken_model_degrades_search_and_says_it_failed_to_load(
    agent: Any, settings: Any, tmp_path: Any
):
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    with model_dir(settings, tmp_path):
        archival_entry_create(agent=agent, content="damson plums")
        result = memory_search(
            actor=Actor.for_agent(agent), query="damson", mode="auto"
        )
        assert result.mode_used == "fts"
        assert "failed to load" in result.degraded
        assert [h.row.content for _k, h in result.hits] == ["damson plums"]
        assert "failed to load" in health_report()[1]["embeddings"]["detail"]


def _queries_of_search(agent: Any, **kwargs: Any) -> tuple[int, list[Any]]:
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        result = memory_search(actor=Actor.for_agent(agent), **kwargs)
        shown = [
            (
                hit.row.agent.name,
                getattr(hit.row, "conversation", None) and hit.row.conversation.title,
            )
            for _kind, hit in result.hits
        ]
    return len(captured), shown


def test_search_costs_the_same_queries_for_two_hits_as_for_twenty(agent: Any):
    conversation = conversation_start(agent=agent, title="garden talk")
    for i in range(2):
        archival_entry_create(agent=agent, content=f"fig tree note {i}")
    messages_append(
        conversation=conversation,
        messages=[{"role": "user", "content": "the fig tree again"}],
    )
    _queries_of_search(agent, query="fig", domain="all")  # sizes get cached
    few, shown_few = _queries_of_search(agent, query="fig", domain="all", limit=30)
    for i in range(2, 20):
        archival_entry_create(agent=agent, content=f"fig tree note {i}")
    many, shown_many = _queries_of_search(agent, query="fig", domain="all", limit=30)
    assert (len(shown_few), len(shown_many)) == (3, 21)
    assert (agent.name, "garden talk") in shown_many
    assert many == few


@pytest.mark.sqlite
def test_hybrid_takes_the_quantised_path_in_a_large_constellation_only(
    agent: Any, embedding_model_loaded: Any, settings: Any
):
    for text in ("The partner grows tomatoes.", "Basil likes sun.", "Rain today."):
        archival_entry_create(agent=agent, content=text)
    embedding_backfill(batch=10)
    actor = Actor.for_agent(agent)

    def run(mode: str) -> Any:
        return memory_search(actor=actor, query="vegetable garden", mode=mode)

    settings.SEARCH_QUANTISED_ABOVE = 0
    exact = run("hybrid")
    settings.SEARCH_QUANTISED_ABOVE = 2
    large = run("hybrid")
    assert (exact.quantised, large.quantised, run("auto").quantised) == (
        False,
        True,
        True,
    )
    assert not run("vector").quantised  # vector mode stays exact
    assert large.hits[0][1].row.content == exact.hits[0][1].row.content
    settings.SEARCH_QUANTISED_ABOVE = 3
    assert not run("hybrid").quantised


def test_a_short_reply_is_found_by_the_topic_of_the_entries_before_it(agent: Any):
    archival_entry_create(agent=agent, content="Planning the trip to Lisbon in June")
    reply = archival_entry_create(agent=agent, content="booked it for the 12th!")
    archival_entry_create(agent=agent, content="unrelated note about gardening")
    found = search(agent, "trip to Lisbon", mode="fts")
    assert found[:2] == ["Planning the trip to Lisbon in June", reply.content]
    retrieval_config_update(constellation=agent.constellation, context_weight=0.0)
    assert search(agent, "trip to Lisbon", mode="fts") == [
        "Planning the trip to Lisbon in June"
    ]


def test_a_message_context_spans_appends_and_stays_in_its_conversation(agent: Any):
    first = conversation_start(agent=agent)
    messages_append(
        conversation=first, messages=[{"role": "user", "content": "any plans?"}]
    )
    messages_append(
        conversation=first,
        messages=[
            {"role": "user", "content": "dinner at the harbour tavern"},
            {"role": "assistant", "content": "sounds lovely"},
        ],
    )
    other = conversation_start(agent=agent)
    messages_append(
        conversation=other, messages=[{"role": "user", "content": "all done"}]
    )
    found = search(agent, "harbour tavern", mode="fts", domain="conversations")
    assert found == ["dinner at the harbour tavern", "sounds lovely"]


def test_an_append_through_the_row_an_append_returned_reads_no_context_again(
    agent: Any, monkeypatch: Any
):
    """The row an append returns (its messages' ``conversation``) carries the
    newest messages' texts: an append through it reads none of them again,
    and one after another writer's append reads them, so each message's
    keyword-index context is the messages just before it either way."""
    from django.test.utils import CaptureQueriesContext

    from memory.longterm import services

    contexts: dict[int, str] = {}
    put = services.index_put_texts

    def capture(index: Any, **kwargs: Any) -> None:
        contexts.update(kwargs["contexts"])
        put(index, **kwargs)

    monkeypatch.setattr(services, "index_put_texts", capture)
    conversation = conversation_start(agent=agent)
    (one,) = messages_append(
        conversation=conversation, messages=[{"role": "user", "content": "one"}]
    )
    held = one.conversation
    with CaptureQueriesContext(connection) as appended:
        (two,) = messages_append(
            conversation=held, messages=[{"role": "assistant", "content": "two"}]
        )
    assert not [q for q in appended.captured_queries if 'position" <' in q["sql"]]
    held = two.conversation
    messages_append(
        conversation=conversation, messages=[{"role": "user", "content": "three"}]
    )
    (four,) = messages_append(
        conversation=held, messages=[{"role": "assistant", "content": "four"}]
    )
    assert contexts[two.pk] == "one"
    assert contexts[four.pk] == "two\nthree"


def test_invalid_retrieval_settings_store_nothing(agent: Any):
    retrieval_config_update(constellation=agent.constellation, keyword_weight=0.2)
    for bad in ({"fusion": "max"}, {"keyword_weight": 1.5}, {"candidate_depth": 5}):
        with pytest.raises(InvalidInput):
            retrieval_config_update(constellation=agent.constellation, **bad)
    stored = RetrievalConfig.objects.get(constellation=agent.constellation)
    assert (stored.fusion, stored.keyword_weight, stored.candidate_depth) == (
        "weighted",
        0.2,
        40,
    )


def test_without_a_model_hybrid_answers_from_keywords_and_context(
    agent: Any, no_embedding_model: None
):
    archival_entry_create(agent=agent, content="Which tent for the Alps trek?")
    reply = archival_entry_create(agent=agent, content="the green one, surely")
    result = memory_search(
        actor=Actor.for_agent(agent), query="Alps trek tent", mode="hybrid"
    )
    assert result.mode_used == "fts" and result.degraded
    assert [hit.row.pk for _kind, hit in result.hits][1:] == [reply.pk]
    assert result.hits[1][1].vector_part is None


def test_a_question_naming_a_day_prefers_the_entry_of_that_day(agent: Any):
    rug = archival_entry_create(
        agent=agent, content="bought a rug", metadata={"date": "2023-03-02"}
    )
    lamp = archival_entry_create(
        agent=agent, content="bought a lamp", metadata={"date": "2024-01-07 10:31:00"}
    )
    undated = archival_entry_create(agent=agent, content="bought a kettle")
    found = search(agent, "What was bought on 7 Jan 2024?", mode="fts")
    assert found[0] == lamp.content and set(found) == {
        rug.content,
        lamp.content,
        undated.content,
    }
    today = undated.created_at
    assert search(agent, f"{today.day} {today:%B} {today.year}", mode="fts") == [
        undated.content
    ]
    retrieval_config_update(constellation=agent.constellation, date_weight=0.0)
    assert search(agent, "7 Jan 2024", mode="fts") == []


def test_many_distinct_tags_are_refused_at_once_inside_the_write(agent: Any):
    # Work done inside the write transaction is linear in the tags given and
    # stops at the first tag past the limit: 200,000 tags are not minutes.
    tags = [f"tag{n}" for n in range(200_000)]
    started = time.perf_counter()
    with pytest.raises(LimitExceeded, match="more than 20 different tags"):
        archival_entry_create(agent=agent, content="fact", tags=tags)
    assert time.perf_counter() - started < 1.0
    assert not ArchivalEntry.objects.exists()


def test_repeated_tags_count_once(agent: Any):
    entry = archival_entry_create(
        agent=agent, content="fact", tags=["Food", "food ", *["x"] * 50]
    )
    assert entry.tags == ["food", "x"]


def test_turns_go_to_the_agents_current_conversation(agent: Any):
    from memory.longterm.services import conversation_current, conversation_set_status

    first = conversation_current(agent=agent)
    assert conversation_current(agent=agent).pk == first.pk
    conversation_set_status(conversation=first, status="idle")
    assert conversation_current(agent=agent).pk == first.pk
    conversation_set_status(conversation=first, status="archived")
    assert conversation_current(agent=agent).pk != first.pk


def test_a_tool_only_message_is_found_by_the_call_it_made(agent: Any):
    conversation = conversation_start(agent=agent)
    messages_append(
        conversation=conversation,
        messages=[
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "name": "weather_lookup", "arguments": {"c": "Oslo"}}
                ],
            }
        ],
    )
    (message,) = conversation.messages.all()
    assert message.tool_calls[0]["arguments"] == '{"c": "Oslo"}'
    assert search(agent, "weather_lookup", mode="fts", domain="conversations") == [""]
