"""Blame: which version of a block wrote each part of its content.

:func:`block_blame` splits the block's current content into parts, each
as spans with the version of the block's history (a ``BlockUpdate`` row)
that wrote them:

- text (a text block, each text section of a composite block): a span per
  stretch of characters, with the version that inserted it;
- map fields (a map block, each map section of a composite block, named
  ``section/field``), a part per field: a text, number or boolean field is
  one span, with the version that set its current value; a counter field
  one span, with the version that last changed it; a list field a span per
  item (a line each), with the version that inserted the item; so are the
  items of a list block.

Attribution follows Loro's own operation ids, so it holds whatever the
order the changes arrived in.  Every character and list item carries the
id ``(peer, counter)`` of the operation that inserted it, and the version
that inserted it is the first row of the block's history whose document
version (its ``frontiers``) includes that id.  Rows are in commit order
and each row's version includes every earlier row's, so that row is found
by bisection.  A map field's value carries only the peer that set it (a
map keeps the last write of the peer with the highest Lamport clock), so
its setter is that peer's latest operation on the field, found in the
operations of the newest rows first, in stretches that double, down to
the one holding it; a counter's last change is the newest row with an
operation on it.  What a rollback restored was written again by the
rollback, so it is that version's; what no change touched keeps its first
author through merges, rollbacks and compaction (rows folded into the
snapshot keep their frontiers, and the snapshot keeps the history).

History retention (``services.retention``) folds the content of the
versions before the block's ``history_from``: the document is a shallow
one whose oldest version is that row's, so the bisection runs over the
rows from it on, and what that oldest version already held (its own
change included) is attributed to the folded history, "written before"
the time of the first version after it.  Operations are never read
before it (Loro cannot walk a shallow document's history past its start).
Log blocks have no blame.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from loro import (
    ID,
    ContainerID,
    CounterSpan,
    Frontiers,
    IdSpan,
    LoroCounter,
    LoroDoc,
    LoroList,
    LoroMap,
    LoroText,
    Side,
    VersionVector,
)

from memory.blocks import documents
from memory.blocks.models import BlockUpdate, MemoryBlock
from memory.blocks.selectors import (
    block_document_versioned,
    block_folded_before,
    block_history_from,
)
from pattern_site.kernel.db.rows import rows_fetch
from pattern_site.kernel.errors import InvalidInput


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
    """``text`` starting at ``start`` (in characters) of its part, written
    by version ``version`` (None: by no version of the history); with
    ``folded_before``, written before that time, in history whose content
    retention folded (``version`` is None then)."""

    start: int
    text: str
    version: int | None
    folded_before: datetime | None = None


@dataclass(frozen=True)
class BlamePart:
    """The spans of one part: the whole text (``name`` None), a composite
    section's text, a map field (``kind`` "field") or a list's items
    (``kind`` "items")."""

    name: str | None
    spans: list[BlameSpan]
    kind: Literal["text", "field", "items"] = "text"


@dataclass(frozen=True)
class Blame:
    parts: list[BlamePart]
    versions: list[BlameVersion]


@dataclass(frozen=True)
class _PartPlace:
    """Where a part lives in the document: a root text or list
    (``container``), or field ``field`` of root map ``container``."""

    name: str | None
    kind: Literal["text", "field", "items"]
    container: str
    field: dict[str, Any] | None = None


def _places(schema: dict[str, Any], section: str | None = None) -> list[_PartPlace]:
    p = f"{section}:" if section else ""
    kind = schema["kind"]
    if kind == "text":
        return [_PartPlace(section, "text", p + "content")]
    if kind == "list":
        return [_PartPlace(section, "items", p + "items")]
    if kind == "map":
        return [
            _PartPlace(
                f"{section}/{f['name']}" if section else f["name"],
                "field",
                p + "fields",
                f,
            )
            for f in schema["fields"]
        ]
    if kind == "composite":
        return [
            place
            for s in schema["sections"]
            for place in _places(s["schema"], s["name"])
        ]
    return []


def blame_covers(schema: dict[str, Any]) -> bool:
    """Whether blocks of ``schema`` have a blame (every kind but log)."""
    return bool(_places(schema))


@dataclass(frozen=True)
class _History:
    """A block's history rows, (id, frontiers) in commit order from row
    ``start`` on (the oldest whose content is held), as of its ``version``
    counter (rows committed since may be in it too), and the version
    vectors of the rows bisections visited (row index -> vector; the same
    for any document of the block)."""

    version: int
    rows: list[tuple[int, bytes]]
    vvs: dict[int, VersionVector]
    start: int = 0


# The histories of the blocks blamed lately, in this process.  Rows are
# only ever added, and only the newest one changes (a burst of live edits
# grows it), so a block's next version reads its rows from its newest
# known one on, and keeps the vectors of the others.
HISTORY_CACHE_SIZE = 32
_histories: OrderedDict[Any, _History] = OrderedDict()
_histories_lock = threading.Lock()


def _history(block: MemoryBlock, version: int, start: int) -> _History:
    with _histories_lock:
        known = _histories.get(block.pk)
    if known is not None and known.start != start:
        known = None  # folded since: the row indexes moved
    if known is not None and known.version == version:
        return known
    # In one fetch: the ORM's chunked iterator costs a large share of
    # reading every row of a long history.
    rows = BlockUpdate.objects.filter(block=block, pk__gte=start).order_by("pk")
    if known is not None and known.rows:
        kept = len(known.rows) - 1
        history = _History(
            version,
            known.rows[:kept]
            + rows_fetch(
                rows.filter(pk__gte=known.rows[-1][0]).values_list("pk", "frontiers")
            ),
            {i: vv for i, vv in list(known.vvs.items()) if i < kept},
            start,
        )
    else:
        history = _History(
            version, rows_fetch(rows.values_list("pk", "frontiers")), {}, start
        )
    with _histories_lock:
        current = _histories.get(block.pk)
        if current is None or current.version <= version:
            _histories[block.pk] = history
            _histories.move_to_end(block.pk)
            while len(_histories) > HISTORY_CACHE_SIZE:
                _histories.popitem(last=False)
    return history


def blame_histories_clear() -> None:
    """Forget the histories kept for blame (benchmarks, tests)."""
    with _histories_lock:
        _histories.clear()


class _Versions:
    """The block's history rows in commit order, each row's version vector
    computed only when the bisection looks at it (and kept with the
    history).  A row the document does not hold was committed after it,
    so its version includes everything the document has."""

    def __init__(self, doc: LoroDoc, history: _History) -> None:
        self.doc = doc
        self.rows = history.rows
        self._vv = history.vvs

    def frontiers(self, index: int) -> Frontiers:
        return documents.frontiers_decode(bytes(self.rows[index][1]))

    def vv(self, index: int) -> VersionVector:
        vv = self._vv.get(index)
        if vv is None:
            vv = self.doc.frontiers_to_vv(self.frontiers(index))
            if vv is None:
                return self.doc.oplog_vv
            self._vv[index] = vv
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

    def of_id(self, op: ID | None) -> int | None:
        return None if op is None else self.first_including(op.peer, op.counter)


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


# A stretch of a part: (start, end, row index or None).
_Stretch = tuple[int, int, int | None]


def _text_stretches(versions: _Versions, text: LoroText) -> tuple[str, list[_Stretch]]:
    """The text and its stretches, neighbours with the same row merged."""
    content = text.to_string()
    out: list[_Stretch] = []
    for start, length, peer, counter in _runs(text, len(content)):
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
    return content, out


def _item_stretches(
    versions: _Versions, items: LoroList | None
) -> tuple[str, list[_Stretch]]:
    """The list's items, one line each, each with the row inserting it."""
    if items is None:
        return "", []
    values = items.get_deep_value()
    lines = [documents.render_scalar(item) for item in values]
    out: list[_Stretch] = []
    at = 0
    for pos, line in enumerate(lines):
        end = at + len(line) + (pos < len(lines) - 1)
        out.append((at, end, versions.of_id(items.get_id_at(pos))))
        at = end
    return "\n".join(lines), out


