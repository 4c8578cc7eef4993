"""History retention: the byte cap counts current content only, old history
is folded into a Loro shallow snapshot, and folded versions stay listed."""

import secrets
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from loro import ExportMode, VersionVector

from memory.blocks import doc_cache, documents
from memory.blocks.blame import blame_histories_clear, block_blame
from memory.blocks.selectors import (
    block_compare,
    block_document_load,
    block_history_count,
    block_history_numbered,
    block_snapshot_data,
    block_value,
    block_version_by_number,
    block_version_view,
)
from memory.blocks.services import (
    block_append,
    block_log_append,
    block_replace,
    block_rollback,
    block_share,
    block_update_import,
)
from memory.blocks.services.retention import block_history_fold, peer_record
from memory.longterm.search import memory_search
from memory.models import BlockPeer, BlockUpdate, MemoryBlock
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import HistoryFolded, LimitExceeded
from tests.memory.blocks.test_changes import _take as take_changes

pytestmark = pytest.mark.django_db


@pytest.fixture
def window(settings: Any) -> Any:
    """Keep a day and 5 versions of working blocks, a day and 20 of logs."""
    settings.MEMORY_HISTORY_KEEP_DAYS = {"working": 1.0, "log": 1.0}
    settings.MEMORY_HISTORY_KEEP_VERSIONS = {"working": 5, "log": 20}
    return settings


def backdate(block: Any, *, first: int, days: float) -> None:
    """Make the block's first ``first`` versions ``days`` old."""
    ids = list(
        BlockUpdate.objects.filter(block=block)
        .order_by("pk")
        .values_list("pk", flat=True)[:first]
    )
    BlockUpdate.objects.filter(pk__in=ids).update(
        created_at=timezone.now() - timedelta(days=days)
    )


def text_block_with_versions(make_block: Any, agent: Any, count: int) -> Any:
    block = make_block(content="v1", char_limit=100_000, block_type="working")
    for n in range(2, count + 1):
        block_append(actor=Actor.for_agent(agent), block=block, content=f"v{n}")
    assert block_history_count(block=block) == count
    return block


def test_a_log_block_takes_appends_long_past_where_its_history_filled_the_cap(
    constellation, settings
):
    # With the history counted, this log refused its ~100th append.
    settings.MEMORY_BLOCK_MAX_BYTES = 4096
    settings.MEMORY_HISTORY_KEEP_DAYS = {}  # no folding: the cap alone
    log = MemoryBlock.objects.get(
        pk=_log_block(constellation, max_entries=10).pk,
    )
    for n in range(250):
        block_log_append(block=log, entry={"text": f"event {n} {secrets.token_hex(8)}"})
    log.refresh_from_db()
    stored = len(block_snapshot_data(block_id=log.pk)) + log.log_bytes
    assert stored > 2 * settings.MEMORY_BLOCK_MAX_BYTES  # history far past the cap
    entries = block_value(block=log)
    assert len(entries) == 10 and entries[-1]["text"].startswith("event 249 ")


def _log_block(constellation: Any, *, max_entries: int) -> Any:
    from memory.blocks.services import block_create

    return block_create(
        actor=Actor.system(),
        label="events",
        constellation=constellation,
        schema={"kind": "log", "display_limit": 5, "max_entries": max_entries},
        char_limit=100_000,
    )


def test_content_itself_over_the_cap_is_still_refused(make_block, agent, settings):
    settings.MEMORY_BLOCK_MAX_BYTES = 2048
    block = make_block(content="", char_limit=100_000)
    with pytest.raises(LimitExceeded, match="at most 2048"):
        block_append(
            actor=Actor.for_agent(agent), block=block, content=secrets.token_hex(1500)
        )


