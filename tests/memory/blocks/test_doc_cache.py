"""The per-process document cache never hides a write and never keeps a
change that failed or was rolled back."""

from secrets import token_hex

import pytest
from django.db import transaction
from loro import LoroDoc

from memory.blocks import doc_cache
from memory.blocks.selectors import block_value
from memory.blocks.services import block_append, block_operate
from memory.models import MemoryBlock
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import LimitExceeded
from tests.memory.conftest import run_in_another_process


def _push(block, item, actor=None):
    return block_operate(
        actor=actor or Actor.system(),
        block=block,
        operations=[{"op": "push_item", "value": item}],
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_write_from_another_process_is_seen_by_the_next_cached_write(make_block):
    block = make_block(label="tasks", schema={"kind": "list"})
    _push(block, "here 1")
    assert doc_cache.fork(block.pk, block.version) is not None, "nothing cached"
    run_in_another_process(
        "from pattern_site.kernel.actors import Actor\n"
        "from memory.models import MemoryBlock\n"
        "from memory.blocks.services import block_operate\n"
        f"b = MemoryBlock.objects.get(pk='{block.pk}')\n"
        "block_operate(actor=Actor.system(), block=b,"
        " operations=[{'op': 'push_item', 'value': 'there'}])"
    )
    _push(block, "here 2")

    assert block_value(block=block) == ["here 1", "there", "here 2"]
    block.refresh_from_db()
    assert block.rendered == "1. here 1\n2. there\n3. here 2"


@pytest.mark.django_db(transaction=True)
def test_rejected_append_leaves_no_trace_in_the_cached_document(make_block, agent):
    block = make_block(label="notes", char_limit=20)
    actor = Actor.for_agent(agent)
    block_append(actor=actor, block=block, content="short")
    with pytest.raises(LimitExceeded):
        block_append(actor=actor, block=block, content="far too long for this block")
    block_append(actor=actor, block=block, content="ok")

    assert block_value(block=block) == "short\nok"
    block.refresh_from_db()
    assert block.rendered == "short\nok"


@pytest.mark.django_db(transaction=True)
def test_rolled_back_write_is_not_cached(make_block, monkeypatch):
    block = make_block(label="tasks", schema={"kind": "list"})
    _push(block, "kept")
    with pytest.raises(RuntimeError), transaction.atomic():
        _push(block, "rolled back")
        assert block_value(block=block) == ["kept", "rolled back"]
        raise RuntimeError("abort")
    # Another process (its own cache) reuses the rolled-back version number.
    ours = doc_cache._entries
    monkeypatch.setattr(doc_cache, "_entries", type(ours)())
    _push(block, "after")
    monkeypatch.setattr(doc_cache, "_entries", ours)

    assert block_value(block=block) == ["kept", "after"]
    assert MemoryBlock.objects.get(pk=block.pk).rendered == "1. kept\n2. after"


@pytest.mark.django_db(transaction=True)
def test_reads_get_a_private_copy_of_the_cached_document(make_block):
    block = make_block(label="tasks", schema={"kind": "list"})
    _push(block, "one")
    from memory.blocks.selectors import block_document_load

    doc = block_document_load(block=block)
    doc.get_list("items").push("scribbled by a reader")
    doc.commit()

    assert block_value(block=block) == ["one"]


@pytest.mark.django_db(transaction=True)
def test_log_counters_track_the_updates_after_the_snapshot(make_block, settings):
    settings.MEMORY_COMPACT_UPDATES = 3
    block = make_block(label="tasks", schema={"kind": "list"})
    # Its creation and four pushes: five versions, the first three compacted.
    for n in range(4):
        _push(block, f"t{n}")
    block.refresh_from_db()

    pending = block.updates.filter(pk__gt=block.snapshot_upto)
    assert block.log_count == pending.count() == 2
    assert block.log_bytes == sum(len(u.data) for u in pending) > 0
    assert block.version == 5


@pytest.mark.django_db
def test_history_rows_carry_each_versions_aware_timestamp(make_block):
    from memory.blocks.selectors import block_history
    from memory.models import BlockUpdate

    block = make_block(label="tasks", schema={"kind": "list"})
    for n in range(3):
        _push(block, f"t{n}")

    rows = block_history(block=block)
    stored = {u.pk: u.created_at for u in BlockUpdate.objects.filter(block=block)}
    assert [row.id for row in rows] == sorted(stored, reverse=True)
    assert {row.id: row.created_at for row in rows} == stored
    assert all(row.created_at.utcoffset() is not None for row in rows)


@pytest.mark.django_db(transaction=True)
def test_byte_cap_counts_the_snapshot_a_compaction_wrote_since_the_last_change(
    make_block, settings
):
    """A compaction leaves the block's version as it was: the cap must still
    see the snapshot it grew, not the size the last change knew (which
    would let a change through without measuring the content at all)."""
    from memory.blocks.documents import state_size
    from memory.blocks.selectors import block_document_load, block_snapshot_size
    from memory.blocks.services import block_compact

    block = make_block(label="notes", char_limit=100_000)
    known = block_snapshot_size(block_id=block.pk)
    for _ in range(3):
        block_append(actor=Actor.system(), block=block, content=token_hex(400))
    assert block_compact(block=block)
    block.refresh_from_db()
    assert block.log_bytes == 0
    held = state_size(block_document_load(block=block))
    # The content passes the cap with the next append, while the snapshot
    # size known before the compaction plus that append stays under it.
    settings.MEMORY_BLOCK_MAX_BYTES = held + 200
    assert known + 400 < held + 200

    with pytest.raises(LimitExceeded):
        block_append(actor=Actor.system(), block=block, content=token_hex(200))
    block_append(actor=Actor.system(), block=block, content="ok")  # small fits


def test_a_pinned_document_outlives_the_cache_size(settings):
    """An open room's block keeps its document however many others are
    cached; unpinned, it is evicted as usual again."""
    settings.MEMORY_DOCUMENT_CACHE_SIZE = 2
    doc_cache.clear()
    doc_cache.pin("room")
    try:
        doc_cache.put("room", 1, LoroDoc())
        for n in range(5):
            doc_cache.put(f"other-{n}", 1, LoroDoc())
        assert doc_cache.fork("room", 1) is not None
        assert doc_cache.fork("other-0", 1) is None  # the oldest others go
        assert doc_cache.fork("other-4", 1) is not None
    finally:
        doc_cache.unpin("room")
    for n in range(5, 8):
        doc_cache.put(f"other-{n}", 1, LoroDoc())
    assert doc_cache.fork("room", 1) is None
    doc_cache.clear()


def test_a_pin_without_a_cached_document_makes_no_room(settings):
    """A room pinned before its document is read (or after it was dropped)
    must not let the cache grow past its size."""
    settings.MEMORY_DOCUMENT_CACHE_SIZE = 2
    doc_cache.clear()
    doc_cache.pin("empty-room")
    try:
        for n in range(4):
            doc_cache.put(f"other-{n}", 1, LoroDoc())
        assert doc_cache.fork("other-1", 1) is None
        assert doc_cache.fork("other-3", 1) is not None
    finally:
        doc_cache.unpin("empty-room")
        doc_cache.clear()
