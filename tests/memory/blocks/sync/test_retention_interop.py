"""The real npm ``loro-websocket`` client against a block whose history
retention folded: a client joining afterwards syncs, and a client that was
offline across the fold either merges (its version was kept for it) or is
told to start again from a fresh snapshot and recovers."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from memory.blocks import doc_cache
from memory.blocks.services import block_append
from memory.blocks.services.retention import block_history_fold
from memory.models import BlockPeer, BlockUpdate
from pattern_site.kernel.actors import Actor
from tests.conftest import daphne
from tests.memory.blocks.sync.test_interop import (
    offline_session,
    run_clients,
    stored_text,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def window(settings: Any) -> Any:
    settings.MEMORY_HISTORY_KEEP_DAYS = {"core": 1.0, "working": 1.0}
    settings.MEMORY_HISTORY_KEEP_VERSIONS = {"core": 3, "working": 3}
    return settings


def grow_and_fold(block: Any, agent: Any, *, edits: int = 12) -> None:
    """Versions by an agent, all but the newest few made old, then folded."""
    for n in range(edits):
        block_append(actor=Actor.for_agent(agent), block=block, content=f"<a{n}>")
    BlockUpdate.objects.filter(block=block).update(
        created_at=timezone.now() - timedelta(days=3)
    )
    assert block_history_fold(block=block) > 0
    block.refresh_from_db()
    assert block.history_from > 0
    doc_cache.clear()


def test_clients_joining_after_a_fold_sync_and_edit(
    node, text_block, token, agent, window
):
    grow_and_fold(text_block, agent)
    with daphne() as (url, _):
        out = run_clients(node, "edit", text_block, token, url, url, edits=5)
        fresh = run_clients(node, "read", text_block, token, url)
    first, second = out["texts"]
    assert first == second
    assert out["errors"] == [[], []]
    assert "<a0>" in first and "<a11>" in first
    assert all(f"<c{i}e{k}>" in first for i in range(2) for k in range(5))
    assert fresh["texts"] == [first]
    assert stored_text(text_block) == first


def offline_across_a_fold(
    node: str, block: Any, token: str, agent: Any, *, peer_gone: bool
) -> dict:
    """A client edits, goes offline (the server is killed), edits offline;
    meanwhile the block's history is folded (the client's join version too
    when ``peer_gone``: it was away longer than the peer hours); then the
    server comes back and the client reconnects."""

    def fold() -> None:
        assert BlockPeer.objects.filter(block=block).exists()
        if peer_gone:
            BlockPeer.objects.update(seen_at=timezone.now() - timedelta(days=30))
        grow_and_fold(block, agent)

    return offline_session(
        node,
        block,
        token,
        edits=3,
        flags=("--fresh-on-fold", "yes"),
        while_down=fold,
    )


def test_a_client_offline_across_a_fold_past_its_version_starts_again(
    node, text_block, token, agent, window
):
    final = offline_across_a_fold(node, text_block, token, agent, peer_gone=True)
    assert final["restarted"] is True
    assert "history_folded" in final["joinErrors"]
    text = final["texts"][0]
    # The fresh snapshot holds everything the server had, and the offline
    # markers written again on top of it are stored.
    assert all(f"<on{k}>" in text for k in range(3))
    assert all(f"<a{n}>" in text for n in range(12))
    assert all(f"<off{k}>" in text for k in range(3))
    assert stored_text(text_block) == text


def test_a_client_offline_across_a_fold_it_was_kept_for_merges_its_edits(
    node, text_block, token, agent, window
):
    final = offline_across_a_fold(node, text_block, token, agent, peer_gone=False)
    assert "restarted" not in final
    text = final["texts"][0]
    assert all(f"<off{k}>" in text for k in range(3))
    assert all(f"<a{n}>" in text for n in range(12))
    assert stored_text(text_block) == text
