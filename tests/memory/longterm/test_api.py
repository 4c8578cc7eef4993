"""The long-term memory tool API: archival, recall, search, conversations."""

import json
import threading
from typing import Any

import pytest
from django.test import Client

from activity.stream.services import activity_record
from memory.blocks.services import block_create
from memory.longterm import access
from memory.longterm.access import archival_access_flush
from memory.longterm.services import (
    archival_entry_create,
    conversation_start,
    messages_append,
    retrieval_config_update,
)
from memory.longterm.tasks import archival_entries_record_access_task
from memory.models import ArchivalEntry
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from pattern_site.kernel.events import EventType
from tests.factories import AgentFactory, ConstellationFactory

HOSTILE_QUERIES = [
    "NEAR(foo bar, 2)",
    '"unbalanced quote',
    "((((",
    "-",
    "*",
    "foo*",
    "AND OR NOT",
    "content: x",
    "^start",
    "🦊🔥",
    "a" * 10_000,
    " ".join(["word"] * 2000),
    "'; DROP TABLE memory_archivalentry; --",
    "\x01\x02 control characters",
    "NEAR",
    "{col1 col2}: term",
]


def post(client: Client, url: str, body: Any) -> Any:
    headers = {}
    if "csrftoken" in client.cookies:
        headers["X-CSRFToken"] = client.cookies["csrftoken"].value
    return client.post(
        url, json.dumps(body), content_type="application/json", headers=headers
    )


@pytest.fixture
def partner_api(partner_client: Client) -> Client:
    """The partner's session client holding a CSRF cookie for API writes."""
    partner_client.get("/", follow=True)
    assert "csrftoken" in partner_client.cookies
    return partner_client


def client_for(agent: Any) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=agent).raw}")


@pytest.fixture
def sibling(constellation: Any) -> Any:
    return AgentFactory(constellation=constellation, name="Flux")


@pytest.fixture
def stranger() -> Any:
    return AgentFactory(constellation=ConstellationFactory(), name="Stranger")


