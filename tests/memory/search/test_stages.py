"""The search stages that need no new weights: the time stage (dates a
question names), late interaction (MaxSim over the embedding model's token
vectors) and several phrasings fused into one ranking."""

import random
from datetime import UTC, date, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from memory.longterm.schemas import SearchIn
from memory.longterm.search import memory_search
from memory.longterm.selectors import MAX_QUERIES
from memory.longterm.services import archival_entry_create, retrieval_config_update
from memory.longterm.tools import search_tool
from memory.search import when
from memory.search.engine import Hit, TimeStage, _late_rescored, _time_favoured
from memory.search.late import LateInteraction, maxsim, token_encoder
from memory.search.when import (
    HOW_LONG,
    MAX_SPANS,
    WHEN,
    question_spans,
    tells_time,
    time_asked,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import InvalidInput

# A Wednesday.
NOW = datetime(2024, 1, 10, 18, tzinfo=UTC)
TODAY = NOW.date()


def _spans(text: str) -> list[tuple[date, date]]:
    return [(s.start, s.end) for s in question_spans(text, today=TODAY)]


# --- Reading dates -----------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What did Kate cook on 29 Dec 2023?", [(date(2023, 12, 29),) * 2]),
        ("what happened on 17th of January, 2024", [(date(2024, 1, 17),) * 2]),
        ("naps on January 6 2024", [(date(2024, 1, 6),) * 2]),
        ("the movie of 09.01.2024", [(date(2024, 1, 9),) * 2]),
        ("and on 2023-12-31?", [(date(2023, 12, 31),) * 2]),
        ("what did I buy yesterday", [(date(2024, 1, 9),) * 2]),
        ("where was I last week", [(date(2024, 1, 1), date(2024, 1, 7))]),
        ("what did I read in May", [(date(2023, 5, 1), date(2023, 5, 31))]),
        ("the trip in December", [(date(2023, 12, 1), date(2023, 12, 31))]),
        ("a match in 2017", [(date(2017, 1, 1), date(2017, 12, 31))]),
        ("three days ago", [(date(2024, 1, 7),) * 2]),
        ("two days before 5 Jan 2024", [(date(2024, 1, 3),) * 2]),
        ("shortly before 7 Jan 2024", [(date(2023, 12, 31), date(2024, 1, 7))]),
        ("the day after 3 Jan 2024", [(date(2024, 1, 4),) * 2]),
        ("the first week of 2024", [(date(2024, 1, 1), date(2024, 1, 7))]),
        ("in the spring of 2024", [(date(2024, 3, 1), date(2024, 5, 31))]),
    ],
)
def test_the_dates_a_question_names_are_read_relative_to_today(
    question: str, expected: list[tuple[date, date]]
):
    assert _spans(question) == expected


def test_words_that_only_look_like_dates_name_none():
    assert _spans("What helps Elise fall asleep?") == []
    assert _spans("You may want to try it") == []
    assert _spans("When did Kate start skiing?") == []


def test_a_question_names_at_most_a_bounded_number_of_spans():
    many = " and ".join(f"{day} Jan 2024" for day in range(1, 20))
    spans = question_spans(many, today=TODAY)
    assert len(spans) == MAX_SPANS
    assert all((s.end - s.start).days < 366 for s in spans)


# --- The time stage ----------------------------------------------------------


def _entry(agent: Any, content: str, day: str) -> int:
    return archival_entry_create(
        agent=agent, content=content, metadata={"date": day}
    ).pk


def _ids(agent: Any, query: str, **kwargs: Any) -> list[int]:
    result = memory_search(
        actor=Actor.for_agent(agent), query=query, mode="fts", now=NOW, **kwargs
    )
    return [hit.row.pk for _kind, hit in result.hits]


