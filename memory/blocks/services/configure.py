"""A block's settings (not its content): label, description, schema,
permission, pinning, type and limit; moving between working and archival
memory; deleting.  A change of permission, and a deletion, tell open sockets to
check their right again.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memory.blocks import documents
from memory.blocks.models import BlockType, MemoryBlock, Permission
from memory.blocks.permissions import (
    block_can_configure,
    block_can_delete,
    block_can_rename,
    block_configure_check,
)
from memory.blocks.selectors import block_document_load
from memory.blocks.services.create import _label_free
from memory.blocks.services.events import _block_event
from memory.blocks.services.rules import _choice
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.apitypes import label_check
from pattern_site.kernel.errors import InvalidInput, PermissionDenied
from pattern_site.kernel.rights import rights_revoke_send


@transaction.atomic
def block_configure(
    *,
    actor: Actor,
    block: MemoryBlock,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    permission: str | None = None,
    pinned: bool | None = None,
    block_type: str | None = None,
    char_limit: int | None = None,
) -> MemoryBlock:
    """Change a block's settings (not its content).

    The owner agent with write access, or a human.  An agent may make the
    permission stricter but never looser, and cannot change the limit.
    """
    if not block_can_configure(actor=actor, block=block):
        raise PermissionDenied(
            f"only the owner with write access or a human can configure {block.label!r}"
        )
    fields: list[str] = []
    if description is not None:
        block.description = description
        fields.append("description")
    if pinned is not None:
        block.pinned = pinned
        fields.append("pinned")
    if block_type is not None:
        new_type = _choice(block_type, BlockType, "block_type")
        if (new_type == BlockType.LOG) != (block.schema.get("kind") == "log"):
            raise InvalidInput("only log-schema blocks are log blocks")
        block.block_type = new_type
        fields.append("block_type")
    if permission is not None:
        _choice(permission, Permission, "permission")
        block_configure_check(actor=actor, block=block, permission=permission)
        if permission != block.permission:
            # Open sockets check their right again (looser: nothing happens).
            rights_revoke_send(block_id=block.pk)
        block.permission = permission
        fields.append("permission")
    if char_limit is not None:
        block_configure_check(actor=actor, block=block, char_limit=char_limit)
        block.char_limit = char_limit
        fields.append("char_limit")
    if schema is not None:
        new_schema = documents.schema_validate(schema)
        if new_schema["kind"] != block.schema["kind"] and block.size:
            raise InvalidInput(
                f"block {block.label!r} has content; its schema kind stays "
                f"{block.schema['kind']}"
            )
        block.schema = new_schema
        block.rendered = documents.render(block_document_load(block=block), new_schema)
        block.size = len(block.rendered)
        fields += ["schema", "rendered", "size"]
    if not fields:
        return block
    block.full_clean()
    block.save(update_fields=[*fields, "updated_at"])
    _block_event(
        actor=actor,
        block=block,
        change_type="configure",
        summary=f"changed {', '.join(fields)}",
    )
    return block


@transaction.atomic
def block_rename(*, actor: Actor, block: MemoryBlock, label: str) -> MemoryBlock:
    """Give ``block`` a new label, free among its owner's (or its
    constellation's) blocks; who may is who may configure it."""
    if not block_can_rename(actor=actor, block=block):
        raise PermissionDenied(
            f"only the owner with write access or a human can rename {block.label!r}"
        )
    old = block.label
    block.label = label_check(label.strip())
    if block.label == old:
        return block
    _label_free(block, exclude=block.pk)
    block.full_clean()
    block.save(update_fields=["label", "updated_at"])
    _block_event(
        actor=actor, block=block, change_type="rename", summary=f"renamed from {old}"
    )
    return block


@transaction.atomic
def block_delete(*, actor: Actor, block: MemoryBlock) -> None:
    if not block_can_delete(actor=actor, block=block):
        raise PermissionDenied(
            f"deleting block {block.label!r} needs Admin permission on your own block"
        )
    rights_revoke_send(block_id=block.pk)
    _block_event(actor=actor, block=block, change_type="delete", summary="deleted")
    block.delete()


def block_move(*, actor: Actor, block: MemoryBlock, to_type: str) -> MemoryBlock:
    """Move a block between working and archival memory (context tool)."""
    if block.block_type == BlockType.CORE:
        raise InvalidInput(f"block {block.label!r} is core memory and stays in context")
    if block.block_type == BlockType.LOG:
        raise InvalidInput(f"block {block.label!r} is a log block")
    if block.block_type == to_type:
        where = "working" if to_type == BlockType.WORKING else "archival"
        raise InvalidInput(f"block {block.label!r} is already in {where} memory")
    pinned = False if to_type == BlockType.ARCHIVAL else None
    return block_configure(actor=actor, block=block, block_type=to_type, pinned=pinned)


@transaction.atomic
def block_swap(
    *, actor: Actor, working: MemoryBlock, archival: MemoryBlock
) -> tuple[MemoryBlock, MemoryBlock]:
    if working.block_type != BlockType.WORKING:
        raise InvalidInput(f"block {working.label!r} is not in working memory")
    if archival.block_type != BlockType.ARCHIVAL:
        raise InvalidInput(f"block {archival.label!r} is not in archival memory")
    return (
        block_move(actor=actor, block=working, to_type=BlockType.ARCHIVAL),
        block_move(actor=actor, block=archival, to_type=BlockType.WORKING),
    )
