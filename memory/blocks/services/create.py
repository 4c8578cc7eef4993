"""Creating a block: from a template or a schema, with initial content or a
whole imported Loro document (its history kept); labels are unique per
owner (or per constellation for constellation-level blocks).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from loro import Frontiers, LoroDoc, VersionVector

from memory.blocks import documents
from memory.blocks.models import BlockType, MemoryBlock, Permission
from memory.blocks.permissions import block_create_check
from memory.blocks.services.change import _block_change
from memory.blocks.services.events import _block_event
from memory.blocks.services.rules import (
    _check_bytes,
    _check_layout,
    _check_limit,
    _choice,
)
from memory.blocks.services.storage import _block_record, _snapshot_save
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.apitypes import label_check
from pattern_site.kernel.errors import Conflict, InvalidInput


@transaction.atomic
def block_create(
    *,
    actor: Actor,
    label: str,
    owner: Agent | None = None,
    constellation: Constellation | None = None,
    template: str | None = None,
    schema: dict[str, Any] | None = None,
    description: str | None = None,
    block_type: str | None = None,
    permission: str = Permission.READ_WRITE,
    char_limit: int | None = None,
    pinned: bool = False,
    content: Any = None,
    snapshot: bytes | None = None,
) -> MemoryBlock:
    """Create a block for ``owner`` (or the constellation when None).

    ``template`` (persona, human, scratchpad, organization, custom) gives the
    schema, description and type unless they are given.  ``content`` is its
    initial content (shaped by the schema); ``snapshot`` (imports) a whole
    Loro document with its history instead.
    """
    block_create_check(actor=actor, owner=owner)
    if not isinstance(label, str) or not label.strip():
        raise InvalidInput(
            "a block needs a label (up to 100 characters, unique per owner)",
            extra={"field": "label"},
        )
    if owner is not None:
        constellation = owner.constellation
    if constellation is None:
        raise InvalidInput("a constellation-level block needs a constellation")
    label = label_check(label.strip())
    tpl = documents.template_get(template) if template else None
    schema = documents.schema_validate(
        schema if schema is not None else (tpl.schema if tpl else {"kind": "text"})
    )
    if block_type is None:
        block_type = tpl.block_type if tpl else BlockType.WORKING
    if schema["kind"] == "log":
        block_type = BlockType.LOG
    block = MemoryBlock(
        constellation=constellation,
        owner=owner,
        label=label,
        description=description
        if description is not None
        else (tpl.description if tpl else ""),
        block_type=_choice(block_type, BlockType, "block_type"),
        schema=schema,
        char_limit=char_limit or settings.MEMORY_DEFAULT_CHAR_LIMIT,
        permission=_choice(permission, Permission, "permission"),
        pinned=pinned,
    )
    if not block.description:
        block.description = f"Memory block '{block.label}'"
    block.rendered = documents.render(LoroDoc(), schema)
    block.size = len(block.rendered)
    _label_free(block)
    block.full_clean()
    block.save()
    if snapshot is not None:
        _block_adopt_snapshot(block=block, actor=actor, snapshot=snapshot)
    elif content not in (None, "", {}, []):
        _block_change(
            block=block,
            actor=actor,
            summary="created",
            change=lambda doc: documents.document_set_value(doc, schema, content),
            access="write",
            change_type="create",
        )
    else:
        _block_record_empty(block=block, actor=actor)
        _block_event(actor=actor, block=block, change_type="create", summary="created")
    return block


def _label_free(block: MemoryBlock, *, exclude: Any = None) -> None:
    qs = MemoryBlock.objects.filter(label=block.label)
    if block.owner_id is not None:
        qs = qs.filter(owner_id=block.owner_id)
    else:
        qs = qs.filter(owner__isnull=True, constellation_id=block.constellation_id)
    if exclude is not None:
        qs = qs.exclude(pk=exclude)
    if qs.exists():
        where = "this agent" if block.owner_id else "this constellation"
        raise Conflict(
            f"{where} already has a block labelled {block.label!r}",
            extra={"field": "label"},
        )


def _block_record_empty(*, block: MemoryBlock, actor: Actor) -> None:
    """Record an empty block's creation as its first version, so that its
    history starts there and a rollback can return it to empty.  Its row
    holds the (empty) document's update like any other: a row without
    bytes reads as one folded into the snapshot."""
    doc = LoroDoc()
    _block_record(
        block=block,
        doc=doc,
        actor=actor,
        summary="created",
        data=documents.updates_since(doc, VersionVector()),
        rendered=block.rendered,
    )


def _block_adopt_snapshot(*, block: MemoryBlock, actor: Actor, snapshot: bytes) -> None:
    doc = documents.document_load(snapshot, [])
    _check_layout(block=block, doc=doc, since=Frontiers())
    rendered = documents.render(doc, block.schema)
    held = documents.held_size(doc, block.schema, rendered)
    _check_limit(block=block, old_size=0, new_size=held)
    _check_bytes(block=block, doc=doc, added=len(snapshot), shrinks=False)
    update = _block_record(
        block=block,
        doc=doc,
        actor=actor,
        summary="imported with its history",
        data=b"",
        rendered=rendered,
    )
    _snapshot_save(block_id=block.pk, data=documents.snapshot(doc))
    MemoryBlock.objects.filter(pk=block.pk).update(
        snapshot_upto=update.pk,
        log_count=0,
        log_bytes=0,
    )
