"""GET /api/tools/schemas: the agent tools as function-calling JSON."""

import re
from typing import Any

import pytest
from django.test import Client
from jsonschema import Draft202012Validator

from memory.blocks.services import block_create
from pattern_site.kernel.actors import Actor

TOOLS = {
    "context",
    "core_memory_append",
    "core_memory_replace",
    "core_memory_update",
    "search",
    "recall",
    "archival_memory_insert",
    "archival_memory_search",
    "coord",
    "memory_changes",
    "notable",
    "route_to_group",
    "files_open",
    "files_read",
    "files_next",
    "files_prev",
    "files_close",
    "files_grep",
    "files_search",
    "open_files",
    "grep_files",
    "semantic_search_files",
    "build_context",
    "memory_insert",
    "memory_replace",
    "memory_rethink",
    "block_create",
    "block_rename",
    "block_delete",
    "block_share",
    "conversation_search",
    "send_message",
    "message_agent",
    "delegate",
    "observations_search",
    "scratchpad_write",
    "scratchpad_read",
    "scratchpad_list",
    "scratchpad_clear",
}


@pytest.fixture
def schemas(agent_client: Client) -> dict[str, Any]:
    response = agent_client.get("/api/tools/schemas")
    assert response.status_code == 200, response.content
    return response.json()


def test_every_agent_tool_is_listed_in_both_formats(schemas: dict[str, Any]):
    openai = {t["function"]["name"]: t["function"] for t in schemas["openai"]}
    anthropic = {t["name"]: t for t in schemas["anthropic"]}
    assert set(openai) == set(anthropic) == TOOLS
    assert all(t["type"] == "function" for t in schemas["openai"])
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) for name in openai)
    assert schemas["endpoints"]["core_memory_replace"] == (
        "POST /api/tools/core_memory_replace"
    )
    for name in TOOLS:
        assert openai[name]["parameters"] == anthropic[name]["input_schema"]
        assert openai[name]["description"] == anthropic[name]["description"]
        assert openai[name]["description"]


def test_every_tool_schema_is_valid_self_contained_json_schema(
    schemas: dict[str, Any],
):
    for tool in schemas["anthropic"]:
        schema = tool["input_schema"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"
        assert "$ref" not in str(schema), tool["name"]


def test_tool_schemas_follow_the_request_schemas(schemas: dict[str, Any]):
    replace = next(
        t for t in schemas["anthropic"] if t["name"] == "core_memory_replace"
    )
    schema = replace["input_schema"]
    assert set(schema["required"]) == {"label", "old_content", "new_content"}
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"label": "human", "old_content": "a", "new_content": ""})
    assert not validator.is_valid({"label": "human", "old_content": "a"})


def test_arguments_valid_for_a_tool_schema_are_accepted_by_its_endpoint(
    agent_client: Client, agent, schemas: dict[str, Any]
):
    block_create(actor=Actor.system(), owner=agent, label="human", template="human")
    tools = {t["name"]: t["input_schema"] for t in schemas["anthropic"]}
    calls = {
        "core_memory_append": {"label": "human", "content": "Likes tea"},
        "core_memory_replace": {
            "label": "human",
            "old_content": "tea",
            "new_content": "cocoa",
        },
        "archival_memory_insert": {"content": "Ana visits in June", "tags": ["family"]},
        "archival_memory_search": {"query": "Ana"},
        "context": {"operation": "changes", "labels": ["human"], "peek": True},
    }
    for name, args in calls.items():
        Draft202012Validator(tools[name]).validate(args)
        _, path = schemas["endpoints"][name].split()
        response = agent_client.post(path, args, content_type="application/json")
        assert response.status_code in (200, 201), (name, response.content)
