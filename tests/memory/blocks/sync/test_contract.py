"""The contract the live co-editing consumer builds on: importing remote Loro
updates, the rights checked on them, compaction and the broadcast."""

import secrets
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from loro import ExportMode, LoroDoc, LoroText

from memory.blocks import doc_cache
from memory.blocks.permissions import block_access_for_actor
from memory.blocks.selectors import (
    block_document_load,
    block_get_for_actor,
    block_value,
    block_version_view,
)
from memory.blocks.services import (
    block_compact,
    block_operate,
    block_rollback,
    block_share,
    block_update_import,
    storage,
)
from memory.models import BlockUpdate, MemoryBlock, Permission, SharedAccess
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import (
    InvalidInput,
    LimitExceeded,
    NotFound,
    PermissionDenied,
)
from pattern_site.kernel.realtime import group_for_block


def remote_edit(block: Any, edit: Any) -> bytes:
    """What a browser peer sends: an update made on its copy of the block."""
    doc = block_document_load(block=block)
    before = doc.oplog_vv
    edit(doc)
    doc.commit()
    return doc.export(ExportMode.Updates(before))


def append_text(text: str) -> Any:
    def edit(doc: LoroDoc) -> None:
        content = doc.get_text("content")
        content.insert(content.len_unicode, text)

    return edit


def test_import_stores_remote_update_attributed_to_actor(make_block, agent):
    block = make_block(content="Hello")
    update = remote_edit(block, append_text(" world"))

    stored = block_update_import(
        block=block, actor=Actor.for_agent(agent), updates=[update]
    )

    assert len(stored) == 1
    assert block_document_load(block=block).get_text("content").to_string() == (
        "Hello world"
    )
    row = BlockUpdate.objects.filter(block=block).last()
    assert (row.actor_kind, row.actor_id) == ("agent", str(agent.pk))
    block.refresh_from_db()
    assert block.rendered == "Hello world"
    assert block.size == 11


def test_import_of_already_known_update_stores_nothing(make_block, agent):
    block = make_block(content="Hello")
    update = remote_edit(block, append_text("!"))
    actor = Actor.for_agent(agent)
    block_update_import(block=block, actor=actor, updates=[update])
    before = BlockUpdate.objects.count()

    assert block_update_import(block=block, actor=actor, updates=[update]) == []
    assert BlockUpdate.objects.count() == before


@pytest.mark.parametrize("garbage", [b"", b"not loro at all", b"\x00" * 64])
def test_import_rejects_corrupt_bytes_and_stores_nothing(make_block, agent, garbage):
    block = make_block(content="Hello")
    before = BlockUpdate.objects.count()

    with pytest.raises(InvalidInput):
        block_update_import(
            block=block, actor=Actor.for_agent(agent), updates=[garbage]
        )

    assert BlockUpdate.objects.count() == before
    assert block_document_load(block=block).get_text("content").to_string() == "Hello"


def test_import_rejects_truncated_update(make_block, agent):
    block = make_block(content="Hello")
    update = remote_edit(block, append_text(" world"))

    with pytest.raises(InvalidInput):
        block_update_import(
            block=block, actor=Actor.for_agent(agent), updates=[update[:-7]]
        )
    assert block_document_load(block=block).get_text("content").to_string() == "Hello"


def test_import_rejects_update_depending_on_unknown_changes(make_block, agent):
    block = make_block(content="Hello")
    doc = block_document_load(block=block)
    doc.get_text("content").insert(5, " a")
    doc.commit()
    middle = doc.oplog_vv
    doc.get_text("content").insert(7, " b")
    doc.commit()
    orphan = doc.export(ExportMode.Updates(middle))

    with pytest.raises(InvalidInput, match="depends on changes"):
        block_update_import(block=block, actor=Actor.for_agent(agent), updates=[orphan])