def test_agent_stores_and_lists_its_own_archival_entries(agent_client: Client):
    response = post(
        agent_client,
        "/api/archival",
        {"content": "Partner prefers tea", "tags": ["Food", "food"], "importance": 1},
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["tags"] == ["food"] and body["source"] == "agent"
    listed = agent_client.get("/api/archival").json()
    assert listed["count"] == 1
    assert listed["results"][0]["content"] == "Partner prefers tea"


def test_archival_insert_rejects_empty_content_and_bad_importance(
    agent_client: Client,
):
    empty = post(agent_client, "/api/archival", {"content": "   "})
    assert empty.status_code == 422
    assert "must not be empty" in empty.json()["detail"]
    too_important = post(
        agent_client, "/api/archival", {"content": "x", "importance": 2}
    )
    assert too_important.status_code == 422


def test_other_agents_archival_entry_does_not_exist_for_an_agent(
    agent: Any, sibling: Any, partner_client: Client
):
    entry = archival_entry_create(agent=sibling, content="Flux's private note")
    response = client_for(agent).get(f"/api/archival/{entry.pk}")
    assert response.status_code == 404
    assert partner_client.get(f"/api/archival/{entry.pk}").status_code == 200


def test_search_never_returns_another_agents_archival_or_another_constellation(
    agent: Any, sibling: Any, stranger: Any
):
    archival_entry_create(agent=agent, content="the zebra password is blue")
    archival_entry_create(agent=sibling, content="the zebra password is green")
    archival_entry_create(agent=stranger, content="the zebra password is red")
    client = client_for(agent)
    body = post(
        client, "/api/tools/search", {"query": "zebra password", "mode": "fts"}
    ).json()
    assert [r["content"] for r in body["results"]] == ["the zebra password is blue"]
    everything = post(
        client, "/api/tools/search", {"query": "zebra", "domain": "all", "mode": "fts"}
    ).json()
    assert {r["content"] for r in everything["results"]} == {
        "the zebra password is blue"
    }


def test_conversation_domains_follow_ownership_and_constellation(
    agent: Any, sibling: Any, stranger: Any
):
    for who in (agent, sibling, stranger):
        messages_append(
            conversation=conversation_start(agent=who),
            messages=[{"role": "user", "content": f"kiwi harvest for {who.name}"}],
        )
    client = client_for(agent)
    own = post(
        client,
        "/api/tools/search",
        {"query": "kiwi harvest", "domain": "conversations", "mode": "fts"},
    ).json()
    assert [r["content"] for r in own["results"]] == ["kiwi harvest for Entropy"]
    # A conversation is its agent's: across the constellation, an agent
    # still reads only its own messages, and the partner reads every agent's.
    for domain in ("constellation_messages", "all"):
        mine = post(
            client,
            "/api/tools/search",
            {"query": "kiwi harvest", "domain": domain, "mode": "fts"},
        ).json()
        assert [r["content"] for r in mine["results"]] == ["kiwi harvest for Entropy"]
    partner = Client()
    partner.force_login(agent.constellation.partner)
    team = post(
        partner,
        "/api/tools/search",
        {
            "query": "kiwi harvest",
            "domain": "constellation_messages",
            "mode": "fts",
            "constellation_id": agent.constellation_id,
            "explain": True,
        },
    ).json()
    assert {r["content"] for r in team["results"]} == {
        "kiwi harvest for Entropy",
        "kiwi harvest for Flux",
    }
    hit = team["results"][0]
    assert hit["provenance"]["store"] == "conversation"
    assert "<mark>kiwi</mark>" in hit["snippet_html"]
    assert hit["scores"]["fts_rank"] >= 1


def test_partner_searches_the_whole_constellation_with_agent_filter(
    agent: Any, sibling: Any, partner_api: Client
):
    partner_client = partner_api
    archival_entry_create(agent=agent, content="mango season starts in May")
    archival_entry_create(agent=sibling, content="mango chutney recipe")
    both = post(partner_client, "/api/tools/search", {"query": "mango", "mode": "fts"})
    assert both.status_code == 200, both.content
    assert len(both.json()["results"]) == 2
    only = post(
        partner_client,
        "/api/tools/search",
        {"query": "mango", "mode": "fts", "filters": {"agent_id": sibling.pk}},
    ).json()
    assert [r["content"] for r in only["results"]] == ["mango chutney recipe"]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
@pytest.mark.parametrize("mode", ["fts", "auto"])
def test_any_user_text_is_a_valid_query(agent: Any, query: str, mode: str):
    archival_entry_create(agent=agent, content="foo bar content word start")
    response = post(
        client_for(agent), "/api/tools/search", {"query": query, "mode": mode}
    )
    assert response.status_code == 200, response.content
    assert isinstance(response.json()["results"], list)


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_any_user_text_is_a_valid_query_without_the_context_column(
    agent: Any, query: str
):
    retrieval_config_update(constellation=agent.constellation, context_weight=0.0)
    archival_entry_create(agent=agent, content="foo bar content word start")
    response = post(
        client_for(agent), "/api/tools/search", {"query": query, "mode": "fts"}
    )
    assert response.status_code == 200, response.content
    assert isinstance(response.json()["results"], list)


def test_hostile_query_still_finds_its_words(agent: Any):
    archival_entry_create(agent=agent, content="the NEAR operator manual")
    body = post(
        client_for(agent), "/api/tools/search", {"query": "NEAR(", "mode": "fts"}
    ).json()
    assert [r["content"] for r in body["results"]] == ["the NEAR operator manual"]


def test_empty_query_is_a_clear_422(agent_client: Client):
    response = post(agent_client, "/api/tools/search", {"query": "   "})
    assert response.status_code == 422
    assert "query is empty" in response.json()["detail"]


def test_search_hits_count_as_accesses(
    agent: Any, django_capture_on_commit_callbacks: Any
):
    entry = archival_entry_create(agent=agent, content="orchid watering schedule")
    with django_capture_on_commit_callbacks(execute=True):
        post(client_for(agent), "/api/tools/search", {"query": "orchid", "mode": "fts"})
    entry.refresh_from_db()
    assert entry.access_count == 1 and entry.accessed_at is not None


def test_hits_of_many_searches_are_counted_by_one_task_off_their_path(
    agent: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
):
    entry = archival_entry_create(agent=agent, content="orchid watering schedule")
    other = archival_entry_create(agent=agent, content="orchid repotting notes")
    sent: list[list] = []
    monkeypatch.setitem(
        archival_entries_record_access_task.app.conf, "task_always_eager", False
    )
    monkeypatch.setattr(archival_entries_record_access_task, "delay", sent.append)
    monkeypatch.setattr(access._ACCESSES, "_delay", 600.0)  # sent by flush only
    client = client_for(agent)
    with django_capture_on_commit_callbacks(execute=True):
        for query in ("orchid watering", "orchid", "orchid schedule"):
            post(client, "/api/tools/search", {"query": query, "mode": "fts"})
    assert sent == []  # no broker write on the searches' path
    assert archival_access_flush() == 2
    [accesses] = sent
    assert sorted((pk, n) for pk, n, _at in accesses) == [(entry.pk, 3), (other.pk, 3)]
    archival_entries_record_access_task(accesses)
    entry.refresh_from_db()
    assert entry.access_count == 3 and entry.accessed_at is not None


def test_counted_hits_are_sent_without_another_search(
    agent: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
):
    entry = archival_entry_create(agent=agent, content="orchid watering schedule")
    sent: list[list] = []
    arrived = threading.Event()
    monkeypatch.setattr(access._ACCESSES, "_delay", 0.05)
    monkeypatch.setitem(
        archival_entries_record_access_task.app.conf, "task_always_eager", False
    )
    monkeypatch.setattr(
        archival_entries_record_access_task,
        "delay",
        lambda accesses: (sent.append(accesses), arrived.set()),
    )
    with django_capture_on_commit_callbacks(execute=True):
        post(client_for(agent), "/api/tools/search", {"query": "orchid", "mode": "fts"})
    assert arrived.wait(timeout=30)
    assert [[pk for pk, _n, _at in accesses] for accesses in sent] == [[entry.pk]]


def test_recall_tool_inserts_appends_reads_and_deletes_by_label(
    agent_client: Client,
):
    inserted = post(
        agent_client,
        "/api/tools/recall",
        {"action": "insert", "label": "trip", "content": "Lisbon in May"},
    )
    assert inserted.status_code == 200, inserted.content
    post(
        agent_client,
        "/api/tools/recall",
        {"action": "append", "label": "trip", "content": "hotel near Alfama"},
    )
    read = post(agent_client, "/api/tools/recall", {"action": "read", "label": "trip"})
    assert read.json()["entry"]["content"] == "Lisbon in May\nhotel near Alfama"
    duplicate = post(
        agent_client,
        "/api/tools/recall",
        {"action": "insert", "label": "trip", "content": "again"},
    )
    assert duplicate.status_code == 409
    deleted = post(
        agent_client, "/api/tools/recall", {"action": "delete", "label": "trip"}
    )
    assert deleted.status_code == 200
    missing = post(
        agent_client, "/api/tools/recall", {"action": "read", "label": "trip"}
    )
    assert missing.status_code == 404


def test_recall_without_action_searches_own_conversations_and_archival(
    agent: Any, sibling: Any
):
    archival_entry_create(agent=agent, content="walnut allergy noted")
    messages_append(
        conversation=conversation_start(agent=agent),
        messages=[{"role": "user", "content": "remember the walnut cake"}],
    )
    messages_append(
        conversation=conversation_start(agent=sibling),
        messages=[{"role": "user", "content": "walnut gossip for Flux"}],
    )
    body = post(client_for(agent), "/api/tools/recall", {"query": "walnut"}).json()
    assert {r["content"] for r in body["results"]} == {
        "walnut allergy noted",
        "remember the walnut cake",
    }


def test_letta_archival_insert_and_search(agent_client: Client):
    created = post(
        agent_client,
        "/api/tools/archival_memory_insert",
        {"content": "Saffron is stored in the top drawer", "tags": ["kitchen"]},
    )
    assert created.status_code == 201
    found = post(
        agent_client,
        "/api/tools/archival_memory_search",
        {"query": "saffron drawer", "tags": ["kitchen"]},
    ).json()
    assert found[0]["content"] == "Saffron is stored in the top drawer"
    none = post(
        agent_client,
        "/api/tools/archival_memory_search",
        {"query": "saffron drawer", "tags": ["garage"]},
    ).json()
    assert none == []


def test_conversation_lifecycle_and_paginated_messages(agent_client: Client):
    conversation = post(agent_client, "/api/conversations", {"title": "Planning"})
    assert conversation.status_code == 201
    cid = conversation.json()["id"]
    appended = post(
        agent_client,
        f"/api/conversations/{cid}/messages",
        {
            "messages": [
                {"role": "user", "content": f"message {i}"} for i in range(1, 6)
            ],
            "batch_id": "b1",
        },
    )
    assert appended.status_code == 201
    assert [m["position"] for m in appended.json()] == [1, 2, 3, 4, 5]
    page = agent_client.get(f"/api/conversations/{cid}/messages?limit=2").json()
    assert [m["content"] for m in page["messages"]] == ["message 1", "message 2"]
    rest = agent_client.get(
        f"/api/conversations/{cid}/messages?limit=10&after={page['next_after']}"
    ).json()
    assert [m["position"] for m in rest["messages"]] == [3, 4, 5]
    assert rest["next_after"] is None

    idle = post(agent_client, f"/api/conversations/{cid}/status", {"status": "idle"})
    assert idle.json()["status"] == "idle"
    post(
        agent_client,
        f"/api/conversations/{cid}/messages",
        {"messages": [{"role": "assistant", "content": "back again"}]},
    )
    assert agent_client.get(f"/api/conversations/{cid}").json()["status"] == "active"
    archived = post(
        agent_client, f"/api/conversations/{cid}/status", {"status": "archived"}
    )
    assert archived.json()["ended_at"] is not None
    reopen = post(
        agent_client, f"/api/conversations/{cid}/status", {"status": "active"}
    )
    assert reopen.status_code == 409
    assert "archived is final" in reopen.json()["detail"]
    late = post(
        agent_client,
        f"/api/conversations/{cid}/messages",
        {"messages": [{"role": "user", "content": "too late"}]},
    )
    assert late.status_code == 409


def test_message_with_unknown_role_is_rejected(agent_client: Client):
    cid = post(agent_client, "/api/conversations", {}).json()["id"]
    response = post(
        agent_client,
        f"/api/conversations/{cid}/messages",
        {"messages": [{"role": "narrator", "content": "hi"}]},
    )
    assert response.status_code == 422


def test_other_agents_conversation_is_not_found(agent: Any, sibling: Any):
    conversation = conversation_start(agent=sibling)
    client = client_for(agent)
    assert client.get(f"/api/conversations/{conversation.pk}").status_code == 404
    response = post(
        client,
        f"/api/conversations/{conversation.pk}/messages",
        {"messages": [{"role": "user", "content": "intrusion"}]},
    )
    assert response.status_code == 404


def test_partner_tunes_decay_but_agents_cannot(
    constellation: Any, partner_api: Client, agent_client: Client
):
    url = f"/api/constellations/{constellation.pk}/retrieval-config"
    assert partner_api.get(url).json()["rerank_enabled"] is False
    body = json.dumps(
        {"rerank_enabled": True, "decay_rate": 0.99, "constellation_decay_rate": 0.9}
    )
    tuned = partner_api.put(
        url,
        body,
        content_type="application/json",
        headers={"X-CSRFToken": partner_api.cookies["csrftoken"].value},
    )
    assert tuned.status_code == 200, tuned.content
    assert tuned.json() == {
        "constellation_id": constellation.pk,
        "rerank_enabled": True,
        "decay_rate": 0.99,
        "conversation_decay_rate": 0.99,
        "constellation_decay_rate": 0.9,
        "archival_cap": 10_000,
        "fusion": "weighted",
        "keyword_weight": 0.6,
        "context_weight": 0.2,
        "date_weight": 0.2,
        "candidate_depth": 40,
        "reranker": "off",
        "reranker_depth": 50,
        "time_weight": 0.5,
        "when_weight": 0.1,
        "late_weight": 0.0,
    }
    denied = agent_client.put(url, body, content_type="application/json")
    assert denied.status_code == 403


def test_partner_sets_fusion_stages_and_bad_values_are_a_422(
    constellation: Any, partner_api: Client
):
    url = f"/api/constellations/{constellation.pk}/retrieval-config"
    headers = {"X-CSRFToken": partner_api.cookies["csrftoken"].value}
    body = {
        "fusion": "rrf",
        "keyword_weight": 0.7,
        "context_weight": 0.0,
        "reranker": "http",
        "reranker_depth": 20,
        "time_weight": 0.2,
        "when_weight": 0.3,
        "late_weight": 0.2,
    }
    tuned = partner_api.put(
        url, json.dumps(body), content_type="application/json", headers=headers
    )
    assert tuned.status_code == 200, tuned.content
    assert {k: tuned.json()[k] for k in body} == body
    for bad in (
        {"fusion": "max"},
        {"keyword_weight": -0.1},
        {"candidate_depth": 9},
        {"reranker": "colbert"},
        {"reranker_depth": 4},
        {"time_weight": 1.5},
        {"when_weight": 1.5},
        {"late_weight": -0.1},
    ):
        response = partner_api.put(
            url, json.dumps(bad), content_type="application/json", headers=headers
        )
        assert response.status_code == 422, bad
    assert partner_api.get(url).json()["fusion"] == "rrf"


def test_each_hit_shows_its_keyword_and_vector_shares(agent: Any):
    archival_entry_create(agent=agent, content="the heron nests by the lake")
    body = post(
        client_for(agent),
        "/api/tools/search",
        {"query": "heron", "mode": "fts", "explain": True},
    ).json()
    scores = body["results"][0]["scores"]
    assert scores["keyword_part"] == pytest.approx(1.0)
    assert "vector_part" not in scores  # null: left out
    assert scores["fused"] == pytest.approx(scores["keyword_part"])


def test_partner_can_file_an_entry_for_an_agent_but_not_a_strangers(
    agent: Any, stranger: Any, partner_api: Client
):
    ok = post(partner_api, "/api/archival", {"content": "x", "agent_id": agent.pk})
    assert ok.status_code == 201 and ok.json()["source"] == "partner"
    other = post(
        partner_api, "/api/archival", {"content": "x", "agent_id": stranger.pk}
    )
    assert other.status_code == 404
    assert ArchivalEntry.objects.filter(agent=stranger).count() == 0


def test_unknown_domains_and_as_of_outside_blocks_are_a_clear_422(
    agent_client: Client,
):
    unknown = post(agent_client, "/api/tools/search", {"query": "x", "domain": "web"})
    assert unknown.status_code == 422
    assert "blocks" in json.dumps(unknown.json()["errors"])
    then = "2026-05-01T12:00:00Z"
    for domain in ("all", "files", "activity", "archival_memory"):
        wrong = post(
            agent_client,
            "/api/tools/search",
            {"query": "x", "domain": domain, "as_of": then},
        )
        assert wrong.status_code == 422, domain
        detail = wrong.json()["detail"]
        assert "as_of" in detail and "'blocks'" in detail and repr(domain) in detail
    for bad in ("yesterday", "1714564800", 1714564800, "2026-13-45T00:00:00Z"):
        response = post(
            agent_client,
            "/api/tools/search",
            {"query": "x", "domain": "blocks", "as_of": bad},
        )
        assert response.status_code == 422, bad
        assert response.json()["errors"][0]["loc"][-1] == "as_of"
    naive = post(
        agent_client,
        "/api/tools/search",
        {"query": "x", "domain": "blocks", "as_of": "2026-05-01T12:00:00"},
    )
    assert naive.status_code == 200, naive.content


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_any_user_text_is_a_valid_query_in_every_domain(
    agent: Any, query: str, django_capture_on_commit_callbacks: Any
):
    with django_capture_on_commit_callbacks(execute=True):
        archival_entry_create(agent=agent, content="foo bar content word start")
        block_create(
            actor=Actor.system(), owner=agent, label="notes", content="foo word"
        )
    response = post(
        client_for(agent),
        "/api/tools/search",
        {"query": query, "domain": "all", "mode": "fts"},
    )
    assert response.status_code == 200, response.content
    assert isinstance(response.json()["results"], list)


def test_all_merges_every_domain_by_score_each_hit_saying_its_kind(
    agent: Any, sibling: Any, django_capture_on_commit_callbacks: Any
):
    with django_capture_on_commit_callbacks(execute=True):
        archival_entry_create(agent=agent, content="the heron nests by the lake")
        block_create(
            actor=Actor.system(), owner=agent, label="birds", content="heron count: 3"
        )
        activity_record(
            actor=Actor.for_agent(sibling),
            event_type=EventType.NOTABLE,
            details={"description": "A heron visited the pond"},
        )
    body = post(
        client_for(agent),
        "/api/tools/search",
        {"query": "heron", "domain": "all", "mode": "fts", "explain": True},
    ).json()
    kinds = {hit["kind"] for hit in body["results"]}
    assert {"archival", "block", "activity"} <= kinds
    scores = [hit["scores"]["score"] for hit in body["results"]]
    assert scores == sorted(scores, reverse=True)
    event = next(h for h in body["results"] if h.get("event_type") == "notable")
    assert event["kind"] == "activity"
    assert event["content"] == "Flux flagged: A heron visited the pond"
    assert event["agent_name"] == "Flux"
    assert "<mark>heron</mark>" in event["snippet_html"]
    block = next(h for h in body["results"] if h["kind"] == "block")
    assert (block["label"], block["version"]) == ("birds", 1)
    # Searching one domain gives that domain's hits only.
    only = post(
        client_for(agent),
        "/api/tools/search",
        {"query": "heron", "domain": "activity", "mode": "fts"},
    ).json()
    assert {h["kind"] for h in only["results"]} == {"activity"}


def _superseded_pair(agent: Any) -> tuple[ArchivalEntry, ArchivalEntry]:
    """Two entries of ``agent``, the second merged into the first."""
    from memory.longterm.services import archival_entry_supersede

    kept = archival_entry_create(agent=agent, content="the boat is moored at pier 4")
    merged = archival_entry_create(agent=agent, content="boat moored at pier 4")
    archival_entry_supersede(entry=merged, reason="merged", by=kept)
    return kept, merged


def test_archival_list_hides_superseded_entries_unless_asked_and_filters(
    agent: Any, partner_api: Client
):
    kept, merged = _superseded_pair(agent)
    archival_entry_create(
        agent=agent, content="team rota", tier="constellation", lifetime="long_term"
    )
    ids = lambda query: [  # noqa: E731
        e["id"] for e in partner_api.get(f"/api/archival?{query}").json()["results"]
    ]
    assert merged.pk not in ids("") and kept.pk in ids("")
    listed = partner_api.get("/api/archival?include_superseded=true").json()
    row = next(e for e in listed["results"] if e["id"] == merged.pk)
    assert row["superseded_by_id"] == kept.pk and row["superseded_reason"] == "merged"
    assert len(ids("tier=constellation")) == 1
    assert len(ids("lifetime=long_term&source=agent")) == 1
    assert ids("source=partner") == []
    assert partner_api.get("/api/archival?tier=galaxy").status_code == 422


def test_only_the_partner_restores_a_superseded_entry(
    agent: Any, partner_api: Client, agent_client: Client, stranger: Any
):
    _kept, merged = _superseded_pair(agent)
    url = f"/api/archival/{merged.pk}/restore"
    assert post(agent_client, url, {}).status_code == 403
    _other_kept, theirs = _superseded_pair(stranger)
    assert (
        post(partner_api, f"/api/archival/{theirs.pk}/restore", {}).status_code == 404
    )
    restored = post(partner_api, url, {})
    assert restored.status_code == 200 and restored.json()["superseded_at"] is None
    assert post(partner_api, url, {}).status_code == 409  # not superseded now
    ids = [e["id"] for e in agent_client.get("/api/archival").json()["results"]]
    assert merged.pk in ids


def test_a_hard_delete_is_the_partners_alone(
    agent: Any, partner_api: Client, agent_client: Client
):
    item = archival_entry_create(agent=agent, content="delete me for good")
    url = f"/api/archival/{item.pk}"
    assert agent_client.delete(url).status_code == 403
    assert ArchivalEntry.objects.filter(pk=item.pk).exists()
    headers = {"X-CSRFToken": partner_api.cookies["csrftoken"].value}
    assert partner_api.delete(url, headers=headers).status_code == 204
    assert not ArchivalEntry.objects.filter(pk=item.pk).exists()


def test_consolidation_runs_are_listed_with_their_counts(
    agent: Any, partner_api: Client, agent_client: Client, stranger: Any
):
    from memory.longterm.consolidation import archival_consolidate

    archival_entry_create(agent=agent, content="twins", importance=0.9)
    archival_entry_create(agent=agent, content="Twins", importance=0.9)
    run = archival_consolidate(agent=agent)
    url = f"/api/constellations/{agent.constellation_id}/consolidation-runs"
    body = partner_api.get(url).json()
    assert [(r["id"], r["merged"], r["agent_id"]) for r in body] == [
        (run.pk, 1, agent.pk)
    ]
    assert len(agent_client.get(url).json()) == 1
    other = f"/api/constellations/{stranger.constellation_id}/consolidation-runs"
    assert partner_api.get(other).status_code == 404


def test_an_entry_is_filed_with_its_tier_lifetime_and_conversation(
    agent: Any, sibling: Any, agent_client: Client
):
    own = conversation_start(agent=agent)
    body = {
        "content": "the partner prefers mornings",
        "tier": "constellation",
        "lifetime": "long_term",
        "source_conversation_id": own.pk,
    }
    created = post(agent_client, "/api/archival", body)
    assert created.status_code == 201, created.content
    row = created.json()
    assert (row["tier"], row["lifetime"], row["source"]) == (
        "constellation",
        "long_term",
        "agent",
    )
    assert row["source_conversation_id"] == own.pk and row["history"] == []
    theirs = conversation_start(agent=sibling)
    body["source_conversation_id"] = theirs.pk
    assert post(agent_client, "/api/archival", body).status_code == 404


def test_tool_calls_and_their_results_are_stored_and_listed(agent_client: Client):
    cid = post(agent_client, "/api/conversations", {}).json()["id"]
    appended = post(
        agent_client,
        f"/api/conversations/{cid}/messages",
        {
            "batch_id": "turn-1",
            "messages": [
                {"role": "user", "content": "what did I plant?"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "name": "archival_search",
                            "arguments": '{"query": "plant"}',
                        }
                    ],
                },
                {"role": "tool", "content": "a fig tree", "tool_call_id": "call_1"},
                {"role": "assistant", "content": "A fig tree."},
            ],
        },
    )
    assert appended.status_code == 201
    page = agent_client.get(f"/api/conversations/{cid}/messages").json()
    call, result = page["messages"][1], page["messages"][2]
    assert call["tool_calls"] == [
        {"id": "call_1", "name": "archival_search", "arguments": '{"query": "plant"}'}
    ]
    assert call["content"] == ""
    assert (result["role"], result["tool_call_id"]) == ("tool", "call_1")
    assert {m["batch_id"] for m in page["messages"]} == {"turn-1"}


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"role": "tool", "content": "orphan"}, "needs the tool_call_id"),
        (
            {
                "role": "user",
                "content": "hi",
                "tool_calls": [{"id": "c", "name": "x", "arguments": "{}"}],
            },
            "cannot make tool calls",
        ),
        ({"role": "assistant", "content": ""}, "must not be empty"),
        (
            {"role": "user", "content": "hi", "tool_call_id": "call_1"},
            "answers no tool call",
        ),
    ],
)
def test_malformed_tool_messages_are_refused(
    agent_client: Client, message: dict[str, Any], error: str
):
    cid = post(agent_client, "/api/conversations", {}).json()["id"]
    response = post(
        agent_client, f"/api/conversations/{cid}/messages", {"messages": [message]}
    )
    assert response.status_code == 422
    assert error in response.json()["detail"]
    listed = agent_client.get(f"/api/conversations/{cid}/messages").json()
    assert listed["messages"] == []
