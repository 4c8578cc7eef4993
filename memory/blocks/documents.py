"""Block documents: schemas, their Loro layout, operations and rendering.

Pure functions over ``loro.LoroDoc`` and plain JSON (no Django, no
database), so the services, the selectors and the benchmarks share them.

Layout of a document (per schema kind; a composite section ``s`` prefixes
its containers with ``"s:"``):

- text: root ``LoroText`` ``content``
- map: root ``LoroMap`` ``fields``; list fields are child ``LoroList`` s,
  counter fields child ``LoroCounter`` s, other fields plain values
- list: root ``LoroList`` ``items``
- log: root ``LoroList`` ``entries`` of JSON objects

A document holds nothing else: :func:`foreign_roots` names the root
containers a change touched outside this layout, and :func:`held_size`
counts what the document holds beyond its rendering (map keys the schema
does not name, log entries past ``max_entries``), so that the char limit
covers everything.

Loro raises ``BaseException`` (not ``Exception``) on bad input;
:func:`loro_guard` turns exactly those into
``InvalidInput`` and lets everything else through.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from loro import (
    ID,
    ContainerID,
    CounterSpan,
    ExportMode,
    Frontiers,
    IdSpan,
    LoroCounter,
    LoroDoc,
    LoroList,
    LoroMap,
    VersionVector,
)

from pattern_site.kernel.errors import InvalidInput, LimitExceeded, PermissionDenied

SCHEMA_KINDS = ("text", "map", "list", "log", "composite")
FIELD_TYPES = ("text", "number", "boolean", "list", "counter")
MAX_JSON_BYTES = 64 * 1024


class loro_guard:
    """Turn a Loro error (a bare ``BaseException``) into ``InvalidInput``.

    A class rather than a ``contextmanager`` generator: it guards the Loro
    calls of every block change, where the generator's machinery cost
    more calls than the guarded work."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, exc: BaseException | None, _: Any) -> None:
        # Loro raises bare BaseException, and a Rust panic PanicException
        # (also a BaseException); anything else is not ours to swallow.
        if kind is BaseException or (
            kind is not None and kind.__name__ == "PanicException"
        ):
            raise InvalidInput(f"{self.what}: {exc}") from None


# --- schemas ----------


# The keys each part of a schema takes: any other is refused, not ignored
# (a misspelt key would silently give a schema other than the one meant).
SCHEMA_KEYS = {
    "text": ("kind",),
    "map": ("kind", "fields"),
    "list": ("kind", "max_items", "style"),
    "log": ("kind", "display_limit", "max_entries", "entry_schema"),
    "composite": ("kind", "sections"),
}
FIELD_KEYS = ("name", "type", "read_only", "description")
SECTION_KEYS = ("name", "schema", "read_only")
ENTRY_SCHEMA_KEYS = ("timestamp", "agent_id", "fields")
# Fields of a map, sections of a composite: a schema is checked inside a
# write, so its work stays bounded.
SCHEMA_MAX_PARTS = 100


def _known_keys(value: dict[str, Any], keys: tuple[str, ...], what: str) -> None:
    unknown = [key for key in value if key not in keys]
    if unknown:
        raise InvalidInput(
            f"{what} has unknown key {unknown[0]!r}; its keys are: {', '.join(keys)}"
        )


