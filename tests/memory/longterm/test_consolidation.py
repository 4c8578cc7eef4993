"""Consolidation keeps archival memory maintained: promote, merge, prune,
cap, never destroying an entry."""

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from memory.longterm.consolidation import (
    archival_consolidate,
    llm_decision_parse,
    says_no_more,
    similar_pairs,
)
from memory.longterm.search import memory_search
from memory.longterm.services import (
    archival_entry_create,
    archival_entry_restore,
    retrieval_config_update,
)
from memory.longterm.tasks import archival_consolidate_due_task
from memory.models import ArchivalEntry, ConsolidationRun
from memory.search.pipeline import embeddings_refresh
from pattern_site.kernel.actors import Actor
from tests.fake_llm import FakeLLM, completion


def entry(agent: Any, content: str, **kwargs: Any) -> ArchivalEntry:
    return archival_entry_create(agent=agent, content=content, **kwargs)


def age(item: ArchivalEntry, *, hours: float) -> None:
    """Make ``item`` last used ``hours`` ago."""
    then = timezone.now() - timedelta(hours=hours)
    ArchivalEntry.objects.filter(pk=item.pk).update(created_at=then, accessed_at=then)


def fresh(item: ArchivalEntry) -> ArchivalEntry:
    return ArchivalEntry.objects.get(pk=item.pk)


def found(agent: Any, text: str) -> list[str]:
    result = memory_search(actor=Actor.for_agent(agent), query=text, mode="fts")
    return [hit.row.content for _kind, hit in result.hits]


def test_short_term_entries_used_often_and_relevant_become_long_term(agent: Any):
    used = entry(agent, "the partner takes oat milk", importance=0.9)
    barely = entry(agent, "the office plant is a fern", importance=0.9)
    weak = entry(agent, "a parking spot was free", importance=0.2)
    ArchivalEntry.objects.filter(pk=used.pk).update(access_count=4)
    ArchivalEntry.objects.filter(pk=barely.pk).update(access_count=3)
    ArchivalEntry.objects.filter(pk=weak.pk).update(access_count=9)
    run = archival_consolidate(agent=agent)
    assert run.promoted == 1 and run.scored == 3
    assert fresh(used).lifetime == "long_term"
    assert fresh(barely).lifetime == "short_term"  # access_count must pass 3
    assert fresh(weak).lifetime == "short_term"  # relevance 0.2 * 3.3 < 0.7


def test_same_text_merges_without_embeddings_and_keeps_the_other_as_history(
    agent: Any, no_embedding_model: Any
):
    older = entry(agent, "Ana visits on the second weekend of June", tags=["ana"])
    newer = entry(agent, "ana visits on the  second weekend of june", tags=["trip"])
    distinct = entry(agent, "Ana is allergic to walnuts")
    ArchivalEntry.objects.filter(pk=newer.pk).update(access_count=2)
    run = archival_consolidate(agent=agent)
    assert (run.merged, run.decided_by) == (1, "rules")
    kept, merged = fresh(older), fresh(newer)
    assert merged.superseded_by_id == kept.pk
    assert merged.superseded_reason == "merged" and merged.superseded_at is not None
    assert kept.superseded_at is None and kept.access_count == 2
    assert kept.tags == ["ana", "trip"]
    assert kept.history[0]["event"] == "merged"
    assert kept.history[0]["text"] == newer.content
    assert kept.history[0]["entry_id"] == newer.pk
    assert fresh(distinct).superseded_at is None


def test_the_same_words_merge_whatever_their_punctuation_without_embeddings(
    agent: Any, no_embedding_model: Any
):
    """A fact noted again with another full stop, exclamation mark, comma or
    quotes is the same text; a question, a number's decimal point or sign,
    and texts without words are not made the same by it."""
    older = entry(agent, "Deploys happen on Tuesdays, after the stand-up.")
    again = entry(agent, "deploys happen on tuesdays after the stand-up!")
    quoted = entry(agent, '"Deploys happen on Tuesdays after the stand-up"')
    kept_apart = [
        entry(agent, "Deploys happen on Tuesdays after the stand-up?"),
        entry(agent, "The parcel weighs 3.5 kg."),
        entry(agent, "The parcel weighs 35 kg."),
        entry(agent, "The freezer is at -18 degrees."),
        entry(agent, "The freezer is at 18 degrees."),
        entry(agent, "🎉"),
        entry(agent, "🚀"),
    ]
    run = archival_consolidate(agent=agent)
    assert run.merged == 2
    assert fresh(again).superseded_by_id == older.pk
    assert fresh(quoted).superseded_by_id == older.pk
    assert [fresh(x).superseded_at for x in [older, *kept_apart]] == [None] * 8