def test_append_only_agent_may_append_but_not_delete(make_block, agent):
    block = make_block(content="Hello", permission=Permission.APPEND)
    actor = Actor.for_agent(agent)
    block_update_import(
        block=block, actor=actor, updates=[remote_edit(block, append_text("!"))]
    )

    def delete(doc: LoroDoc) -> None:
        doc.get_text("content").delete(0, 2)

    with pytest.raises(PermissionDenied, match="only append"):
        block_update_import(
            block=block, actor=actor, updates=[remote_edit(block, delete)]
        )
    assert block_document_load(block=block).get_text("content").to_string() == "Hello!"


def test_read_only_agent_cannot_import(make_block, agent):
    block = make_block(content="Hello", permission=Permission.READ_ONLY)
    with pytest.raises(PermissionDenied):
        block_update_import(
            block=block,
            actor=Actor.for_agent(agent),
            updates=[remote_edit(block, append_text("!"))],
        )


def test_import_over_char_limit_names_block_size_limit_and_change(make_block, agent):
    block = make_block(label="human", content="x" * 95, char_limit=100)

    with pytest.raises(LimitExceeded) as caught:
        block_update_import(
            block=block,
            actor=Actor.for_agent(agent),
            updates=[remote_edit(block, append_text("y" * 10))],
        )

    assert caught.value.message == "block 'human' is 95/100 chars; this change adds 10"
    assert caught.value.extra == {
        "block": "human",
        "size": 95,
        "limit": 100,
        "change_size": 10,
    }
    assert block_document_load(block=block).get_text("content").to_string() == (
        "x" * 95
    )


def test_humans_may_edit_read_only_blocks(make_block, partner):
    block = make_block(content="Hello", permission=Permission.READ_ONLY)
    stored = block_update_import(
        block=block,
        actor=Actor.for_user(partner),
        updates=[remote_edit(block, append_text("!"))],
    )
    assert stored
    row = BlockUpdate.objects.filter(block=block).last()
    assert (row.actor_kind, row.actor_name) == ("human", "partner")


def test_compaction_folds_log_into_snapshot_without_losing_updates(
    make_block, agent, settings
):
    settings.MEMORY_COMPACT_UPDATES = 3
    settings.MEMORY_HISTORY_BURST_SECONDS = 0  # every import its own log row
    block = make_block(content="a")
    actor = Actor.for_agent(agent)
    for letter in "bcdefg":
        block_update_import(
            block=block, actor=actor, updates=[remote_edit(block, append_text(letter))]
        )

    block.refresh_from_db()
    assert block.snapshot_upto > 0
    pending = BlockUpdate.objects.filter(block=block, pk__gt=block.snapshot_upto)
    assert pending.count() < 3
    assert not BlockUpdate.objects.filter(
        block=block, pk__lte=block.snapshot_upto
    ).exclude(data=b"")
    assert block_document_load(block=block).get_text("content").to_string() == (
        "abcdefg"
    )
    # Every change is still in the history.
    assert BlockUpdate.objects.filter(block=block).count() == 7


def test_block_compact_folds_the_whole_log_now(make_block, agent):
    block = make_block(content="a")
    actor = Actor.for_agent(agent)
    for letter in "bc":
        block_update_import(
            block=block, actor=actor, updates=[remote_edit(block, append_text(letter))]
        )

    assert block_compact(block=block) is True
    assert block_compact(block=block) is False  # nothing left to fold

    block.refresh_from_db()
    assert not BlockUpdate.objects.filter(block=block).exclude(data=b"")
    assert block_document_load(block=block).get_text("content").to_string() == "abc"


def test_block_get_for_actor_hides_other_agents_blocks(make_block, other_agent):
    block = make_block()
    with pytest.raises(NotFound):
        block_get_for_actor(actor=Actor.for_agent(other_agent), block_id=block.pk)
    with pytest.raises(NotFound):
        block_get_for_actor(actor=Actor.for_agent(other_agent), block_id="not-a-uuid")


