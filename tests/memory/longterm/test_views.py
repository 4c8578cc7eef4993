"""Dashboard pages of long-term memory: search, archival browser, viewer."""

import re
from typing import Any

from django.test import Client
from django.utils import timezone

from activity.stream.services import activity_record
from memory.blocks.services import block_create, block_set_content
from memory.longterm.search import SearchResult
from memory.longterm.services import (
    archival_entry_create,
    conversation_start,
    messages_append,
    retrieval_config_update,
)
from memory.models import ArchivalEntry
from memory.search.engine import Fusion, Rerank
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.events import EventType
from tests.factories import AgentFactory, ConstellationFactory


def csrf_post(client: Client, url: str, data: dict[str, Any]) -> Any:
    client.get("/", follow=True)
    return client.post(
        url, data, headers={"X-CSRFToken": client.cookies["csrftoken"].value}
    )


def test_search_page_shows_snippets_and_provenance_and_scores_on_request(
    agent: Any, partner_client: Client
):
    archival_entry_create(agent=agent, content="The <b>heron</b> nests by the lake")
    page = partner_client.get("/memory/search/", {"q": "heron", "mode": "fts"})
    html = page.content.decode()
    assert page.status_code == 200
    assert "<mark>heron</mark>" in html
    assert "&lt;b&gt;" in html  # stored text is escaped, only marks are HTML
    assert agent.name in html
    # The scores are behind the ranking toggle, which live search keeps.
    assert "keyword rank" not in html
    assert 'name="explain"' in html
    explained = partner_client.get(
        "/memory/search/", {"q": "heron", "mode": "fts", "explain": "1"}
    ).content.decode()
    assert "keyword rank 1" in explained


def test_search_page_shows_the_stages_that_ran_with_their_settings_and_times(
    agent: Any, partner_client: Client
):
    archival_entry_create(agent=agent, content="The heron nests by the lake")
    retrieval_config_update(constellation=agent.constellation, context_weight=0.0)
    html = partner_client.get(
        "/memory/search/", {"q": "heron", "mode": "fts", "kind": "archival_memory"}
    ).content.decode()
    stages = html[html.index('data-testid="search-stages"') :]
    stages = stages[: stages.index("</details>")]
    names = re.findall(r'<th scope="row">([^<]+)</th>', stages)
    assert names == ["keywords", "permissions", "duplicates", "rows"]
    assert "BM25: own text 1, date in words 0.2" in stages  # context off
    assert re.search(r"\(\d+(\.\d+)? ms in all\)", stages)
    timed = re.findall(r'<td class="num">([^<]+)</td>', stages)
    assert all(re.fullmatch(r"\d+(\.\d+)?", value) for value in timed), timed


def test_stages_of_a_hybrid_search_name_fusion_vectors_and_rerank():
    result = SearchResult(
        query="q",
        domain="all",
        mode_requested="auto",
        mode_used="hybrid",
        degraded="",
        timings_ms={
            "archival.embed": 4.0,
            "archival.fts": 1.25,
            "message.fts": 0.5,
            "archival.vector": 2.0,
            "archival.total": 9.0,
            "message.total": 1.0,
        },
        quantised=True,
        fusion=Fusion(method="rrf", keyword_weight=0.7, depth=30),
        rerank=Rerank(decay_rate=0.99, now=timezone.now()),
    )
    stages = {stage.name: stage for stage in result.stages}
    assert list(stages) == [
        "query vector",
        "keywords",
        "meaning",
        "fusion",
        "permissions",
        "re-rank",
        "duplicates",
        "rows",
    ]
    assert stages["keywords"].ms == 1.8  # summed over the domains searched
    assert stages["meaning"].detail == "nearest vectors (quantised, re-scored exactly)"
    assert stages["fusion"].detail.startswith("reciprocal rank (k=60), keywords 0.7")
    assert "30 candidates" in stages["fusion"].detail
    assert "0.99/h" in stages["re-rank"].detail
    assert stages["permissions"].ms is None  # not timed in this result
    assert result.total_ms == 10.0


def test_search_page_shows_blocks_and_activity_with_their_own_provenance(
    agent: Any, partner_client: Client, django_capture_on_commit_callbacks: Any
):
    with django_capture_on_commit_callbacks(execute=True):
        block = block_create(
            actor=Actor.system(), owner=agent, label="birds", content="heron: 3"
        )
        activity_record(
            actor=Actor.for_agent(agent),
            event_type=EventType.NOTABLE,
            details={"description": "a heron landed"},
        )
    page = partner_client.get("/memory/search/", {"q": "heron", "mode": "fts"})
    html = page.content.decode()
    assert page.status_code == 200
    assert f'<a href="/memory/blocks/{block.pk}/">birds</a>' in html
    assert "version 1" in html
    assert 'data-kind="activity"' in html and "Entropy flagged: a" in html
    only = partner_client.get(
        "/memory/search/", {"q": "heron", "mode": "fts", "kind": "blocks"}
    ).content.decode()
    assert 'data-kind="block"' in only and 'data-kind="activity"' not in only