def test_folding_keeps_the_window_and_lists_every_version(make_block, agent, window):
    block = text_block_with_versions(make_block, agent, 30)
    backdate(block, first=20, days=3)
    before = {
        n: block_version_view(
            block=block, version_id=block_version_by_number(block=block, number=n).pk
        ).rendered
        for n in (20, 22, 30)
    }
    full_snapshot = len(documents.snapshot(block_document_load(block=block)))
    compared = block_compare(block=block, old_number=21, new_number=25).parts

    assert block_history_fold(block=block) == 20
    block.refresh_from_db()
    horizon = block_version_by_number(block=block, number=20)
    assert block.history_from == horizon.pk
    assert len(block_snapshot_data(block_id=block.pk)) < full_snapshot
    # Idempotent: folded to the window already.
    assert block_history_fold(block=block) == 0

    # Every version is still listed, with who and why.
    listed = block_history_numbered(block=block, limit=100)
    assert [v.number for v in listed] == list(range(30, 0, -1))
    assert listed[-1].row.summary and listed[-1].row.actor_name

    # Inside the window nothing changed.
    doc_cache.clear()
    for n, text in before.items():
        version = block_version_by_number(block=block, number=n)
        assert block_version_view(block=block, version_id=version.pk).rendered == text
    assert block_compare(block=block, old_number=21, new_number=25).parts == compared

    # Before it, the content is gone and that is said.
    old = block_version_by_number(block=block, number=5)
    with pytest.raises(HistoryFolded, match=r"version 5 .* folded"):
        block_version_view(block=block, version_id=old.pk)
    with pytest.raises(HistoryFolded, match="content is kept from version 20"):
        block_compare(block=block, old_number=5)
    with pytest.raises(HistoryFolded, match="rolled back to"):
        block_rollback(actor=Actor.for_agent(agent), block=block, version_id=old.pk)

    # A rollback inside the window, and new writes, still work.
    target = block_version_by_number(block=block, number=22)
    block_rollback(actor=Actor.for_agent(agent), block=block, version_id=target.pk)
    assert block_value(block=block) == before[22]
    block_append(actor=Actor.for_agent(agent), block=block, content="after")
    doc_cache.clear()
    assert block_value(block=block) == before[22] + "\nafter"


def test_folding_up_to_an_empty_blocks_creation_keeps_it_readable(
    make_block, agent, window
):
    block = make_block(char_limit=100_000, block_type="working")
    for n in range(2, 7):
        block_append(actor=Actor.for_agent(agent), block=block, content=f"v{n}")
    backdate(block, first=6, days=3)

    # Six versions, five kept: the horizon is the creation itself.
    assert block_history_fold(block=block) == 1
    block.refresh_from_db()
    created = block_version_by_number(block=block, number=1)
    assert block.history_from == created.pk
    doc_cache.clear()
    assert block_version_view(block=block, version_id=created.pk).rendered == ""
    block_rollback(actor=Actor.for_agent(agent), block=block, version_id=created.pk)
    assert block_value(block=block) == ""

    # Once folded past, the creation is listed without its content.
    backdate(block, first=7, days=3)
    assert block_history_fold(block=block) == 1
    with pytest.raises(HistoryFolded, match="version 1 "):
        block_version_view(block=block, version_id=created.pk)
    assert block_history_numbered(block=block, limit=100)[-1].row.summary == "created"
    doc_cache.clear()
    assert block_value(block=block) == ""


def test_the_history_api_marks_folded_versions(make_block, agent, window, agent_client):
    block = text_block_with_versions(make_block, agent, 12)
    backdate(block, first=8, days=3)
    block_history_fold(block=block)
    response = agent_client.get(f"/api/blocks/{block.pk}/history?limit=20")
    assert response.status_code == 200
    folded = {v["number"]: v["folded"] for v in response.json()}
    # Kept: the newest 5 (8-12); the newest version outside is 7.
    assert [n for n, f in folded.items() if f] == list(range(6, 0, -1))
    old = block_version_by_number(block=block, number=3)
    view = agent_client.get(f"/api/blocks/{block.pk}/versions/{old.pk}")
    assert view.status_code == 410
    assert view.json()["code"] == "history_folded"