def test_shared_access_is_weaker_of_permission_and_attachment(make_block, other_agent):
    block = make_block(permission=Permission.READ_WRITE)
    block_share(
        actor=Actor.system(),
        block=block,
        agent=other_agent,
        access=SharedAccess.APPEND_ONLY,
    )
    actor = Actor.for_agent(other_agent)
    seen = block_get_for_actor(actor=actor, block_id=block.pk)
    assert block_access_for_actor(actor=actor, block=seen) == "append"


def test_group_for_block_is_short_ascii(make_block):
    block = make_block()
    group = group_for_block(block.pk)
    assert group.isascii() and len(group) < 100
    assert group == group_for_block(str(block.pk))


@pytest.mark.django_db(transaction=True)
def test_service_change_reaches_the_group_for_block(make_block, agent):
    block = make_block(content="Hello")
    peer = block_document_load(block=block)  # an editor that has the block open
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group_for_block(block.pk), channel)

    block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "append_text", "text": " there"}],
    )

    message = async_to_sync(layer.receive)(channel)
    assert message["type"] == "block.updates"
    assert message["origin"] is None
    for update in message["updates"]:
        peer.import_(update)
    assert peer.get_text("content").to_string() == "Hello there"


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_import_reaches_the_group_through_redis(make_block, agent, redis_channel_layer):
    block = make_block(content="Hello")
    peer = block_document_load(block=block)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group_for_block(block.pk), channel)

    block_update_import(
        block=block,
        actor=Actor.for_agent(agent),
        updates=[remote_edit(block, append_text("!"))],
        origin="specific.sender",
    )

    message = async_to_sync(layer.receive)(channel)
    assert message["origin"] == "specific.sender"
    for update in message["updates"]:
        peer.import_(update)
    assert peer.get_text("content").to_string() == "Hello!"


@pytest.mark.django_db(transaction=True)
def test_failed_broadcast_is_logged_and_the_change_stays(
    make_block, agent, monkeypatch, caplog
):
    block = make_block(content="Hello")

    def broken(**kwargs):
        raise ConnectionError("channel layer down")

    monkeypatch.setattr("memory.blocks.services.change.block_broadcast", broken)
    block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "append_text", "text": " there"}],
    )

    assert block_value(block=block) == "Hello there"
    assert "channel layer down" in caplog.text


def test_import_writing_to_a_root_container_outside_the_schema_stores_nothing(
    make_block, agent
):
    block = make_block(content="hello")
    stored_before = BlockUpdate.objects.filter(block=block).count()
    update = remote_edit(block, lambda doc: doc.get_text("x0").insert(0, "a" * 1000))

    with pytest.raises(InvalidInput, match=r"holds only content \(Text\).*x0"):
        block_update_import(block=block, actor=Actor.for_agent(agent), updates=[update])

    assert BlockUpdate.objects.filter(block=block).count() == stored_before
    assert "x0" not in block_document_load(block=block).get_value()


def test_import_into_a_schema_name_with_another_container_type_is_refused(
    make_block, agent
):
    block = make_block(content="hello")
    update = remote_edit(block, lambda doc: doc.get_map("content").insert("k", "v"))

    with pytest.raises(InvalidInput, match=r"content \(Map\)"):
        block_update_import(block=block, actor=Actor.for_agent(agent), updates=[update])


def test_import_through_a_child_of_a_foreign_root_is_refused(make_block, agent):
    block = make_block(content="hello")

    def edit(doc: LoroDoc) -> None:
        child = doc.get_map("junk").insert_container("deep", LoroText())
        child.insert(0, "b" * 1000)

    with pytest.raises(InvalidInput, match=r"junk \(Map\)"):
        block_update_import(
            block=block,
            actor=Actor.for_agent(agent),
            updates=[remote_edit(block, edit)],
        )


def test_a_composite_block_takes_updates_to_its_sections_only(make_block, agent):
    block = make_block(template="scratchpad", content=None)
    ok = remote_edit(block, lambda doc: doc.get_text("notes:content").insert(0, "n"))
    block_update_import(block=block, actor=Actor.for_agent(agent), updates=[ok])
    assert block_value(block=block)["notes"] == "n"
    bad = remote_edit(block, lambda doc: doc.get_text("content").insert(0, "x"))
    with pytest.raises(InvalidInput, match="notes:content"):
        block_update_import(block=block, actor=Actor.for_agent(agent), updates=[bad])