def test_a_row_dated_last_week_is_favoured_for_last_week(agent: Any):
    old = _entry(agent, "We cooked pasta with pesto", "2023-06-02")
    recent = _entry(agent, "We cooked a curry", "2024-01-04")
    query = "what did we cook with pesto last week"

    retrieval_config_update(constellation=agent.constellation, time_weight=0)
    assert _ids(agent, query)[:2] == [old, recent]

    retrieval_config_update(constellation=agent.constellation, time_weight=1.0)
    assert _ids(agent, query)[:2] == [recent, old]
    # The same question without a date keeps the keyword order.
    assert _ids(agent, "what did we cook with pesto")[:2] == [old, recent]


@pytest.mark.sqlite  # PostgreSQL's stage favours the candidates found, adds none
def test_a_dated_row_outside_the_candidate_pool_joins_it(agent: Any):
    # Forty-five entries that match the words better than the one dated
    # on the day named fill the keyword list's pool.
    for i in range(45):
        _entry(agent, f"Cooked soup and more soup, pot {i}", "2023-03-01")
    dated = _entry(agent, "cooked something", "2024-01-05")
    query = "what soup was cooked on 5 Jan 2024"
    # Without the date-in-words column, which alone would rank the day's
    # rows up by keywords.
    config = retrieval_config_update(
        constellation=agent.constellation, time_weight=0, date_weight=0
    )
    assert dated not in _ids(agent, query, limit=10)

    retrieval_config_update(constellation=config.constellation, time_weight=1.0)
    result = memory_search(
        actor=Actor.for_agent(agent), query=query, mode="fts", now=NOW, limit=10
    )
    assert result.hits[0][1].row.pk == dated
    assert result.hits[0][1].time_part is not None
    assert "2024-01-05" in next(s.detail for s in result.stages if s.name == "time")


def test_a_row_told_of_the_day_after_counts_as_that_day(agent: Any):
    other = _entry(agent, "Lunch: noodles, noodles everywhere", "2023-11-20")
    next_day = _entry(agent, "Yesterday I had noodles for lunch", "2024-01-06")
    retrieval_config_update(
        constellation=agent.constellation, time_weight=0.5, date_weight=0
    )
    assert _ids(agent, "noodles for lunch on 5 Jan 2024")[:2] == [next_day, other]


# --- Questions asking when ---------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        "When did Kate start skiing?",
        "when is the concert",
        "Kate, when did you move?",
        "Since when has Moon been in different families?",
        "What year did Paola move to New York?",
        "Which month was the trip?",
        "How long ago did Akib visit Japan?",
    ],
)
def test_a_question_asking_when_is_told_apart(question: str):
    assert time_asked(question) == WHEN


@pytest.mark.parametrize(
    "question",
    [
        "How long did Akib's last visit to Japan last?",
        "For how long did Vanessa date her partner?",
        "How much time does Mohamed spend on the road to work?",
        "How many years has Paola lived in New York?",
    ],
)
def test_a_question_asking_how_long_is_told_apart(question: str):
    assert time_asked(question) == HOW_LONG


@pytest.mark.parametrize(
    "question",
    [
        "What helps Paola when she's tired?",
        "What does Paola like to do when traveling?",
        "Where did Elise celebrate the New Year?",
        "What are Kate's hobbies?",
    ],
)
def test_when_as_a_conjunction_asks_for_no_time(question: str):
    assert time_asked(question) == ""


@pytest.mark.parametrize(
    "text",
    [
        "I went skiing yesterday",
        "Two weeks ago I started a new job",
        "This morning, I started with a gentle cleanser",
        "last Friday was fun",
        "We moved there in May",
        "since 2019 I live here",
        "the party on 10.01.2024",
        "See you on January 6th!",
        "We spent New Year's Eve in Miami",
    ],
)
def test_a_text_that_tells_when_is_told_apart(text: str):
    assert tells_time(WHEN, text)


@pytest.mark.parametrize(
    "text",
    [
        "I love skiing in the Alps",
        "You may want to try it",
        "Fall asleep early, it helps",
        "I have 3 cats",
    ],
)
def test_a_text_without_a_time_tells_none(text: str):
    assert not tells_time(WHEN, text)
    assert not tells_time(HOW_LONG, text)


