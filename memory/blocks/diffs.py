"""Differences between two versions of a block, shaped for reading.

:func:`value_diff` compares two values of a block's schema: text blocks
line by line, map and composite blocks field by field (each field rendered
as the LLM sees it, then compared line by line), lists and logs by their
rendering.  Each compared part is a list of :class:`DiffRow` that a
template shows inline (removed then added lines) or side by side.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from memory.blocks import documents


@dataclass(frozen=True)
class DiffRow:
    """One line pair: ``kind`` is "same", "removed", "added" or "changed"
    (``old`` replaced by ``new``); absent sides are None."""

    kind: str
    old_number: int | None
    old: str | None
    new_number: int | None
    new: str | None


@dataclass(frozen=True)
class DiffPart:
    """The rows of one compared part: a field, a section, or the whole
    text (``name`` None)."""

    name: str | None
    rows: list[DiffRow]

    @property
    def changed(self) -> bool:
        return any(row.kind != "same" for row in self.rows)


def lines_diff(old: str, new: str) -> list[DiffRow]:
    """Rows pairing ``old``'s lines with ``new``'s."""
    a, b = old.splitlines(), new.splitlines()
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(
                DiffRow("same", i + 1, a[i], j + 1, b[j])
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            )
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            has_old, has_new = i < i2, j < j2
            kind = (
                "changed" if has_old and has_new else "removed" if has_old else "added"
            )
            rows.append(
                DiffRow(
                    kind,
                    i + 1 if has_old else None,
                    a[i] if has_old else None,
                    j + 1 if has_new else None,
                    b[j] if has_new else None,
                )
            )
    return rows


def _field_text(value: Any) -> str:
    """A map field's value as lines: a list one item per line."""
    if isinstance(value, list):
        return "\n".join(documents.render_scalar(item) for item in value)
    return documents.render_scalar(value)


def value_diff(schema: dict[str, Any], old: Any, new: Any) -> list[DiffPart]:
    """The changed parts between two values of ``schema`` (text blocks: one
    part with every line, for context)."""
    kind = schema["kind"]
    if kind == "map":
        parts = [
            DiffPart(
                f["name"],
                lines_diff(
                    _field_text(old.get(f["name"])), _field_text(new.get(f["name"]))
                ),
            )
            for f in schema["fields"]
        ]
    elif kind == "composite":
        parts = [
            DiffPart(
                s["name"],
                lines_diff(
                    documents.render_value(s["schema"], old[s["name"]]),
                    documents.render_value(s["schema"], new[s["name"]]),
                ),
            )
            for s in schema["sections"]
        ]
    else:
        return [
            DiffPart(
                None,
                lines_diff(
                    documents.render_value(schema, old),
                    documents.render_value(schema, new),
                ),
            )
        ]
    return [part for part in parts if part.changed]


def text_spans(old: str, new: str) -> list[dict[str, Any]]:
    """What turned ``old`` into ``new``, as inserted and deleted spans:
    ``{"op": "insert" | "delete", "at": offset in new, "text": ...}``.

    The common head and tail are cut off first, so a small edit of a long
    text compares only the stretch around it."""
    head = 0
    limit = min(len(old), len(new))
    while head < limit and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    a, b = old[head : len(old) - tail], new[head : len(new) - tail]
    spans: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("delete", "replace"):
            spans.append({"op": "delete", "at": head + j1, "text": a[i1:i2]})
        if tag in ("insert", "replace"):
            spans.append({"op": "insert", "at": head + j1, "text": b[j1:j2]})
    return spans


def compact_diff(schema: dict[str, Any], old: Any, new: Any) -> dict[str, Any]:
    """A change in few words for an agent: text as inserted and deleted
    spans; map fields and composite sections by name (text inside them as
    spans, other values before and after); list and log items added and
    removed."""
    kind = schema["kind"]
    if kind == "text":
        return {"kind": "text", "spans": text_spans(old, new)}
    if kind in ("list", "log"):
        return {
            "kind": "items",
            "added": [item for item in new if item not in old],
            "removed": [item for item in old if item not in new],
        }
    if kind == "map":
        named = [(f["name"], {"kind": f["type"]}) for f in schema["fields"]]
    else:
        named = [(s["name"], s["schema"]) for s in schema["sections"]]
    fields = []
    for name, sub in named:
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        if isinstance(before, str) and isinstance(after, str):
            fields.append({"field": name, "spans": text_spans(before, after)})
        elif sub["kind"] in ("list", "log", "map"):
            fields.append({"field": name, **compact_diff(sub, before, after)})
        else:
            fields.append({"field": name, "before": before, "after": after})
    return {"kind": "fields", "fields": fields}