def test_the_char_limit_counts_map_keys_the_schema_does_not_name(make_block, agent):
    block = make_block(template="human", content=None, char_limit=500)
    update = remote_edit(
        block, lambda doc: doc.get_map("fields").insert("x", "c" * 600)
    )

    with pytest.raises(LimitExceeded):
        block_update_import(block=block, actor=Actor.for_agent(agent), updates=[update])
    assert "x" not in block_document_load(block=block).get_map("fields").get_value()


# 1: every change is folded into the snapshot, so the bytes stored are the
# snapshot's; 16: they are the log's.
@pytest.mark.parametrize("compact_updates", [1, 16])
def test_the_byte_cap_counts_the_current_content_not_the_history(
    make_block, agent, settings, compact_updates
):
    settings.MEMORY_BLOCK_MAX_BYTES = 4000
    settings.MEMORY_COMPACT_UPDATES = compact_updates
    block = make_block(content="", char_limit=100_000)
    actor = Actor.for_agent(agent)

    def write_and_erase(doc: LoroDoc) -> None:
        text = doc.get_text("content")
        text.insert(0, secrets.token_hex(1500))  # does not compress
        text.delete(0, 3000)

    # The content stays empty: only the history grows, far past the cap.
    for _ in range(4):
        block_update_import(
            block=block, actor=actor, updates=[remote_edit(block, write_and_erase)]
        )
    grow = remote_edit(block, lambda doc: doc.get_text("content").insert(0, "kept"))
    block_update_import(block=block, actor=actor, updates=[grow])
    assert block_value(block=block) == "kept"
    # Content itself past the cap is refused.
    too_big = remote_edit(
        block, lambda doc: doc.get_text("content").insert(0, secrets.token_hex(2500))
    )
    with pytest.raises(LimitExceeded, match="at most 4000"):
        block_update_import(block=block, actor=actor, updates=[too_big])
    assert block_value(block=block) == "kept"


def test_the_char_limit_counts_log_entries_past_max_entries(make_block, partner):
    log = make_block(
        label="events",
        schema={"kind": "log", "display_limit": 2, "max_entries": 3},
        char_limit=500,
    )

    def flood(doc: LoroDoc) -> None:
        entries = doc.get_list("entries")
        for n in range(20):
            entries.push({"message": f"hidden entry {n} " + "e" * 40})

    with pytest.raises(LimitExceeded):
        block_update_import(
            block=log, actor=Actor.for_user(partner), updates=[remote_edit(log, flood)]
        )
    assert block_value(block=log) == []


def type_into(block: Any, actor: Actor, text: str) -> None:
    """A person typing: one imported update per character, as the editor sends."""
    for char in text:
        block_update_import(
            block=block, actor=actor, updates=[remote_edit(block, append_text(char))]
        )


def test_a_burst_of_live_edits_by_one_actor_is_one_version(make_block, partner):
    block = make_block(content="Hello")
    before = BlockUpdate.objects.filter(block=block).count()

    type_into(block, Actor.for_user(partner), ", dear world.")

    rows = BlockUpdate.objects.filter(block=block)
    assert rows.count() == before + 1
    assert rows.last().size == len("Hello, dear world.")
    doc_cache.clear()  # the stored log alone rebuilds the document
    assert block_value(block=block) == "Hello, dear world."


