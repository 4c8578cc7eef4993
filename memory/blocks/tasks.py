"""Background work of memory blocks: tasks take ids and call one service.

Recording a look twice records the same look, and folding a block already
folded to its window does nothing: each task can run twice safely.
"""

from celery import shared_task


@shared_task(name="memory.blocks_seen_record", ignore_result=True)
def blocks_seen_record_task(looks: list[list]) -> int:
    """[agent id, block id, the block's version counter when read] per look."""
    from memory.blocks.seen import blocks_seen_record

    return blocks_seen_record(
        looks=[(agent_id, block_id, version) for agent_id, block_id, version in looks]
    )


@shared_task(name="memory.block_history_fold", ignore_result=True)
def block_history_fold_task(block_id: str) -> int:
    """Fold one block's history to its window (a write found it well past)."""
    from memory.blocks.models import MemoryBlock
    from memory.blocks.services.retention import block_history_fold

    block = MemoryBlock.objects.filter(pk=block_id).first()
    return 0 if block is None else block_history_fold(block=block)


@shared_task(name="memory.blocks_history_fold_due", ignore_result=True)
def blocks_history_fold_due_task() -> int:
    """Fold every block's history to its window (the beat's)."""
    from memory.blocks.services.retention import blocks_history_fold_due

    return blocks_history_fold_due()