# An operation test: (peer of its change, the operation as Loro's JSON).
_OpTest = Callable[[int, dict[str, Any]], bool]


def _newest_rows(
    doc: LoroDoc, versions: _Versions, tests: dict[int, _OpTest]
) -> dict[int, int]:
    """For each test, the newest row holding an operation it accepts (none:
    left out).  The operations are read from the newest row back, in
    stretches of rows that double (1, 2, 4, ...), until every test found
    one: a recent change costs little however long the history."""
    found: dict[int, int] = {}
    pending = dict(tests)
    hi, size = len(versions.rows), 1
    # Rows committed after the document was read hold nothing it has.
    while hi and doc.frontiers_to_vv(versions.frontiers(hi - 1)) is None:
        hi -= 1
    # A shallow document's operations are read from its oldest version on.
    floor = 1 if doc.is_shallow() else 0
    while pending and hi > floor:
        lo = max(floor, hi - size)
        before = versions.frontiers(lo - 1) if lo else Frontiers()
        spans = documents.id_spans_between(doc, before, versions.frontiers(hi - 1))
        hits: dict[int, int] = {}
        for peer, (start, end) in spans.inner().items():
            if end <= start:
                continue
            span = IdSpan(peer, CounterSpan(start, end))
            for change in json.loads(doc.export_json_in_id_span(span)):
                for op in change["ops"]:
                    for key, test in pending.items():
                        if not test(peer, op):
                            continue
                        row = versions.first_including(peer, op["counter"])
                        if row is not None and row > hits.get(key, -1):
                            hits[key] = row
        found.update(hits)
        for key in hits:
            del pending[key]
        hi, size = lo, size * 2
    return found


