"""The agent tools on memory blocks, one function per tool, registered
with ``pattern_site.kernel.tools`` (which serves them over HTTP, MCP and
in process).

Each takes the calling actor and the tool's parsed input schema, finds the
block through the selectors, changes it through the services (which decide
every right) and returns the tool's answer as a plain dict in the shape of
its output schema (``ChangeOut``, ``BlockOut``).  Domain errors propagate
for the caller's transport to present.
"""

from collections.abc import Callable
from typing import Any

from django.db import transaction

from memory.blocks.changes import block_changes_for_agent
from memory.blocks.models import BlockType, MemoryBlock
from memory.blocks.permissions import block_tool_agent
from memory.blocks.schemas import (
    BLOCK_CREATE_TOOL,
    BLOCK_DELETE_TOOL,
    BLOCK_RENAME_TOOL,
    BLOCK_SHARE_TOOL,
    CHANGES_TOOL,
    CONTEXT_TOOL,
    CORE_MEMORY_APPEND,
    CORE_MEMORY_REPLACE,
    CORE_MEMORY_UPDATE,
    MEMORY_INSERT,
    MEMORY_REPLACE,
    MEMORY_RETHINK,
    BlockAttachmentOut,
    BlockCreateToolIn,
    BlockDeletedOut,
    BlockLabelIn,
    BlockOut,
    BlockRenameIn,
    BlockShareToolIn,
    ChangeOut,
    ChangesIn,
    ChangesOut,
    ContextToolIn,
    ContextToolOut,
    CoreMemoryIn,
    CoreMemoryReplaceIn,
    CoreMemoryUpdateIn,
    MemoryInsertIn,
    MemoryReplaceIn,
    MemoryRethinkIn,
)
from memory.blocks.seen import blocks_seen_advance, blocks_seen_record_later
from memory.blocks.selectors import (
    block_facts_for_actor,
    block_get_by_label_for_agent,
    block_value,
)
from memory.blocks.services import (
    BlockChange,
    block_append,
    block_create,
    block_delete,
    block_insert,
    block_move,
    block_rename,
    block_replace,
    block_rewrite,
    block_share,
    block_swap,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.selectors import agent_get_by_name_for_agent
from pattern_site.kernel.errors import InvalidInput
from pattern_site.kernel.tools import AgentTool, tool_register


def block_change_payload(change: BlockChange) -> dict[str, Any]:
    """A block change as ``ChangeOut``, with a message for the model."""
    block = change.block
    messages = {
        "applied": f"block {block.label!r} updated ({block.size}/"
        f"{block.char_limit} chars)",
        "unchanged": f"block {block.label!r} already had this content",
        "pending_approval": f"block {block.label!r} needs the partner's approval; "
        f"your change waits as request {change.approval.pk if change.approval else ''}",
    }
    return {
        "status": change.status,
        "message": messages[change.status],
        "block_id": block.pk,
        "label": block.label,
        "size": block.size,
        "char_limit": block.char_limit,
        "version_id": change.update.pk if change.update else None,
        "approval_id": change.approval.pk if change.approval else None,
    }


def _moved_out(block: MemoryBlock, where: str) -> dict[str, Any]:
    return {
        "status": "moved",
        "message": f"block {block.label!r} is now in {where} memory",
        "block_id": block.pk,
        "label": block.label,
        "size": block.size,
        "char_limit": block.char_limit,
    }


def _labelled(actor: Actor, label: str) -> tuple[Agent, MemoryBlock]:
    agent = block_tool_agent(actor)
    return agent, block_get_by_label_for_agent(agent=agent, label=label)


@transaction.atomic
def _change_labelled(
    actor: Actor, label: str, change: Callable[[MemoryBlock], BlockChange]
) -> dict[str, Any]:
    """``change`` of the block an agent means by ``label``, as ``ChangeOut``:
    the block is found under its row lock in the change's own transaction,
    so that one read finds and locks it."""
    agent = block_tool_agent(actor)
    block = block_get_by_label_for_agent(agent=agent, label=label, lock=True)
    return block_change_payload(change(block))


def block_detail(*, actor: Actor, block: MemoryBlock) -> dict[str, Any]:
    """A block as ``BlockOut``: its facts for ``actor`` and its content."""
    return {
        **block_facts_for_actor(actor=actor, block=block),
        "schema": block.schema,
        "rendered": block.rendered,
        "content": block_value(block=block),
    }


def block_detail_by_label(*, actor: Actor, label: str) -> dict[str, Any]:
    """The block an agent means by ``label``, as ``BlockOut``."""
    agent, block = _labelled(actor, label)
    blocks_seen_record_later(agent=agent, blocks=[block])
    return block_detail(actor=actor, block=block)


def context_tool(*, actor: Actor, args: ContextToolIn) -> dict[str, Any]:
    """The context tool (``ContextToolOut``): its changes operation is the
    memory_changes tool's (``ChangesOut``), every other one changes block
    ``args.label`` (``ChangeOut``)."""
    op = args.operation
    if op == "changes":
        labels = [*([args.label] if args.label else []), *(args.labels or [])]
        return block_changes_tool(
            actor=actor, args=ChangesIn(peek=args.peek, labels=labels or None)
        )
    if not args.label:
        raise InvalidInput(f"{op} needs 'label', the block to act on")
    if op == "append":
        return _change_labelled(
            actor,
            args.label,
            lambda block: block_append(
                actor=actor,
                block=block,
                content=args.content or "",
                section=args.section,
            ),
        )
    if op == "replace":

        def replace(block: MemoryBlock) -> BlockChange:
            if args.old is None or args.new is None:
                raise InvalidInput("replace needs 'old' and 'new'")
            return block_replace(
                actor=actor,
                block=block,
                old=args.old,
                new=args.new,
                section=args.section,
            )

        return _change_labelled(actor, args.label, replace)
    agent, block = _labelled(actor, args.label)
    if op == "archive":
        moved = block_move(actor=actor, block=block, to_type=BlockType.ARCHIVAL)
        return _moved_out(moved, "archival")
    if op == "load":
        moved = block_move(actor=actor, block=block, to_type=BlockType.WORKING)
        return _moved_out(moved, "working")
    if not args.archival_label:
        raise InvalidInput("swap needs 'archival_label'")
    archival = block_get_by_label_for_agent(agent=agent, label=args.archival_label)
    _, loaded = block_swap(actor=actor, working=block, archival=archival)
    out = _moved_out(loaded, "working")
    out["message"] = (
        f"block {block.label!r} archived; block {loaded.label!r} loaded into "
        "working memory"
    )
    return out


def core_memory_update_tool(
    *, actor: Actor, args: CoreMemoryUpdateIn
) -> dict[str, Any]:
    return _change_labelled(
        actor,
        args.label,
        lambda block: block_rewrite(actor=actor, block=block, content=args.content),
    )


def core_memory_append_tool(*, actor: Actor, args: CoreMemoryIn) -> dict[str, Any]:
    return _change_labelled(
        actor,
        args.label,
        lambda block: block_append(
            actor=actor, block=block, content=args.content, section=args.section
        ),
    )


def core_memory_replace_tool(
    *, actor: Actor, args: CoreMemoryReplaceIn
) -> dict[str, Any]:
    return _change_labelled(
        actor,
        args.label,
        lambda block: block_replace(
            actor=actor,
            block=block,
            old=args.old_content,
            new=args.new_content,
            section=args.section,
            every=True,
        ),
    )


def memory_insert_tool(*, actor: Actor, args: MemoryInsertIn) -> dict[str, Any]:
    return _change_labelled(
        actor,
        args.label,
        lambda block: block_insert(
            actor=actor, block=block, content=args.new_str, line=args.insert_line
        ),
    )


def memory_replace_tool(*, actor: Actor, args: MemoryReplaceIn) -> dict[str, Any]:
    return _change_labelled(
        actor,
        args.label,
        lambda block: block_replace(
            actor=actor, block=block, old=args.old_str, new=args.new_str, once=True
        ),
    )


def memory_rethink_tool(*, actor: Actor, args: MemoryRethinkIn) -> dict[str, Any]:
    return _change_labelled(
        actor,
        args.label,
        lambda block: block_rewrite(actor=actor, block=block, content=args.new_memory),
    )


@transaction.atomic
def block_create_tool(*, actor: Actor, args: BlockCreateToolIn) -> dict[str, Any]:
    """A new block of the caller's own, its content written as text (one
    transaction: a content the block refuses leaves no empty block)."""
    block = block_create(
        actor=actor,
        owner=block_tool_agent(actor),
        label=args.label,
        template=args.template,
        description=args.description,
        block_type=args.block_type,
        permission=args.permission,
        pinned=args.pinned,
    )
    if args.content:
        block = block_rewrite(actor=actor, block=block, content=args.content).block
    return block_detail(actor=actor, block=block)


def block_rename_tool(*, actor: Actor, args: BlockRenameIn) -> dict[str, Any]:
    _, block = _labelled(actor, args.label)
    block = block_rename(actor=actor, block=block, label=args.new_label)
    return block_detail(actor=actor, block=block)


def block_delete_tool(*, actor: Actor, args: BlockLabelIn) -> dict[str, Any]:
    _, block = _labelled(actor, args.label)
    block_delete(actor=actor, block=block)
    return {"label": args.label, "message": f"block {args.label!r} deleted"}


def block_share_tool(*, actor: Actor, args: BlockShareToolIn) -> dict[str, Any]:
    agent, block = _labelled(actor, args.label)
    other = agent_get_by_name_for_agent(agent=agent, name=args.agent)
    attachment = block_share(actor=actor, block=block, agent=other, access=args.access)
    return {
        "agent_id": other.pk,
        "agent": other.name,
        "access": attachment.access,
        "attached_at": attachment.attached_at,
    }


def block_changes_tool(*, actor: Actor, args: ChangesIn) -> dict[str, Any]:
    """What changed since the agent last looked (``ChangesOut``); its looks
    move to now unless ``args.peek``."""
    agent = block_tool_agent(actor)
    found = block_changes_for_agent(agent=agent, labels=args.labels)
    if not args.peek:
        blocks_seen_advance(
            agent_id=agent.pk, marks=[b.mark for b in found if b.mark is not None]
        )
    return {
        "blocks": [
            {
                "block_id": b.block.pk,
                "label": b.block.label,
                "changes": b.changes,
                "earlier": b.earlier,
                "folded": b.folded,
            }
            for b in found
            if b.changes or b.earlier
        ],
        "advanced": not args.peek,
    }


tool_register(
    AgentTool(
        name="context",
        description=CONTEXT_TOOL,
        args=ContextToolIn,
        out=ContextToolOut,
        run=context_tool,
        writes=True,
        errors=(403, 404, 409),
        summary="context: append, replace, archive, load, swap, changes",
    ),
    AgentTool(
        name="core_memory_append",
        description=CORE_MEMORY_APPEND,
        args=CoreMemoryIn,
        out=ChangeOut,
        run=core_memory_append_tool,
        writes=True,
        summary="core_memory_append",
    ),
    AgentTool(
        name="core_memory_replace",
        description=CORE_MEMORY_REPLACE,
        args=CoreMemoryReplaceIn,
        out=ChangeOut,
        run=core_memory_replace_tool,
        writes=True,
        summary="core_memory_replace",
    ),
    AgentTool(
        name="memory_changes",
        description=CHANGES_TOOL,
        args=ChangesIn,
        out=ChangesOut,
        # Advances what the agent has seen, unless it only peeks.
        run=block_changes_tool,
        writes=True,
        errors=(403,),
        summary="memory_changes: what changed since you looked",
    ),
    AgentTool(
        name="core_memory_update",
        description=CORE_MEMORY_UPDATE,
        args=CoreMemoryUpdateIn,
        out=ChangeOut,
        run=core_memory_update_tool,
        writes=True,
        summary="core_memory_update",
    ),
    AgentTool(
        name="memory_insert",
        description=MEMORY_INSERT,
        args=MemoryInsertIn,
        out=ChangeOut,
        run=memory_insert_tool,
        writes=True,
        summary="memory_insert",
    ),
    AgentTool(
        name="memory_replace",
        description=MEMORY_REPLACE,
        args=MemoryReplaceIn,
        out=ChangeOut,
        run=memory_replace_tool,
        writes=True,
        summary="memory_replace",
    ),
    AgentTool(
        name="memory_rethink",
        description=MEMORY_RETHINK,
        args=MemoryRethinkIn,
        out=ChangeOut,
        run=memory_rethink_tool,
        writes=True,
        summary="memory_rethink",
    ),
    AgentTool(
        name="block_create",
        description=BLOCK_CREATE_TOOL,
        args=BlockCreateToolIn,
        out=BlockOut,
        run=block_create_tool,
        writes=True,
        status=201,
        errors=(403, 409),
        summary="block_create: a block of your own",
    ),
    AgentTool(
        name="block_rename",
        description=BLOCK_RENAME_TOOL,
        args=BlockRenameIn,
        out=BlockOut,
        run=block_rename_tool,
        writes=True,
        errors=(403, 404, 409),
        summary="block_rename",
    ),
    AgentTool(
        name="block_delete",
        description=BLOCK_DELETE_TOOL,
        args=BlockLabelIn,
        out=BlockDeletedOut,
        run=block_delete_tool,
        writes=True,
        summary="block_delete",
    ),
    AgentTool(
        name="block_share",
        description=BLOCK_SHARE_TOOL,
        args=BlockShareToolIn,
        out=BlockAttachmentOut,
        run=block_share_tool,
        writes=True,
        errors=(403, 404, 409),
        summary="block_share: with an agent of your constellation",
    ),
)
