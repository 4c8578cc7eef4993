"""Export and import of an agent's memory blocks (JSON with Loro snapshots)."""

from __future__ import annotations

import base64
from typing import Any

from django.db import (
    transaction,
)
from django.utils import timezone

from memory.blocks import documents
from memory.blocks.models import BlockType, MemoryBlock, Permission
from memory.blocks.selectors import block_document_load, block_list_for_actor
from memory.blocks.services import block_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.errors import (
    InvalidInput,
)

EXPORT_FORMAT = "pattern-site.memory"


EXPORT_VERSION = 1


def blocks_export(*, actor: Actor, agent: Agent) -> dict[str, Any]:
    """An agent's own blocks as JSON, each with its Loro snapshot (base64)."""
    blocks = []
    for block in block_list_for_actor(actor=actor).filter(owner=agent):
        doc = block_document_load(block=block)
        blocks.append(
            {
                "label": block.label,
                "description": block.description,
                "block_type": block.block_type,
                "schema": block.schema,
                "char_limit": block.char_limit,
                "permission": block.permission,
                "pinned": block.pinned,
                "content": documents.document_value(doc, block.schema),
                "loro_snapshot": base64.b64encode(documents.snapshot(doc)).decode(),
            }
        )
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "agent": agent.name,
        "exported_at": timezone.now().isoformat(),
        "blocks": blocks,
    }


V1_TYPES = {"core": BlockType.CORE, "working": BlockType.WORKING}


V1_PERMISSIONS = {
    "read_only": Permission.READ_ONLY,
    "readonly": Permission.READ_ONLY,
    "partner": Permission.PARTNER,
    "human": Permission.HUMAN,
    "append": Permission.APPEND,
    "read_write": Permission.READ_WRITE,
    "readwrite": Permission.READ_WRITE,
    "admin": Permission.ADMIN,
}


@transaction.atomic
def blocks_import(
    *, actor: Actor, agent: Agent, data: dict[str, Any]
) -> list[MemoryBlock]:
    """Import an export (``version`` 1) or v1-style blocks into ``agent``.

    v1 blocks (``content``, ``label``, ``memory_type``, ``pinned``,
    ``permission``) become new Loro documents: pinned maps to a core block,
    the description is generated from the label when missing.  All or
    nothing: one bad block imports none.
    """
    if not isinstance(data, dict) or not isinstance(data.get("blocks"), list):
        raise InvalidInput("expected a JSON object with a 'blocks' list")
    if data.get("format") == EXPORT_FORMAT:
        if data.get("version") != EXPORT_VERSION:
            raise InvalidInput(
                f"export version {data.get('version')!r} is not supported "
                f"(this server reads version {EXPORT_VERSION})"
            )
        make = _import_current
    else:
        make = _import_v1
    created = []
    for n, item in enumerate(data["blocks"]):
        if not isinstance(item, dict) or not isinstance(item.get("label"), str):
            raise InvalidInput(f"block {n} needs a 'label'")
        created.append(make(actor=actor, agent=agent, item=item))
    return created


def _import_current(*, actor: Actor, agent: Agent, item: dict[str, Any]) -> MemoryBlock:
    try:
        snapshot = base64.b64decode(item.get("loro_snapshot") or "", validate=True)
    except ValueError:
        raise InvalidInput(
            f"block {item['label']!r}: loro_snapshot is not base64"
        ) from None
    return block_create(
        actor=actor,
        owner=agent,
        label=item["label"],
        schema=item.get("schema") or {"kind": "text"},
        description=item.get("description"),
        block_type=item.get("block_type"),
        permission=item.get("permission", Permission.READ_WRITE),
        char_limit=item.get("char_limit"),
        pinned=bool(item.get("pinned", False)),
        snapshot=snapshot,
    )


def _import_v1(*, actor: Actor, agent: Agent, item: dict[str, Any]) -> MemoryBlock:
    content = item.get("content", item.get("value", ""))
    if not isinstance(content, str):
        raise InvalidInput(f"block {item['label']!r}: v1 content must be text")
    pinned = bool(item.get("pinned", False))
    memory_type = str(item.get("memory_type", "core")).lower()
    if memory_type not in (*V1_TYPES, "archival"):
        raise InvalidInput(
            f"block {item['label']!r}: unknown memory_type {memory_type!r}"
        )
    block_type = (
        BlockType.CORE if pinned else V1_TYPES.get(memory_type, BlockType.ARCHIVAL)
    )
    permission = V1_PERMISSIONS.get(
        str(item.get("permission", "read_write")).lower().replace("-", "_")
    )
    if permission is None:
        raise InvalidInput(f"block {item['label']!r}: unknown permission")
    label = item["label"]
    tpl = documents.TEMPLATES.get(label)
    return block_create(
        actor=actor,
        owner=agent,
        label=label,
        schema={"kind": "text"},
        description=item.get("description")
        or (tpl.description if tpl and tpl.description else None),
        block_type=block_type,
        permission=permission,
        char_limit=max(int(item.get("char_limit") or 0), len(content)) or None,
        pinned=pinned,
        content=content,
    )
