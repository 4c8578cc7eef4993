"""The versions co-editing clients joined with (``BlockPeer``) against the
history fold: a connected client is kept however long it stays, and a join
racing a fold is either kept or told to start again, never passed."""

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import loro
import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

from memory.blocks import doc_cache
from memory.blocks.selectors import block_document_load, block_value
from memory.blocks.services import block_append, block_create, block_update_import
from memory.blocks.services.retention import block_history_fold
from memory.blocks.sync import consumer as consumer_module
from memory.blocks.sync import protocol as sp
from memory.models import BlockPeer, BlockUpdate, MemoryBlock
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import HistoryFolded
from tests.memory.blocks.sync.test_consumer import Peer

pytestmark = pytest.mark.django_db(transaction=True)
# Only a ceiling for declaring failure: each wait ends on its signal.
WAIT_SECONDS = 30.0


@pytest.fixture
def window(settings: Any) -> Any:
    settings.MEMORY_HISTORY_KEEP_DAYS = {"working": 1.0}
    settings.MEMORY_HISTORY_KEEP_VERSIONS = {"working": 3}
    return settings


def _block(agent: Any, versions: int) -> MemoryBlock:
    block = block_create(
        actor=Actor.system(),
        label="notes",
        owner=agent,
        content="v0",
        char_limit=100_000,
        block_type="working",
    )
    _append(block, agent, range(1, versions))
    return block


def _append(block: MemoryBlock, agent: Any, numbers: range) -> None:
    for n in numbers:
        block_append(actor=Actor.for_agent(agent), block=block, content=f"<v{n}>")


def _age_all(block: MemoryBlock) -> None:
    BlockUpdate.objects.filter(block=block).update(
        created_at=timezone.now() - timedelta(days=3)
    )


def _newest(block: MemoryBlock) -> int:
    return BlockUpdate.objects.filter(block=block).order_by("-pk")[0].pk


def _history_from(block: MemoryBlock) -> int:
    return MemoryBlock.objects.get(pk=block.pk).history_from


async def test_a_client_connected_longer_than_the_peer_hours_keeps_its_version(
    agent, agent_token, window
):
    window.MEMORY_HISTORY_PEER_REFRESH_SECONDS = 0.05
    block = await sync_to_async(_block)(agent, 12)
    joined_at = await sync_to_async(_newest)(block)
    peer = await Peer.open(peer_id=77)
    assert isinstance(
        await peer.join(str(block.pk), token=agent_token.raw), sp.JoinResponseOk
    )
    joined = peer.doc.oplog_vv

    # The connection has lasted longer than the peer hours.
    long_ago = timezone.now() - timedelta(hours=window.MEMORY_HISTORY_PEER_HOURS + 1)
    await sync_to_async(BlockPeer.objects.update)(seen_at=long_ago)

    def refreshed() -> bool:
        row = BlockPeer.objects.get(block=block)
        return row.seen_at > timezone.now() - timedelta(hours=1)

    deadline = time.monotonic() + WAIT_SECONDS
    while not await sync_to_async(refreshed)():
        assert time.monotonic() < deadline, "the connected client was never seen"
        await asyncio.sleep(0.02)

    def fold_and_edit() -> None:
        _append(block, agent, range(12, 24))
        _age_all(block)
        block_history_fold(block=block)
        assert 0 < _history_from(block) <= joined_at
        doc_cache.clear()
        # The client's edit on the version it joined with still merges.
        peer.doc.get_text("content").insert(0, "client ")
        peer.doc.commit()
        block_update_import(
            block=MemoryBlock.objects.get(pk=block.pk),
            actor=Actor.for_agent(agent),
            updates=[peer.doc.export(loro.ExportMode.Updates(joined))],
        )
        assert block_value(block=block).startswith("client v0")

    await sync_to_async(fold_and_edit)()
    await peer.ws.disconnect()


async def test_a_long_connected_client_s_kept_version_moves_up_to_what_it_was_sent(
    agent, agent_token, window
):
    """A tab left open does not hold history back to its join for ever:
    each refresh keeps the version relayed to it by the refresh before, and
    the fold passes the join version while the client's edits still merge."""
    window.MEMORY_HISTORY_PEER_REFRESH_SECONDS = 0.05
    block = await sync_to_async(_block)(agent, 12)
    joined_at = await sync_to_async(_newest)(block)
    peer = await Peer.open(peer_id=77)
    room = str(block.pk)
    assert isinstance(await peer.join(room, token=agent_token.raw), sp.JoinResponseOk)
    joined = peer.doc.oplog_vv.encode()

    await sync_to_async(_append)(block, agent, range(12, 24))
    server = (await sync_to_async(block_document_load)(block=block)).oplog_vv
    while not peer.doc.oplog_vv.includes_vv(server):
        relayed = await peer.receive()
        assert isinstance(relayed, sp.DocUpdate)
        peer.doc.import_batch(list(relayed.updates))

    def kept_version() -> bytes:
        return bytes(BlockPeer.objects.get(block=block).version)

    assert await sync_to_async(kept_version)() == joined
    deadline = time.monotonic() + WAIT_SECONDS
    while await sync_to_async(kept_version)() != server.encode():
        assert time.monotonic() < deadline, "the client's kept version never moved"
        await asyncio.sleep(0.02)

    def fold() -> None:
        _age_all(block)
        block_history_fold(block=block)
        assert _history_from(block) > joined_at
        doc_cache.clear()

    await sync_to_async(fold)()
    ack = await peer.edit(room, "client ", at=0)
    assert ack.status == sp.UpdateStatus.OK
    assert (await sync_to_async(block_value)(block=block)).startswith("client v0")
    await peer.ws.disconnect()


def test_a_join_racing_a_fold_is_kept_or_told_to_start_again(
    agent, window, monkeypatch
):
    block = _block(agent, 12)
    joined_at = _newest(block)
    client = block_document_load(block=block)
    client.peer_id = 77
    version = client.oplog_vv.encode()
    _append(block, agent, range(12, 24))
    _age_all(block)
    doc_cache.clear()
    folded: list[int] = []
    errors: list[BaseException] = []

    def fold() -> None:
        try:
            folded.append(block_history_fold(block=block))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    fold_thread = threading.Thread(target=fold)
    read = consumer_module.block_document_versioned

    def read_then_fold(**kwargs: Any) -> Any:
        # The join has read the document it checks the client against: a
        # fold starts now.  Without the join holding the fold's lock it
        # runs to its end here; with it, it waits for the join (this wait
        # then only lets it try, the outcome does not depend on its length).
        doc = read(**kwargs)
        fold_thread.start()
        fold_thread.join(timeout=1.0)
        return doc

    monkeypatch.setattr(consumer_module, "block_document_versioned", read_then_fold)
    try:
        consumer_module._backfill(block=block, client_version=version, socket="s-1")
    except HistoryFolded:
        pass  # told to start again: nothing to keep for it
    else:
        fold_thread.join()
        assert errors == []
        # Kept: the horizon stops at the version the client joined with.
        assert 0 < _history_from(block) <= joined_at
        assert BlockPeer.objects.filter(block=block, socket="s-1").exists()
    fold_thread.join()
    assert errors == []
    assert folded and folded[0] > 0
