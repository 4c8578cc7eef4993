"""Who may do what with a memory block: the one place that decides."""

from __future__ import annotations

from typing import Literal

from coordination.actors import Actor
from coordination.errors import NotFound, PermissionDenied
from coordination.models import Agent
from memory.blocks.models import (
    BlockAttachment,
    BlockType,
    MemoryBlock,
    Permission,
    SharedAccess,
)

Access = Literal["read", "append", "write"]


_RANK: dict[str, int] = {"read": 0, "append": 1, "write": 2}


PERMISSION_ACCESS: dict[str, Access] = {
    Permission.READ_ONLY: "read",
    Permission.PARTNER: "read",
    Permission.HUMAN: "read",
    Permission.APPEND: "append",
    Permission.READ_WRITE: "write",
    Permission.ADMIN: "write",
}


SHARED_ACCESS: dict[str, Access] = {
    SharedAccess.READ_ONLY: "read",
    SharedAccess.APPEND_ONLY: "append",
    SharedAccess.READ_WRITE: "write",
}


# Prompt names of permissions and shared access (seed 001/003 spelling).
PERMISSION_LABEL = dict(Permission.choices)


SHARED_ACCESS_LABEL = dict(SharedAccess.choices)


def _shared_access(*, agent: Agent, block: MemoryBlock) -> str | None:
    if hasattr(block, "shared_access"):
        return block.shared_access
    return (
        BlockAttachment.objects.filter(block=block, agent=agent)
        .values_list("access", flat=True)
        .first()
    )


def block_access_for_actor(*, actor: Actor, block: MemoryBlock) -> Access:
    """The actor's effective right on ``block`` (which it can see)."""
    if actor.kind == "system":
        return "write"
    if actor.kind == "human":
        return "write"
    assert actor.agent is not None
    agent = actor.agent
    if block.block_type == BlockType.LOG or block.schema.get("kind") == "log":
        return "read"
    access = PERMISSION_ACCESS[block.permission]
    if block.owner_id == agent.pk or block.owner_id is None:
        return access
    shared = _shared_access(agent=agent, block=block)
    if shared is None:
        raise NotFound(f"block {block.pk} does not exist")
    limit = SHARED_ACCESS[shared]
    return access if _RANK[access] <= _RANK[limit] else limit


def block_approval_needed(*, actor: Actor, block: MemoryBlock) -> bool:
    """Whether the actor's writes become approval requests (Partner/Human)."""
    if actor.kind != "agent" or block.permission not in (
        Permission.PARTNER,
        Permission.HUMAN,
    ):
        return False
    if block.block_type == BlockType.LOG or block.schema.get("kind") == "log":
        return False
    assert actor.agent is not None
    if block.owner_id in (None, actor.agent.pk):
        return True
    shared = _shared_access(agent=actor.agent, block=block)
    return shared in (SharedAccess.APPEND_ONLY, SharedAccess.READ_WRITE)


def block_permission_label(*, actor: Actor, block: MemoryBlock) -> str:
    """How the block's permission reads in the actor's prompt: the block's
    permission, or what a weaker attachment leaves of it."""
    label = PERMISSION_LABEL[block.permission]
    if actor.kind != "agent":
        return label
    access = block_access_for_actor(actor=actor, block=block)
    if _RANK[access] < _RANK[PERMISSION_ACCESS[block.permission]]:
        return {"read": "ReadOnly", "append": "Append"}[access]
    return label


def block_require_access(*, actor: Actor, block: MemoryBlock, needed: Access) -> None:
    access = block_access_for_actor(actor=actor, block=block)
    if _RANK[access] < _RANK[needed]:
        raise PermissionDenied(
            f"block {block.label!r} is {access}-only for you; this needs {needed}"
            + (
                " (log blocks are maintained by the system)"
                if block.block_type == BlockType.LOG
                else ""
            )
        )


def block_can_delete(*, actor: Actor, block: MemoryBlock) -> bool:
    if actor.kind != "agent":
        return True
    assert actor.agent is not None
    return block.owner_id == actor.agent.pk and block.permission == Permission.ADMIN


def block_can_configure(*, actor: Actor, block: MemoryBlock) -> bool:
    """Description/schema/pinned/type: the owner with write access, or a human."""
    if actor.kind != "agent":
        return True
    assert actor.agent is not None
    return (
        block.owner_id == actor.agent.pk
        and block_access_for_actor(actor=actor, block=block) == "write"
    )


def block_can_share(*, actor: Actor, block: MemoryBlock) -> bool:
    """Humans, or the owner agent with write access."""
    return block.owner_id is not None and block_can_configure(actor=actor, block=block)
