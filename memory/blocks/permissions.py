"""Who may do what with a memory block: the one place that decides.

Visibility: an agent sees its own blocks, blocks attached to it, and the
constellation-level blocks of its constellation; anything else does not
exist for it (``NotFound``).  Humans see every block of their
constellations; the system sees everything.

Rights (``block_access_for_actor``): an agent's right is the weaker of the
block's permission and, for a block shared with it, the attachment's
access.  Partner/Human blocks are read-only to agents except through an
approval request (``block_approval_needed``), which the partner (Partner
blocks) or any human of the constellation (Human blocks) decides.  Log
blocks are system-maintained: read-only to agents.  Read-only fields and
sections bind agents.  An agent creates blocks in its own memory only;
it renames, configures and shares its own blocks it may write, and deletes
its own Admin blocks.  Humans of the constellation may edit any of its
blocks; the system bypasses every check.
"""

from __future__ import annotations

from typing import Any, Literal

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.expressions import RawSQL

from memory.blocks import documents
from memory.blocks.models import (
    BlockApproval,
    BlockAttachment,
    BlockType,
    MemoryBlock,
    Permission,
    SharedAccess,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, AgentToken, Constellation
from pattern_site.kernel.agents.permissions import constellation_filter
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.db.rows import row_mark_locked
from pattern_site.kernel.errors import AuthenticationFailed, NotFound, PermissionDenied

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


# Prompt names of permissions and shared access (as prompts spell them).
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


def _token_live(token_id: int, agent_id: int) -> QuerySet[AgentToken]:
    """The token, if it is still the live token of an active agent."""
    return AgentToken.objects.filter(
        pk=token_id, agent_id=agent_id, revoked_at__isnull=True, agent__is_active=True
    )


# Every stored live edit of an agent's socket runs this: compiled once (see
# pattern_site.kernel.db.compiled); the block's key goes in prepared.
_TOKEN_LIVE_SHARE = CompiledQuery(
    lambda token_id, agent_id, block_key: (
        _token_live(token_id, agent_id)
        .annotate(
            shared=Subquery(
                BlockAttachment.objects.filter(
                    block_id=RawSQL("%s", (block_key,)), agent=OuterRef("agent")
                )
                .order_by()
                .values("access")[:1]
            )
        )
        .order_by()
        .values_list("shared")[:1]
    ),
    token_id=-730_301,
    agent_id=-730_302,
    block_key="\x00block_key",
)


_TOKEN_DEAD = (
    "the agent token this connection joined with is revoked, or its agent deactivated"
)


def block_access_now(*, actor: Actor, block: MemoryBlock) -> Access:
    """The actor's right on ``block`` (its row, locked by the write this
    decides) as the database has it now.

    An actor bound to a token (an open socket's, ``Actor.token_id``) was
    authenticated when it joined: its token must still be live and its agent
    active, or ``AuthenticationFailed`` - so a revocation or an unshare
    committed before this write refuses it even when the socket has not
    heard of it yet.  One indexed query (the token by primary key) checks
    the token and reads the agent's share of the block.
    """
    if actor.token_id is not None:
        assert actor.agent is not None
        row = _TOKEN_LIVE_SHARE.first_row(
            token_id=actor.token_id,
            agent_id=actor.agent.pk,
            block_key=MemoryBlock._meta.pk.get_db_prep_value(
                block.pk, connections[DEFAULT_DB_ALIAS]
            ),
        )
        if row is None:
            raise AuthenticationFailed(_TOKEN_DEAD)
        block.shared_access = row[0]
    return block_access_for_actor(actor=actor, block=block)


# The locked row and the check of an open socket's token in one statement,
# on the path of every stored live edit (see block_token_lock).
_LOCKED_TOKEN_LIVE_SHARE = CompiledQuery(
    lambda pk, token_id, agent_id: (
        MemoryBlock.objects.select_for_update()
        .filter(pk=RawSQL("%s", (pk,)))
        .annotate(
            token_live=Exists(_token_live(token_id, agent_id)),
            token_shared=Subquery(
                BlockAttachment.objects.filter(block=OuterRef("pk"), agent_id=agent_id)
                .order_by()
                .values("access")[:1]
            ),
        )
        .order_by()
    ),
    pk="\x00pk",
    token_id=-730_311,
    agent_id=-730_312,
)


def block_token_lock(*, actor: Actor, block: MemoryBlock) -> MemoryBlock:
    """The block's row, locked for this transaction (as
    ``pattern_site.kernel.db.rows.row_lock`` locks it), read in one
    statement with the check :func:`block_access_now` makes of the token
    ``actor`` is bound to: ``AuthenticationFailed`` when it died, else the
    row carries the agent's share of the block for
    :func:`block_access_for_actor`."""
    assert actor.token_id is not None and actor.agent is not None
    connection = connections[DEFAULT_DB_ALIAS]
    locked = _LOCKED_TOKEN_LIVE_SHARE.first(
        pk=MemoryBlock._meta.pk.get_db_prep_value(block.pk, connection),
        token_id=actor.token_id,
        agent_id=actor.agent.pk,
    )
    if locked is None:
        raise NotFound(f"block {block.label!r} no longer exists")
    row_mark_locked(locked)
    if not locked.token_live:
        raise AuthenticationFailed(_TOKEN_DEAD)
    locked.shared_access = locked.token_shared
    return locked


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


def block_can_rename(*, actor: Actor, block: MemoryBlock) -> bool:
    """A label is how its owner names the block: the owner agent with write
    access renames it, or a human; constellation blocks only humans."""
    return block_can_configure(actor=actor, block=block)


def block_can_share(*, actor: Actor, block: MemoryBlock) -> bool:
    """Humans, or the owner agent with write access."""
    return block.owner_id is not None and block_can_configure(actor=actor, block=block)


# Permissions from the tightest to the loosest.
_PERMISSION_ORDER = [
    Permission.READ_ONLY,
    Permission.PARTNER,
    Permission.HUMAN,
    Permission.APPEND,
    Permission.READ_WRITE,
    Permission.ADMIN,
]


def blocks_visible(
    qs: QuerySet[MemoryBlock], *, actor: Actor, agent_id: int | None = None
) -> QuerySet[MemoryBlock]:
    """``qs`` narrowed to the blocks ``actor`` may see; with ``agent_id``,
    those in that agent's memory.  Agents' rows carry ``shared_access``
    (their attachment's access, or None), so rights need no further query.
    """
    if actor.kind == "agent":
        assert actor.agent is not None
        agent = actor.agent
        attached = BlockAttachment.objects.filter(block=OuterRef("pk"), agent=agent)
        shared = BlockAttachment.objects.filter(agent=agent).values("block_id")
        qs = qs.filter(
            Q(owner=agent)
            | Q(owner__isnull=True, constellation_id=agent.constellation_id)
            | Q(pk__in=shared)
        ).annotate(shared_access=Subquery(attached.values("access")[:1]))
        if agent_id is not None and agent_id != agent.pk:
            return qs.none()
        return qs
    condition = constellation_filter(actor)
    if condition is not None:
        qs = qs.filter(
            constellation__in=Constellation.objects.filter(condition).values("pk")
        )
    if agent_id is not None:
        qs = qs.filter(
            Q(owner_id=agent_id)
            | Q(attachments__agent_id=agent_id)
            | Q(owner__isnull=True, constellation__agents=agent_id)
        ).distinct()
    return qs


def block_create_check(*, actor: Actor, owner: Agent | None) -> None:
    """Agents create blocks in their own memory only; constellation-level
    blocks are for humans."""
    if actor.kind != "agent":
        return
    assert actor.agent is not None
    if owner is None:
        raise PermissionDenied("agents cannot create constellation-level blocks")
    if owner.pk != actor.agent.pk:
        raise PermissionDenied("an agent may create blocks in its own memory only")


def memory_transfer_check(*, actor: Actor, agent: Agent) -> None:
    """Whether ``actor`` may export or import ``agent``'s whole memory: a
    human of its constellation (whoever could see the agent), or the agent
    itself; another agent may not, even one that can read some blocks."""
    if actor.agent is not None and actor.agent.pk != agent.pk:
        raise PermissionDenied(
            f"an agent may export or import its own memory only, not {agent.name}'s"
        )


def block_configure_check(
    *,
    actor: Actor,
    block: MemoryBlock,
    permission: str | None = None,
    char_limit: int | None = None,
) -> None:
    """Agents may tighten a block's permission but never loosen it, and
    never change its char limit."""
    if actor.kind != "agent":
        return
    if permission is not None and _PERMISSION_ORDER.index(
        permission
    ) > _PERMISSION_ORDER.index(block.permission):
        raise PermissionDenied("agents cannot loosen a block's permission")
    if char_limit is not None:
        raise PermissionDenied("only a human can change a block's char limit")


def read_only_binds(actor: Actor) -> bool:
    """Whether read-only fields and sections bind ``actor`` (agents)."""
    return actor.kind == "agent"


def block_change_check(
    *, actor: Actor, block: MemoryBlock, access: Access, old: Any, new: Any
) -> None:
    """Whether a change from value ``old`` to ``new`` is within ``access``:
    append-only rights may only extend, and agents never touch read-only
    fields or sections."""
    if access == "read":
        block_require_access(actor=actor, block=block, needed="append")
    if access == "append" and not documents.is_extension(old, new):
        raise PermissionDenied(
            f"you may only append to block {block.label!r}; this change would "
            "delete or rewrite existing content"
        )
    if read_only_binds(actor):
        changed = documents.read_only_changed(block.schema, old, new)
        if changed:
            raise PermissionDenied(f"{changed} of block {block.label!r} is read-only")


def approvals_visible(
    qs: QuerySet[BlockApproval], *, actor: Actor
) -> QuerySet[BlockApproval]:
    """Approval requests ``actor`` may see: an agent its own, humans those of
    their constellations."""
    if actor.kind == "agent":
        assert actor.agent is not None
        return qs.filter(agent=actor.agent)
    condition = constellation_filter(actor)
    if condition is None:
        return qs
    return qs.filter(
        block__constellation__in=Constellation.objects.filter(condition).values("pk")
    )


def approval_decide_check(*, actor: Actor, approval: BlockApproval) -> None:
    """The partner decides requests on Partner blocks, any human of the
    constellation on Human blocks; agents never decide."""
    if actor.kind == "agent":
        raise PermissionDenied("agents cannot decide approval requests")
    if actor.kind == "human" and approval.block.permission == Permission.PARTNER:
        assert actor.user is not None
        if approval.block.constellation.partner_id != actor.user.pk:
            raise PermissionDenied(
                f"block {approval.block.label!r} needs the partner's approval"
            )


def approval_can_decide(*, actor: Actor, approval: BlockApproval) -> bool:
    """Whether ``actor`` may decide ``approval`` (see approval_decide_check)."""
    try:
        approval_decide_check(actor=actor, approval=approval)
    except PermissionDenied:
        return False
    return True


def approvals_decidable(
    qs: QuerySet[BlockApproval], *, actor: Actor
) -> QuerySet[BlockApproval]:
    """The requests of ``qs`` that ``actor`` may decide, as one query (the
    rule of approval_decide_check)."""
    if actor.kind == "agent":
        return qs.none()
    qs = approvals_visible(qs, actor=actor)
    if actor.kind == "human":
        assert actor.user is not None
        return qs.exclude(
            Q(block__permission=Permission.PARTNER)
            & ~Q(block__constellation__partner_id=actor.user.pk)
        )
    return qs


def block_tool_agent(actor: Actor) -> Agent:
    """The agent calling a memory tool: the tools act on the caller's own
    memory, so only agents (with their token) call them."""
    if actor.agent is None:
        raise PermissionDenied("memory tools are called by agents, with their token")
    return actor.agent
