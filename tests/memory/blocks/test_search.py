"""The search tool's blocks domain: the blocks a caller can read, matched
in their rendered text now or as they were at a time."""

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from memory.blocks.models import BlockUpdate
from memory.blocks.selectors import block_history_count, block_texts_at
from memory.blocks.services import (
    block_append,
    block_create,
    block_rewrite,
    block_share,
)
from memory.longterm.search import SearchFilters, memory_search, search_hit_payload
from pattern_site.kernel.actors import Actor
from tests.factories import AgentFactory, ConstellationFactory

SYSTEM = Actor.system()


def search(client: Client, body: dict[str, Any]) -> Any:
    return client.post(
        "/api/tools/search", json.dumps(body), content_type="application/json"
    )


def labels(response: Any) -> set[str]:
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert {hit["kind"] for hit in results} <= {"block"}
    return {hit["label"] for hit in results}


def backdate(block: Any, *ages: timedelta) -> None:
    """Give the block's versions, oldest first, the times ``ages`` ago."""
    now = timezone.now()
    versions = list(BlockUpdate.objects.filter(block=block).order_by("pk"))
    assert len(versions) == len(ages)
    for version, age in zip(versions, ages, strict=True):
        BlockUpdate.objects.filter(pk=version.pk).update(created_at=now - age)


@pytest.fixture
def blocks(agent: Any, other_agent: Any, constellation: Any) -> dict[str, Any]:
    stranger = AgentFactory(constellation=ConstellationFactory(), name="Stranger")
    made = {
        "own": block_create(
            actor=SYSTEM, owner=agent, label="plans", content="Ana visits in June."
        ),
        "secret": block_create(
            actor=SYSTEM,
            owner=other_agent,
            label="surprise",
            content="Ana's birthday party is a secret.",
        ),
        "shared": block_create(
            actor=SYSTEM, owner=other_agent, label="tastes", content="Ana likes tea."
        ),
        "team": block_create(
            actor=SYSTEM,
            constellation=constellation,
            label="family",
            content="Ana is the partner's sister.",
        ),
        "elsewhere": block_create(
            actor=SYSTEM, owner=stranger, label="other", content="Ana elsewhere."
        ),
    }
    block_share(actor=SYSTEM, block=made["shared"], agent=agent, access="read_only")
    return made


def test_agent_finds_its_own_shared_and_constellation_blocks_only(
    agent_client: Client, blocks: dict[str, Any]
):
    found = search(agent_client, {"query": "Ana", "domain": "blocks", "explain": True})
    assert labels(found) == {"plans", "tastes", "family"}
    hit = next(h for h in found.json()["results"] if h["label"] == "plans")
    assert hit["block_id"] == hit["id"] == str(blocks["own"].pk)
    assert hit["version"] == block_history_count(block=blocks["own"])
    assert hit["content"] == "Ana visits in June."
    assert "<mark>Ana</mark>" in hit["snippet_html"]
    assert hit["provenance"]["store"] == "block"
    shared = next(h for h in found.json()["results"] if h["label"] == "tastes")
    assert shared["agent_name"] == "Flux"
    # The block not shared with the agent is never found, whatever the words.
    everything = search(
        agent_client, {"query": "birthday secret party", "domain": "all"}
    ).json()
    assert [h for h in everything["results"] if h["kind"] == "block"] == []
    assert (
        labels(
            search(agent_client, {"query": "birthday secret party", "domain": "blocks"})
        )
        == set()
    )


def test_a_human_finds_every_block_of_their_constellation_only(
    partner: Any, other_agent: Any, blocks: dict[str, Any]
):
    human = Actor.for_user(partner)
    result = memory_search(actor=human, query="Ana", domain="blocks", mode="fts")
    found = {search_hit_payload(k, h)["label"] for k, h in result.hits}
    assert found == {"plans", "surprise", "tastes", "family"}
    theirs = memory_search(
        actor=human,
        query="Ana",
        domain="blocks",
        filters=SearchFilters(agent_id=other_agent.pk),
    )
    # The blocks in Flux's memory: its own and the constellation's.
    assert {h.row.block.label for _k, h in theirs.hits} == {
        "surprise",
        "tastes",
        "family",
    }