def _parts(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise InvalidInput(f"a {what} schema needs a non-empty list")
    if len(value) > SCHEMA_MAX_PARTS:
        raise LimitExceeded(
            f"a {what} schema has {len(value)} parts; at most {SCHEMA_MAX_PARTS}"
        )
    return value


def schema_validate(schema: Any, *, nested: bool = False) -> dict[str, Any]:
    """Check a schema definition and return it normalised (defaults filled)."""
    if not isinstance(schema, dict) or schema.get("kind") not in SCHEMA_KINDS:
        raise InvalidInput(f"a schema needs a 'kind', one of {', '.join(SCHEMA_KINDS)}")
    kind = schema["kind"]
    _known_keys(schema, SCHEMA_KEYS[kind], f"a {kind} schema")
    if kind == "text":
        return {"kind": "text"}
    if kind == "map":
        fields = schema.get("fields")
        if not isinstance(fields, list) or not fields:
            raise InvalidInput("a map schema needs a non-empty list of 'fields'")
        out, seen = [], set()
        for field in _parts(fields, "map"):
            if not isinstance(field, dict) or not isinstance(field.get("name"), str):
                raise InvalidInput("each map field needs a 'name'")
            _known_keys(field, FIELD_KEYS, f"map field {field['name']!r}")
            name = field["name"].strip()
            ftype = field.get("type", "text")
            if not name or name in seen:
                raise InvalidInput(f"map field names must be unique: {name!r}")
            if ftype not in FIELD_TYPES:
                raise InvalidInput(
                    f"field {name!r} has type {ftype!r}; allowed: "
                    + ", ".join(FIELD_TYPES)
                )
            seen.add(name)
            out.append(
                {
                    "name": name,
                    "type": ftype,
                    "read_only": bool(field.get("read_only", False)),
                    "description": str(field.get("description", "")),
                }
            )
        return {"kind": "map", "fields": out}
    if kind == "list":
        max_items = schema.get("max_items")
        if max_items is not None and (not isinstance(max_items, int) or max_items < 1):
            raise InvalidInput("'max_items' must be a positive integer or null")
        style = schema.get("style", "numbered")
        if style not in ("numbered", "checkbox"):
            raise InvalidInput("a list 'style' is 'numbered' or 'checkbox'")
        return {"kind": "list", "max_items": max_items, "style": style}
    if kind == "log":
        display_limit = schema.get("display_limit", 10)
        max_entries = schema.get("max_entries", 100)
        for key, value in (
            ("display_limit", display_limit),
            ("max_entries", max_entries),
        ):
            if not isinstance(value, int) or value < 1:
                raise InvalidInput(f"'{key}' must be a positive integer")
        entry = schema.get("entry_schema") or {}
        if not isinstance(entry, dict):
            raise InvalidInput("a log's 'entry_schema' is an object")
        _known_keys(entry, ENTRY_SCHEMA_KEYS, "a log's entry_schema")
        return {
            "kind": "log",
            "display_limit": display_limit,
            "max_entries": max(max_entries, display_limit),
            "entry_schema": {
                "timestamp": bool(entry.get("timestamp", True)),
                "agent_id": bool(entry.get("agent_id", True)),
                "fields": [str(f) for f in entry.get("fields", [])],
            },
        }
    if nested:
        raise InvalidInput("composite sections cannot themselves be composite")
    sections = schema.get("sections")
    if not isinstance(sections, list) or not sections:
        raise InvalidInput("a composite schema needs a non-empty list of 'sections'")
    out_sections, names = [], set()
    for section in _parts(sections, "composite"):
        if not isinstance(section, dict) or not isinstance(section.get("name"), str):
            raise InvalidInput("each composite section needs a 'name'")
        _known_keys(section, SECTION_KEYS, f"section {section['name']!r}")
        name = section["name"].strip()
        if not name or set(name) & set("/:\0") or name in names:
            raise InvalidInput(
                f"section names must be unique, without '/' or ':': {name!r}"
            )
        names.add(name)
        out_sections.append(
            {
                "name": name,
                "schema": schema_validate(section.get("schema"), nested=True),
                "read_only": bool(section.get("read_only", False)),
            }
        )
    return {"kind": "composite", "sections": out_sections}


def has_read_only(schema: dict[str, Any]) -> bool:
    """Whether any field or section (at any depth) is read-only."""
    if schema["kind"] == "map":
        return any(f["read_only"] for f in schema["fields"])
    if schema["kind"] == "composite":
        return any(
            s["read_only"] or has_read_only(s["schema"]) for s in schema["sections"]
        )
    return False


def _section(schema: dict[str, Any], name: str) -> dict[str, Any]:
    for section in schema["sections"]:
        if section["name"] == name:
            return section
    names = ", ".join(s["name"] for s in schema["sections"])
    raise InvalidInput(f"no section {name!r}; sections: {names}")


def _field(schema: dict[str, Any], name: str) -> dict[str, Any]:
    for field in schema["fields"]:
        if field["name"] == name:
            return field
    names = ", ".join(f["name"] for f in schema["fields"])
    raise InvalidInput(f"no field {name!r}; fields: {names}")


# --- templates ----------


@dataclass(frozen=True)
class Template:
    name: str
    description: str
    schema: dict[str, Any]
    block_type: str = "core"


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template(
            "persona",
            "Stores details about your current persona, guiding how you behave "
            "and respond",
            {
                "kind": "map",
                "fields": [
                    {"name": "name", "type": "text"},
                    {"name": "traits", "type": "list"},
                    {"name": "style", "type": "text"},
                    {"name": "guidelines", "type": "text"},
                ],
            },
        ),
        Template(
            "human",
            "Stores key details about the person you are conversing with",
            {
                "kind": "map",
                "fields": [
                    {"name": "name", "type": "text"},
                    {"name": "preferences", "type": "list"},
                    {"name": "context", "type": "text"},
                ],
            },
        ),
        Template(
            "scratchpad",
            "Working notes for the task at hand; rewrite freely",
            {
                "kind": "composite",
                "sections": [
                    {"name": "current_task", "schema": {"kind": "text"}},
                    {"name": "notes", "schema": {"kind": "text"}},
                ],
            },
            block_type="working",
        ),
        Template(
            "organization",
            "Information about the organization and its policies (read-only)",
            {
                "kind": "map",
                "fields": [
                    {"name": "name", "type": "text", "read_only": True},
                    {"name": "policies", "type": "text", "read_only": True},
                ],
            },
        ),
        Template("custom", "", {"kind": "text"}, block_type="working"),
    )
}


def template_get(name: str) -> Template:
    if name not in TEMPLATES:
        raise InvalidInput(f"no template {name!r}; templates: {', '.join(TEMPLATES)}")
    return TEMPLATES[name]


# --- reading a document ----------


def _prefix(section: str | None) -> str:
    return f"{section}:" if section else ""


def document_value(doc: LoroDoc, schema: dict[str, Any]) -> Any:
    """The block's structured content as JSON, shaped by its schema."""
    return _value(doc, schema, None)


def _value(doc: LoroDoc, schema: dict[str, Any], section: str | None) -> Any:
    p = _prefix(section)
    kind = schema["kind"]
    if kind == "text":
        return doc.get_text(p + "content").to_string()
    if kind == "map":
        raw = doc.get_map(p + "fields").get_deep_value()
        out: dict[str, Any] = {}
        for field in schema["fields"]:
            value = raw.get(field["name"])
            if value is None:
                value = {"list": [], "counter": 0, "boolean": False, "number": 0}.get(
                    field["type"], ""
                )
            if field["type"] == "counter":
                value = int(value) if float(value).is_integer() else value
            out[field["name"]] = value
        return out
    if kind == "list":
        return doc.get_list(p + "items").get_deep_value()
    if kind == "log":
        return doc.get_list(p + "entries").get_deep_value()
    return {s["name"]: _value(doc, s["schema"], s["name"]) for s in schema["sections"]}


