"""Benchmark memory history: "changes since you last looked" for an agent
with many shared blocks, and blame of a long-edited block (shown again,
right after an edit, and with its history not read before in the process),
each beside loading a block measured in the same run.

Run: ``.venv/bin/python bench/history.py`` (50 shared blocks of 10,000
edits each); ``--quick`` for 5 blocks of 1,000 edits; ``--blocks``,
``--edits``, ``--rounds`` to change the sizes.  Uses a throwaway database
in a temporary data directory; prints each figure next to its target.

The blocks are seeded straight into the tables (a Loro document edited
``--edits`` times by three agents and a human in turn, each commit one
history row with its frontiers, the whole log folded into the snapshot, as
compaction leaves it); the measured calls then go through the real
selectors, services and tools.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.common import django_setup, line, percentile

DATA_DIR = django_setup("pattern-bench-history-")

from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone
from loro import LoroDoc

from memory.blocks import doc_cache, documents
from memory.blocks.blame import blame_histories_clear, block_blame
from memory.blocks.schemas import ChangesIn
from memory.blocks.selectors import block_document_load
from memory.blocks.services import block_append
from memory.blocks.services.storage import SERVER_PEER
from memory.blocks.tools import block_changes_tool
from memory.models import BlockSnapshot, BlockUpdate, MemoryBlock
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    constellation_create,
    user_get_or_create,
)


def seed_block(constellation, label: str, edits: int, authors: list[Actor]):
    """A constellation-level text block (every agent of the constellation
    reads and writes it) with ``edits`` changes by
    ``authors`` in turn: notes appended, the text cut back to its last
    1,500 characters whenever it passes 4,000 (as a real block is kept
    under its limit)."""
    block = MemoryBlock.objects.create(
        constellation=constellation,
        label=label,
        schema={"kind": "text"},
        char_limit=20_000,
    )
    doc = LoroDoc()
    doc.peer_id = SERVER_PEER
    text = doc.get_text("content")
    rows = []
    start = timezone.now() - timedelta(days=1)
    for n in range(edits):
        actor = authors[n % len(authors)]
        summary = f"note {n}"
        doc.set_next_commit_message(
            documents.commit_message(actor_ref=actor.ref, summary=summary)
        )
        if text.len_unicode > 4000:
            text.update(text.to_string()[-1500:])
        else:
            text.insert(text.len_unicode, f"note {n}: {actor.display_name} was here\n")
        doc.commit()
        rows.append(
            BlockUpdate(
                block=block,
                data=b"",
                frontiers=doc.oplog_frontiers.encode(),
                actor_kind=actor.kind,
                actor_id=actor.id,
                actor_name=actor.display_name,
                summary=summary,
                size=text.len_unicode,
                created_at=start + timedelta(milliseconds=n),
            )
        )
    BlockUpdate.objects.bulk_create(rows, batch_size=2000)
    last = BlockUpdate.objects.filter(block=block).order_by("-pk").first()
    BlockSnapshot.objects.create(block=block, data=documents.snapshot(doc))
    rendered = text.to_string()
    MemoryBlock.objects.filter(pk=block.pk).update(
        snapshot_upto=last.pk,
        version=edits,
        rendered=rendered,
        size=len(rendered),
    )
    block.refresh_from_db()
    return block


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def figures(name: str, values: list[float], target: str, limit: float | None):
    p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
    line(
        f"{name} p50 / p95 (ms)",
        f"{p50:.2f} / {p95:.2f}",
        target,
        None if limit is None else p95 <= limit,
    )


def bench_changes(viewer, others: list[Actor], blocks, rounds: int) -> None:
    """The viewer takes its changes after others edited a few blocks; and
    with nothing new."""
    viewer_actor = Actor.for_agent(viewer)
    take = ChangesIn(peek=False)
    block_changes_tool(actor=viewer_actor, args=take)  # the first look
    changed_per_round = min(5, len(blocks))
    took, reported = [], 0
    for n in range(rounds):
        for k in range(changed_per_round):
            block = blocks[(n * changed_per_round + k) % len(blocks)]
            block_append(
                actor=others[k % len(others)], block=block, content=f"r{n}.{k}"
            )
        start = time.perf_counter()
        answer = block_changes_tool(actor=viewer_actor, args=take)
        took.append((time.perf_counter() - start) * 1000)
        reported += sum(len(b["changes"]) for b in answer["blocks"])
    assert reported == rounds * changed_per_round, reported
    quiet = timed(lambda: block_changes_tool(actor=viewer_actor, args=take), rounds)
    figures(
        f"changes since last look, {changed_per_round} of {len(blocks)} blocks changed",
        took,
        "p95 <= 20 ms",
        20,
    )
    figures("changes since last look, nothing changed", quiet, "reference", None)


def bench_blame(block, author: Actor, runs: int) -> None:
    """Blame of a long-edited block: as the block page shows it again,
    right after an edit, and in a process that never read its history."""
    blame = timed(lambda: block_blame(block=block), runs)
    loads = timed(lambda: block_document_load(block=block), runs)

    def cold() -> None:
        doc_cache.clear()
        block_document_load(block=block)

    def edited() -> float:
        block_append(actor=author, block=block, content="one more line")
        return timed(lambda: block_blame(block=block), 1)[0]

    def unread() -> None:
        blame_histories_clear()
        block_blame(block=block)

    cold_loads = timed(cold, runs)
    spans = len(block_blame(block=block).parts[0].spans)
    name = (
        f"blame of a {block.version:,}-edit block ({block.size:,} chars, {spans} spans)"
    )
    after_edit = [edited() for _ in range(runs)]
    not_read = timed(unread, runs)
    figures(name, blame, "p95 <= 30 ms", 30)
    figures("blame of that block right after an edit", after_edit, "reference", None)
    figures("blame of it, history not read before", not_read, "reference", None)
    figures("load of that block (cached document)", loads, "reference", None)
    figures("load of that block (from the database)", cold_loads, "reference", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="5 blocks x 1,000")
    parser.add_argument("--blocks", type=int, default=None)
    parser.add_argument("--edits", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    blocks_n = args.blocks or (5 if args.quick else 50)
    edits = args.edits or (1_000 if args.quick else 10_000)

    call_command("migrate", verbosity=0)
    partner, _ = user_get_or_create(username="bench")
    constellation = constellation_create(name="Bench", partner=partner)
    viewer, _ = agent_create(constellation=constellation, name="Viewer")
    agents = [
        agent_create(constellation=constellation, name=name)[0]
        for name in ("Flux", "Anchor")
    ]
    authors = [
        Actor.for_agent(agents[0]),
        Actor.for_agent(agents[1]),
        Actor.for_user(partner),
        Actor.for_agent(viewer),
    ]
    print(f"database: {connection.settings_dict['NAME']}")
    start = time.perf_counter()
    blocks = []
    for n in range(blocks_n):
        with transaction.atomic():
            block = seed_block(constellation, f"shared{n:02}", edits, authors)
        blocks.append(block)
    print(
        f"seeded {blocks_n} blocks x {edits:,} edits in "
        f"{time.perf_counter() - start:.1f} s\n"
    )
    bench_blame(blocks[0], authors[0], args.rounds)
    bench_changes(viewer, authors[:3], blocks, args.rounds)
    print(json.dumps({"blocks": blocks_n, "edits": edits, "rounds": args.rounds}))


if __name__ == "__main__":
    main()