def test_another_actor_or_a_pause_starts_a_new_version(
    make_block, agent, partner, settings
):
    block = make_block(content="")
    person, bot = Actor.for_user(partner), Actor.for_agent(agent)
    start = BlockUpdate.objects.filter(block=block).count()

    type_into(block, person, "ab")
    type_into(block, bot, "cd")
    type_into(block, person, "ef")
    assert BlockUpdate.objects.filter(block=block).count() == start + 3

    BlockUpdate.objects.filter(block=block).update(
        created_at=timezone.now() - timedelta(seconds=60)
    )
    type_into(block, person, "gh")
    assert BlockUpdate.objects.filter(block=block).count() == start + 4

    # A block quiet for a minute (its row says so) starts a new version too.
    MemoryBlock.objects.filter(pk=block.pk).update(
        updated_at=timezone.now() - timedelta(seconds=60)
    )
    block.refresh_from_db()
    type_into(block, person, "!")
    assert BlockUpdate.objects.filter(block=block).count() == start + 5
    block_operate(
        actor=person,
        block=block,
        operations=[{"op": "replace_text", "old": "!", "new": ""}],
    )

    settings.MEMORY_HISTORY_BURST_SECONDS = 0
    type_into(block, person, "ij")
    assert BlockUpdate.objects.filter(block=block).count() == start + 8
    doc_cache.clear()
    assert block_value(block=block) == "abcdefghij"


@pytest.mark.django_db(transaction=True)
def test_a_burst_reads_its_history_once_and_again_after_another_change(
    make_block, partner
):
    block = make_block(content="")
    person = Actor.for_user(partner)
    type_into(block, person, "ab")
    start = BlockUpdate.objects.filter(block=block).count()

    with CaptureQueriesContext(connection) as queries:
        type_into(block, person, "cd")
    assert not [
        q for q in queries if q["sql"].startswith('SELECT "memory_blockupdate"')
    ]
    assert BlockUpdate.objects.filter(block=block).count() == start

    # Another process's change moves the row's version: the latest version
    # is read again, and here it says the burst paused.
    BlockUpdate.objects.filter(block=block).update(
        created_at=timezone.now() - timedelta(seconds=60)
    )
    MemoryBlock.objects.filter(pk=block.pk).update(version=F("version") + 1)
    block.refresh_from_db()
    type_into(block, person, "ef")
    assert BlockUpdate.objects.filter(block=block).count() == start + 1
    doc_cache.clear()
    assert block_value(block=block) == "abcdef"


def test_burst_versions_view_and_roll_back_to_the_burst_end(make_block, partner):
    block = make_block(content="a")
    person = Actor.for_user(partner)
    type_into(block, person, "bc")
    burst = BlockUpdate.objects.filter(block=block).last()
    block_operate(
        actor=person,
        block=block,
        operations=[{"op": "append_text", "text": "X"}],
    )

    assert block_version_view(block=block, version_id=burst.pk).rendered == "abc"
    first = BlockUpdate.objects.filter(block=block).first()
    assert block_version_view(block=block, version_id=first.pk).rendered == "a"
    block_rollback(actor=person, block=block, version_id=burst.pk)
    doc_cache.clear()
    assert block_value(block=block) == "abc"


def test_a_burst_folded_into_the_snapshot_stops_growing(make_block, partner, settings):
    settings.MEMORY_COMPACT_BYTES = 1000
    block = make_block(content="")
    person = Actor.for_user(partner)

    type_into(block, person, "x" * 80)

    block.refresh_from_db()
    rows = BlockUpdate.objects.filter(block=block)
    assert block.snapshot_upto > 0
    assert rows.count() >= 3  # a version per compaction, not one per key
    assert rows.count() < 20
    assert not rows.filter(pk__lte=block.snapshot_upto).exclude(data=b"")
    doc_cache.clear()
    assert block_value(block=block) == "x" * 80


def test_a_long_burst_is_cut_into_versions_of_bounded_size(
    make_block, partner, monkeypatch
):
    monkeypatch.setattr(storage, "BURST_MAX_BYTES", 300)
    block = make_block(content="")

    type_into(block, Actor.for_user(partner), "y" * 120)

    rows = BlockUpdate.objects.filter(block=block)
    assert 2 < rows.count() < 60
    assert all(len(data) <= 300 for data in rows.values_list("data", flat=True))
    doc_cache.clear()
    assert block_value(block=block) == "y" * 120
