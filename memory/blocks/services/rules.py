"""What every change to a block must satisfy, and what a change returns.

:class:`BlockChange` says what a change did; the checks refuse a change
over the block's character limit, one that writes outside the containers of
the block's schema, and one that would store more than
``settings.MEMORY_BLOCK_MAX_BYTES`` in its current state (history does
not count).  Each raises an
``ApplicationError`` that says what was wrong and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from loro import LoroDoc

from memory.blocks import documents
from memory.blocks.models import BlockApproval, BlockUpdate, MemoryBlock
from memory.blocks.selectors import block_snapshot_size
from pattern_site.kernel.errors import InvalidInput, LimitExceeded

SUMMARY_MAX = 300


@dataclass
class BlockChange:
    """What a change did: the stored update, or the approval it now waits on."""

    block: MemoryBlock
    update: BlockUpdate | None = None
    approval: BlockApproval | None = None
    data: bytes = b""
    pruned: list[Any] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.approval is not None:
            return "pending_approval"
        return "applied" if self.update is not None else "unchanged"


def _check_limit(*, block: MemoryBlock, old_size: int, new_size: int) -> None:
    if new_size > block.char_limit and new_size > old_size:
        change = new_size - old_size
        raise LimitExceeded(
            f"block {block.label!r} is {old_size}/{block.char_limit} chars; "
            f"this change adds {change}",
            extra={
                "block": block.label,
                "size": old_size,
                "limit": block.char_limit,
                "change_size": change,
            },
        )


def _check_layout(*, block: MemoryBlock, doc: LoroDoc, since: Any) -> None:
    foreign = documents.foreign_roots(doc, block.schema, since)
    if foreign:
        allowed = ", ".join(
            f"{name} ({ctype})"
            for name, ctype in sorted(documents.schema_roots(block.schema))
        )
        raise InvalidInput(
            f"block {block.label!r} holds only {allowed}; this change writes to "
            + ", ".join(foreign)
        )


def _check_bytes(
    *,
    block: MemoryBlock,
    doc: LoroDoc,
    added: int,
    shrinks: bool,
    snapshot: int | None = None,
) -> None:
    """The document's current state within the cap, unless the change
    ``shrinks`` what the block holds.

    History does not count: retention folds it (``services.retention``),
    and a block whose content is within its limits takes writes for ever.
    The stored bytes (snapshot, log and this change) bound the state from
    above, so the state is measured only when they pass the cap: a block
    with a long history pays an export per write until its next fold.  A
    block whose content itself passed the cap (a lower cap, a schema
    change) still takes a change that shrinks it, deleting a wrong or
    secret line included.  ``snapshot``: the bytes in the block's snapshot
    when the caller knows them (else read)."""
    cap = settings.MEMORY_BLOCK_MAX_BYTES
    if snapshot is None:
        snapshot = block_snapshot_size(block_id=block.pk)
    stored = snapshot + block.log_bytes
    if stored + added <= cap or shrinks:
        return
    held = documents.state_size(doc)
    if held > cap:
        raise LimitExceeded(
            f"block {block.label!r} would hold {held} bytes; a block may hold "
            f"at most {cap} (a change that shrinks its content is still "
            "accepted)",
            extra={"block": block.label, "bytes": held, "max_bytes": cap},
        )


def _summary(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_MAX else text[: SUMMARY_MAX - 1] + "…"


def _choice(value: str, choices: Any, what: str) -> str:
    if value not in choices.values:
        raise InvalidInput(
            f"{what} is one of {', '.join(choices.values)}; got {value!r}"
        )
    return value
