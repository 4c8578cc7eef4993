"""The block tools of Letta's memory (memory_insert, memory_replace,
memory_rethink) and agents' own block management (block_create,
block_rename, block_delete, block_share), over HTTP and through
``tool_call``."""

from typing import Any

import pytest
from django.test import Client

from memory.blocks.models import BlockAttachment, MemoryBlock
from memory.blocks.selectors import block_value
from memory.blocks.services import block_share
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from pattern_site.kernel.tools import tool_call
from tests.factories import AgentFactory, ConstellationFactory


def post(client: Client, name: str, body: dict[str, Any]) -> Any:
    return client.post(f"/api/tools/{name}", body, content_type="application/json")


def call(caller: Any, name: str, **arguments: Any) -> Any:
    return tool_call(actor=Actor.for_agent(caller), name=name, arguments=arguments)


@pytest.fixture
def other_client(other_agent: Any) -> Client:
    return Client(
        HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=other_agent).raw}"
    )


def _share(block: Any, agent: Any, access: str = "read_write") -> None:
    block_share(actor=Actor.system(), block=block, agent=agent, access=access)


# --- memory_insert ----------------------------------------------------------


@pytest.mark.parametrize(
    "line,expected",
    [
        (-1, "one\ntwo\nnew"),
        (0, "new\none\ntwo"),
        (1, "one\nnew\ntwo"),
        (2, "one\ntwo\nnew"),
    ],
)
def test_memory_insert_puts_lines_after_the_line_named(
    agent_client, make_block, line, expected
):
    block = make_block(label="notes", content="one\ntwo")
    response = post(
        agent_client,
        "memory_insert",
        {"label": "notes", "new_str": "new", "insert_line": line},
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "applied"
    assert block_value(block=block) == expected


def test_memory_insert_refuses_a_line_past_the_end(agent, make_block):
    block = make_block(label="notes", content="one\ntwo")
    result = call(agent, "memory_insert", label="notes", new_str="x", insert_line=5)
    assert not result.ok
    assert "outside 0..2" in result.text
    assert block_value(block=block) == "one\ntwo"


def test_memory_insert_at_the_end_appends_to_a_structured_block(agent, make_block):
    block = make_block(label="human", template="human", content={"name": "Sam"})
    result = call(agent, "memory_insert", label="human", new_str="Likes tea")
    assert result.ok, result.text
    assert block_value(block=block)["context"] == "Likes tea"
    numbered = call(agent, "memory_insert", label="human", new_str="x", insert_line=0)
    assert not numbered.ok
    assert "text blocks only" in numbered.text


def test_memory_insert_adds_within_append_access_where_replace_may_not(
    agent, other_agent, make_block
):
    block = make_block(label="board", owner=other_agent, content="a\nb")
    _share(block, agent, "append_only")
    middle = call(agent, "memory_insert", label="board", new_str="x", insert_line=1)
    assert middle.ok, middle.text
    assert block_value(block=block) == "a\nx\nb"
    replaced = call(agent, "memory_replace", label="board", old_str="a", new_str="z")
    assert not replaced.ok
    assert "only append" in replaced.text
    assert block_value(block=block) == "a\nx\nb"


# --- memory_replace ---------------------------------------------------------


def test_memory_replace_changes_text_that_occurs_once(agent_client, make_block):
    block = make_block(label="notes", content="Sam likes tea.")
    response = post(
        agent_client,
        "memory_replace",
        {"label": "notes", "old_str": "tea", "new_str": "coffee"},
    )
    assert response.status_code == 200, response.content
    assert block_value(block=block) == "Sam likes coffee."


def test_memory_replace_refuses_text_that_occurs_twice(agent_client, make_block):
    block = make_block(label="notes", content="tea or tea")
    response = post(
        agent_client,
        "memory_replace",
        {"label": "notes", "old_str": "tea", "new_str": "coffee"},
    )
    assert response.status_code == 422
    assert "occurs 2 times" in response.json()["detail"]
    assert block_value(block=block) == "tea or tea"


def test_memory_replace_refuses_missing_text(agent, make_block):
    make_block(label="notes", content="Sam likes tea.")
    result = call(agent, "memory_replace", label="notes", old_str="juice", new_str="")
    assert not result.ok
    assert "not found" in result.text


def test_memory_replace_with_nothing_deletes_the_text(agent, make_block):
    block = make_block(label="notes", content="Sam likes green tea.")
    result = call(agent, "memory_replace", label="notes", old_str="green ", new_str="")
    assert result.ok, result.text
    assert block_value(block=block) == "Sam likes tea."


# --- memory_rethink ---------------------------------------------------------


def test_memory_rethink_rewrites_the_whole_block(agent_client, make_block):
    block = make_block(label="notes", content="old\nthoughts")
    response = post(
        agent_client,
        "memory_rethink",
        {"label": "notes", "new_memory": "fresh start"},
    )
    assert response.status_code == 200, response.content
    assert block_value(block=block) == "fresh start"


def test_memory_rethink_cannot_touch_another_agents_block(agent, other_agent):
    from memory.blocks.services import block_create

    block = block_create(
        actor=Actor.system(), owner=other_agent, label="private", content="mine"
    )
    result = call(agent, "memory_rethink", label="private", new_memory="yours")
    assert not result.ok
    assert block_value(block=block) == "mine"


# --- block_create -----------------------------------------------------------


def test_block_create_makes_a_block_the_agent_owns(agent_client, agent):
    response = post(
        agent_client,
        "block_create",
        {"label": "trips", "content": "Lisbon in May", "description": "Trips"},
    )
    assert response.status_code == 201, response.content
    block = MemoryBlock.objects.get(label="trips")
    assert block.owner_id == agent.pk
    assert block_value(block=block) == "Lisbon in May"
    assert response.json()["content"] == "Lisbon in May"


def test_block_create_refuses_a_taken_label_and_leaves_no_block(agent, make_block):
    make_block(label="trips")
    result = call(agent, "block_create", label="trips")
    assert not result.ok
    assert "already has a block labelled 'trips'" in result.text


def test_block_create_with_too_much_content_leaves_no_empty_block(agent, settings):
    settings.MEMORY_DEFAULT_CHAR_LIMIT = 10
    result = call(agent, "block_create", label="big", content="x" * 50)
    assert not result.ok
    assert not MemoryBlock.objects.filter(label="big").exists()


# --- block_rename -----------------------------------------------------------


def test_block_rename_relabels_the_agents_own_block(agent_client, make_block):
    block = make_block(label="trips", content="Lisbon")
    response = post(
        agent_client, "block_rename", {"label": "trips", "new_label": "travel"}
    )
    assert response.status_code == 200, response.content
    block.refresh_from_db()
    assert block.label == "travel"
    assert block_value(block=block) == "Lisbon"


def test_block_rename_refuses_a_label_the_agent_uses(agent, make_block):
    make_block(label="trips")
    make_block(label="travel")
    result = call(agent, "block_rename", label="trips", new_label="travel")
    assert not result.ok
    assert MemoryBlock.objects.filter(label="trips").exists()


def test_an_agent_cannot_rename_a_block_shared_with_it(
    other_client, agent, other_agent, make_block
):
    block = make_block(label="trips")
    _share(block, other_agent)
    response = post(
        other_client, "block_rename", {"label": "trips", "new_label": "mine"}
    )
    assert response.status_code == 403
    block.refresh_from_db()
    assert block.label == "trips"


# --- block_delete -----------------------------------------------------------


def test_block_delete_removes_the_agents_own_admin_block(agent_client, make_block):
    make_block(label="scratch", permission="admin")
    response = post(agent_client, "block_delete", {"label": "scratch"})
    assert response.status_code == 200, response.content
    assert response.json()["label"] == "scratch"
    assert not MemoryBlock.objects.filter(label="scratch").exists()


def test_block_delete_needs_admin_permission(agent, make_block):
    make_block(label="scratch")
    result = call(agent, "block_delete", label="scratch")
    assert not result.ok
    assert "Admin permission" in result.text
    assert MemoryBlock.objects.filter(label="scratch").exists()


def test_an_agent_cannot_delete_a_block_shared_with_it(
    other_client, other_agent, make_block
):
    block = make_block(label="scratch", permission="admin")
    _share(block, other_agent)
    response = post(other_client, "block_delete", {"label": "scratch"})
    assert response.status_code == 403
    assert MemoryBlock.objects.filter(pk=block.pk).exists()


# --- block_share ------------------------------------------------------------


def test_block_share_attaches_the_block_to_a_named_agent(
    agent_client, other_agent, make_block
):
    block = make_block(label="trips")
    response = post(
        agent_client,
        "block_share",
        {"label": "trips", "agent": "Flux", "access": "append_only"},
    )
    assert response.status_code == 200, response.content
    assert response.json()["agent"] == "Flux"
    attachment = BlockAttachment.objects.get(block=block, agent=other_agent)
    assert attachment.access == "append_only"


def test_an_agent_cannot_share_a_block_shared_with_it(
    other_client, agent, other_agent, make_block
):
    third = AgentFactory(constellation=agent.constellation, name="Archive")
    block = make_block(label="trips")
    _share(block, other_agent)
    response = post(other_client, "block_share", {"label": "trips", "agent": "Archive"})
    assert response.status_code == 403
    assert not BlockAttachment.objects.filter(block=block, agent=third).exists()


def test_block_share_does_not_know_another_constellations_agents(agent, make_block):
    AgentFactory(constellation=ConstellationFactory(name="Elsewhere"), name="Stray")
    make_block(label="trips")
    result = call(agent, "block_share", label="trips", agent="Stray")
    assert not result.ok
    assert "no agent named 'Stray'" in result.text
    assert not BlockAttachment.objects.exists()