def test_the_search_page_searches_blocks_as_they_were_at_a_time(
    agent: Any, partner_client: Client
):
    block = block_create(
        actor=Actor.system(), owner=agent, label="birds", content="heron: 3"
    )
    then = timezone.now()
    block_set_content(actor=Actor.system(), block=block, value="egret: 1")
    params = {"q": "heron", "mode": "fts"}
    now = partner_client.get("/memory/search/", params).content.decode()
    assert f'<a href="/memory/blocks/{block.pk}/">birds</a>' not in now
    at = then.replace(tzinfo=None).isoformat()
    past = partner_client.get("/memory/search/", {**params, "as_of": at})
    html = past.content.decode()
    assert f'<a href="/memory/blocks/{block.pk}/">birds</a>' in html
    assert f'value="{at}"' in html  # the picker keeps the time asked for
    bad = partner_client.get("/memory/search/", {**params, "as_of": "yesterday"})
    assert "must be a date and time" in bad.content.decode()


def test_search_page_explains_an_empty_query_and_hostile_text(
    partner_client: Client, agent: Any
):
    empty = partner_client.get("/memory/search/", {"q": "  "})
    assert "query is empty" in empty.content.decode()
    hostile = partner_client.get("/memory/search/", {"q": 'NEAR("x" -'})
    assert hostile.status_code == 200


def test_search_page_says_why_meaning_search_is_off(
    partner_client: Client, agent: Any, no_embedding_model: Any
):
    html = partner_client.get("/memory/search/").content.decode()
    assert "Search by meaning is off" in html and "no ONNX model" in html


def test_archival_browser_creates_edits_and_deletes(agent: Any, partner_client: Client):
    url = f"/memory/agents/{agent.pk}/archival/"
    created = csrf_post(
        partner_client,
        url,
        {"content": "Umbrella in the car", "tags": "car, rain", "importance": "0.8"},
    )
    assert created.status_code == 302
    entry = ArchivalEntry.objects.get()
    assert entry.tags == ["car", "rain"] and entry.source == "partner"
    assert "Umbrella in the car" in partner_client.get(url).content.decode()
    csrf_post(
        partner_client,
        f"/memory/archival/{entry.pk}/edit/",
        {"content": "Umbrella in the hallway", "tags": "rain", "importance": "0.3"},
    )
    entry.refresh_from_db()
    assert entry.content == "Umbrella in the hallway" and entry.importance == 0.3
    csrf_post(partner_client, f"/memory/archival/{entry.pk}/delete/", {})
    assert not ArchivalEntry.objects.exists()


def test_archival_browser_reports_invalid_input_without_losing_the_page(
    agent: Any, partner_client: Client
):
    url = f"/memory/agents/{agent.pk}/archival/"
    response = csrf_post(partner_client, url, {"content": "x", "importance": "7"})
    assert response.status_code == 302
    page = partner_client.get(url).content.decode()
    assert "importance" in page.lower() and not ArchivalEntry.objects.exists()


def test_other_constellations_memory_pages_do_not_exist(partner_client: Client):
    stranger = AgentFactory(constellation=ConstellationFactory())
    entry = archival_entry_create(agent=stranger, content="secret")
    conversation = conversation_start(agent=stranger)
    assert (
        partner_client.get(f"/memory/agents/{stranger.pk}/archival/").status_code == 404
    )
    assert partner_client.get(f"/memory/archival/{entry.pk}/edit/").status_code == 404
    assert (
        partner_client.get(f"/memory/conversations/{conversation.pk}/").status_code
        == 404
    )


def test_conversation_viewer_shows_messages_in_order(
    agent: Any, partner_client: Client
):
    conversation = conversation_start(agent=agent, title="Morning check-in")
    messages_append(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "good morning"},
            {"role": "assistant", "content": "morning! 3 tasks today"},
        ],
    )
    listing = partner_client.get(f"/memory/agents/{agent.pk}/conversations/")
    assert "Morning check-in" in listing.content.decode()
    html = partner_client.get(
        f"/memory/conversations/{conversation.pk}/"
    ).content.decode()
    assert html.index("good morning") < html.index("morning! 3 tasks today")


