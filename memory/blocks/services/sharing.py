"""Sharing a block with another agent of its constellation, with
ReadOnly/AppendOnly/ReadWrite access, and unsharing it; a changed or
withdrawn access tells that agent's open sockets to check their right
again.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from memory.blocks.models import BlockAttachment, MemoryBlock, SharedAccess
from memory.blocks.permissions import block_can_share
from memory.blocks.services.events import _block_event
from memory.blocks.services.rules import _choice
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    PermissionDenied,
)
from pattern_site.kernel.rights import rights_revoke_send


@transaction.atomic
def block_share(
    *, actor: Actor, block: MemoryBlock, agent: Agent, access: str
) -> BlockAttachment:
    """Attach ``block`` to ``agent`` with ReadOnly/AppendOnly/ReadWrite access
    (again: changes the access)."""
    if not block_can_share(actor=actor, block=block):
        raise PermissionDenied(f"you cannot share block {block.label!r}")
    _choice(access, SharedAccess, "access")
    if agent.constellation_id != block.constellation_id:
        raise NotFound(f"agent {agent.pk} does not exist")
    if agent.pk == block.owner_id:
        raise InvalidInput("a block is not shared with its own owner")
    attachment = BlockAttachment.objects.filter(block=block, agent=agent).first()
    if attachment is None:
        attachment = BlockAttachment(block=block, agent=agent, access=access)
    elif attachment.access != access:
        rights_revoke_send(agent_id=agent.pk, block_id=block.pk)
    attachment.access = access
    attachment.full_clean(validate_unique=False)
    try:
        attachment.save()
    except IntegrityError:
        raise Conflict("this block was just shared with that agent") from None
    _block_event(
        actor=actor,
        block=block,
        change_type="share",
        summary=f"shared with {agent.name} ({access})",
    )
    return attachment


@transaction.atomic
def block_unshare(*, actor: Actor, block: MemoryBlock, agent: Agent) -> bool:
    if not block_can_share(actor=actor, block=block):
        raise PermissionDenied(f"you cannot unshare block {block.label!r}")
    deleted, _ = BlockAttachment.objects.filter(block=block, agent=agent).delete()
    if deleted:
        rights_revoke_send(agent_id=agent.pk, block_id=block.pk)
        _block_event(
            actor=actor,
            block=block,
            change_type="unshare",
            summary=f"no longer shared with {agent.name}",
        )
    return bool(deleted)
