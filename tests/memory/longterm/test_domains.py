"""The registry of search domains other apps fill, and how ``memory_search``
runs and merges them."""

from typing import Any

import pytest
from django.utils import timezone

from memory.longterm import domains
from memory.longterm.domains import (
    DomainQuery,
    SearchFilters,
    search_domain_register,
    search_domains,
)
from memory.longterm.search import (
    memory_search,
    search_domain_names,
    search_hit_payload,
)
from memory.longterm.services import archival_entry_create
from memory.search.engine import SearchOutcome, words_search
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import InvalidInput

NOTES = ["heron sighted at dawn", "heron and egret nests", "no birds today"]


@pytest.fixture
def notes_domain(monkeypatch: pytest.MonkeyPatch) -> list[DomainQuery]:
    """A domain of fixed notes, registered for one test; it keeps the
    queries it was handed."""
    monkeypatch.setattr(domains, "_DOMAINS", dict(domains._DOMAINS))
    asked: list[DomainQuery] = []

    def search(query: DomainQuery) -> SearchOutcome:
        asked.append(query)
        hits = words_search(
            ((note, note) for note in NOTES),
            text=query.text,
            limit=query.limit,
            fusion=query.fusion,
        )
        return SearchOutcome(hits, query.mode, "fts")

    search_domain_register(
        name="notes",
        kind="note",
        search=search,
        payload=lambda hit: {"id": NOTES.index(hit.row), "content": hit.row},
    )
    return asked


def test_registered_domains_are_named_and_searched_alone_or_in_all(
    agent: Any, notes_domain: list[DomainQuery]
):
    assert search_domain_names()[-2:] == ("notes", "all")
    assert {"files", "activity", "blocks"} <= set(search_domain_names())
    archival_entry_create(agent=agent, content="a heron in the archive")
    actor = Actor.for_agent(agent)
    alone = memory_search(actor=actor, query="heron egret", domain="notes")
    assert [hit.row for _kind, hit in alone.hits] == NOTES[1::-1]
    everything = memory_search(
        actor=actor, query="heron egret", domain="all", mode="fts"
    )
    kinds = [kind for kind, _hit in everything.hits]
    assert kinds.count("note") == 2 and "archival" in kinds
    scores = [hit.score for _kind, hit in everything.hits]
    assert scores == sorted(scores, reverse=True)
    asked = notes_domain[-1]
    assert (asked.actor, asked.constellation) == (actor, agent.constellation)
    note = next(hit for kind, hit in everything.hits if kind == "note")
    payload = search_hit_payload("note", note)
    assert payload["kind"] == "note" and payload["content"] == NOTES[1]
    assert payload["scores"]["score"] == note.score


def test_a_domain_name_or_kind_is_registered_once(notes_domain: Any):
    with pytest.raises(ValueError, match="already of kind note"):
        search_domain_register(name="notes", kind="memo", search=print, payload=dict)
    with pytest.raises(ValueError, match="kind 'note' already belongs"):
        search_domain_register(name="memos", kind="note", search=print, payload=dict)
    assert [d.name for d in search_domains()].count("notes") == 1


def test_unknown_domain_names_every_domain_and_as_of_only_blocks(agent: Any):
    actor = Actor.for_agent(agent)
    with pytest.raises(InvalidInput, match=r"one of .*activity.*blocks.*files.*all"):
        memory_search(actor=actor, query="x", domain="web")
    with pytest.raises(InvalidInput, match="only domain 'blocks' can"):
        memory_search(actor=actor, query="x", domain="files", as_of=timezone.now())


def test_filters_say_which_a_domain_cannot_meet():
    assert not SearchFilters().beyond(frozenset())
    dated = SearchFilters(since=None, tags=("x",))
    assert dated.beyond(frozenset({"since"}))
    assert not dated.beyond(frozenset({"tags"}))
    assert SearchFilters(agent_id=3).beyond(frozenset({"since", "until"}))