def test_blocks_rank_by_the_share_of_words_and_name_their_newest_version(
    agent: Any, agent_client: Client
):
    notes = block_create(actor=SYSTEM, owner=agent, label="notes", content="Tea.")
    block_append(actor=SYSTEM, block=notes, content="Ana visits in June.")
    block_create(actor=SYSTEM, owner=agent, label="diary", content="June was wet.")
    body = search(
        agent_client, {"query": "when does Ana visit", "domain": "blocks"}
    ).json()
    assert [h["label"] for h in body["results"]] == ["notes"]
    assert body["results"][0]["version"] == 2
    assert body["mode_used"] == "fts"
    both = search(
        agent_client, {"query": "Ana June", "domain": "blocks", "explain": True}
    ).json()
    assert [h["label"] for h in both["results"]] == ["notes", "diary"]
    assert both["results"][0]["scores"]["score"] > both["results"][1]["scores"]["score"]


def test_as_of_searches_the_text_blocks_had_then(agent: Any, agent_client: Client):
    plans = block_create(
        actor=SYSTEM, owner=agent, label="plans", content="Ana visits in June."
    )
    block_rewrite(actor=SYSTEM, block=plans, content="Ana visits in July.")
    later = block_create(actor=SYSTEM, owner=agent, label="later", content="July.")
    backdate(plans, timedelta(days=3), timedelta(days=1))
    backdate(later, timedelta(hours=1))
    then = (timezone.now() - timedelta(days=2)).isoformat()

    past = search(
        agent_client, {"query": "June", "domain": "blocks", "as_of": then}
    ).json()
    assert [(h["label"], h["version"]) for h in past["results"]] == [("plans", 1)]
    assert past["results"][0]["content"] == "Ana visits in June."
    # Neither the newer text nor a block made since is found as of then.
    newer = search(agent_client, {"query": "July", "domain": "blocks", "as_of": then})
    assert labels(newer) == set()
    now = search(agent_client, {"query": "July", "domain": "blocks"}).json()
    assert {(h["label"], h["version"]) for h in now["results"]} == {
        ("plans", 2),
        ("later", 1),
    }
    assert labels(search(agent_client, {"query": "June", "domain": "blocks"})) == set()
    before = (timezone.now() - timedelta(days=5)).isoformat()
    assert (
        labels(
            search(agent_client, {"query": "Ana", "domain": "blocks", "as_of": before})
        )
        == set()
    )


def test_as_of_never_shows_a_block_the_caller_cannot_read(
    agent_client: Client, blocks: dict[str, Any]
):
    for block in blocks.values():
        backdate(block, timedelta(days=2))
    then = (timezone.now() - timedelta(days=1)).isoformat()
    found = search(agent_client, {"query": "Ana", "domain": "blocks", "as_of": then})
    assert labels(found) == {"plans", "tastes", "family"}


def test_filters_blocks_cannot_meet_leave_no_block(agent_client: Client, blocks):
    for filters in ({"tags": ["x"]}, {"role": "user"}, {"metadata_keys": ["k"]}):
        found = search(
            agent_client, {"query": "Ana", "domain": "blocks", "filters": filters}
        )
        assert labels(found) == set()
    old = (timezone.now() + timedelta(days=1)).isoformat()
    assert (
        labels(
            search(
                agent_client,
                {"query": "Ana", "domain": "blocks", "filters": {"since": old}},
            )
        )
        == set()
    )


def test_block_texts_at_leave_out_blocks_without_a_version_then(agent: Any):
    made = block_create(actor=SYSTEM, owner=agent, label="plans", content="One.")
    empty = block_create(actor=SYSTEM, owner=agent, label="empty")
    block_append(actor=SYSTEM, block=made, content="Two.")
    backdate(made, timedelta(days=2), timedelta(hours=1))
    texts = block_texts_at(
        blocks=[made, empty], moment=timezone.now() - timedelta(days=1)
    )
    assert [(t.block.label, t.text) for t in texts] == [("plans", "One.")]
    now = {t.block.label: t for t in block_texts_at(blocks=[made, empty])}
    assert now["plans"].text == "One.\nTwo."
    assert now["plans"].version_id == BlockUpdate.objects.filter(block=made).last().pk
