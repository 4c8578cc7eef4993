"""Text-level changes, as agents' tools name them: append a line or item,
insert lines, replace exact text, rewrite the whole content.

Each becomes one schema operation on the place of the block it names (or
the one place it can mean) and goes through
:func:`memory.blocks.services.operations.block_operate`.
"""

from __future__ import annotations

from typing import Any

from memory.blocks import documents
from memory.blocks.models import MemoryBlock
from memory.blocks.permissions import read_only_binds
from memory.blocks.selectors import block_value
from memory.blocks.services.operations import block_operate, block_set_content
from memory.blocks.services.rules import BlockChange, _summary
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import InvalidInput


def _text_place(
    *, block: MemoryBlock, section: str | None, places: list[documents.TextPlace]
) -> documents.TextPlace:
    """The place ``section`` names, or the block's last writable one."""
    names = ", ".join(str(p.name) for p in places)
    if not places:
        raise InvalidInput(
            f"block {block.label!r} ({block.schema['kind']}) has no text you can "
            "change; use its structured operations (POST /api/blocks/{id}/operations)"
        )
    if section is None:
        return places[-1]
    for place in places:
        if place.name == section:
            return place
    where = f"; its text is in: {names}" if places[0].name else ""
    raise InvalidInput(f"block {block.label!r} has no text at {section!r}{where}")


def block_append(
    *, actor: Actor, block: MemoryBlock, content: str, section: str | None = None
) -> BlockChange:
    """Append ``content`` on a new line (text) or as a new item (list).

    On a structured block it lands in ``section`` (a composite section, a
    map field, or ``section/field``), by default the last text or list
    place the actor may write."""
    if not content:
        raise InvalidInput("nothing to append: 'content' is empty")
    places = documents.text_places(block.schema, agent=read_only_binds(actor))
    place = _text_place(block=block, section=section, places=places)
    return _block_operate_one(
        actor=actor,
        block=block,
        op=documents.text_place_operation(place, "append", text=content),
        summary=f"append: {content}",
    )


def block_insert(
    *, actor: Actor, block: MemoryBlock, content: str, line: int = -1
) -> BlockChange:
    """Insert ``content`` as new lines after line ``line`` of a text block
    (0: before the first line, -1: after the last, on any block as
    :func:`block_append` does)."""
    if not content:
        raise InvalidInput("nothing to insert: the text is empty")
    if line == -1:
        return block_append(actor=actor, block=block, content=content)
    if block.schema["kind"] != "text":
        raise InvalidInput(
            f"block {block.label!r} is a {block.schema['kind']} block; lines are "
            "inserted by number into text blocks only (-1 appends to any block)"
        )
    return _block_operate_one(
        actor=actor,
        block=block,
        op={"op": "insert_lines", "text": content, "line": line},
        summary=f"insert at line {line}: {content}",
    )


def block_replace(
    *,
    actor: Actor,
    block: MemoryBlock,
    old: str,
    new: str,
    section: str | None = None,
    every: bool = False,
    once: bool = False,
) -> BlockChange:
    """Replace the exact text ``old`` with ``new`` (its first occurrence, or
    with ``every`` all of them, or with ``once`` the only one, refused when
    there are several): in ``section`` when named, else in the one text
    place of the block that holds ``old``."""
    if not old:
        raise InvalidInput("'old' is empty; give the exact text to replace")
    places = [
        p
        for p in documents.text_places(block.schema, agent=read_only_binds(actor))
        if p.kind == "text"
    ]
    if section is None and len(places) > 1:
        value = block_value(block=block)
        holding = [
            p
            for p in places
            if old in documents.text_place_value(block.schema, value, p)
        ]
        if len(holding) > 1:
            names = ", ".join(str(p.name) for p in holding)
            raise InvalidInput(
                f"{old!r} is in several places of block {block.label!r} ({names}); "
                "name the 'section'"
            )
        if not holding:
            raise InvalidInput(
                f"the text to replace was not found in block {block.label!r}: {old!r}"
            )
        places = holding
    place = _text_place(block=block, section=section, places=places)
    return _block_operate_one(
        actor=actor,
        block=block,
        op=documents.text_place_operation(
            place, "replace", old=old, new=new, every=every, once=once
        ),
        summary=f"replace {old!r} with {new!r}",
    )


def _block_operate_one(
    *, actor: Actor, block: MemoryBlock, op: dict[str, Any], summary: str
) -> BlockChange:
    return block_operate(
        actor=actor, block=block, operations=[op], summary=_summary(summary)
    )


def block_rewrite(*, actor: Actor, block: MemoryBlock, content: str) -> BlockChange:
    """Letta's ``core_memory_update``: the block's whole content becomes
    ``content``."""
    value = documents.value_from_text(block.schema, content)
    return block_set_content(
        actor=actor, block=block, value=value, summary=_summary(f"update: {content}")
    )
