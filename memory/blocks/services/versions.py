"""A block's history as a whole: rolling back to a version (as a new
change; history is never rewritten) and folding the whole log into the
snapshot now.
"""

from __future__ import annotations

from django.db import transaction
from loro import LoroDoc

from memory.blocks import documents
from memory.blocks.models import BlockUpdate, MemoryBlock
from memory.blocks.permissions import block_require_access
from memory.blocks.selectors import (
    block_document_load,
    block_version_get,
    block_version_held_check,
    block_version_number,
)
from memory.blocks.services.change import _block_change
from memory.blocks.services.rules import BlockChange
from memory.blocks.services.storage import _lock, _log_fold, _snapshot_save
from pattern_site.kernel.actors import Actor


def block_compact(*, block: MemoryBlock) -> bool:
    """Fold a block's whole log into its snapshot now; False if nothing to do."""
    with transaction.atomic():
        locked = _lock(block)
        last = (
            BlockUpdate.objects.filter(block=locked, pk__gt=locked.snapshot_upto)
            .order_by("-pk")
            .values_list("pk", flat=True)
            .first()
        )
        if last is None:
            return False
        doc = block_document_load(block=locked)
        _log_fold(block=locked, upto=last)
        _snapshot_save(block_id=locked.pk, data=documents.snapshot(doc))
        MemoryBlock.objects.filter(pk=locked.pk).update(
            snapshot_upto=last, log_count=0, log_bytes=0
        )
        return True


def block_rollback(*, actor: Actor, block: MemoryBlock, version_id: int) -> BlockChange:
    """Make the block's content what it was after ``version_id``, as a new
    change (history is never rewritten); ``HistoryFolded`` for a version
    whose content history retention folded."""
    version = block_version_get(block=block, version_id=version_id)
    block_require_access(actor=actor, block=block, needed="write")
    block_version_held_check(block=block, version=version, doing="rolled back to")
    frontiers = documents.frontiers_decode(bytes(version.frontiers))

    def apply(doc: LoroDoc) -> None:
        with documents.loro_guard("cannot roll back to this version"):
            doc.revert_to(frontiers)

    return _block_change(
        change_type="rollback",
        block=block,
        actor=actor,
        summary="rolled back to version "
        f"{block_version_number(block=block, version_id=version.pk)}",
        change=apply,
    )
