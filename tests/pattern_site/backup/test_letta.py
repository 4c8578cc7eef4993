"""Letta agent files (.af) become agents here."""

import io
import json

import pytest
from django.core.management import call_command

from memory.blocks.selectors import block_value
from memory.longterm.search import memory_search
from memory.models import ArchivalEntry, MemoryBlock, Message
from pattern_site.backup.letta import agent_file_import
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.errors import Conflict, InvalidInput

T = "2025-04-01T10:00:00+00:00"


def letta_message(role: str, text: str, **extra) -> dict:
    return {
        "created_at": T,
        "updated_at": T,
        "group_id": None,
        "model": "gpt-4o-mini",
        "name": None,
        "role": role,
        "content": [{"type": "text", "text": text}],
        "tool_call_id": None,
        "tool_calls": [],
        "tool_returns": [],
        **extra,
    }


def block(label: str, value: str, limit: int = 5000) -> dict:
    return {
        "created_at": T,
        "updated_at": T,
        "description": f"The {label} block",
        "is_template": False,
        "label": label,
        "limit": limit,
        "metadata_": {},
        "template_name": None,
        "value": value,
    }


# An agent file as Letta publishes its schema (one agent at the root), cut
# to what a small agent has.
AGENT_FILE = {
    "agent_type": "memgpt_agent",
    "name": "Sam",
    "description": "A companion",
    "system": "You are Sam, a helpful companion.",
    "created_at": T,
    "updated_at": T,
    "version": "0.6.47",
    "message_buffer_autoclear": False,
    "in_context_message_indices": [0, 1, 2],
    "metadata_": None,
    "multi_agent_group": None,
    "llm_config": {"model": "gpt-4o-mini", "model_endpoint_type": "openai"},
    "embedding_config": {"embedding_model": "text-embedding-3-small"},
    "core_memory": [
        block("persona", "I am Sam. I like sailing."),
        block("human", "Name: Chad. Lives by the harbour.", limit=200),
    ],
    "messages": [
        letta_message("system", "You are Sam, a helpful companion."),
        letta_message(
            "user",
            json.dumps({"type": "user_message", "message": "Hi Sam!", "time": T}),
        ),
        letta_message(
            "assistant",
            "",
            tool_calls=[
                {
                    "id": "call-1",
                    "type": "function",
                    "function": {
                        "name": "send_message",
                        "arguments": json.dumps({"message": "Ahoy Chad!"}),
                    },
                }
            ],
        ),
    ],
    "passages": [
        {"text": "Chad's boat is called Osprey.", "tags": ["boat"], "created_at": T}
    ],
    "tags": [{"tag": "companion"}],
    "tool_exec_environment_variables": [],
    "tool_rules": [{"tool_name": "send_message", "type": "exit_loop"}],
    "tools": [{"name": "send_message"}, {"name": "core_memory_append"}],
}


def test_an_agent_file_becomes_an_agent_with_its_memory(constellation):
    [result] = agent_file_import(
        constellation=constellation, source=json.dumps(AGENT_FILE).encode()
    )

    sam = Agent.objects.get(constellation=constellation, name="Sam")
    assert (sam.description, sam.model_name) == ("A companion", "gpt-4o-mini")
    values = {
        b.label: block_value(block=b) for b in MemoryBlock.objects.filter(owner=sam)
    }
    assert values == {
        "system_prompt": "You are Sam, a helpful companion.",
        "persona": "I am Sam. I like sailing.",
        "human": "Name: Chad. Lives by the harbour.",
    }
    assert MemoryBlock.objects.get(owner=sam, label="human").char_limit == 200
    assert list(
        Message.objects.filter(agent=sam)
        .order_by("position")
        .values_list("role", "content")
    ) == [
        ("system", "You are Sam, a helpful companion."),
        ("user", "Hi Sam!"),
        ("assistant", "Ahoy Chad!"),
    ]
    entry = ArchivalEntry.objects.get(agent=sam)
    assert (entry.content, entry.tags) == ("Chad's boat is called Osprey.", ["boat"])
    found = memory_search(actor=Actor.for_agent(sam), query="Osprey", mode="fts")
    assert [hit.row.pk for _kind, hit in found.hits] == [entry.pk]
    assert result.tools_not_imported == ["core_memory_append", "send_message"]
    assert result.token.raw


def test_the_later_shape_with_shared_blocks_is_read_too(constellation):
    document = {
        "agents": [
            {
                "id": "agent-0",
                "name": "Ada",
                "system": "",
                "llm_config": {"model": "claude-3-5-haiku"},
                "block_ids": ["block-0"],
                "messages": [letta_message("user", "plain words")],
            }
        ],
        "blocks": [{"id": "block-0", **block("persona", "I am Ada.")}],
        "tools": [],
    }
    agent_file_import(constellation=constellation, source=json.dumps(document))
    ada = Agent.objects.get(name="Ada")
    assert [block_value(block=b) for b in ada.memory_blocks.all()] == ["I am Ada."]
    assert Message.objects.get(agent=ada).content == "plain words"


def test_a_clash_or_a_broken_file_imports_nothing(constellation, tmp_path):
    agent_file_import(constellation=constellation, source=json.dumps(AGENT_FILE))
    with pytest.raises(Conflict, match="already has an agent named 'Sam'"):
        agent_file_import(constellation=constellation, source=json.dumps(AGENT_FILE))
    with pytest.raises(InvalidInput, match="not an agent file"):
        agent_file_import(constellation=constellation, source=b'{"hello": 1}')
    with pytest.raises(InvalidInput, match="JSON expected"):
        agent_file_import(constellation=constellation, source=b"\x00garbage")
    assert Agent.objects.filter(constellation=constellation).count() == 1
    # The command renames on request and prints the new agent's token.
    path = tmp_path / "sam.af"
    path.write_text(json.dumps(AGENT_FILE))
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "agent_file_import",
        "Pattern",
        str(path),
        "--name",
        "Sam2",
        stdout=out,
        stderr=err,
    )
    assert out.getvalue().startswith("Sam2: ")
    assert "3 messages; 1 archival passages" in err.getvalue()