def test_blame_attributes_folded_text_to_before_a_date(make_block, agent, window):
    block = text_block_with_versions(make_block, agent, 12)
    backdate(block, first=8, days=3)
    blame_histories_clear()
    numbers_before = {
        span.text: span.version for span in block_blame(block=block).parts[0].spans
    }
    block_history_fold(block=block)
    doc_cache.clear()
    blame_histories_clear()
    spans = block_blame(block=block).parts[0].spans
    first_kept = block_version_by_number(block=block, number=8)
    folded = [s for s in spans if s.folded_before is not None]
    kept = [s for s in spans if s.folded_before is None]
    assert "v1" in "".join(s.text for s in folded)
    assert all(s.version is None for s in folded)
    assert {s.folded_before for s in folded} == {first_kept.created_at}
    # Text the window wrote keeps its version numbers.
    assert "\nv12" in "".join(s.text for s in kept)
    for span in kept:
        if span.text in numbers_before:
            assert span.version == numbers_before[span.text]


def test_as_of_before_the_horizon_says_the_history_was_folded(
    make_block, agent, window
):
    block = text_block_with_versions(make_block, agent, 12)
    backdate(block, first=8, days=3)
    backdate(block, first=6, days=10)
    block_history_fold(block=block)  # keeps 7 (the horizon) on
    kept = memory_search(
        actor=Actor.for_agent(agent),
        query="v1",
        domain="blocks",
        as_of=timezone.now() - timedelta(days=2),
    )
    assert kept.hits and "folded" not in kept.degraded
    result = memory_search(
        actor=Actor.for_agent(agent),
        query="v1",
        domain="blocks",
        as_of=timezone.now() - timedelta(days=6),
    )
    assert result.hits == []
    assert f"block {block.label!r}" in result.degraded
    assert "folded" in result.degraded
    now = memory_search(actor=Actor.for_agent(agent), query="v12", domain="blocks")
    assert now.hits


def test_a_connected_peer_keeps_the_version_it_joined_with(make_block, agent, window):
    block = text_block_with_versions(make_block, agent, 30)
    backdate(block, first=25, days=3)
    # A client joined at version 10 and edits on top of it, unsent yet.
    at_10 = block_version_by_number(block=block, number=10)
    client = block_document_load(block=block).fork_at(_frontiers(at_10))
    client.peer_id = 77
    joined = client.oplog_vv
    peer_record(block_id=block.pk, socket="sock-1", version=joined.encode())
    client.get_text("content").insert(0, "client ")
    client.commit()

    block_history_fold(block=block)
    block.refresh_from_db()
    assert block.history_from == at_10.pk
    doc_cache.clear()
    block_update_import(
        block=block,
        actor=Actor.for_agent(agent),
        updates=[client.export(ExportMode.Updates(joined))],
    )
    assert block_value(block=block).startswith("client v1")
    assert block_value(block=block).endswith("v30")


def test_a_peer_gone_longer_than_the_peer_hours_no_longer_holds_history(
    make_block, agent, window
):
    block = text_block_with_versions(make_block, agent, 30)
    backdate(block, first=25, days=3)
    peer_record(block_id=block.pk, socket="sock-1", version=VersionVector().encode())
    BlockPeer.objects.update(
        seen_at=timezone.now() - timedelta(hours=window.MEMORY_HISTORY_PEER_HOURS + 1)
    )
    assert block_history_fold(block=block) == 25
    assert not BlockPeer.objects.exists()


def test_an_update_built_on_folded_history_says_so(make_block, agent, window):
    block = text_block_with_versions(make_block, agent, 12)
    stale = block_document_load(block=block).fork_at(
        _frontiers(block_version_by_number(block=block, number=3))
    )
    stale.peer_id = 77
    version = stale.oplog_vv
    stale.get_text("content").insert(0, "stale ")
    stale.commit()
    backdate(block, first=8, days=3)
    block_history_fold(block=block)
    with pytest.raises(HistoryFolded, match="fresh snapshot"):
        block_update_import(
            block=block,
            actor=Actor.for_agent(agent),
            updates=[stale.export(ExportMode.Updates(version))],
        )
    assert "stale" not in block_value(block=block)