def render_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(render_scalar(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {render_scalar(v)}" for k, v in value.items())
    return str(value)


def _item_text(item: Any) -> str:
    if isinstance(item, dict):
        for key in ("text", "task", "title"):
            if key in item:
                return render_scalar(item[key])
    return render_scalar(item)


def render_value(schema: dict[str, Any], value: Any) -> str:
    """Render structured content for the LLM."""
    kind = schema["kind"]
    if kind == "text":
        return value
    if kind == "map":
        lines = []
        for field in schema["fields"]:
            marker = " [read-only]" if field["read_only"] else ""
            line = f"{field['name']}{marker}: {render_scalar(value[field['name']])}"
            lines.append(line.rstrip())
        return "\n".join(lines)
    if kind == "list":
        if schema["style"] == "checkbox":
            return "\n".join(
                f"- [{'x' if isinstance(i, dict) and i.get('done') else ' '}] "
                f"{_item_text(i)}"
                for i in value
            )
        return "\n".join(f"{n}. {_item_text(i)}" for n, i in enumerate(value, 1))
    if kind == "log":
        newest = list(reversed(value))[: schema["display_limit"]]
        return "\n".join(log_entry_render(entry) for entry in newest)
    parts = []
    for section in schema["sections"]:
        marker = " [read-only]" if section["read_only"] else ""
        body = render_value(section["schema"], value[section["name"]])
        parts.append(f"=== {section['name']}{marker} ===\n{body}".rstrip())
    return "\n\n".join(parts)


def log_entry_render(entry: Any) -> str:
    if not isinstance(entry, dict):
        return render_scalar(entry)
    head = ""
    if entry.get("timestamp"):
        head += f"[{entry['timestamp']}] "
    if entry.get("agent"):
        head += f"{entry['agent']}: "
    rest = {
        k: v for k, v in entry.items() if k not in ("timestamp", "agent", "agent_id")
    }
    if set(rest) == {"message"}:
        return head + render_scalar(rest["message"])
    return head + render_scalar(rest)


def render(doc: LoroDoc, schema: dict[str, Any]) -> str:
    return render_value(schema, document_value(doc, schema))


# --- what a document may hold ----------

# Root container of each schema kind: (name, Loro container type).
_ROOTS = {
    "text": ("content", "Text"),
    "map": ("fields", "Map"),
    "list": ("items", "List"),
    "log": ("entries", "List"),
}


def schema_roots(schema: dict[str, Any]) -> set[tuple[str, str]]:
    """The root containers of the schema's layout, as (name, type)."""
    if schema["kind"] != "composite":
        return {_ROOTS[schema["kind"]]}
    return {
        (_prefix(s["name"]) + name, ctype)
        for s in schema["sections"]
        for name, ctype in schema_roots(s["schema"])
    }


def foreign_roots(doc: LoroDoc, schema: dict[str, Any], since: Frontiers) -> list[str]:
    """Root containers outside the schema's layout that the changes after
    ``since`` wrote to (directly or through a child container), as
    ``name (Type)``.  A child container no longer attached to the document
    has no root; its bytes still count against the document's byte cap.
    A shallow document's changes are read from its start on, and the roots
    its start holds are checked by name."""
    allowed = schema_roots(schema)
    found: set[tuple[str, str]] = set()
    if not history_reaches(doc, since):
        names = {name for name, _ in allowed}
        found |= {(name, "?") for name in doc.get_value() if name not in names}
        since = doc.shallow_since_frontiers
    with loro_guard("cannot read the update's changes"):
        spans = id_spans_between(doc, since, doc.oplog_frontiers)
        for peer, (start, end) in spans.inner().items():
            if end <= start:
                continue
            for cid in doc.get_changed_containers_in(ID(peer, start), end - start):
                path = doc.get_path_to_container(cid)
                root = path[0][0] if path else cid
                if not isinstance(root, ContainerID.Root):
                    continue
                key = (root.name, str(root.container_type))
                if key not in allowed:
                    found.add(key)
    return sorted(f"{name} ({ctype})" for name, ctype in found)


def held_size(doc: LoroDoc, schema: dict[str, Any], rendered: str) -> int:
    """Characters the document holds: its rendering plus, as JSON, what a
    peer can write that rendering leaves out and the schema does not bound -
    the values of map keys no field names, and log entries past
    ``max_entries`` (the server prunes them; a peer need not)."""
    return len(rendered) + _unbounded(doc, schema, None)


def _unbounded(doc: LoroDoc, schema: dict[str, Any], section: str | None) -> int:
    kind = schema["kind"]
    if kind == "composite":
        return sum(_unbounded(doc, s["schema"], s["name"]) for s in schema["sections"])
    if kind == "map":
        named = {f["name"] for f in schema["fields"]}
        raw = doc.get_map(_prefix(section) + "fields").get_deep_value()
        extra: Any = {k: v for k, v in raw.items() if k not in named}
    elif kind == "log":
        entries = doc.get_list(_prefix(section) + "entries")
        excess = len(entries) - schema["max_entries"]
        extra = entries.get_deep_value()[:excess] if excess > 0 else None
    else:
        return 0
    return len(json.dumps(extra, ensure_ascii=False, default=str)) if extra else 0


# --- changing a document ----------

OPERATIONS = {
    "text": ("set_text", "append_text", "insert_lines", "replace_text"),
    "map": (
        "set_field",
        "append_to_list_field",
        "append_to_text_field",
        "replace_in_text_field",
        "increment_counter",
    ),
    "list": ("push_item", "insert_item", "delete_item", "check_item"),
    "log": ("append_log_entry",),
}

# Each operation's arguments besides ``op`` and ``section``: name -> (JSON
# type, required).  ``operation_apply`` refuses missing and unknown ones;
# the API derives its operation schemas from this table.
Arg = tuple[str, bool]
OPERATION_ARGS: dict[str, dict[str, Arg]] = {
    "set_text": {"text": ("string", True)},
    "append_text": {"text": ("string", True), "separator": ("string", False)},
    "insert_lines": {"text": ("string", True), "line": ("integer", True)},
    "replace_text": {
        "old": ("string", True),
        "new": ("string", True),
        "all": ("boolean", False),
        "once": ("boolean", False),
    },
    "set_field": {"field": ("string", True), "value": ("any", True)},
    "append_to_list_field": {"field": ("string", True), "value": ("any", True)},
    "append_to_text_field": {
        "field": ("string", True),
        "text": ("string", True),
        "separator": ("string", False),
    },
    "replace_in_text_field": {
        "field": ("string", True),
        "old": ("string", True),
        "new": ("string", True),
        "all": ("boolean", False),
        "once": ("boolean", False),
    },
    "increment_counter": {"field": ("string", True), "delta": ("number", False)},
    "push_item": {"value": ("any", True)},
    "insert_item": {"index": ("integer", True), "item": ("any", True)},
    "delete_item": {"index": ("integer", True)},
    "check_item": {"index": ("integer", True), "done": ("boolean", False)},
    "append_log_entry": {"entry": ("object", True)},
}


# Argument names an operation still accepts under an older name: operation ->
# {old name: name}.  ``push_item`` takes ``value`` as ``set_field`` does; an
# operation sent with ``item`` is applied and its answer says to rename it.
RENAMED_ARGS: dict[str, dict[str, str]] = {"push_item": {"item": "value"}}


def operation_renamed(op: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``op`` with its arguments under their names, and a notice for each
    argument it sent under an older name (given both, the new name wins)."""
    name = op.get("op")
    # Any JSON may arrive as the name (a list, an object): validation,
    # after this, answers it with a 422.
    renames = RENAMED_ARGS.get(name, {}) if isinstance(name, str) else {}
    old_names = [old for old in renames if old in op]
    if not old_names:
        return op, []
    out = {k: v for k, v in op.items() if k not in old_names}
    notices = []
    for old in old_names:
        new = renames[old]
        out.setdefault(new, op[old])
        notices.append(
            f"{op['op']}'s {old!r} is deprecated: send {new!r} (as set_field does);"
            f" {old!r} will stop being accepted"
        )
    return out, notices


def operation_signature(name: str) -> str:
    """``name(arg, arg, [optional])`` for error messages."""
    args = OPERATION_ARGS[name]
    shown = [a if required else f"[{a}]" for a, (_, required) in args.items()]
    return f"{name}({', '.join(shown)})"


def operation_arguments_check(op: dict[str, Any]) -> None:
    """Refuse an operation with missing or unknown arguments, naming the
    arguments it takes (under their names: :func:`operation_renamed` first)."""
    name = op.get("op")
    if name not in OPERATION_ARGS:
        raise InvalidInput(
            f"unknown operation {name!r}; operations: {', '.join(OPERATION_ARGS)}"
        )
    args = OPERATION_ARGS[name]
    unknown = sorted(set(op) - set(args) - {"op", "section"})
    missing = [a for a, (_, required) in args.items() if required and a not in op]
    if unknown or missing:
        problems = []
        if missing:
            problems.append(f"missing {', '.join(missing)}")
        if unknown:
            problems.append(f"unknown {', '.join(unknown)}")
        raise InvalidInput(
            f"operation {name!r} takes {operation_signature(name)} (and 'section' "
            f"on a composite block): {'; '.join(problems)}"
        )


def _require(op: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = op.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise InvalidInput(f"operation {op.get('op')!r} needs '{key}'")
    return value


def _replace_all(op: dict[str, Any]) -> bool:
    """``all``: every occurrence (Letta's core_memory_replace), else the first."""
    replace_all = op.get("all", False)
    if not isinstance(replace_all, bool):
        raise InvalidInput("'all' is true or false")
    return replace_all


def _occurs_once(op: dict[str, Any], current: str, old: str) -> None:
    """``once``: refuse to replace text that occurs more than once (Letta's
    memory_replace), as the first occurrence may not be the one meant."""
    once = op.get("once", False)
    if not isinstance(once, bool):
        raise InvalidInput("'once' is true or false")
    count = current.count(old)
    if once and count > 1:
        raise InvalidInput(
            f"{old!r} occurs {count} times; it must occur exactly once - "
            "include more of the text around it"
        )


def _lines_inserted(current: str, text: str, line: int) -> str:
    """``current`` with ``text`` as new lines after line ``line`` (0: before
    the first line, -1: after the last)."""
    lines = current.split("\n") if current else []
    if line == -1:
        line = len(lines)
    if not 0 <= line <= len(lines):
        raise InvalidInput(
            f"line {line} is outside 0..{len(lines)} (the text has {len(lines)}"
            " lines; -1 inserts after the last)"
        )
    return "\n".join([*lines[:line], *text.split("\n"), *lines[line:]])


def _json_sized(value: Any) -> Any:
    if len(json.dumps(value, default=str)) > MAX_JSON_BYTES:
        raise InvalidInput(f"a value may be at most {MAX_JSON_BYTES} bytes of JSON")
    return value


def operation_apply(
    doc: LoroDoc,
    schema: dict[str, Any],
    op: dict[str, Any],
    *,
    enforce_read_only: bool,
) -> None:
    """Apply one operation (``{"op": name, ...}``) to ``doc`` (uncommitted).

    ``enforce_read_only`` refuses read-only fields and sections (agents);
    humans and the system may change them.
    """
    op, _ = operation_renamed(op)
    operation_arguments_check(op)
    section = op.get("section")
    if schema["kind"] == "composite":
        if not isinstance(section, str):
            names = ", ".join(s["name"] for s in schema["sections"])
            raise InvalidInput(
                f"a composite block needs a 'section' for {op.get('op')!r}; "
                f"sections: {names}"
            )
        sec = _section(schema, section)
        if sec["read_only"] and enforce_read_only:
            raise PermissionDenied(f"section {section!r} is read-only")
        schema = sec["schema"]
    elif section is not None:
        raise InvalidInput("'section' applies to composite blocks only")
    name = op.get("op")
    allowed = OPERATIONS[schema["kind"]]
    if name not in allowed:
        raise InvalidInput(
            f"operation {name!r} does not apply to a {schema['kind']} block; "
            f"allowed: {', '.join(allowed)}"
        )
    p = _prefix(section)
    if schema["kind"] == "text":
        text = doc.get_text(p + "content")
        if name == "set_text":
            new = _require(op, "text", str)
            text.update(new) if text.len_unicode else text.insert(0, new)
        elif name == "append_text":
            # "separator" goes between old and new text (not into an empty one).
            separator = op.get("separator", "") if text.len_unicode else ""
            if not isinstance(separator, str):
                raise InvalidInput("'separator' must be text")
            text.insert(text.len_unicode, separator + _require(op, "text", str))
        elif name == "insert_lines":
            new = _lines_inserted(
                text.to_string(), _require(op, "text", str), _require(op, "line", int)
            )
            text.update(new) if text.len_unicode else text.insert(0, new)
        else:
            old, new = _require(op, "old", str), _require(op, "new", str)
            current = text.to_string()
            if not old or old not in current:
                raise InvalidInput(
                    f"the text to replace was not found in the block: {old!r}"
                )
            _occurs_once(op, current, old)
            if _replace_all(op):
                text.update(current.replace(old, new))
            else:
                start = current.index(old)
                text.delete(start, len(old))
                text.insert(start, new)
    elif schema["kind"] == "map":
        field = _field(schema, _require(op, "field", str))
        if field["read_only"] and enforce_read_only:
            raise PermissionDenied(f"field {field['name']!r} is read-only")
        _map_operation(doc.get_map(p + "fields"), field, name, op)
    elif schema["kind"] == "list":
        items = doc.get_list(p + "items")
        if name == "delete_item":
            index = _require(op, "index", int)
            if not 0 <= index < len(items):
                raise InvalidInput(f"no item {index}; the list has {len(items)}")
            items.delete(index, 1)
            return
        if name == "check_item":
            _check_item(items, schema, op)
            return
        if schema["max_items"] is not None and len(items) >= schema["max_items"]:
            raise InvalidInput(
                f"the list is full ({schema['max_items']} items); delete one first"
            )
        arg = "value" if name == "push_item" else "item"
        item = _json_sized(op.get(arg))
        if item is None or item == "":
            raise InvalidInput(f"operation {name!r} needs an {arg!r}")
        if name == "push_item":
            items.push(item)
        else:
            index = _require(op, "index", int)
            if not 0 <= index <= len(items):
                raise InvalidInput(f"index {index} is outside 0..{len(items)}")
            items.insert(index, item)
    else:
        entry = _json_sized(_require(op, "entry", dict))
        doc.get_list(p + "entries").push(entry)


def _check_item(items: LoroList, schema: dict[str, Any], op: dict[str, Any]) -> None:
    """Tick (or, with ``done`` false, untick) item ``index`` of a checkbox
    list: the item keeps its text and becomes ``{"text", "done"}``."""
    if schema["style"] != "checkbox":
        raise InvalidInput(
            "check_item ticks items of a checkbox list; this list is numbered "
            "(its schema's style)"
        )
    index = _require(op, "index", int)
    if not 0 <= index < len(items):
        raise InvalidInput(f"no item {index}; the list has {len(items)}")
    done = op.get("done", True)
    if not isinstance(done, bool):
        raise InvalidInput("'done' is true or false")
    item = items.get_deep_value()[index]
    if isinstance(item, dict) and item.get("done") is done:
        return
    items.delete(index, 1)
    items.insert(index, {"text": _item_text(item), "done": done})


def _map_operation(
    fields: LoroMap, field: dict[str, Any], name: str, op: dict[str, Any]
) -> None:
    key, ftype = field["name"], field["type"]
    if name == "set_field":
        value = _json_sized(op.get("value"))
        checks: dict[str, Callable[[Any], bool]] = {
            "text": lambda v: isinstance(v, str),
            "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
            "boolean": lambda v: isinstance(v, bool),
            "list": lambda v: isinstance(v, list),
        }
        if ftype == "counter" or not checks[ftype](value):
            raise InvalidInput(f"field {key!r} is a {ftype}; got {value!r}")
        if ftype == "list":
            child = fields.insert_container(key, LoroList())
            for item in value:
                child.push(item)
        else:
            fields.insert(key, value)
    elif name in ("append_to_text_field", "replace_in_text_field"):
        if ftype != "text":
            raise InvalidInput(f"field {key!r} is a {ftype}, not text")
        current = fields.get_deep_value().get(key) or ""
        if name == "append_to_text_field":
            separator = op.get("separator", "") if current else ""
            if not isinstance(separator, str):
                raise InvalidInput("'separator' must be text")
            fields.insert(key, current + separator + _require(op, "text", str))
        else:
            old, new = _require(op, "old", str), _require(op, "new", str)
            if not old or old not in current:
                raise InvalidInput(
                    f"the text to replace was not found in field {key!r}: {old!r}"
                )
            _occurs_once(op, current, old)
            fields.insert(key, current.replace(old, new, -1 if _replace_all(op) else 1))
    elif name == "append_to_list_field":
        if ftype != "list":
            raise InvalidInput(f"field {key!r} is a {ftype}, not a list")
        child = fields.get(key)
        container = getattr(child, "container", None)
        if not isinstance(container, LoroList):
            container = fields.insert_container(key, LoroList())
        container.push(_json_sized(op.get("value")))
    else:
        if ftype != "counter":
            raise InvalidInput(f"field {key!r} is a {ftype}, not a counter")
        delta = op.get("delta", 1)
        if not isinstance(delta, int | float) or isinstance(delta, bool):
            raise InvalidInput("'delta' must be a number")
        child = fields.get(key)
        container = getattr(child, "container", None)
        if not isinstance(container, LoroCounter):
            container = fields.insert_container(key, LoroCounter())
        container.increment(delta)


def log_prune(doc: LoroDoc, schema: dict[str, Any]) -> list[Any]:
    """Drop the oldest entries past ``max_entries``; return them."""
    entries = doc.get_list("entries")
    excess = len(entries) - schema["max_entries"]
    if excess <= 0:
        return []
    pruned = entries.get_deep_value()[:excess]
    entries.delete(0, excess)
    return pruned


def operations_apply(
    doc: LoroDoc,
    schema: dict[str, Any],
    operations: list[dict[str, Any]],
    *,
    enforce_read_only: bool,
) -> None:
    """Apply stored operations (an approval request's), including the
    ``set_content`` pseudo-operation that replaces the whole value."""
    for op in operations:
        if op.get("op") == "set_content":
            document_set_value(doc, schema, op.get("value"))
        else:
            operation_apply(doc, schema, op, enforce_read_only=enforce_read_only)


def document_set_value(doc: LoroDoc, schema: dict[str, Any], value: Any) -> None:
    """Make the document's content equal ``value`` (rollback, imports)."""
    _set_value(doc, schema, value, None)


def _set_value(
    doc: LoroDoc, schema: dict[str, Any], value: Any, section: str | None
) -> None:
    p = _prefix(section)
    kind = schema["kind"]
    expected = {"text": str, "map": dict, "list": list, "log": list}.get(kind, dict)
    if not isinstance(value, expected):
        where = f"section {section!r}" if section else "the block"
        raise InvalidInput(
            f"content of {where} must be {expected.__name__} for a {kind} schema"
        )
    known = {f["name"] for f in schema.get("fields", schema.get("sections", []))}
    if isinstance(value, dict) and set(value) - known:
        unknown = ", ".join(sorted(set(value) - known))
        raise InvalidInput(f"unknown names {unknown}; the schema has {sorted(known)}")
    if kind == "text":
        text = doc.get_text(p + "content")
        if text.to_string() != value:
            text.update(value) if text.len_unicode else text.insert(0, value)
    elif kind == "map":
        fields = doc.get_map(p + "fields")
        current = _value(doc, schema, section)
        for field in schema["fields"]:
            key = field["name"]
            if key in value and value[key] != current[key]:
                if field["type"] == "counter":
                    _map_operation(
                        fields,
                        field,
                        "increment_counter",
                        {"delta": value[key] - current[key]},
                    )
                elif field["type"] == "list" and isinstance(
                    child := getattr(fields.get(key), "container", None), LoroList
                ):
                    _list_update(child, _json_sized(value[key]), key)
                else:
                    _map_operation(fields, field, "set_field", {"value": value[key]})
    elif kind in ("list", "log"):
        items = doc.get_list(p + ("items" if kind == "list" else "entries"))
        _list_update(items, value, section or "the block")
    else:
        for sec in schema["sections"]:
            if sec["name"] in value:
                _set_value(doc, sec["schema"], value[sec["name"]], sec["name"])


def _list_update(items: LoroList, value: Any, where: str) -> None:
    """Make ``items`` hold ``value`` by the fewest deletions and insertions:
    an item that stays keeps the operation that inserted it (and so its
    author in blame, and its place in a concurrent edit)."""
    if not isinstance(value, list):
        raise InvalidInput(f"{where} holds a list; got {value!r}")
    current = items.get_deep_value()
    if current == value:
        return

    def key(item: Any) -> str:
        return json.dumps(item, sort_keys=True, default=str)

    matcher = difflib.SequenceMatcher(
        a=[key(i) for i in current], b=[key(i) for i in value], autojunk=False
    )
    # From the end, so each opcode's indices still name the same items.
    for tag, i1, i2, j1, j2 in reversed(matcher.get_opcodes()):
        if tag == "equal":
            continue
        if i2 > i1:
            items.delete(i1, i2 - i1)
        for offset, item in enumerate(value[j1:j2]):
            items.insert(i1 + offset, item)


# --- text places (the Letta-style tools on any schema) ----------


@dataclass(frozen=True)
class TextPlace:
    """Somewhere plain text can be appended or replaced: a text or list
    block, a composite section or a map field (``section/field`` within a
    composite section)."""

    name: str | None
    kind: Literal["text", "list"]
    section: str | None = None
    field: str | None = None


def text_places(schema: dict[str, Any], *, agent: bool) -> list[TextPlace]:
    """Every place of ``schema`` holding text or a list, in schema order;
    read-only ones left out for ``agent``."""
    kind = schema["kind"]
    if kind in ("text", "list"):
        return [TextPlace(None, kind)]
    if kind == "map":
        return [
            TextPlace(f["name"], f["type"], field=f["name"])
            for f in schema["fields"]
            if f["type"] in ("text", "list") and not (agent and f["read_only"])
        ]
    if kind == "log":
        return []
    places = []
    for sec in schema["sections"]:
        if agent and sec["read_only"]:
            continue
        for place in text_places(sec["schema"], agent=agent):
            name = sec["name"] if place.field is None else f"{sec['name']}/{place.name}"
            places.append(TextPlace(name, place.kind, sec["name"], place.field))
    return places


def text_place_value(schema: dict[str, Any], value: Any, place: TextPlace) -> Any:
    if place.section is not None:
        value = value[place.section]
    return value[place.field] if place.field is not None else value


def text_place_operation(place: TextPlace, action: str, **args: Any) -> dict[str, Any]:
    """The schema operation that appends to or replaces text in ``place``."""
    if action == "append":
        if place.kind == "list":
            op = (
                {"op": "append_to_list_field", "value": args["text"]}
                if place.field
                else {"op": "push_item", "value": args["text"]}
            )
        elif place.field:
            op = {"op": "append_to_text_field", "text": args["text"], "separator": "\n"}
        else:
            op = {"op": "append_text", "text": args["text"], "separator": "\n"}
    else:
        name = "replace_in_text_field" if place.field else "replace_text"
        op = {"op": name, "old": args["old"], "new": args["new"]}
        if args.get("every"):
            op["all"] = True
        if args.get("once"):
            op["once"] = True
    if place.field:
        op["field"] = place.field
    if place.section:
        op["section"] = place.section
    return op


def value_from_text(schema: dict[str, Any], text: str) -> Any:
    """Content for a block from plain text (imports, ``core_memory_update``).

    A text block takes the text as it is; a list block one item per line.
    A structured block takes the form it is rendered in: ``field: value``
    lines for a map (a line not shaped ``name: ...`` continues the previous
    field; a ``name:`` that is no field is refused; list fields are
    comma-separated), ``=== section ===``
    headings for a composite.  Fields and sections left out keep their
    content; a JSON object shaped by the schema is taken as it is.
    """
    stripped = text.strip()
    if schema["kind"] in ("map", "composite") and stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    return _value_from_text(schema, text)


_LIST_MARK = re.compile(r"^\s*(?:\d+\.|-\s*\[[ xX]\]|[-*])\s*")


def _value_from_text(schema: dict[str, Any], text: str) -> Any:
    kind = schema["kind"]
    if kind == "text":
        return text
    if kind == "list":
        return [
            _LIST_MARK.sub("", line, count=1)
            for line in text.splitlines()
            if line.strip()
        ]
    if kind == "map":
        return _map_from_text(schema, text)
    if kind == "composite":
        return _composite_from_text(schema, text)
    raise InvalidInput(
        "plain text cannot replace a log block; the system appends its entries"
    )


# A line that reads as ``name: value`` (a word, a colon, then a space or
# the end: not a URL's "https://").
_FIELD_LINE = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*:(?:\s|$)")


def _map_from_text(schema: dict[str, Any], text: str) -> dict[str, Any]:
    fields = {f["name"]: f for f in schema["fields"]}
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        head, sep, rest = line.partition(":")
        name = head.replace("[read-only]", "").strip()
        if sep and name in fields:
            current = name
            found[name] = [rest.strip()]
        elif (unknown := _FIELD_LINE.match(line)) is not None:
            # Taken as the previous field's text, it would change a field
            # the writer did not name.
            raise InvalidInput(
                f"{unknown.group(1)!r} is not a field of this block; fields: "
                + ", ".join(fields)
            )
        elif current is not None:
            found[current].append(line)
        elif line.strip():
            raise InvalidInput(
                "write a structured block as 'field: value' lines; fields: "
                + ", ".join(fields)
            )
    return {
        name: _field_from_text(fields[name], "\n".join(lines).strip())
        for name, lines in found.items()
    }


def _field_from_text(field: dict[str, Any], text: str) -> Any:
    ftype = field["type"]
    if ftype == "text":
        return text
    if ftype == "list":
        return [item.strip() for item in text.split(",") if item.strip()]
    if ftype == "boolean":
        if text.lower() not in ("true", "false"):
            raise InvalidInput(f"field {field['name']!r} is true or false")
        return text.lower() == "true"
    try:
        number = float(text or 0)
    except ValueError:
        raise InvalidInput(
            f"field {field['name']!r} is a number; got {text!r}"
        ) from None
    if ftype == "counter" or number.is_integer():
        return int(number)
    return number


_HEADING = re.compile(r"^===\s*(.+?)(?:\s*\[read-only\])?\s*===\s*$")


def _composite_from_text(schema: dict[str, Any], text: str) -> dict[str, Any]:
    sections = {s["name"]: s for s in schema["sections"]}
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        match = _HEADING.match(line)
        if match and match.group(1) in sections:
            current = match.group(1)
            found[current] = []
        elif current is not None:
            found[current].append(line)
        elif line.strip():
            raise InvalidInput(
                "write a composite block with '=== section ===' headings; "
                "sections: " + ", ".join(sections)
            )
    return {
        name: _value_from_text(sections[name]["schema"], "\n".join(lines).strip())
        for name, lines in found.items()
    }


# --- comparing contents ----------


def is_extension(old: Any, new: Any) -> bool:
    """True when ``new`` only adds to ``old`` (what append-only access allows).

    Text keeps every old character in order; lists keep every old item in
    order; maps keep every old key with an extended value; other values stay
    equal.
    """
    if isinstance(old, str) and isinstance(new, str):
        return _is_subsequence(old, new)
    if isinstance(old, list) and isinstance(new, list):
        position = 0
        for item in old:
            while position < len(new) and new[position] != item:
                position += 1
            if position == len(new):
                return False
            position += 1
        return True
    if isinstance(old, dict) and isinstance(new, dict):
        return all(k in new and is_extension(v, new[k]) for k, v in old.items())
    return old == new


def _is_subsequence(old: str, new: str) -> bool:
    if new.startswith(old):
        return True
    it = iter(new)
    return all(ch in it for ch in old)


def read_only_changed(schema: dict[str, Any], old: Any, new: Any) -> str | None:
    """Name of a read-only field or section whose content differs, if any."""
    if schema["kind"] == "map":
        for field in schema["fields"]:
            if field["read_only"] and old.get(field["name"]) != new.get(field["name"]):
                return f"field {field['name']!r}"
    if schema["kind"] == "composite":
        for sec in schema["sections"]:
            name = sec["name"]
            if sec["read_only"] and old.get(name) != new.get(name):
                return f"section {name!r}"
            found = read_only_changed(sec["schema"], old.get(name), new.get(name))
            if found:
                return f"{found} of section {name!r}"
    return None


DiffKind = Literal["text", "fields"]


def diff_values(schema: dict[str, Any], old: Any, new: Any) -> dict[str, Any]:
    """A text diff for text blocks, a field-level diff for structured ones."""
    if schema["kind"] == "text":
        lines = difflib.unified_diff(
            old.splitlines(), new.splitlines(), "before", "after", lineterm=""
        )
        return {"kind": "text", "unified": "\n".join(lines)}
    if schema["kind"] == "map":
        keys = [f["name"] for f in schema["fields"]]
    elif schema["kind"] == "composite":
        keys = [s["name"] for s in schema["sections"]]
    else:
        old_r, new_r = render_value(schema, old), render_value(schema, new)
        lines = difflib.unified_diff(
            old_r.splitlines(), new_r.splitlines(), "before", "after", lineterm=""
        )
        return {"kind": "text", "unified": "\n".join(lines)}
    changes = [
        {"field": k, "before": old.get(k), "after": new.get(k)}
        for k in keys
        if old.get(k) != new.get(k)
    ]
    return {"kind": "fields", "changes": changes}


# --- Loro plumbing ------------------------------------------------------------


def document_load(snapshot: bytes, updates: list[bytes]) -> LoroDoc:
    doc = LoroDoc()
    with loro_guard("stored block document is unreadable"):
        if snapshot:
            doc.import_(snapshot)
        if updates:
            doc.import_batch(updates)
    return doc


def updates_since(doc: LoroDoc, vv: VersionVector) -> bytes:
    return doc.export(ExportMode.Updates(vv))


def snapshot(doc: LoroDoc) -> bytes:
    return doc.export(ExportMode.Snapshot())


_NO_VERSION = Frontiers().encode()


def shallow_snapshot(doc: LoroDoc, since: Frontiers) -> bytes:
    """The document with its history before ``since`` folded away (a Loro
    shallow snapshot): the state there, and every change after it.  Before
    the empty version (an empty block's creation) there is nothing to fold:
    the whole snapshot, as Loro's shallow one from there says it is not
    shallow yet refuses ``fork_at``."""
    if since.encode() == _NO_VERSION:
        return snapshot(doc)
    return doc.export(ExportMode.ShallowSnapshot(since))


def state_size(doc: LoroDoc) -> int:
    """Bytes of the document's current state alone (a shallow snapshot at
    its newest version): what it holds, however long its history."""
    return len(shallow_snapshot(doc, doc.oplog_frontiers))


def document_at(doc: LoroDoc, frontiers: Frontiers) -> LoroDoc:
    """A read-only copy of ``doc`` as it was at ``frontiers``.  Loro forks a
    shallow document only whole, so that one is forked and checked out."""
    if not doc.is_shallow():
        return doc.fork_at(frontiers)
    past = doc.fork()
    past.checkout(frontiers)
    return past


def frontiers_decode(data: bytes) -> Frontiers:
    with loro_guard("not a valid version"):
        return Frontiers.decode(data)


def commit_message(*, actor_ref: str, summary: str) -> str:
    return json.dumps({"actor": actor_ref, "summary": summary})


def change_messages(doc: LoroDoc) -> list[dict[str, Any]]:
    """Attribution carried in the document itself: each change's commit
    message (``{"actor", "summary"}``; ``{}`` when a peer set none)."""
    spans = doc.oplog_vv.to_spans().inner()
    heads = [ID(peer, end - 1) for peer, (start, end) in spans.items() if end > start]
    found: list[dict[str, Any]] = []

    def visit(change: Any) -> bool:
        try:
            found.append(json.loads(change.message or "{}"))
        except ValueError:
            found.append({"summary": change.message})
        return False  # False walks on to the change's ancestors

    with loro_guard("cannot read the document's history"):
        doc.travel_change_ancestors(heads, visit)
    return found


def id_spans_between(doc: LoroDoc, before: Frontiers, after: Frontiers) -> Any:
    """The ids of the operations after ``before`` up to ``after`` (a later
    version of the same history), as a ``VersionRange``.  Loro's
    ``find_id_spans_between`` panics on a shallow document, so there the
    difference of the two versions' vectors is taken (the same spans, for
    a version and a later one)."""
    if not doc.is_shallow():
        return doc.find_id_spans_between(before, after).forward
    start, end = doc.frontiers_to_vv(before), doc.frontiers_to_vv(after)
    if start is None or end is None or not history_reaches(doc, before):
        raise InvalidInput("the history before this version was folded")
    return end.sub_vec(start)


def history_reaches(doc: LoroDoc, frontiers: Frontiers) -> bool:
    """Whether ``doc`` holds the history from ``frontiers`` on: always for a
    full document; for a shallow one, from its start on.  Loro panics (and
    leaves the document unusable) walking a shallow document's history from
    before its start, so every such walk asks first."""
    if not doc.is_shallow():
        return True
    vv = doc.frontiers_to_vv(frontiers)
    start = doc.frontiers_to_vv(doc.shallow_since_frontiers)
    return vv is not None and start is not None and vv.includes_vv(start)


def text_change_spans(
    doc: LoroDoc, before: Frontiers, after: Frontiers
) -> list[dict[str, Any]]:
    """The text edits of the changes from ``before`` to ``after``, read from
    their operations (no checkout of either version, so its cost does not
    grow with the history): ``{"op": "insert" | "delete", "at", "text"}``
    in the order they were made, ``at`` a position in the text as its
    author saw it; a deleted text is read from the operations that had
    inserted it.  A deletion of text whose insertion history retention
    folded says so (``"folded": True``, its ``length``, ``text`` the part
    still held) rather than showing an empty or partial deletion."""
    if not history_reaches(doc, before):
        raise InvalidInput("the history before this change was folded")
    spans = id_spans_between(doc, before, after)
    changes: list[dict[str, Any]] = []
    for peer, (start, end) in spans.inner().items():
        if end > start:
            changes += json.loads(
                doc.export_json_in_id_span(IdSpan(peer, CounterSpan(start, end)))
            )
    changes.sort(key=lambda change: change["lamport"])
    out: list[dict[str, Any]] = []
    for change in changes:
        for op in change["ops"]:
            content = op["content"]
            if content.get("type") == "insert" and "text" in content:
                out.append(
                    {"op": "insert", "at": content["pos"], "text": content["text"]}
                )
            elif content.get("type") == "delete" and "start_id" in content:
                text, held = _deleted_text(doc, content["start_id"], content["len"])
                span = {"op": "delete", "at": content["pos"], "text": text}
                if not held:
                    span.update(folded=True, length=abs(content["len"]))
                out.append(span)
    return out


def _deleted_text(doc: LoroDoc, start_id: str, length: int) -> tuple[str, bool]:
    """The characters with ids ``start_id`` on (``length`` of them; a
    negative length counts backwards), from the operations that inserted
    them, and whether all of them were found (not when history retention
    folded those operations into the shallow snapshot)."""
    counter, peer = (int(part) for part in start_id.split("@"))
    low = counter if length > 0 else counter + length + 1
    count = abs(length)
    chars: dict[int, str] = {}
    found = json.loads(
        doc.export_json_in_id_span(IdSpan(peer, CounterSpan(low, low + count)))
    )
    for change in found:
        for op in change["ops"]:
            content = op["content"]
            if content.get("type") == "insert" and "text" in content:
                for offset, char in enumerate(content["text"]):
                    if low <= op["counter"] + offset < low + count:
                        chars[op["counter"] + offset] = char
    return "".join(chars[key] for key in sorted(chars)), len(chars) == count