@pytest.mark.parametrize(
    "text",
    [
        "I was only there for about a week and a half",
        "It lasted for about an hour",
        "We dated for 3 years",
        "I have been here since the summer",
    ],
)
def test_a_text_that_tells_how_long_is_told_apart(text: str):
    assert tells_time(HOW_LONG, text)


@pytest.mark.parametrize(
    ("text", "when", "how_long"),
    [
        ("LAST FRIDAY was fun", True, False),
        ("We Moved There In MAY", True, False),
        ("I Was There For About A Week", False, True),
        ("Nothing Here At All", False, False),
    ],
)
def test_telling_a_time_ignores_case_in_ascii_and_other_text(
    text: str, when: bool, how_long: bool
):
    # ASCII text is matched lowercased, other text case-insensitively.
    for other in (text, f"{text} ✨", f"Ünder: {text}"):
        assert tells_time(WHEN, other) is when
        assert tells_time(HOW_LONG, other) is how_long


def test_telling_a_time_is_scanned_once_per_text_and_answers_the_same():
    when._tells_time_kept.cache_clear()
    text = "We moved there in May"
    first = [tells_time(kind, text) for kind in (WHEN, HOW_LONG)]
    scanned = when._tells_time_kept.cache_info().misses
    again = [tells_time(kind, text) for kind in (WHEN, HOW_LONG)]
    assert again == first == [True, False]
    assert when._tells_time_kept.cache_info().misses == scanned
    # A text too long to keep is scanned each time, with the same answer.
    long_text = "x " * when.TELLS_KEPT_CHARS + "three weeks ago"
    assert tells_time(WHEN, long_text) and tells_time(WHEN, long_text)
    assert when._tells_time_kept.cache_info().misses == scanned


def test_a_row_that_tells_a_time_is_favoured_when_the_question_asks_when(
    agent: Any,
):
    # The keywords favour the row that names the question's words more
    # often (bm25 and ts_rank alike); the one telling when ("last winter")
    # answers it.
    plain = _entry(
        agent,
        "Kate: start skiing, Kate did start skiing at the start of the day skiing",
        "2023-06-02",
    )
    told = _entry(agent, "Kate took up skiing last winter", "2023-06-01")
    query = "When did Kate start skiing?"

    retrieval_config_update(constellation=agent.constellation, when_weight=0)
    assert _ids(agent, query)[:2] == [plain, told]

    retrieval_config_update(constellation=agent.constellation, when_weight=1.0)
    result = memory_search(
        actor=Actor.for_agent(agent), query=query, mode="fts", now=NOW
    )
    assert [hit.row.pk for _kind, hit in result.hits][:2] == [told, plain]
    assert result.hits[0][1].time_part is not None
    assert "asks when" in next(s.detail for s in result.stages if s.name == "time")
    # A question that asks for no time keeps the keyword order.
    assert _ids(agent, "Does Kate like skiing?")[:2] == [plain, told]


# --- Late interaction --------------------------------------------------------


@pytest.fixture
def token_vectors(embedding_model_loaded: Any) -> Any:
    return token_encoder()


def test_maxsim_prefers_the_passage_that_shares_the_querys_meaning(
    token_vectors: Any,
):
    query, close, far = token_vectors.vectors(
        [
            "where did the cat sleep",
            "the kitten slept on the sofa all afternoon",
            "quarterly revenue grew by four percent",
        ],
        max_tokens=64,
    )
    assert maxsim(query, close) > maxsim(query, far)


def test_late_interaction_reorders_close_fused_candidates(token_vectors: Any):
    texts = {
        1: "quarterly revenue grew by four percent",
        2: "the kitten slept on the sofa all afternoon",
    }
    ordered = [
        Hit(row=1, snippet_html="", fused_score=0.50, score=0.50),
        Hit(row=2, snippet_html="", fused_score=0.49, score=0.49),
    ]
    failed = _late_rescored(
        ordered,
        LateInteraction(0.5),
        text="where did the cat sleep",
        texts=texts,
        timings={},
    )
    assert failed == ""
    assert [h.row for h in ordered] == [2, 1]
    assert ordered[0].late_part and ordered[0].late_part > 0


