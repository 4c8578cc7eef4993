"""Reads of what changed, since an agent last looked, in the blocks it can
read.

An agent's look at a block is a ``BlockSeen`` row: the newest version
(``BlockUpdate`` id) it had seen, the document version it received (Loro
frontiers) and the block's ``version`` counter then.  A block whose counter
has not moved has nothing new and costs nothing more than that comparison;
for the others, the versions after the look (and the look's own version
when a burst of live edits grew it since) are the changes, each with who
made it, when, why and a compact diff from the version before it
(``memory.blocks.diffs.compact_diff``).  The agent's own changes are left
out: it knows them.  A block the agent never looked at reports its newest
changes.  Advancing the looks: ``memory.blocks.seen``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import FilteredRelation, Q, QuerySet
from django.db.models.expressions import RawSQL
from loro import Frontiers, LoroDoc

from memory.blocks import diffs, documents
from memory.blocks.models import BlockUpdate, MemoryBlock
from memory.blocks.selectors import (
    block_folded_before,
    block_history_document,
    block_list_for_actor,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.db.compiled import CompiledQuery

# Changes per block reported at most (the newest); older ones are counted.
CHANGES_PER_BLOCK = 20
# The diff of a change whose content history retention folded.
FOLDED_DIFF: dict[str, Any] = {
    "kind": "folded",
    "note": "history retention folded this change's content; who, when and "
    "why are kept",
}


@dataclass(frozen=True)
class SeenChange:
    """One change by someone else: its version id, who, when, why, and what
    it did (a ``compact_diff``)."""

    id: int
    created_at: datetime
    actor_kind: str
    actor_id: str
    actor_name: str
    summary: str
    diff: dict[str, Any]


@dataclass(frozen=True)
class SeenMark:
    """Where an agent's look at a block stands: the values of ``BlockSeen``."""

    block_id: Any
    upto: int
    frontiers: bytes
    version: int


@dataclass
class BlockChangesSince:
    """A block's changes since the agent's look (oldest first), how many
    older ones were left out, and the look that would cover them all."""

    block: MemoryBlock
    changes: list[SeenChange] = field(default_factory=list)
    earlier: int = 0
    mark: SeenMark | None = None
    # Said when the changes reach into history retention folded (a change
    # without its diff, a deletion of folded text): since when.
    folded: str | None = None


_EMPTY = Frontiers().encode()
_BLOCK_KEY = MemoryBlock._meta.pk


@functools.cache
def _newest_versions(limit: int) -> CompiledQuery:
    """A block's newest ``limit`` versions from version id ``after`` on,
    newest first: compiled once (this runs for every changed block)."""
    return CompiledQuery(
        lambda block_id, after: (
            BlockUpdate.objects.filter(
                block_id=RawSQL("%s", (block_id,)), pk__gte=after
            )
            .order_by("-pk")
            .only(
                "frontiers",
                "created_at",
                "actor_kind",
                "actor_id",
                "actor_name",
                "summary",
            )[:limit]
        ),
        block_id="\x00block",
        after=-7_406_195,
    )


def _looks_query(
    agent_id: int, constellation_id: int, others_only: bool
) -> QuerySet[MemoryBlock]:
    """The blocks the agent can read (with ``others_only``, not its own),
    each as its key, its version counter and the agent's look at it (None
    where it never looked)."""
    agent = Agent(pk=agent_id, constellation_id=constellation_id)
    blocks = block_list_for_actor(actor=Actor.for_agent(agent))
    if others_only:
        blocks = blocks.exclude(owner_id=agent_id)
    return blocks.annotate(
        look=FilteredRelation("seen_by", condition=Q(seen_by__agent_id=agent_id))
    ).values_list("pk", "version", "look__upto", "look__frontiers", "look__version")


@functools.cache
def _looks(others_only: bool) -> CompiledQuery:
    """``_looks_query`` compiled once: every build of an agent's context
    reads it (again after each writing step of a turn), and the permission
    filter's subqueries cost several times the query to put together."""
    return CompiledQuery(
        lambda agent_id, constellation_id: _looks_query(
            agent_id, constellation_id, others_only
        ),
        agent_id=-7_406_311,
        constellation_id=-7_406_312,
    )


def block_changes_for_agent(
    *,
    agent: Agent,
    limit: int = CHANGES_PER_BLOCK,
    labels: list[str] | None = None,
    others_only: bool = False,
    looked_only: bool = False,
    with_diffs: bool = True,
) -> list[BlockChangesSince]:
    """The blocks ``agent`` can read (``labels``: only those; with
    ``others_only``, only shared and constellation blocks; with
    ``looked_only``, only blocks the agent looked at before) that changed
    since it last looked, with what changed (without ``with_diffs``, diffs
    are left empty and cost nothing); blocks whose only changes are the
    agent's own come back with no changes (and a mark to advance)."""
    # Which blocks moved, from their version counters and the agent's looks
    # alone (one query): model instances only for those.
    looks: dict[Any, SeenMark] = {}
    moved = []
    if labels is None:
        listed: Any = _looks(others_only).rows(
            agent_id=agent.pk, constellation_id=agent.constellation_id
        )
    else:
        listed = _looks_query(agent.pk, agent.constellation_id, others_only).filter(
            label__in=labels
        )
    for pk, version, upto, frontiers, seen in listed:
        if upto is not None:
            looks[pk] = SeenMark(pk, upto, bytes(frontiers), seen)
        if (upto is not None and version != seen) or (upto is None and not looked_only):
            moved.append(pk)
    if not moved:
        return []
    blocks = block_list_for_actor(actor=Actor.for_agent(agent))
    out = []
    for block in blocks.filter(pk__in=moved).order_by("label"):
        look = looks.get(block.pk)
        if look is None and block.version == 0:
            # Nothing written yet: the look starts at the beginning.
            out.append(BlockChangesSince(block, mark=SeenMark(block.pk, 0, _EMPTY, 0)))
            continue
        out.append(
            _changes(
                block=block, agent=agent, look=look, limit=limit, with_diffs=with_diffs
            )
        )
    return out