def test_near_duplicates_merge_by_cosine_but_distinct_facts_stay(
    agent: Any, embedding_model_loaded: Any
):
    a = entry(agent, "The partner's sister Ana visits every June.")
    b = entry(agent, "Ana, the partner's sister, comes to visit every June.")
    c = entry(agent, "The partner's brother Tom visits every June.")
    d = entry(agent, "The partner is allergic to peanuts.")
    embeddings_refresh(kind="archival", row_ids=[a.pk, b.pk, c.pk, d.pk])
    items = [fresh(x) for x in (a, b, c, d)]
    pairs = similar_pairs(items, threshold=0.95)
    assert [(new, old) for _sim, new, old in pairs] == [(b.pk, a.pk)]
    run = archival_consolidate(agent=agent)
    assert run.merged == 1
    # b says all that a says and that she comes: b is kept.
    assert fresh(a).superseded_by_id == b.pk
    assert [fresh(x).superseded_at for x in (b, c, d)] == [None, None, None]


def test_near_duplicate_vectors_naming_another_detail_stay_two_facts(
    agent: Any, embedding_model_loaded: Any
):
    """MiniLM puts these pairs above the merge threshold, but each names a
    month, a day or a time the other does not: without an LLM the rules
    keep both, and merge only a copy that adds nothing."""
    pairs = [
        (
            "The partner's sister Ana visits every June.",
            "The partner's sister Ana visits every July.",
        ),
        (
            "The team meeting moved to Tuesday at 10:00.",
            "The team meeting moved to Thursday at 10:00.",
        ),
        (
            "Lena keeps the notes on the tax return in the shared folder,"
            " updated in the evenings.",
            "Lena keeps the notes on the tax return in the shared folder,"
            " updated on rainy weekends.",
        ),
    ]
    made = [(entry(agent, x), entry(agent, y)) for x, y in pairs]
    copy = entry(agent, "the team meeting moved to tuesday, at 10:00!")
    ids = [e.pk for pair in made for e in pair] + [copy.pk]
    embeddings_refresh(kind="archival", row_ids=ids)
    close = similar_pairs([fresh(e) for pair in made for e in pair], threshold=0.95)
    assert len(close) == len(pairs)  # the vectors alone would merge each pair
    run = archival_consolidate(agent=agent)
    assert run.merged == 1
    assert fresh(copy).superseded_by_id == made[1][0].pk
    assert [fresh(e).superseded_at for pair in made for e in pair] == [None] * 6


@pytest.mark.parametrize(
    ("text", "than", "expected"),
    [
        ("Ana visits in June.", "ana VISITS in june!", True),
        ("Ana visits in June.", "Ana's visit is in June, with the kids.", True),
        ("Ana visits in June, with the kids.", "Ana visits in June.", False),
        ("Ana visits in June.", "Ana visits in July.", False),
        ("The partner likes oat milk.", "The partner doesn't like oat milk.", False),
        ("The partner likes oat milk.", "The partner likes no oat milk.", False),
        ("Deploys happen on Tuesdays.", "Deploys happen on Tuesdays?", False),
        ("The parcel weighs 3.5 kg.", "The parcel weighs 35 kg.", False),
    ],
)
def test_a_text_adds_no_detail_when_its_words_are_all_in_the_other(
    text: str, than: str, expected: bool
):
    assert says_no_more(text, than=than) is expected


def test_prune_and_cap_mark_entries_superseded_with_reason_and_time(agent: Any):
    stale = entry(agent, "an old short-term note about a delivery")
    kept_long = entry(agent, "an old long-term fact", lifetime="long_term")
    age(stale, hours=24 * 365)
    age(kept_long, hours=24 * 365)
    low = entry(agent, "a mildly useful detail", importance=0.1)
    high = entry(agent, "an important preference", importance=0.9)
    mid = entry(agent, "a middling remark", importance=0.5)
    retrieval_config_update(constellation=agent.constellation, archival_cap=3)
    before = timezone.now()
    run = archival_consolidate(agent=agent)
    assert (run.pruned, run.capped) == (1, 1)
    pruned = fresh(stale)
    assert pruned.superseded_reason == "pruned" and pruned.superseded_by is None
    assert pruned.superseded_at >= before
    # Over the cap of 3 among 4 live ones: the least relevant short-term goes,
    # and the old long-term entry outranks it.
    assert fresh(low).superseded_reason == "capped"
    assert [fresh(x).superseded_at for x in (kept_long, high, mid)] == [None] * 3
    assert ArchivalEntry.objects.count() == 5  # nothing destroyed


