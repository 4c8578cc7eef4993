"""Schemas: each one's operations and its exact rendering for the LLM."""

import pytest
from loro import LoroDoc

from memory.blocks import documents
from memory.blocks.documents import operation_apply, render, schema_validate
from pattern_site.kernel.errors import InvalidInput, PermissionDenied


def apply(schema, *ops, agent=True):
    doc = LoroDoc()
    for op in ops:
        operation_apply(doc, schema, op, enforce_read_only=agent)
        doc.commit()
    return doc


TEXT = schema_validate({"kind": "text"})
MAP = schema_validate(
    {
        "kind": "map",
        "fields": [
            {"name": "mood", "type": "text"},
            {"name": "energy", "type": "number"},
            {"name": "focused", "type": "boolean"},
            {"name": "tags", "type": "list"},
            {"name": "wins", "type": "counter"},
            {"name": "status", "type": "text", "read_only": True},
        ],
    }
)
LIST = schema_validate({"kind": "list", "max_items": 3})
CHECKS = schema_validate({"kind": "list", "style": "checkbox"})
LOG = schema_validate({"kind": "log", "display_limit": 2, "max_entries": 3})
COMPOSITE = schema_validate(
    {
        "kind": "composite",
        "sections": [
            {"name": "notes", "schema": {"kind": "text"}},
            {"name": "stats", "schema": MAP},
            {"name": "diagnostics", "schema": {"kind": "text"}, "read_only": True},
        ],
    }
)


def test_text_set_append_replace():
    doc = apply(
        TEXT,
        {"op": "set_text", "text": "Hello, world!"},
        {"op": "append_text", "text": " More text."},
        {"op": "replace_text", "old": "Hello", "new": "Hi"},
    )
    assert render(doc, TEXT) == "Hi, world! More text."


def test_text_replace_of_missing_text_fails_and_changes_nothing():
    doc = apply(TEXT, {"op": "set_text", "text": "Hello"})
    with pytest.raises(InvalidInput, match="not found"):
        operation_apply(
            doc,
            TEXT,
            {"op": "replace_text", "old": "Bye", "new": "x"},
            enforce_read_only=True,
        )
    assert render(doc, TEXT) == "Hello"


def test_map_fields_render_as_name_value_with_read_only_marker():
    doc = apply(
        MAP,
        {"op": "set_field", "field": "mood", "value": "calm"},
        {"op": "set_field", "field": "energy", "value": 7},
        {"op": "set_field", "field": "focused", "value": True},
        {"op": "append_to_list_field", "field": "tags", "value": "important"},
        {"op": "append_to_list_field", "field": "tags", "value": "urgent"},
        {"op": "increment_counter", "field": "wins", "delta": 5},
        {"op": "increment_counter", "field": "wins"},
        {"op": "set_field", "field": "status", "value": "active"},
        agent=False,
    )
    assert render(doc, MAP) == (
        "mood: calm\nenergy: 7\nfocused: true\ntags: important, urgent\n"
        "wins: 6\nstatus [read-only]: active"
    )


def test_map_rejects_wrong_types_unknown_fields_and_agent_read_only_writes():
    doc = LoroDoc()
    with pytest.raises(InvalidInput, match="is a number"):
        operation_apply(
            doc,
            MAP,
            {"op": "set_field", "field": "energy", "value": "high"},
            enforce_read_only=True,
        )
    with pytest.raises(InvalidInput, match="no field 'sleep'"):
        operation_apply(
            doc,
            MAP,
            {"op": "set_field", "field": "sleep", "value": 1},
            enforce_read_only=True,
        )
    with pytest.raises(PermissionDenied, match="read-only"):
        operation_apply(
            doc,
            MAP,
            {"op": "set_field", "field": "status", "value": "x"},
            enforce_read_only=True,
        )
    with pytest.raises(InvalidInput, match="not a counter"):
        operation_apply(
            doc,
            MAP,
            {"op": "increment_counter", "field": "mood"},
            enforce_read_only=True,
        )


def test_list_push_insert_delete_numbered_and_max_items():
    doc = apply(
        LIST,
        {"op": "push_item", "value": {"task": "Review PR"}},
        {"op": "insert_item", "index": 0, "item": {"task": "Urgent"}},
        {"op": "push_item", "value": "Call mum"},
        {"op": "delete_item", "index": 1},
    )
    assert render(doc, LIST) == "1. Urgent\n2. Call mum"
    operation_apply(
        doc, LIST, {"op": "push_item", "value": "c"}, enforce_read_only=True
    )
    with pytest.raises(InvalidInput, match="full"):
        operation_apply(
            doc, LIST, {"op": "push_item", "value": "d"}, enforce_read_only=True
        )
    with pytest.raises(InvalidInput, match="no item 9"):
        operation_apply(
            doc, LIST, {"op": "delete_item", "index": 9}, enforce_read_only=True
        )


def test_checkbox_list_renders_done_state():
    doc = apply(
        CHECKS,
        {"op": "push_item", "value": {"text": "Dishes", "done": True}},
        {"op": "push_item", "value": {"text": "Laundry", "done": False}},
    )
    assert render(doc, CHECKS) == "- [x] Dishes\n- [ ] Laundry"


def test_check_item_ticks_and_unticks_an_item_of_a_checkbox_list():
    doc = apply(
        CHECKS,
        {"op": "push_item", "value": "Dishes"},
        {"op": "push_item", "value": {"text": "Laundry", "done": False}},
        {"op": "check_item", "index": 1},
        {"op": "check_item", "index": 0},
        {"op": "check_item", "index": 0, "done": False},
    )
    assert render(doc, CHECKS) == "- [ ] Dishes\n- [x] Laundry"
    with pytest.raises(InvalidInput, match="no item 5"):
        operation_apply(
            doc, CHECKS, {"op": "check_item", "index": 5}, enforce_read_only=True
        )


