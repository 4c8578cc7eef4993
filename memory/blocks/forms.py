"""The edit form of a structured block: from its schema and value to the
widgets of memory/_structured_form.html, and from the posted form back to a
value for ``block_set_content``.

Input names are ``<section>/<field>`` paths (the section part only in
composite blocks): a map field is ``f:<path>``, a text section ``t:<section>``,
list items ``i:<path>`` with their keys in order (``<name>#<key>`` holds an
item's text, ``<name>#<key>.done`` its checkbox, ``<name>#<key>.orig`` the
item as it was, so that keys the form does not show survive an edit).  A
checkbox field says it was posted with ``b:<path>``, a list with ``l:<path>``
(an unchecked box and an emptied list post nothing else).

Only what was posted changes: the page's script leaves unchanged fields out
of the post, so a field someone else changed meanwhile keeps their value.
Read-only fields and sections, and logs, are shown but never posted; the
value returned holds only what the form changes, and ``block_set_content``
leaves everything else as it is.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import QueryDict

from memory.blocks import documents
from pattern_site.kernel.errors import InvalidInput

TEXT_ITEM_KEYS = ("text", "task", "title")


def _item_widget(item: Any, key: str) -> dict[str, Any]:
    text_key = next(
        (k for k in TEXT_ITEM_KEYS if isinstance(item, dict) and k in item), None
    )
    return {
        "key": key,
        "text": documents.render_scalar(item[text_key] if text_key else item),
        "done": bool(isinstance(item, dict) and item.get("done")),
        "orig": json.dumps(item, ensure_ascii=False),
    }


def _list_widget(items: list[Any]) -> list[dict[str, Any]]:
    return [_item_widget(item, str(n)) for n, item in enumerate(items)]


def form_widgets(
    schema: dict[str, Any],
    value: Any,
    section: str = "",
    read_only: bool = False,
    posted: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """What the template draws for ``schema`` holding ``value``; ``posted``
    (a refused post's input) puts back what was typed in scalar fields and
    text sections."""
    posted = posted or {}
    kind = schema["kind"]
    path = f"{section}/" if section else ""
    widget: dict[str, Any] = {"kind": kind, "read_only": read_only, "path": section}
    if kind == "text":
        widget["value"] = posted.get(f"t:{section}", [value])[0]
    elif kind == "map":
        widget["fields"] = [
            {
                "name": f["name"],
                "path": path + f["name"],
                "type": f["type"],
                "description": f["description"],
                "read_only": read_only or f["read_only"],
                "value": _posted_field(posted, f, path + f["name"], value),
                "items": (
                    _list_widget(value.get(f["name"]) or [])
                    if f["type"] == "list"
                    else None
                ),
            }
            for f in schema["fields"]
        ]
    elif kind == "list":
        widget["items"] = _list_widget(value)
        widget["checkbox"] = schema["style"] == "checkbox"
        widget["max_items"] = schema["max_items"]
    elif kind == "log":
        widget["entries"] = [
            documents.log_entry_render(entry) for entry in reversed(value)
        ]
    else:
        widget["sections"] = [
            {
                "name": s["name"],
                "widget": form_widgets(
                    s["schema"], value[s["name"]], s["name"], s["read_only"], posted
                ),
            }
            for s in schema["sections"]
        ]
    return widget


def _posted_field(
    posted: dict[str, list[str]], field: dict[str, Any], path: str, value: Any
) -> Any:
    if not posted or field["read_only"] or field["type"] == "list":
        return value.get(field["name"])
    if field["type"] == "boolean":
        return f"f:{path}" in posted
    return posted.get(f"f:{path}", [""])[0]


def _items_from_form(post: QueryDict, name: str, *, checkbox: bool) -> list[Any]:
    """The list posted under ``name``: items in the order of their keys,
    empty ones dropped."""
    items: list[Any] = []
    for key in post.getlist(name):
        text = post.get(f"{name}#{key}", "").strip()
        if not text:
            continue
        try:
            orig = json.loads(post.get(f"{name}#{key}.orig") or "null")
        except json.JSONDecodeError:
            orig = None
        if isinstance(orig, dict):
            text_key = next((k for k in TEXT_ITEM_KEYS if k in orig), "text")
            item: Any = {**orig, text_key: text}
        elif checkbox:
            item = {"text": text}
        else:
            item = text
        if checkbox:
            item["done"] = bool(post.get(f"{name}#{key}.done"))
        items.append(item)
    return items


def _number(raw: str, name: str, path: str, *, whole: bool) -> int | float:
    try:
        number = float(raw or 0)
    except ValueError:
        raise InvalidInput(
            f"{name} must be a number; got {raw!r}", extra={"field": path}
        ) from None
    if whole or number.is_integer():
        if whole and not number.is_integer():
            raise InvalidInput(
                f"{name} is a counter: a whole number; got {raw!r}",
                extra={"field": path},
            )
        return int(number)
    return number


# A field the form left out (unchanged): the block keeps its value.
NOT_POSTED = object()


def _field_from_form(post: QueryDict, field: dict[str, Any], path: str) -> Any:
    """The posted value of a map field; ``NOT_POSTED`` when left out."""
    name, ftype = f"f:{path}", field["type"]
    if ftype == "boolean":
        return bool(post.get(name)) if f"b:{path}" in post else NOT_POSTED
    if ftype == "list":
        if f"l:{path}" not in post:
            return NOT_POSTED
        return _items_from_form(post, f"i:{path}", checkbox=False)
    if name not in post:
        return NOT_POSTED
    raw = post[name]
    if ftype in ("number", "counter"):
        return _number(raw.strip(), field["name"], path, whole=ftype == "counter")
    return raw.replace("\r\n", "\n")


def form_value(
    schema: dict[str, Any], post: QueryDict, section: str = ""
) -> dict[str, Any] | list[Any] | str | None:
    """The posted value of ``schema``: only the parts the form posted and
    may change; None when it posted nothing for this part (left unchanged,
    read-only, or a log)."""
    kind = schema["kind"]
    path = f"{section}/" if section else ""
    if kind == "text":
        name = f"t:{section}"
        return post[name].replace("\r\n", "\n") if name in post else None
    if kind == "map":
        fields = {
            f["name"]: _field_from_form(post, f, path + f["name"])
            for f in schema["fields"]
            if not f["read_only"]
        }
        posted = {k: v for k, v in fields.items() if v is not NOT_POSTED}
        return posted or None
    if kind == "list":
        if f"l:{section}" not in post:
            return None
        return _items_from_form(
            post, f"i:{section}", checkbox=schema["style"] == "checkbox"
        )
    if kind == "log":
        return None
    value: dict[str, Any] = {}
    for s in schema["sections"]:
        if s["read_only"]:
            continue
        part = form_value(s["schema"], post, s["name"])
        if part is not None:
            value[s["name"]] = part
    return value or None
