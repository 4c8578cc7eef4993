"""Where each agent's look at each block stands (``BlockSeen``): advanced
when the agent takes its changes (:func:`blocks_seen_advance`), and after
reads (its built context, a tool read) and what its sync sockets received
(the document on joining a block's room, each change relayed to it) in
batches off their path (:func:`blocks_seen_record_later`,
:func:`blocks_seen_received`).

A read knows only the block's ``version`` counter (from the row it already
has); the batch resolves it to the newest version and document version
(frontiers), and records nothing for a block that changed since the read:
a look is never moved past what the agent received, so at worst a change
is reported twice, never missed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.blocks.changes import SeenMark
from memory.blocks.models import BlockSeen, BlockUpdate, MemoryBlock
from memory.blocks.tasks import blocks_seen_record_task
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.batching import Batcher


@transaction.atomic
def blocks_seen_advance(*, agent_id: int, marks: Sequence[SeenMark]) -> int:
    """Move ``agent_id``'s looks to ``marks`` in one statement; returns how
    many."""
    if not marks:
        return 0
    now = timezone.now()
    BlockSeen.objects.bulk_create(
        [
            BlockSeen(
                agent_id=agent_id,
                block_id=m.block_id,
                upto=m.upto,
                frontiers=m.frontiers,
                version=m.version,
                seen_at=now,
            )
            for m in marks
        ],
        update_conflicts=True,
        unique_fields=["agent", "block"],
        update_fields=["upto", "frontiers", "version", "seen_at"],
    )
    return len(marks)


def blocks_seen_record(*, looks: Sequence[tuple[int, Any, int]]) -> int:
    """Record reads, (agent id, block id, the block's version counter then):
    each block still at that counter is marked seen at its newest version.
    Returns how many looks moved."""
    versions = dict(
        MemoryBlock.objects.filter(pk__in={b for _, b, _ in looks}).values_list(
            "pk", "version"
        )
    )
    by_agent: dict[int, list[SeenMark]] = {}
    newest: dict[Any, tuple[int, bytes] | None] = {}
    for agent_id, block_id, version in looks:
        if versions.get(_uuid(block_id)) != version:
            continue
        key = _uuid(block_id)
        if key not in newest:
            newest[key] = (
                BlockUpdate.objects.filter(block_id=key)
                .order_by("-pk")
                .values_list("pk", "frontiers")
                .first()
            )
        row = newest[key]
        if row is not None:
            by_agent.setdefault(agent_id, []).append(
                SeenMark(key, row[0], bytes(row[1]), version)
            )
    return sum(
        blocks_seen_advance(agent_id=agent_id, marks=marks)
        for agent_id, marks in by_agent.items()
    )


def _uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _send_looks(pending: dict[tuple[int, str], int]) -> None:
    blocks_seen_record_task.delay(
        [
            [agent_id, block_id, version]
            for (agent_id, block_id), version in pending.items()
        ]
    )


# Looks gathered in this process are recorded by one task a second (or as
# soon as 500 wait), so that a read does no write of its own.  Of two looks
# at one block the later counter wins, whatever order they came in.
_LOOKS: Batcher[tuple[int, str], int] = Batcher(
    name="block looks",
    send=_send_looks,
    merge=lambda old, new: new if old is None else max(old, new),
    delay=1.0,
    max_items=500,
    eager=lambda: bool(blocks_seen_record_task.app.conf.task_always_eager),
)


def blocks_seen_record_later(*, agent: Agent, blocks: Iterable[MemoryBlock]) -> None:
    """Mark ``blocks`` as received by ``agent`` at their row's version, after
    commit and in a batch."""
    looks = [((agent.pk, str(b.pk)), b.version) for b in blocks]
    if looks:
        transaction.on_commit(lambda: _LOOKS.add(looks))


def blocks_seen_received(*, looks: Mapping[tuple[int, str], int]) -> None:
    """Mark blocks as received by agents' sync sockets: ``(agent id, block
    id) -> the block's version counter`` of the newest document or change
    sent, in the same batch as reads (a socket writes nothing itself)."""
    _LOOKS.add(looks.items())


def blocks_seen_received_nowait(*, looks: Mapping[tuple[int, str], int]) -> bool:
    """:func:`blocks_seen_received` from an event loop: nothing is sent on
    the caller's thread.  False when the batch is due now: the caller then
    runs :func:`blocks_seen_flush` off the loop."""
    return _LOOKS.add_nowait(looks.items())


def blocks_seen_flush() -> int:
    """Send this process's waiting looks now (tests, shutdown)."""
    return _LOOKS.flush()