def _changes(
    *,
    block: MemoryBlock,
    agent: Agent,
    look: SeenMark | None,
    limit: int,
    with_diffs: bool,
) -> BlockChangesSince:
    # The newest ``limit`` versions and one before them, whose version is
    # where the first reported change starts.
    newest_first = _newest_versions(limit + 2).all(
        block_id=_BLOCK_KEY.get_db_prep_value(block.pk, connection),
        after=look.upto if look is not None else 0,
    )
    rows = [
        (
            u.pk,
            u.frontiers,
            u.created_at,
            u.actor_kind,
            u.actor_id,
            u.actor_name,
            u.summary,
        )
        for u in reversed(newest_first)
    ]
    result = BlockChangesSince(block=block)
    if not rows:
        return result
    newest = rows[-1]
    upto = bytes(newest[1])
    result.mark = SeenMark(block.pk, newest[0], upto, block.version)
    start: bytes | None
    if look is not None and rows[0][0] == look.upto:
        # The look's own version starts the changes; it is one of them
        # only when it grew since (a burst of live edits).
        start = look.frontiers
        if bytes(rows[0][1]) == look.frontiers:
            rows = rows[1:]
    elif (look is None or look.upto == 0) and len(rows) <= limit:
        start = None  # the block's whole history
    else:
        rows = rows[-(limit + 1) :]
        start, rows = bytes(rows[0][1]), rows[1:]
        after = look.upto if look is not None else 0
        result.earlier = BlockUpdate.objects.filter(
            block=block, pk__gt=after
        ).count() - len(rows)
    me = str(agent.pk)
    theirs = [
        (before, row)
        for before, row in zip(
            [start, *(bytes(r[1]) for r in rows[:-1])], rows, strict=True
        )
        if not (row[3] == "agent" and row[4] == me)
    ]
    if not theirs:
        return result
    if not with_diffs:
        result.changes.extend(_change(row, {}) for _, row in theirs)
        return result
    if block.history_from:
        # A change at or before the oldest held version starts from content
        # history retention folded: told, without its diff.
        kept = []
        for before, row in theirs:
            if row[0] <= block.history_from:
                result.changes.append(_change(row, FOLDED_DIFF))
            else:
                kept.append((before, row))
        theirs = kept
        if not theirs:
            _folded_note(result)
            return result
    # Past versions only are read: the cached document serves, uncopied.
    doc = block_history_document(block=block, upto=upto)
    if block.schema["kind"] == "text":
        # From the changes' operations: checking out past versions costs
        # time that grows with the history.
        with documents.loro_guard("cannot read the block's changes"):
            for before, row in theirs:
                spans = documents.text_change_spans(
                    doc,
                    documents.frontiers_decode(before) if before else Frontiers(),
                    documents.frontiers_decode(bytes(row[1])),
                )
                result.changes.append(_change(row, {"kind": "text", "spans": spans}))
        _folded_note(result)
        return result
    values: dict[bytes | None, Any] = {}

    def value_at(frontiers: bytes | None) -> Any:
        if frontiers not in values:
            values[frontiers] = documents.document_value(
                _at(doc, frontiers), block.schema
            )
        return values[frontiers]

    for before, row in theirs:
        diff = diffs.compact_diff(
            block.schema, value_at(before), value_at(bytes(row[1]))
        )
        result.changes.append(_change(row, diff))
    _folded_note(result)
    return result


def _folded_note(result: BlockChangesSince) -> None:
    """Say since when history was folded, when a reported change reaches
    into it: without its diff, or deleting text whose writing was folded."""
    block = result.block
    reaches = any(
        change.diff.get("kind") == FOLDED_DIFF["kind"]
        or any(span.get("folded") for span in change.diff.get("spans", ()))
        for change in result.changes
    )
    if not block.history_from or not reaches:
        return
    when = block_folded_before(block_id=block.pk, history_from=block.history_from)
    if when is not None:
        result.folded = (
            f"changes before {when:%Y-%m-%d %H:%M} UTC were folded by history "
            "retention: their content is not shown"
        )


def _change(row: tuple[Any, ...], diff: dict[str, Any]) -> SeenChange:
    return SeenChange(
        id=row[0],
        created_at=row[2],
        actor_kind=row[3],
        actor_id=row[4],
        actor_name=row[5],
        summary=row[6],
        diff=diff,
    )


def _at(doc: LoroDoc, frontiers: bytes | None) -> LoroDoc:
    """The document as it was at ``frontiers`` (None: before any change)."""
    with documents.loro_guard("cannot check out a past version"):
        if frontiers is None:
            return doc.fork_at(Frontiers())
        return documents.document_at(doc, documents.frontiers_decode(frontiers))
