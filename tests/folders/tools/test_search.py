import pytest
from django.test import Client

from folders.files import services
from folders.tools.search import folder_search, passage_hit_payload
from memory.longterm.search import memory_search
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.factories import ConstellationFactory, UserFactory

pytestmark = pytest.mark.django_db

DOCS = {
    "pets.md": "Our dog loves long walks in the park every morning.\n",
    "finance.md": "The quarterly budget review is scheduled for Thursday.\n",
    "code.py": "def parse_config(path):\n    return load_yaml(path)\n",
}


@pytest.fixture
def indexed(folder, upload, embedding_ready):
    upload(folder, *[(name, text.encode()) for name, text in DOCS.items()])
    return folder


@pytest.fixture
def embedding_ready():
    from memory.search.embedder import embedding_model, embedding_status

    if embedding_model() is None:
        pytest.skip(embedding_status().reason)


def test_hybrid_search_finds_a_passage_by_meaning(indexed):
    outcome = folder_search(
        folders=[indexed], query="puppy exercise outdoors", mode="hybrid"
    )
    assert outcome.mode_used == "hybrid"
    top = passage_hit_payload(outcome.hits[0])
    assert top["path"] == "pets.md"
    assert top["cite"] == "docs/pets.md:1-1"
    assert top["scores"]["vector_rank"] == 1


def test_hybrid_search_finds_a_passage_by_exact_words(indexed):
    outcome = folder_search(folders=[indexed], query="load_yaml", mode="hybrid")
    top = passage_hit_payload(outcome.hits[0])
    assert top["path"] == "code.py"
    assert top["scores"]["fts_rank"] == 1
    assert "<mark>" in top["snippet_html"]


def test_search_narrows_to_one_file(indexed):
    outcome = folder_search(
        folders=[indexed], query="budget", mode="fts", path="pets.md"
    )
    assert outcome.hits == []


def test_search_never_returns_another_folders_passages(
    indexed, upload, human, constellation
):
    other = services.folder_create(
        actor=human, constellation_id=constellation.pk, name="other"
    )
    upload(other, ("dog.md", b"A dog sleeps in the park.\n"))
    outcome = folder_search(folders=[other], query="dog park", mode="hybrid")
    assert {passage_hit_payload(h)["folder"] for h in outcome.hits} == {"other"}


def _search_tool(agent, body):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=agent).raw}")
    response = client.post("/api/tools/search", body, content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_files_domain_finds_passages_of_folders_attached_to_the_agent(
    folder, upload, reader
):
    upload(folder, *[(name, text.encode()) for name, text in DOCS.items()])
    found = _search_tool(
        reader,
        {
            "query": "quarterly budget",
            "domain": "files",
            "mode": "fts",
            "explain": True,
        },
    )
    assert [(h["kind"], h["cite"]) for h in found] == [("file", "docs/finance.md:1-1")]
    hit = found[0]
    assert hit["folder"] == "docs" and hit["path"] == "finance.md"
    assert hit["provenance"] == {
        "store": "folder",
        "folder": "docs",
        "path": "finance.md",
        "cite": "docs/finance.md:1-1",
    }
    assert "<mark>budget</mark>" in hit["snippet_html"]
    everything = _search_tool(
        reader, {"query": "quarterly budget", "domain": "all", "mode": "fts"}
    )
    assert "docs/finance.md:1-1" in [h.get("cite") for h in everything]


def test_files_domain_never_reaches_a_folder_not_attached_or_elsewhere(
    folder, upload, reader, agent, human, constellation
):
    upload(folder, ("finance.md", b"The quarterly budget review.\n"))
    private = services.folder_create(
        actor=human, constellation_id=constellation.pk, name="private"
    )
    upload(private, ("salary.md", b"The budget for salaries is secret.\n"))
    body = {"query": "budget", "domain": "files", "mode": "fts"}
    # The reader has docs only; the agent no folder at all.
    assert {h["folder"] for h in _search_tool(reader, body)} == {"docs"}
    assert _search_tool(agent, body) == []
    everything = _search_tool(agent, {**body, "domain": "all"})
    assert [h for h in everything if h["kind"] == "file"] == []
    # The humans of the constellation read every folder of it; others none.
    found = memory_search(actor=human, query="budget", domain="files", mode="fts")
    assert {h.row.file.path for _k, h in found.hits} == {"finance.md", "salary.md"}
    outsider = UserFactory(username="outsider")
    ConstellationFactory(partner=outsider, name="Elsewhere")
    theirs = memory_search(
        actor=Actor.for_user(outsider), query="budget", domain="files", mode="fts"
    )
    assert theirs.hits == []


@pytest.mark.sqlite
def test_vector_and_hybrid_search_take_the_quantised_path_in_a_large_constellation(
    indexed, settings
):
    from memory.search.engine import scope_sizes_forget

    def run(mode: str):
        scope_sizes_forget()
        return folder_search(folders=[indexed], query="puppy outdoors", mode=mode)

    settings.SEARCH_QUANTISED_ABOVE = 0
    exact = run("vector")
    settings.SEARCH_QUANTISED_ABOVE = 2
    large = run("vector")
    assert (exact.quantised, large.quantised, run("hybrid").quantised) == (
        False,
        True,
        True,
    )
    assert passage_hit_payload(large.hits[0])["path"] == "pets.md"
    assert [h.row.pk for h in large.hits] == [h.row.pk for h in exact.hits]
    settings.SEARCH_QUANTISED_ABOVE = 3
    assert not run("vector").quantised