def _field_child(fields: LoroMap, key: str) -> Any:
    """The child container that field ``key``'s value is (None: a plain
    value, or no value)."""
    value = fields.get(key)
    return getattr(value, "container", None) if value is not None else None


def _field_text(fields: LoroMap, key: str) -> str:
    value = fields.get_deep_value().get(key)
    return "" if value is None else documents.render_scalar(value)


def _cid(container: Any) -> str:
    """A container's id as Loro's JSON names it."""
    cid = container.id
    kind = cid.container_type
    if isinstance(cid, ContainerID.Root):
        return f"cid:root-{cid.name}:{kind}"
    return f"cid:{cid.counter}@{cid.peer}:{kind}"


def _setter_test(fields: LoroMap, key: str) -> _OpTest | None:
    """Accepts the operations that may have set map ``fields``'s current
    value of ``key``: those of the peer whose write holds (its latest
    one holds, a peer's operations being ordered); None when nobody wrote
    the key."""
    peer = fields.get_last_editor(key)
    if peer is None:
        return None
    cid = _cid(fields)
    return lambda op_peer, op: (
        op_peer == peer and op["container"] == cid and op["content"].get("key") == key
    )


def _counter_test(counter: LoroCounter) -> _OpTest:
    cid = _cid(counter)
    return lambda _peer, op: op["container"] == cid


def _parts(
    doc: LoroDoc, versions: _Versions, places: list[_PartPlace]
) -> list[tuple[_PartPlace, str, list[_Stretch]]]:
    """Each place's current text and its stretches."""
    done: dict[int, tuple[str, list[_Stretch]]] = {}
    tests: dict[int, _OpTest] = {}
    for index, place in enumerate(places):
        if place.kind == "text":
            done[index] = _text_stretches(versions, doc.get_text(place.container))
            continue
        if place.kind == "items":
            done[index] = _item_stretches(versions, doc.get_list(place.container))
            continue
        assert place.field is not None
        fields = doc.get_map(place.container)
        child = _field_child(fields, place.field["name"])
        if isinstance(child, LoroList):
            done[index] = _item_stretches(versions, child)
        elif isinstance(child, LoroCounter):
            tests[index] = _counter_test(child)
        elif (test := _setter_test(fields, place.field["name"])) is not None:
            tests[index] = test
    rows = _newest_rows(doc, versions, tests) if tests else {}
    out = []
    for index, place in enumerate(places):
        if index in done:
            out.append((place, *done[index]))
            continue
        assert place.field is not None
        text = _field_text(doc.get_map(place.container), place.field["name"])
        row = rows.get(index)
        stretches = [(0, len(text), row)] if text or row is not None else []
        out.append((place, text, stretches))
    return out


def block_blame(*, block: MemoryBlock, doc: LoroDoc | None = None) -> Blame:
    """Who wrote each part of the block's current content; see the module
    doc.  ``InvalidInput`` for log blocks."""
    places = _places(block.schema)
    if not places:
        raise InvalidInput(
            f"blame covers text, map and list blocks and their composite "
            f"sections; block {block.label!r} is a {block.schema['kind']} block"
        )
    if doc is None:
        doc, version = block_document_versioned(block=block)
    else:
        version = block.version
    # Read after the document: a fold committed in between leaves a full
    # document with fewer rows, never a shallow one with rows it lacks.
    start = block_history_from(block=block) if doc.is_shallow() else 0
    versions = _Versions(doc, _history(block, version, start))
    rows = versions.rows
    with documents.loro_guard("cannot read the block's history"):
        stretches = _parts(doc, versions, places)
    # Numbers count the folded versions too.
    offset = (
        BlockUpdate.objects.filter(block=block, pk__lt=start).count() if start else 0
    )
    before = (
        block_folded_before(block_id=block.pk, history_from=start) if start else None
    )

    def folded(kind: str, index: int | None) -> bool:
        # The oldest held row holds the folded history; a field's setter
        # not found in the rows after it was set in that history.
        return before is not None and (
            index == 0 or (index is None and kind == "field")
        )

    used = sorted(
        {
            i
            for place, _, spans in stretches
            for *_, i in spans
            if i is not None and not folded(place.kind, i)
        }
    )
    meta = {
        row[0]: row
        for row in BlockUpdate.objects.filter(
            pk__in=[rows[i][0] for i in used]
        ).values_list(
            "pk", "created_at", "actor_kind", "actor_id", "actor_name", "summary"
        )
    }
    blamed = [BlameVersion(offset + i + 1, *meta[rows[i][0]]) for i in used]
    parts = [
        BlamePart(
            place.name,
            [
                BlameSpan(a, content[a:b], None, before)
                if folded(place.kind, i)
                else BlameSpan(a, content[a:b], None if i is None else offset + i + 1)
                for a, b, i in spans
            ],
            place.kind,
        )
        for place, content, spans in stretches
    ]
    return Blame(parts, blamed)