def test_a_write_asks_for_a_fold_once_well_past_the_window(
    make_block, agent, settings, django_capture_on_commit_callbacks
):
    settings.MEMORY_HISTORY_KEEP_DAYS = {"working": 0.0}
    settings.MEMORY_HISTORY_KEEP_VERSIONS = {"working": 4}
    settings.MEMORY_COMPACT_UPDATES = 4
    block = make_block(content="v1", char_limit=100_000, block_type="working")
    for n in range(2, 13):
        with django_capture_on_commit_callbacks(execute=True):
            block_append(actor=Actor.for_agent(agent), block=block, content=f"v{n}")
    block.refresh_from_db()
    assert block.history_from > 0
    assert block_value(block=block).endswith("v12")


def _frontiers(version: Any) -> Any:
    return documents.frontiers_decode(bytes(version.frontiers))


def test_changes_since_a_look_before_the_horizon_tell_folded_ones_without_diffs(
    make_block, agent, other_agent, window
):
    block = text_block_with_versions(make_block, agent, 3)
    block_share(
        actor=Actor.system(), block=block, agent=other_agent, access="read_write"
    )
    take_changes(other_agent)  # its look: version 3
    for n in range(4, 13):
        block_append(actor=Actor.for_agent(agent), block=block, content=f"v{n}")
    backdate(block, first=8, days=3)
    block_history_fold(block=block)  # content kept from version 7 on
    doc_cache.clear()

    [told] = take_changes(other_agent, peek=True)["blocks"]
    kinds = [change.diff["kind"] for change in told["changes"]]
    # Versions 4 to 7 start from folded content; 8 to 12 are diffed as ever.
    assert kinds == ["folded"] * 4 + ["text"] * 5
    assert told["changes"][-1].diff["spans"][-1]["text"] == "\nv12"


def test_a_deletion_of_folded_text_says_the_changes_before_a_date_were_folded(
    make_block, agent, other_agent, window
):
    block = text_block_with_versions(make_block, agent, 3)
    block_share(
        actor=Actor.system(), block=block, agent=other_agent, access="read_write"
    )
    take_changes(other_agent)  # its look: version 3
    for n in range(4, 13):
        block_append(actor=Actor.for_agent(agent), block=block, content=f"v{n}")
    backdate(block, first=8, days=3)
    block_history_fold(block=block)  # content kept from version 7 on
    first_kept = block_version_by_number(block=block, number=8)
    doc_cache.clear()
    # Text written in the folded history is deleted after the horizon.
    block_replace(actor=Actor.for_agent(agent), block=block, old="v2\n", new="")

    [told] = take_changes(other_agent, peek=True)["blocks"]
    deletion = told["changes"][-1].diff["spans"]
    assert [span["op"] for span in deletion] == ["delete"]
    # Not an empty deletion: what it removed was folded, and that is said.
    assert deletion[0]["folded"] is True
    assert deletion[0]["length"] == 3
    when = f"{first_kept.created_at:%Y-%m-%d %H:%M} UTC"
    assert told["folded"] == (
        f"changes before {when} were folded by history retention: "
        "their content is not shown"
    )
    # A span within the window says nothing of the kind.
    take_changes(other_agent)
    block_append(actor=Actor.for_agent(agent), block=block, content="v13")
    [recent] = take_changes(other_agent, peek=True)["blocks"]
    assert recent["folded"] is None
    assert "folded" not in recent["changes"][-1].diff["spans"][-1]


def test_the_block_page_says_a_version_was_folded(make_block, agent, window, partner):
    web = Client()
    web.force_login(partner)
    block = text_block_with_versions(make_block, agent, 12)
    backdate(block, first=8, days=3)
    block_history_fold(block=block)
    page = web.get(f"/memory/blocks/{block.pk}/?version=3")
    assert page.status_code == 200
    body = page.content.decode()
    assert "content folded" in body
    assert "version 3 of block" in body and "was folded" in body
    kept = web.get(f"/memory/blocks/{block.pk}/?version=9").content.decode()
    assert "v9" in kept and "version 9 of block" not in kept
    compare = web.get(f"/memory/blocks/{block.pk}/compare/?from=2").content.decode()
    assert "version 2 of block" in compare and "was folded" in compare