def test_search_page_pages_results_and_filters_by_kind_and_date(
    agent: Any, partner_client: Client
):
    for n in range(13):
        archival_entry_create(agent=agent, content=f"heron sighting number {n}")
    conversation = conversation_start(agent=agent, title="walk")
    messages_append(
        conversation=conversation, messages=[{"role": "user", "content": "a heron!"}]
    )
    first = partner_client.get("/memory/search/", {"q": "heron", "mode": "fts"})
    html = first.content.decode()
    assert "Results 1\u201310" in html
    assert html.count('data-testid="search-result"') == 10
    assert 'page=2" data-testid="next-page"' in html
    second = partner_client.get(
        "/memory/search/", {"q": "heron", "mode": "fts", "page": "2"}
    ).content.decode()
    assert "Results 11\u201314" in second and "next-page" not in second

    only_messages = partner_client.get(
        "/memory/search/",
        {"q": "heron", "mode": "fts", "kind": "constellation_messages"},
    ).content.decode()
    assert only_messages.count('data-testid="search-result"') == 1
    ArchivalEntry.objects.filter(content__endswith=" 0").update(
        created_at="2020-01-01T10:00:00Z"
    )
    old = partner_client.get(
        "/memory/search/",
        {"q": "heron", "mode": "fts", "kind": "archival_memory", "until": "2020-01-01"},
    ).content.decode()
    assert old.count('data-testid="search-result"') == 1
    assert "sighting number 0" in old
    bad = partner_client.get("/memory/search/", {"q": "heron", "since": "soon"})
    assert "from must be a date (YYYY-MM-DD)" in bad.content.decode()


def test_meaning_only_results_far_from_the_query_are_weaker_matches(settings):
    from memory.longterm.views import _is_weak

    settings.SEARCH_WEAK_DISTANCE = 0.5

    def hit(fts_rank: Any, distance: Any) -> dict[str, Any]:
        return {"scores": {"fts_rank": fts_rank, "vector_distance": distance}}

    assert not _is_weak(hit(1, 0.9))  # the words matched
    assert not _is_weak(hit(None, 0.3))
    assert _is_weak(hit(None, 0.7))


def test_search_page_counts_entries_not_yet_indexed(agent: Any, partner_client: Client):
    archival_entry_create(agent=agent, content="fresh")
    ArchivalEntry.objects.update(embedding_state="pending")
    html = partner_client.get("/memory/search/").content.decode()
    assert "1 entry not yet indexed" in html
    ArchivalEntry.objects.update(embedding_state="ready")
    assert (
        "not yet indexed" not in partner_client.get("/memory/search/").content.decode()
    )


def test_search_page_finds_an_entry_waiting_for_its_embedding_and_says_so(
    agent: Any, partner_client: Client, embedding_model_loaded: Any
):
    archival_entry_create(agent=agent, content="Ana visits on June 7th")
    html = partner_client.get(
        "/memory/search/", {"q": "When does Ana visit?", "mode": "vector"}
    ).content.decode()
    assert "<mark>Ana</mark> <mark>visits</mark> on June 7th" in html
    assert "1 entry is still waiting for an embedding" in html
    stages = html[html.index('data-testid="search-stages"') :]
    assert "rows without a vector yet" in stages[: stages.index("</details>")]


def test_archival_browser_treats_an_offset_past_64_bits_as_the_first_page(
    agent: Any, partner_client: Client
):
    archival_entry_create(agent=agent, content="The heron nests by the lake")
    page = partner_client.get(
        f"/memory/agents/{agent.pk}/archival/", {"offset": str(2**63)}
    )
    assert page.status_code == 200
    assert "heron" in page.content.decode()


def test_archival_page_filters_shows_merges_and_restores(
    agent: Any, partner_client: Client, no_embedding_model: Any
):
    from memory.longterm.consolidation import archival_consolidate

    kept = archival_entry_create(agent=agent, content="The tram stop moved north")
    merged = archival_entry_create(agent=agent, content="the tram stop moved NORTH")
    archival_entry_create(
        agent=agent, content="Shared rota", tier="constellation", lifetime="long_term"
    )
    archival_consolidate(agent=agent)
    url = f"/memory/agents/{agent.pk}/archival/"
    page = partner_client.get(url).content.decode()
    assert "The tram stop moved north" in page and "NORTH" not in page
    assert "1 merged" in page  # the run's counts
    shown = partner_client.get(url + "?superseded=1").content.decode()
    assert (
        "the tram stop moved NORTH" in shown
        and 'data-testid="superseded-entry"' in shown
    )
    assert f"into entry {kept.pk}" in shown
    only_shared = partner_client.get(url + "?tier=constellation").content.decode()
    assert "Shared rota" in only_shared and "tram" not in only_shared
    long_term = partner_client.get(url + "?lifetime=long_term").content.decode()
    assert "Shared rota" in long_term and "tram" not in long_term
    history = partner_client.get(f"/memory/archival/{kept.pk}/edit/").content.decode()
    assert "merged" in history and "the tram stop moved NORTH" in history
    csrf_post(partner_client, f"/memory/archival/{merged.pk}/restore/", {})
    assert ArchivalEntry.objects.get(pk=merged.pk).superseded_at is None
    history = partner_client.get(f"/memory/archival/{kept.pk}/edit/").content.decode()
    assert "(restored since)" in history


def test_members_cannot_hard_delete_on_the_archival_page(agent: Any):
    from tests.factories import UserFactory

    member = UserFactory(username="member")
    agent.constellation.members.add(member)
    client = Client()
    client.force_login(member)
    item = archival_entry_create(agent=agent, content="keep me")
    client.post(f"/memory/archival/{item.pk}/delete/", {})
    assert ArchivalEntry.objects.filter(pk=item.pk).exists()