def test_superseded_entries_leave_search_until_restored(
    agent: Any, no_embedding_model: Any
):
    stale = entry(agent, "the spare key hangs by the door")
    age(stale, hours=24 * 365)
    assert found(agent, "spare key") == ["the spare key hangs by the door"]
    assert archival_consolidate(agent=agent).pruned == 1
    assert found(agent, "spare key") == []
    archival_entry_restore(entry=fresh(stale))
    assert found(agent, "spare key") == ["the spare key hangs by the door"]
    restored = fresh(stale)
    assert restored.superseded_at is None and restored.superseded_reason == ""
    assert restored.history[-1]["event"] == "restored"


def test_constellation_tier_entries_consolidate_across_agents(
    agent: Any, other_agent: Any, no_embedding_model: Any
):
    entry(agent, "the team meets on Mondays", tier="constellation")
    theirs = entry(other_agent, "The team meets on Mondays", tier="constellation")
    own = entry(agent, "the team meets on Mondays")
    assert archival_consolidate(agent=agent).merged == 0  # other tier
    run = archival_consolidate(constellation=agent.constellation)
    assert run.merged == 1 and run.agent is None
    assert fresh(theirs).superseded_reason == "merged"
    assert fresh(own).superseded_at is None


def test_the_task_is_idempotent_and_runs_each_scope_once_per_interval(
    agent: Any, other_agent: Any, no_embedding_model: Any
):
    entry(agent, "the bins go out on Thursday")
    entry(agent, "The bins go out on Thursday")
    first = archival_consolidate_due_task()
    # Two agents and their constellation.
    assert len(first) == 3 and ConsolidationRun.objects.count() == 3
    assert archival_consolidate_due_task() == []
    assert ConsolidationRun.objects.filter(merged=1).count() == 1
    again = archival_consolidate(agent=agent)
    assert (again.merged, again.promoted, again.pruned, again.capped) == (0,) * 4


def test_the_llm_updates_an_entry_and_keeps_its_previous_text(
    agent: Any, llm: FakeLLM, no_embedding_model: Any
):
    old = entry(agent, "Ana visits in June")
    new = entry(agent, "ana visits in june")
    merged_text = "Ana visits in June, usually for a week"
    llm.answer(
        completion(json.dumps({"event": "UPDATE", "id": old.pk, "text": merged_text}))
    )
    run = archival_consolidate(agent=agent)
    assert (run.decided_by, run.merged) == ("llm", 1)
    asked = json.loads(llm.requests[0]["body"]["messages"][1]["content"])
    assert asked["new_fact"]["id"] == new.pk
    assert [m["id"] for m in asked["memories"]] == [old.pk]
    kept = fresh(old)
    assert kept.content == merged_text
    assert [h["event"] for h in kept.history] == ["updated", "merged"]
    assert kept.history[0]["text"] == "Ana visits in June"
    assert fresh(new).superseded_by_id == old.pk


def test_the_llm_can_say_a_new_fact_contradicts_an_old_one(
    agent: Any, llm: FakeLLM, no_embedding_model: Any
):
    old = entry(agent, "the meeting room is B2")
    new = entry(agent, "The meeting room is B2")
    llm.answer(completion(json.dumps({"event": "DELETE", "id": old.pk})))
    run = archival_consolidate(agent=agent)
    assert run.contradicted == 1
    assert fresh(old).superseded_reason == "contradicted"
    assert fresh(old).superseded_by_id == new.pk


def test_an_invalid_llm_answer_falls_back_to_the_rules(
    agent: Any, llm: FakeLLM, no_embedding_model: Any
):
    old = entry(agent, "the wifi password is on the fridge")
    new = entry(agent, "The wifi password is on the fridge")
    llm.answer(completion(json.dumps({"event": "MERGE", "id": 999_999})))
    run = archival_consolidate(agent=agent)
    assert run.merged == 1 and len(llm.requests) == 1
    assert fresh(new).superseded_by_id == old.pk


@pytest.mark.parametrize(
    "answer",
    [
        [],
        {"event": "UPDATE", "id": 1},
        {"event": "NONE", "id": 2},
        {"event": "UPDATE", "id": 1, "text": "  "},
    ],
)
def test_llm_answers_of_the_wrong_shape_are_refused(answer: Any):
    with pytest.raises(ValueError):
        llm_decision_parse(answer, new=3, candidates=[1])