def test_check_item_refuses_a_numbered_list():
    doc = apply(LIST, {"op": "push_item", "value": "a"})
    with pytest.raises(InvalidInput, match="checkbox list; this list is numbered"):
        operation_apply(
            doc, LIST, {"op": "check_item", "index": 0}, enforce_read_only=True
        )


def test_log_renders_newest_first_within_display_limit_and_prunes():
    entries = [
        {"timestamp": f"2025-01-0{n}T00:00:00Z", "agent": "Flux", "message": f"m{n}"}
        for n in range(1, 5)
    ]
    doc = apply(LOG, *({"op": "append_log_entry", "entry": e} for e in entries))
    assert render(doc, LOG) == (
        "[2025-01-04T00:00:00Z] Flux: m4\n[2025-01-03T00:00:00Z] Flux: m3"
    )
    pruned = documents.log_prune(doc, LOG)
    assert pruned == [entries[0]]
    assert [e["message"] for e in documents.document_value(doc, LOG)] == [
        "m2",
        "m3",
        "m4",
    ]


def test_composite_sections_render_with_headers_and_read_only_marker():
    doc = apply(
        COMPOSITE,
        {"op": "set_text", "section": "notes", "text": "notes here"},
        {"op": "set_field", "section": "stats", "field": "energy", "value": 42},
        {"op": "set_text", "section": "diagnostics", "text": "ok"},
        agent=False,
    )
    assert render(doc, COMPOSITE) == (
        "=== notes ===\nnotes here\n\n"
        "=== stats ===\nmood:\nenergy: 42\nfocused: false\ntags:\nwins: 0\n"
        "status [read-only]:\n\n"
        "=== diagnostics [read-only] ===\nok"
    )
    with pytest.raises(PermissionDenied, match="section 'diagnostics'"):
        operation_apply(
            doc,
            COMPOSITE,
            {"op": "set_text", "section": "diagnostics", "text": "x"},
            enforce_read_only=True,
        )
    with pytest.raises(InvalidInput, match="needs a 'section'"):
        operation_apply(
            doc, COMPOSITE, {"op": "set_text", "text": "x"}, enforce_read_only=True
        )


def test_operation_of_another_schema_is_refused_with_the_allowed_ones():
    with pytest.raises(InvalidInput, match="allowed: push_item"):
        operation_apply(
            LoroDoc(), LIST, {"op": "append_text", "text": "x"}, enforce_read_only=True
        )


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"kind": "tree"},
        {"kind": "map", "fields": []},
        {"kind": "map", "fields": [{"name": "a", "type": "date"}]},
        {"kind": "list", "max_items": 0},
        {"kind": "composite", "sections": [{"name": "a", "schema": {"kind": "x"}}]},
        {
            "kind": "composite",
            "sections": [
                {"name": "a", "schema": {"kind": "composite", "sections": []}}
            ],
        },
    ],
)
def test_invalid_schemas_are_refused(bad):
    with pytest.raises(InvalidInput):
        schema_validate(bad)


@pytest.mark.parametrize("name", ["persona", "human", "scratchpad", "organization"])
def test_templates_give_a_valid_schema_and_description(name):
    template = documents.template_get(name)
    assert schema_validate(template.schema) == schema_validate(template.schema)
    assert template.description


def test_set_value_validates_content_against_the_schema():
    with pytest.raises(InvalidInput, match="unknown names"):
        documents.document_set_value(LoroDoc(), MAP, {"height": 3})
    with pytest.raises(InvalidInput, match="must be str"):
        documents.document_set_value(LoroDoc(), TEXT, ["a"])


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("abc", "abcd", True),
        ("abc", "xabc", True),
        ("abc", "ab", False),
        ("abc", "abX", False),
        (["a", "b"], ["a", "x", "b"], True),
        (["a", "b"], ["b"], False),
        ({"k": "v"}, {"k": "v2", "n": 1}, True),
        ({"k": "v"}, {"k": "w"}, False),
        ({"n": 1}, {"n": 2}, False),
    ],
)
def test_is_extension_allows_additions_only(old, new, expected):
    assert documents.is_extension(old, new) is expected


def test_operation_apply_refuses_unknown_arguments_instead_of_storing_none():
    schema = schema_validate(documents.TEMPLATES["human"].schema)
    doc = LoroDoc()
    with pytest.raises(InvalidInput, match=r"append_to_list_field\(field, value\)"):
        operation_apply(
            doc,
            schema,
            {"op": "append_to_list_field", "field": "preferences", "item": "tea"},
            enforce_read_only=False,
        )
    assert doc.get_map("fields").get_deep_value() == {}


MAP_SCHEMA = {"kind": "map", "fields": [{"name": "name"}, {"name": "notes"}]}


def test_map_text_refuses_a_field_name_the_schema_lacks():
    schema = documents.schema_validate(MAP_SCHEMA)
    with pytest.raises(InvalidInput, match=r"'favourite' is not a field.*name, notes"):
        documents.value_from_text(schema, "name: Sam\nfavourite: green")


def test_map_text_continuation_lines_stay_with_their_field():
    schema = documents.schema_validate(MAP_SCHEMA)
    text = "name: Sam\nnotes: first line\nsee https://example.org/a\n- a dash item"
    assert documents.value_from_text(schema, text) == {
        "name": "Sam",
        "notes": "first line\nsee https://example.org/a\n- a dash item",
    }


def test_a_map_field_with_an_unknown_key_is_refused():
    schema = {"kind": "map", "fields": [{"name": "mood", "typ": "number"}]}
    with pytest.raises(InvalidInput, match="unknown key 'typ'"):
        documents.schema_validate(schema)
