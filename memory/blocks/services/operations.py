"""Changes to a block's content by schema operations, by a remote peer's
Loro updates (live editing) and by the system's log entries.

Each goes through :func:`memory.blocks.services.change._block_change`; an
agent's change to a Partner/Human block becomes an approval request there.
Services are keyword-only, typed and atomic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone
from loro import LoroDoc

from memory.blocks import documents
from memory.blocks.models import MemoryBlock
from memory.blocks.permissions import read_only_binds
from memory.blocks.services.change import _block_change
from memory.blocks.services.rules import SUMMARY_MAX, BlockChange, _summary
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import HistoryFolded, InvalidInput


def block_update_import(
    *,
    block: MemoryBlock,
    actor: Actor,
    updates: list[bytes],
    origin: str | None = None,
) -> list[bytes]:
    """Validate and store Loro updates sent by a remote peer.

    Corrupt bytes or updates depending on unknown changes are
    ``InvalidInput``; ``HistoryFolded`` when they build on history that
    retention folded; the actor's right and the char limit are checked on
    the result.  Returns the stored update (empty when nothing was new).
    Attribution comes from ``actor``; a burst of updates by one actor is one
    version of the history (:func:`_burst_version`).
    """
    if not updates or not all(isinstance(u, bytes | bytearray) for u in updates):
        raise InvalidInput("expected one or more Loro updates as bytes")

    def apply(doc: LoroDoc) -> None:
        try:
            with documents.loro_guard("invalid Loro update"):
                status = doc.import_batch([bytes(u) for u in updates])
        except InvalidInput as exc:
            if doc.is_shallow() and "shallow history" in exc.message:
                # Loro refuses what builds on history before a shallow
                # document's start.
                raise HistoryFolded(
                    f"this update builds on history of block {block.label!r} "
                    "that retention folded; start again from a fresh snapshot "
                    "of the block",
                    extra={"block": block.label},
                ) from None
            raise
        if status.pending is not None:
            raise InvalidInput(
                "this update depends on changes the server does not have; "
                "sync the document first"
            )

    summary = f"live edit by {actor.display_name}"
    result = _block_change(
        block=block,
        actor=actor,
        summary=summary,
        change=apply,
        origin=origin,
        change_type="co-edit",
        burst=True,
        relay_early=True,
    )
    return [result.data] if result.update is not None else []


def _describe(op: dict[str, Any]) -> str:
    name = op.get("op", "?")
    target = op.get("field") or op.get("section") or ""
    return f"{name} {target}".strip()


def _apply_operations(
    operations: list[dict[str, Any]], schema: dict[str, Any], *, agent: bool
) -> Callable[[LoroDoc], None]:
    if not operations or not all(isinstance(op, dict) for op in operations):
        raise InvalidInput("expected a list of operations ({'op': name, ...})")

    def apply(doc: LoroDoc) -> None:
        for op in operations:
            documents.operation_apply(doc, schema, op, enforce_read_only=agent)

    return apply


def block_operate(
    *,
    actor: Actor,
    block: MemoryBlock,
    operations: list[dict[str, Any]],
    summary: str | None = None,
    origin: str | None = None,
) -> BlockChange:
    """Apply schema operations to a block as ``actor``.

    An agent's change to a Partner/Human block becomes a pending approval
    request instead (checked against the block first, so a request that
    could never apply is refused now).
    """
    summary = summary or ", ".join(_describe(op) for op in operations)[:SUMMARY_MAX]
    apply = _apply_operations(operations, block.schema, agent=read_only_binds(actor))
    return _block_change(
        block=block,
        actor=actor,
        summary=summary,
        change=apply,
        origin=origin,
        request=operations,
    )


def block_set_content(
    *, actor: Actor, block: MemoryBlock, value: Any, summary: str | None = None
) -> BlockChange:
    """Replace a block's whole content with ``value`` (shaped by its schema)."""
    return _block_change(
        block=block,
        actor=actor,
        summary=summary or "set content",
        change=lambda doc: documents.document_set_value(doc, block.schema, value),
        request=[{"op": "set_content", "value": value}],
    )


def _run_operations(
    *, actor: Actor, block: MemoryBlock, operations: list[dict[str, Any]], **kw: Any
) -> BlockChange:
    """Apply stored operations, including the ``set_content`` pseudo-op."""
    agent = read_only_binds(actor)

    def apply(doc: LoroDoc) -> None:
        documents.operations_apply(
            doc, block.schema, operations, enforce_read_only=agent
        )

    return _block_change(block=block, actor=actor, change=apply, **kw)


def block_log_append(
    *, block: MemoryBlock, entry: dict[str, Any], actor: Actor | None = None
) -> BlockChange:
    """Append an entry to a log block (system-maintained) and prune it.

    Entries past the schema's ``max_entries`` leave the block through
    :func:`log_entries_pruned` (they stay in its history).
    """
    if block.schema.get("kind") != "log":
        raise InvalidInput(f"block {block.label!r} is not a log block")
    actor = actor or Actor.system()
    entry = {"timestamp": timezone.now().isoformat(timespec="seconds"), **entry}

    def apply(doc: LoroDoc) -> list[Any]:
        documents.operation_apply(
            doc,
            block.schema,
            {"op": "append_log_entry", "entry": entry},
            enforce_read_only=False,
        )
        return documents.log_prune(doc, block.schema)

    summary = _summary(f"log: {entry.get('message', entry)}")
    return _block_change(
        block=block,
        actor=actor,
        summary=summary,
        change=apply,
        change_type="log_append",
    )