def test_a_restored_entry_is_not_merged_or_pruned_again(
    agent: Any, no_embedding_model: Any
):
    entry(agent, "the cat is called Miso")
    dup = entry(agent, "The cat is called Miso")
    age(dup, hours=24 * 365)
    archival_consolidate(agent=agent)
    archival_entry_restore(entry=fresh(dup))
    assert fresh(dup).lifetime == "long_term"
    run = archival_consolidate(agent=agent)
    assert (run.merged, run.pruned) == (0, 0)
    assert fresh(dup).superseded_at is None


def test_a_run_shows_in_the_activity_stream_with_its_counts(
    agent: Any, django_capture_on_commit_callbacks: Any, no_embedding_model: Any
):
    from activity.stream.models import ActivityEvent, EventType

    entry(agent, "the printer is on floor 2")
    entry(agent, "The printer is on floor 2")
    with django_capture_on_commit_callbacks(execute=True):
        run = archival_consolidate(agent=agent)
    (event,) = ActivityEvent.objects.filter(event_type=EventType.CONSOLIDATION_RUN)
    assert event.details["agent_id"] == agent.pk
    assert event.details["run_id"] == run.pk and event.details["merged"] == 1
    assert event.text.startswith(f"System consolidated {agent.name}'s memory: ")
    assert "1 merged" in event.text


def test_each_tier_decays_at_its_own_configured_rate(agent: Any):
    from memory.longterm.decay import tier_decay
    from memory.longterm.selectors import retrieval_config_for

    config = retrieval_config_update(
        constellation=agent.constellation,
        conversation_decay_rate=0.9,
        decay_rate=0.99,
        constellation_decay_rate=0.999,
    )
    items = {
        tier: entry(agent, f"a {tier} fact", tier=tier, importance=1.0)
        for tier in ("conversation", "agent", "constellation")
    }
    for item in items.values():
        age(item, hours=10)
    decay = tier_decay(config, now=timezone.now())
    scores = {tier: decay.relevance(fresh(item)) for tier, item in items.items()}
    assert scores["conversation"] == pytest.approx(0.9**10, rel=1e-3)
    assert scores["agent"] == pytest.approx(0.99**10, rel=1e-3)
    assert scores["constellation"] == pytest.approx(0.999**10, rel=1e-3)
    assert (
        retrieval_config_for(constellation=agent.constellation).archival_cap == 10_000
    )


def test_search_decay_is_a_setting_and_a_parameter(agent: Any):
    old = entry(agent, "heron heron heron seen at the lake", importance=0.9)
    age(old, hours=24 * 30)
    entry(agent, "a heron once", importance=0.9)

    def order(**kwargs: Any) -> list[str]:
        result = memory_search(
            actor=Actor.for_agent(agent), query="heron", mode="fts", **kwargs
        )
        return [hit.row.content for _kind, hit in result.hits]

    by_words = order()
    assert by_words[0] == "heron heron heron seen at the lake"
    assert order(decay=True)[0] == "a heron once"  # the stale one decayed
    retrieval_config_update(constellation=agent.constellation, rerank_enabled=True)
    assert order()[0] == "a heron once"
    assert order(decay=False) == by_words


def test_the_schedule_runs_the_task_and_a_starting_worker_catches_up(
    monkeypatch: Any, settings: Any
):
    from celery.signals import worker_ready

    from memory.longterm import tasks
    from memory.search import tasks as search_tasks

    entry_ = settings.CELERY_BEAT_SCHEDULE["memory-archival-consolidation"]
    assert entry_["task"] == tasks.archival_consolidate_due_task.name
    assert entry_["schedule"] == settings.ARCHIVAL_CONSOLIDATION_HOURS * 3600
    sent: list[tuple] = []
    monkeypatch.setattr(
        tasks.archival_consolidate_due_task, "delay", lambda *a: sent.append(a)
    )
    # The embedding catch-up listens too; it has tests of its own.
    monkeypatch.setattr(search_tasks.embedding_backfill_task, "delay", lambda: None)
    worker_ready.send(sender=None)
    assert sent == [()]


def test_a_run_that_changes_nothing_is_not_in_the_activity_stream(
    agent: Any, django_capture_on_commit_callbacks: Any, no_embedding_model: Any
):
    from activity.stream.models import ActivityEvent, EventType

    entry(agent, "the printer is on floor 2")
    with django_capture_on_commit_callbacks(execute=True):
        run = archival_consolidate(agent=agent)
    assert run.merged == run.promoted == run.pruned == 0
    assert not ActivityEvent.objects.filter(event_type=EventType.CONSOLIDATION_RUN)
