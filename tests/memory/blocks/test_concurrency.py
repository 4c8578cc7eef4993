"""Concurrent appends through the service layer lose nothing, even while the
log is being compacted, and every process sees all of them."""

import json
import threading

import pytest
from django.db import connection

from memory.blocks.selectors import block_document_load, block_value
from memory.blocks.services import block_operate
from memory.models import BlockUpdate
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
                    operations=[{"op": "push_item", "item": f"t{n}-{i}"}],
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
    assert BlockUpdate.objects.filter(block=block).count() == THREADS * APPENDS
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
