"""Background work of memory blocks: tasks take ids and call one service.

Recording a look twice records the same look: each task can run twice
safely.
"""

from celery import shared_task


@shared_task(name="memory.blocks_seen_record", ignore_result=True)
def blocks_seen_record_task(looks: list[list]) -> int:
    """[agent id, block id, the block's version counter when read] per look."""
    from memory.blocks.seen import blocks_seen_record

    return blocks_seen_record(
        looks=[(agent_id, block_id, version) for agent_id, block_id, version in looks]
    )
