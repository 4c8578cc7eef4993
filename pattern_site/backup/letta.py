"""Letta Agent Files (``.af``) become agents of a constellation.

An agent file is JSON.  Its first published shape is one agent at the root
(``name``, ``system``, ``llm_config``, ``core_memory`` blocks, ``messages``
with a list of content parts, ``tools``...); the later shape lists
``agents`` beside shared ``blocks`` that agents name by ``block_ids``.
Both are read.  Memory blocks become the agent's core blocks (the system
prompt one more, read-only), messages one conversation, archival passages
(``passages``, when the file carries them) archival entries.  Tools and
tool rules have no counterpart here: they are named in the result, not
imported.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from memory.blocks.services import block_create
from memory.longterm.services import (
    MESSAGES_PER_APPEND,
    archival_entry_create,
    conversation_start,
    messages_append,
)
from memory.models import ArchivalSource, BlockType, MessageRole, Permission
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.agents.services import IssuedToken, agent_create
from pattern_site.kernel.errors import InvalidInput

SYSTEM_LABEL = "system_prompt"
MODEL_NAME_MAX = Agent._meta.get_field("model_name").max_length or 100


@dataclass
class AgentFileResult:
    agent: Agent
    token: IssuedToken
    blocks: list[str] = field(default_factory=list)
    messages: int = 0
    passages: int = 0
    tools_not_imported: list[str] = field(default_factory=list)


def _parse(source: bytes | str) -> dict[str, Any]:
    try:
        data = json.loads(source)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"not an agent file (JSON expected): {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInput("not an agent file: the JSON is not an object")
    return data


def _agents(data: dict[str, Any]) -> Iterator[tuple[dict, list[dict]]]:
    """Each agent of the file and its memory blocks."""
    if isinstance(data.get("agents"), list):
        shared = {
            b.get("id"): b for b in data.get("blocks") or [] if isinstance(b, dict)
        }
        for agent in data["agents"]:
            named = [shared[i] for i in agent.get("block_ids") or [] if i in shared]
            yield agent, [*named, *(agent.get("core_memory") or [])]
    elif "name" in data and ("core_memory" in data or "messages" in data):
        yield data, list(data.get("core_memory") or [])
    else:
        raise InvalidInput(
            "not an agent file: expected an agent (name, core_memory, messages)"
            " or a list of agents"
        )


def _text(parts: Any) -> str:
    """A message's text: its text parts (a string is its own text)."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    return "\n".join(
        p.get("text", "")
        for p in parts
        if isinstance(p, dict) and p.get("type", "text") == "text" and p.get("text")
    )


def _message(raw: dict[str, Any]) -> dict[str, str] | None:
    """One message here, or None for a message with nothing to keep."""
    role = raw.get("role")
    if role not in MessageRole.values:
        return None
    text = _text(raw.get("content") if "content" in raw else raw.get("text"))
    if role == MessageRole.USER:
        # Letta wraps what a user said in a JSON packet with its time.
        try:
            packet = json.loads(text)
        except ValueError:
            packet = None
        if isinstance(packet, dict) and isinstance(packet.get("message"), str):
            text = packet["message"]
    calls = [c.get("function", {}) for c in raw.get("tool_calls") or []]
    for call in calls:
        try:
            args = json.loads(call.get("arguments") or "{}")
        except ValueError:
            args = {}
        if call.get("name") == "send_message" and isinstance(args, dict):
            text = "\n".join(filter(None, [text, str(args.get("message", ""))]))
        else:
            text = "\n".join(
                filter(None, [text, f"{call.get('name')}({call.get('arguments', '')})"])
            )
    if not text.strip():
        return None
    return {"role": role, "content": text, "author": raw.get("name") or ""}


def _chunks(items: list[dict], size: int) -> Iterator[list[dict]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _one_agent(
    constellation: Constellation, raw: dict, blocks: list[dict], name: str | None
) -> AgentFileResult:
    llm = raw.get("llm_config") or {}
    agent, token = agent_create(
        constellation=constellation,
        name=(name or str(raw.get("name") or "")).strip()[:100],
        description=str(raw.get("description") or ""),
        model_name=str(llm.get("model") or "")[:MODEL_NAME_MAX],
    )
    result = AgentFileResult(agent=agent, token=token)
    system = Actor.system()
    prompt = str(raw.get("system") or "")
    if prompt:
        blocks = [
            {
                "label": SYSTEM_LABEL,
                "value": prompt,
                "description": "Letta system prompt",
            },
            *blocks,
        ]
    for block in blocks:
        value = str(block.get("value") or "")
        label = str(block.get("label") or "").strip()
        block_create(
            actor=system,
            label=label,
            owner=agent,
            description=str(block.get("description") or ""),
            block_type=BlockType.CORE,
            permission=(
                Permission.READ_ONLY if label == SYSTEM_LABEL else Permission.READ_WRITE
            ),
            char_limit=max(int(block.get("limit") or 0), len(value), 1),
            content=value,
        )
        result.blocks.append(label)
    messages = [m for m in map(_message, raw.get("messages") or []) if m]
    if messages:
        conversation = conversation_start(agent=agent, title="Imported from Letta")
        for chunk in _chunks(messages, MESSAGES_PER_APPEND):
            messages_append(conversation=conversation, messages=chunk)
        result.messages = len(messages)
    for passage in raw.get("passages") or raw.get("archival_memory") or []:
        text = str(passage.get("text") or "").strip()
        if text:
            archival_entry_create(
                agent=agent,
                content=text,
                tags=[t for t in passage.get("tags") or [] if isinstance(t, str)],
                metadata={
                    "imported_from": "letta",
                    "created_at": passage.get("created_at"),
                },
                source=ArchivalSource.SYSTEM,
            )
            result.passages += 1
    result.tools_not_imported = sorted(
        {str(t.get("name")) for t in raw.get("tools") or [] if isinstance(t, dict)}
    )
    return result


@transaction.atomic
def agent_file_import(
    *, constellation: Constellation, source: bytes | str, name: str | None = None
) -> list[AgentFileResult]:
    """Make the agents of a Letta agent file agents of ``constellation``
    (all of them, or none); ``name`` renames a file's single agent."""
    agents = list(_agents(_parse(source)))
    if name and len(agents) != 1:
        raise InvalidInput("a new name is for a file holding a single agent")
    return [_one_agent(constellation, raw, blocks, name) for raw, blocks in agents]
