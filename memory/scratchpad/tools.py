"""The scratchpad agent tools, registered with ``pattern_site.kernel.tools``
(which serves them over HTTP, MCP and in process)."""

from typing import Any

from memory.longterm.models import Conversation
from memory.longterm.services import conversation_current
from memory.scratchpad.models import ScratchpadEntry
from memory.scratchpad.permissions import scratchpad_change_check
from memory.scratchpad.schemas import (
    SCRATCHPAD_CLEAR,
    SCRATCHPAD_LIST,
    SCRATCHPAD_READ,
    SCRATCHPAD_WRITE,
    ScratchpadClearIn,
    ScratchpadClearOut,
    ScratchpadEntryOut,
    ScratchpadKeyIn,
    ScratchpadListIn,
    ScratchpadListOut,
    ScratchpadWriteIn,
)
from memory.scratchpad.selectors import (
    scratchpad_conversation_for_actor,
    scratchpad_entries,
    scratchpad_entry_get,
)
from memory.scratchpad.services import scratchpad_clear, scratchpad_write
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import NotFound
from pattern_site.kernel.tools import AgentTool, tool_register


def _changed(*, actor: Actor, conversation_id: int | None) -> Conversation | None:
    conversation = scratchpad_conversation_for_actor(
        actor=actor, conversation_id=conversation_id
    )
    if conversation is not None:
        scratchpad_change_check(actor=actor, conversation=conversation)
    return conversation


def scratchpad_write_tool(*, actor: Actor, args: ScratchpadWriteIn) -> ScratchpadEntry:
    conversation = _changed(actor=actor, conversation_id=args.conversation_id)
    if conversation is None:
        # An agent's first note starts its conversation, as its first turn would.
        assert actor.agent is not None
        conversation = conversation_current(agent=actor.agent)
    return scratchpad_write(conversation=conversation, key=args.key, value=args.value)


def scratchpad_read_tool(*, actor: Actor, args: ScratchpadKeyIn) -> ScratchpadEntry:
    conversation = scratchpad_conversation_for_actor(
        actor=actor, conversation_id=args.conversation_id
    )
    if conversation is None:
        raise NotFound(f"no scratchpad key {args.key!r}: you have no conversation yet")
    return scratchpad_entry_get(conversation=conversation, key=args.key)


def scratchpad_list_tool(*, actor: Actor, args: ScratchpadListIn) -> dict[str, Any]:
    conversation = scratchpad_conversation_for_actor(
        actor=actor, conversation_id=args.conversation_id
    )
    if conversation is None:
        return {"conversation_id": None, "entries": []}
    return {
        "conversation_id": conversation.pk,
        "entries": scratchpad_entries(conversation=conversation),
    }


def scratchpad_clear_tool(*, actor: Actor, args: ScratchpadClearIn) -> dict[str, Any]:
    conversation = _changed(actor=actor, conversation_id=args.conversation_id)
    if conversation is None:
        return {"conversation_id": None, "cleared": 0}
    return {
        "conversation_id": conversation.pk,
        "cleared": scratchpad_clear(conversation=conversation, key=args.key),
    }


tool_register(
    AgentTool(
        name="scratchpad_write",
        description=SCRATCHPAD_WRITE,
        args=ScratchpadWriteIn,
        out=ScratchpadEntryOut,
        run=scratchpad_write_tool,
        writes=True,
        errors=(403, 404, 409),
        summary="scratchpad_write: save a working note",
        tags=("conversations",),
    ),
    AgentTool(
        name="scratchpad_read",
        description=SCRATCHPAD_READ,
        args=ScratchpadKeyIn,
        out=ScratchpadEntryOut,
        run=scratchpad_read_tool,
        writes=False,
        summary="scratchpad_read: one working note",
        tags=("conversations",),
    ),
    AgentTool(
        name="scratchpad_list",
        description=SCRATCHPAD_LIST,
        args=ScratchpadListIn,
        out=ScratchpadListOut,
        run=scratchpad_list_tool,
        writes=False,
        summary="scratchpad_list: the conversation's working notes",
        tags=("conversations",),
        body_optional=True,
    ),
    AgentTool(
        name="scratchpad_clear",
        description=SCRATCHPAD_CLEAR,
        args=ScratchpadClearIn,
        out=ScratchpadClearOut,
        run=scratchpad_clear_tool,
        writes=True,
        summary="scratchpad_clear: remove working notes",
        tags=("conversations",),
    ),
)
