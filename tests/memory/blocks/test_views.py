"""Dashboard pages of memory: agent page, block page, approvals, context."""

import pytest
from django.test import Client

from coordination.actors import Actor
from memory.blocks.selectors import block_history, block_value
from memory.blocks.services import block_operate, block_share
from memory.models import BlockApproval, MemoryBlock
from tests.factories import AgentFactory, ConstellationFactory


@pytest.fixture
def web(partner):
    client = Client()
    client.force_login(partner)
    return client


def test_agent_page_lists_blocks_with_type_permission_and_size(web, make_block, agent):
    make_block(
        label="persona",
        content="I plan",
        block_type="core",
        permission="append",
        char_limit=2000,
    )
    page = web.get(f"/agents/{agent.pk}/").content.decode()
    assert "persona" in page
    assert "Core" in page and "Append" in page
    assert "6 / 2000" in page


def test_constellation_page_shows_block_counts(web, make_block, constellation, agent):
    make_block(label="a")
    make_block(label="b")
    page = web.get(f"/constellations/{constellation.pk}/").content.decode()
    assert "<td>2</td>" in page
    assert "2 blocks in this constellation" in page


def test_create_block_from_template_in_the_dashboard(web, agent):
    response = web.post(
        f"/memory/agents/{agent.pk}/blocks/new",
        {"label": "human", "template": "human", "permission": "partner"},
    )
    block = MemoryBlock.objects.get(label="human")
    assert response.status_code == 302
    assert response["Location"] == f"/memory/blocks/{block.pk}/"
    assert block.permission == "partner" and block.schema["kind"] == "map"
    page = web.get(response["Location"]).content.decode()
    assert "preferences" in page  # structured fields table


def test_block_page_shows_content_history_and_version(web, make_block, agent):
    block = make_block(label="notes", content="first")
    block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "set_text", "text": "second"}],
        summary="rewrote notes",
    )
    first = block_history(block=block)[-1]
    page = web.get(f"/memory/blocks/{block.pk}/?version={first.id}").content.decode()
    assert 'data-testid="rendered"' in page and "second" in page
    assert "rewrote notes" in page and "Entropy" in page
    assert "Read-only view" in page and "first" in page
    diff = web.get(f"/memory/blocks/{block.pk}/?from={first.id}").content.decode()
    assert "-first" in diff and "+second" in diff


def test_edit_and_rollback_from_the_dashboard(web, make_block):
    block = make_block(label="notes", content="one")
    web.post(f"/memory/blocks/{block.pk}/edit", {"content": "two\r\nlines"})
    assert block_value(block=block) == "two\nlines"
    last = block_history(block=block)[0]
    assert (last.actor_kind, last.actor_name) == ("human", "partner")
    first = block_history(block=block)[-1]
    web.post(f"/memory/blocks/{block.pk}/rollback", {"version": first.id})
    assert block_value(block=block) == "one"


@pytest.mark.parametrize(
    "target", ["//evil.example/", "https://evil.example/", "javascript:alert(1)"]
)
def test_a_form_never_redirects_off_the_site(web, make_block, target):
    # Over the limit: the form goes back where it came from, with the error.
    block = make_block(label="tiny", content="x", char_limit=3)
    url = f"/memory/blocks/{block.pk}/edit"
    response = web.post(url, {"content": "too long", "next": target})
    assert response.status_code == 302 and response["Location"] == "/"
    response = web.post(url, {"content": "too long"}, HTTP_REFERER=target)
    assert response["Location"] == "/"
    response = web.post(url, {"content": "too long", "next": "/memory/approvals/"})
    assert response["Location"] == "/memory/approvals/"


def test_dashboard_errors_come_back_as_messages(web, make_block):
    block = make_block(label="tiny", content="x", char_limit=3)
    url = f"/memory/blocks/{block.pk}/"
    response = web.post(
        f"/memory/blocks/{block.pk}/edit",
        {"content": "too long", "next": url},
        follow=True,
    )
    assert "is 1/3 chars; this change adds 7" in response.content.decode()
    response = web.post(
        f"/memory/blocks/{make_block(label='m', template='human').pk}/edit",
        {"content": "{broken", "next": url},
        follow=True,
    )
    assert "not valid JSON" in response.content.decode()


def test_structured_edit_takes_json(web, make_block):
    block = make_block(label="human", template="human")
    web.post(
        f"/memory/blocks/{block.pk}/edit",
        {"content": '{"name": "Sam", "preferences": ["tea"]}'},
    )
    assert block_value(block=block)["preferences"] == ["tea"]


def test_sharing_panel_shares_and_unshares(web, make_block, other_agent):
    block = make_block(label="board")
    web.post(
        f"/memory/blocks/{block.pk}/share",
        {"agent_id": other_agent.pk, "access": "append_only"},
    )
    assert "AppendOnly" in web.get(f"/memory/blocks/{block.pk}/").content.decode()
    web.post(
        f"/memory/blocks/{block.pk}/share", {"agent_id": other_agent.pk, "remove": "1"}
    )
    assert not block.attachments.exists()


def test_approvals_inbox_approve(web, make_block, agent):
    block = make_block(label="human", content="Sam", permission="partner")
    change = block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "append_text", "text": " (likes tea)"}],
        summary="note tea",
    )
    page = web.get("/memory/approvals/").content.decode()
    assert "note tea" in page and "Entropy" in page
    web.post(f"/memory/approvals/{change.approval.pk}/decide", {"decision": "approve"})
    assert block_value(block=block) == "Sam (likes tea)"
    assert BlockApproval.objects.get().status == "approved"


def test_what_this_agent_sees(web, make_block, agent, other_agent):
    make_block(label="persona", content="I plan", block_type="core")
    shared = make_block(
        label="board", owner=other_agent, block_type="core", content="tasks"
    )
    block_share(actor=Actor.system(), block=shared, agent=agent, access="read_only")
    page = web.get(f"/memory/agents/{agent.pk}/context/").content.decode()
    assert "&lt;block:persona permission=&quot;ReadWrite&quot;&gt;" in page
    assert "shared_from=&quot;Flux&quot;" in page
    assert "core_memory" in page


def test_other_constellations_blocks_are_404_on_the_dashboard(web):
    stranger = AgentFactory(constellation=ConstellationFactory())
    from memory.blocks.services import block_create

    block = block_create(actor=Actor.system(), owner=stranger, label="x")
    assert web.get(f"/memory/blocks/{block.pk}/").status_code == 404
    web.post(f"/memory/blocks/{block.pk}/edit", {"content": "pwned"})
    assert block_value(block=block) == ""
    assert web.get(f"/memory/agents/{stranger.pk}/context/").status_code == 404


def test_memory_pages_require_login(client, make_block):
    block = make_block()
    assert client.get(f"/memory/blocks/{block.pk}/").status_code == 302
