"""Blame: which version of a block inserted each character of its text.

:func:`block_blame` splits the current text of a text block (or of each
text section of a composite block) into spans, each with the version of
the block's history (a ``BlockUpdate`` row) that inserted it.

Attribution follows Loro's own operation ids, so it holds whatever the
order the changes arrived in: every character carries the id
``(peer, counter)`` of the operation that inserted it, and the version
that inserted it is the first row of the block's history whose document
version (its ``frontiers``) includes that id.  Rows are in commit order
and each row's version includes every earlier row's, so that row is found
by bisection; a character moved back by a rollback was re-inserted by the
rollback, so it is that version's; characters no change deleted keep
their first author through merges, rollbacks and compaction (rows folded
into the snapshot keep their frontiers, and the snapshot keeps the whole
history).  Map, list and log blocks hold no text containers and have no
blame.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from loro import ID, LoroDoc, LoroText, Side, VersionVector

from coordination.errors import InvalidInput
from memory.blocks import documents
from memory.blocks.models import BlockUpdate, MemoryBlock
from memory.blocks.selectors import block_document_load
from pattern_site.db.rows import rows_fetch


@dataclass(frozen=True)
class BlameVersion:
    """The version a span came from: its number (1 = the block's first)
    and who made it, when and why."""

    number: int
    id: int
    created_at: datetime
    actor_kind: str
    actor_id: str
    actor_name: str
    summary: str


@dataclass(frozen=True)
class BlameSpan:
    """``text`` starting at ``start`` (in characters) of its part, inserted
    by version ``version`` (None: by no version of the history)."""

    start: int
    text: str
    version: int | None


@dataclass(frozen=True)
class BlamePart:
    """The spans of one text: a composite section's (``name``) or the whole
    block's (``name`` None)."""

    name: str | None
    spans: list[BlameSpan]


@dataclass(frozen=True)
class Blame:
    parts: list[BlamePart]
    versions: list[BlameVersion]


def blame_texts(schema: dict[str, Any]) -> list[tuple[str | None, str]]:
    """The text containers of ``schema`` as (part name, container name)."""
    if schema["kind"] == "text":
        return [(None, "content")]
    if schema["kind"] == "composite":
        return [
            (s["name"], f"{s['name']}:content")
            for s in schema["sections"]
            if s["schema"]["kind"] == "text"
        ]
    return []


class _Versions:
    """The block's history rows in commit order, each row's version vector
    computed only when the bisection looks at it."""

    def __init__(self, doc: LoroDoc, rows: list[tuple[int, bytes]]) -> None:
        self.doc = doc
        self.rows = rows
        self._vv: dict[int, VersionVector] = {}

    def vv(self, index: int) -> VersionVector:
        vv = self._vv.get(index)
        if vv is None:
            frontiers = documents.frontiers_decode(bytes(self.rows[index][1]))
            vv = self._vv[index] = self.doc.frontiers_to_vv(frontiers)
        return vv

    def first_including(self, peer: int, counter: int) -> int | None:
        """Index of the first row whose version includes ``(peer, counter)``."""
        target = ID(peer, counter)
        lo, hi = 0, len(self.rows)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.vv(mid).includes_id(target):
                hi = mid
            else:
                lo = mid + 1
        return lo if lo < len(self.rows) else None

    def last_counter(self, index: int, peer: int) -> int:
        last = self.vv(index).get_last(peer)
        return -1 if last is None else last


def _runs(text: LoroText, length: int) -> list[tuple[int, int, int, int]]:
    """The text as runs of characters inserted by consecutive operations of
    one peer: (start, length, peer, first counter)."""
    runs: list[tuple[int, int, int, int]] = []
    start = peer = counter = -1
    for pos in range(length):
        cursor = text.get_cursor(pos, Side.Middle)
        op = cursor.id if cursor is not None else None
        if op is None:
            raise InvalidInput("cannot attribute this text: a character has no id")
        if op.peer == peer and op.counter == counter + (pos - start):
            continue
        if start >= 0:
            runs.append((start, pos - start, peer, counter))
        start, peer, counter = pos, op.peer, op.counter
    if start >= 0:
        runs.append((start, length - start, peer, counter))
    return runs


def _spans(
    versions: _Versions, runs: list[tuple[int, int, int, int]]
) -> list[tuple[int, int, int | None]]:
    """(start, end, row index) per attributed stretch, neighbours with the
    same row merged."""
    out: list[tuple[int, int, int | None]] = []
    for start, length, peer, counter in runs:
        done = 0
        while done < length:
            index = versions.first_including(peer, counter + done)
            if index is None:
                take = length - done
            else:
                last = versions.last_counter(index, peer)
                take = min(length - done, last - (counter + done) + 1)
            begin = start + done
            if out and out[-1][2] == index and out[-1][1] == begin:
                out[-1] = (out[-1][0], begin + take, index)
            else:
                out.append((begin, begin + take, index))
            done += take
    return out


def block_blame(*, block: MemoryBlock, doc: LoroDoc | None = None) -> Blame:
    """Who inserted each stretch of the block's current text; see the
    module doc.  ``InvalidInput`` for blocks without text."""
    texts = blame_texts(block.schema)
    if not texts:
        raise InvalidInput(
            f"blame covers text blocks and the text sections of composite "
            f"blocks; block {block.label!r} is a {block.schema['kind']} block"
        )
    doc = doc or block_document_load(block=block)
    # In one fetch: the ORM's chunked iterator costs a large share of
    # reading every row of a long history.
    rows = rows_fetch(
        BlockUpdate.objects.filter(block=block)
        .order_by("pk")
        .values_list("pk", "frontiers")
    )
    versions = _Versions(doc, rows)
    stretches: list[tuple[str | None, str, list[tuple[int, int, int | None]]]] = []
    with documents.loro_guard("cannot read the block's text"):
        for name, container in texts:
            text = doc.get_text(container)
            content = text.to_string()
            runs = _runs(text, len(content))
            stretches.append((name, content, _spans(versions, runs)))
    used = sorted({i for _, _, spans in stretches for *_, i in spans if i is not None})
    meta = {
        row[0]: row
        for row in BlockUpdate.objects.filter(
            pk__in=[rows[i][0] for i in used]
        ).values_list(
            "pk", "created_at", "actor_kind", "actor_id", "actor_name", "summary"
        )
    }
    blamed = [BlameVersion(i + 1, *meta[rows[i][0]]) for i in used]
    parts = [
        BlamePart(
            name,
            [
                BlameSpan(a, content[a:b], None if i is None else i + 1)
                for a, b, i in spans
            ],
        )
        for name, content, spans in stretches
    ]
    return Blame(parts, blamed)