def test_late_interaction_without_a_model_keeps_the_order(
    no_embedding_model: Any, agent: Any
):
    ordered = [Hit(row=1, snippet_html="", fused_score=0.5, score=0.5)]
    failed = _late_rescored(
        ordered, LateInteraction(0.5), text="cat", texts={1: "dog"}, timings={}
    )
    assert "late interaction failed" in failed
    assert [h.row for h in ordered] == [1]


# --- Several phrasings -------------------------------------------------------


def test_phrasings_are_fused_into_one_ranking(agent: Any):
    pie = _entry(agent, "Grandma's apple pie needs cinnamon", "2024-01-01")
    dog = _entry(agent, "The neighbours' dog is called Biscuit", "2024-01-01")
    both = _entry(agent, "Biscuit stole the apple pie", "2024-01-01")
    actor = Actor.for_agent(agent)
    # Each entry matched by its own words only (not those of the entries
    # before it or of its date).
    retrieval_config_update(
        constellation=agent.constellation, context_weight=0, date_weight=0
    )

    alone = memory_search(actor=actor, query="apple pie", mode="fts")
    assert dog not in [hit.row.pk for _kind, hit in alone.hits]

    result = memory_search(
        actor=actor, query="apple pie", queries=["dog Biscuit"], mode="fts"
    )
    ids = [hit.row.pk for _kind, hit in result.hits]
    assert ids[0] == both  # found by both phrasings
    assert set(ids) == {pie, dog, both}
    assert result.queries == ("apple pie", "dog Biscuit")
    assert any(s.name == "queries" for s in result.stages)


def test_the_search_tool_takes_phrasings_and_bounds_them(agent: Any):
    _entry(agent, "The neighbours' dog is called Biscuit", "2024-01-01")
    out = search_tool(
        actor=Actor.for_agent(agent),
        args=SearchIn(queries=["name of the dog", "Biscuit"], mode="fts"),
    )
    assert [r["content"] for r in out["results"]] == [
        "The neighbours' dog is called Biscuit"
    ]
    with pytest.raises(ValidationError):
        SearchIn(query="a", queries=["b"] * MAX_QUERIES)
    with pytest.raises(InvalidInput):
        memory_search(
            actor=Actor.for_agent(agent),
            query="a",
            queries=[f"q{i}" for i in range(MAX_QUERIES)],
        )
    with pytest.raises(InvalidInput):
        memory_search(actor=Actor.for_agent(agent), query="", queries=[" "])


def _favoured_by_time(keep: int | None, scores: list[float], texts: dict) -> list:
    ordered = [
        Hit(row=i, snippet_html="", fused_score=s, score=s)
        for i, s in enumerate(scores)
    ]
    ordered.sort(key=lambda h: -h.fused_score)
    stage = TimeStage((), 0.0, asked=WHEN, told_weight=0.1)
    _time_favoured(None, ordered, stage, texts, {}, keep=keep)  # type: ignore[arg-type]
    return [(h.row, h.score, h.time_part) for h in ordered]


def test_the_time_stage_reads_only_the_candidates_that_can_reach_the_window():
    rng = random.Random(5)
    read: list[int] = []

    class Texts(dict):
        def __getitem__(self, key: int) -> str:
            read.append(key)
            return super().__getitem__(key)

    for _ in range(200):
        n = rng.randint(1, 80)
        # Ties and near-ties included: scores on a coarse grid.
        scores = [rng.randint(0, 40) / 40 for _ in range(n)]
        texts = {i: rng.choice(["see you yesterday", "a cat"]) for i in range(n)}
        keep = rng.randint(1, 30)
        full = _favoured_by_time(None, scores, texts)
        read.clear()
        pruned = _favoured_by_time(keep, scores, Texts(texts))
        assert pruned[:keep] == full[:keep]
        assert len(read) <= n
    assert read  # some candidates are read; others not (below)
    scores = [1.0] * 5 + [0.1] * 20
    read.clear()
    _favoured_by_time(5, scores, Texts({i: "a cat" for i in range(25)}))
    assert sorted(read) == [0, 1, 2, 3, 4]
