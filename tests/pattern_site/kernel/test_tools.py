"""The agent tool registry and its in-process caller: the HTTP API's
answers and messages, as the calling actor, without raising for a
tool-level error."""

from typing import Any

import pytest

from memory.blocks.models import MemoryBlock
from memory.blocks.selectors import block_value
from memory.blocks.services import block_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.tools import (
    AgentTool,
    tool_call,
    tool_functions,
    tool_get,
    tool_register,
    tools_all,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def make_block(agent: Any) -> Any:
    def make(label: str, **kwargs: Any) -> MemoryBlock:
        return block_create(actor=Actor.system(), owner=agent, label=label, **kwargs)

    return make


def test_core_memory_append_changes_the_block_and_answers_as_the_http_api(
    agent, make_block, agent_client
):
    block = make_block(label="notes", content="Likes tea.")
    result = tool_call(
        actor=Actor.for_agent(agent),
        name="core_memory_append",
        arguments={"label": "notes", "content": "Walks at six."},
    )
    assert result.ok, result.text
    content = block_value(block=MemoryBlock.objects.get(pk=block.pk))
    assert content == "Likes tea.\nWalks at six."
    assert result.value["label"] == "notes"
    # The same answer shape as the HTTP route's.
    http = agent_client.post(
        "/api/tools/core_memory_append",
        {"label": "notes", "content": "Reads at nine."},
        content_type="application/json",
    ).json()
    assert set(result.value) == set(http)


def test_a_list_answer_comes_back_as_a_list(agent):
    result = tool_call(
        actor=Actor.for_agent(agent),
        name="archival_memory_search",
        arguments={"query": "nothing stored yet"},
    )
    assert result.ok, result.text
    assert result.value == []


def test_invalid_arguments_name_the_fields_and_change_nothing(agent, make_block):
    block = make_block(label="notes", content="Likes tea.")
    result = tool_call(
        actor=Actor.for_agent(agent),
        name="core_memory_replace",
        arguments={"label": "notes", "old_content": 3},
    )
    assert not result.ok
    assert result.value is None
    assert result.text.startswith("invalid arguments: ")
    assert "old_content" in result.text and "new_content" in result.text
    assert MemoryBlock.objects.get(pk=block.pk).version == block.version


def test_an_unknown_tool_is_refused_listing_the_tools(agent):
    result = tool_call(actor=Actor.for_agent(agent), name="teleport", arguments={})
    assert not result.ok
    assert result.text.startswith("no tool 'teleport'; the tools are: ")
    assert "core_memory_append" in result.text


def test_rights_are_the_actors_own(agent, make_block, agent_client):
    make_block(label="org", template="organization")
    arguments = {"label": "org", "content": "policies: none"}
    result = tool_call(
        actor=Actor.for_agent(agent), name="core_memory_update", arguments=arguments
    )
    http = agent_client.post(
        "/api/tools/core_memory_update", arguments, content_type="application/json"
    )
    assert http.status_code == 403
    assert not result.ok
    assert result.text == http.json()["detail"]
    assert "read-only" in result.text


def _tool(name: str) -> AgentTool:
    existing = tool_get("notable")
    assert existing is not None
    return AgentTool(
        name=name,
        description="x",
        args=existing.args,
        out=existing.out,
        run=existing.run,
        writes=True,
    )


def test_a_name_registered_twice_is_an_error_and_the_registry_is_unchanged():
    before = tools_all()
    with pytest.raises(ValueError, match="'notable' is registered twice"):
        tool_register(_tool("notable"))
    assert tools_all() == before


def test_a_tool_name_must_be_a_function_name():
    with pytest.raises(ValueError, match="is not"):
        _tool("Open Files")


def test_function_calling_list_has_one_self_contained_schema_per_tool():
    functions: list[dict[str, Any]] = tool_functions()
    assert [f["function"]["name"] for f in functions] == [t.name for t in tools_all()]
    for function in functions:
        assert function["type"] == "function"
        assert function["function"]["parameters"]["type"] == "object"
        assert "$ref" not in str(function["function"]["parameters"])
