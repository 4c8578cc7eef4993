"""Concurrent appends through the service layer lose nothing, even while the
log is being compacted, and every process sees all of them; a write decides
whether it needs approval on the row it locked, not on a stale copy."""

import json
import threading

import pytest
from django.db import connection

from memory.blocks.selectors import block_document_load, block_value
from memory.blocks.services import block_append, block_operate, block_set_content
from memory.models import (
    ApprovalStatus,
    BlockApproval,
    BlockUpdate,
    MemoryBlock,
    Permission,
)
from pattern_site.kernel.actors import Actor
from tests.memory.conftest import run_in_another_process

THREADS = 8
APPENDS = 50


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_all_survive_compaction(make_block, agent, settings):
    settings.MEMORY_COMPACT_UPDATES = 7
    settings.MEMORY_COMPACT_BYTES = 2048
    block = make_block(label="tasks", schema={"kind": "list"}, char_limit=100_000)
    actor = Actor.for_agent(agent)
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def writer(n: int) -> None:
        try:
            start.wait()
            for i in range(APPENDS):
                block_operate(
                    actor=actor,
                    block=block,
                    operations=[{"op": "push_item", "value": f"t{n}-{i}"}],
                )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    expected = {f"t{n}-{i}" for n in range(THREADS) for i in range(APPENDS)}
    items = block_value(block=block)
    assert len(items) == THREADS * APPENDS
    assert set(items) == expected
    # Each thread's own appends stay in its order.
    for n in range(THREADS):
        mine = [item for item in items if item.startswith(f"t{n}-")]
        assert mine == [f"t{n}-{i}" for i in range(APPENDS)]
    block.refresh_from_db()
    assert block.snapshot_upto > 0, "compaction never ran"
    # One version per append, after the block's creation.
    assert BlockUpdate.objects.filter(block=block).count() == 1 + THREADS * APPENDS
    assert block.rendered.count("\n") == THREADS * APPENDS - 1

    # Another process loading the block from the database sees the same.
    out = run_in_another_process(
        "import json\n"
        "from memory.models import MemoryBlock\n"
        "from memory.blocks.selectors import block_document_load\n"
        f"b = MemoryBlock.objects.get(pk='{block.pk}')\n"
        "print(json.dumps(block_document_load(block=b).get_list('items')"
        ".get_deep_value()))"
    )
    assert json.loads(out.strip().splitlines()[-1]) == items
    assert block_document_load(block=block).get_list("items").get_deep_value() == items


def _loaded_then_reconfigured(block, permission):
    """The block as a write loaded it, after which a human committed
    ``permission`` on its row (before the write takes the row's lock)."""
    loaded = MemoryBlock.objects.get(pk=block.pk)
    MemoryBlock.objects.filter(pk=block.pk).update(permission=permission)
    return loaded


@pytest.mark.parametrize("operate", ["append", "set_content"])
def test_a_write_racing_a_switch_to_human_becomes_an_approval_request(
    make_block, agent, operate
):
    block = make_block(content="likes tea", permission=Permission.READ_WRITE)
    loaded = _loaded_then_reconfigured(block, Permission.HUMAN)
    actor = Actor.for_agent(agent)
    if operate == "append":
        change = block_append(actor=actor, block=loaded, content="coffee")
    else:
        change = block_set_content(actor=actor, block=loaded, value="coffee only")

    assert change.status == "pending_approval"
    assert block_value(block=block) == "likes tea"
    assert BlockApproval.objects.get().status == ApprovalStatus.PENDING


def test_a_write_racing_a_switch_to_read_write_applies_without_a_request(
    make_block, agent
):
    block = make_block(content="likes tea", permission=Permission.HUMAN)
    loaded = _loaded_then_reconfigured(block, Permission.READ_WRITE)
    change = block_append(actor=Actor.for_agent(agent), block=loaded, content="coffee")

    assert change.status == "applied"
    assert block_value(block=block) == "likes tea\ncoffee"
    assert not BlockApproval.objects.exists()
