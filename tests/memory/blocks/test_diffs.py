"""Differences between block values, shaped for reading."""

from memory.blocks.diffs import lines_diff, value_diff


def rows(old: str, new: str) -> list[tuple]:
    return [
        (r.kind, r.old_number, r.old, r.new_number, r.new) for r in lines_diff(old, new)
    ]


def test_lines_pair_up_as_same_changed_removed_and_added():
    assert rows("a\nb\nc", "a\nB\nc\nd") == [
        ("same", 1, "a", 1, "a"),
        ("changed", 2, "b", 2, "B"),
        ("same", 3, "c", 3, "c"),
        ("added", None, None, 4, "d"),
    ]
    assert rows("a\nb", "a") == [
        ("same", 1, "a", 1, "a"),
        ("removed", 2, "b", None, None),
    ]


def test_map_fields_compare_one_by_one_with_lists_an_item_per_line():
    schema = {
        "kind": "map",
        "fields": [
            {"name": "name", "type": "text", "read_only": False},
            {"name": "likes", "type": "list", "read_only": False},
            {"name": "on", "type": "boolean", "read_only": False},
        ],
    }
    parts = value_diff(
        schema,
        {"name": "Sam", "likes": ["tea"], "on": False},
        {"name": "Sam", "likes": ["tea", "jazz"], "on": True},
    )
    assert [p.name for p in parts] == ["likes", "on"]  # unchanged fields left out
    assert [(r.kind, r.new) for r in parts[0].rows] == [
        ("same", "tea"),
        ("added", "jazz"),
    ]
    assert [(r.old, r.new) for r in parts[1].rows] == [("false", "true")]


def test_text_blocks_keep_every_line_for_context():
    parts = value_diff({"kind": "text"}, "same", "same")
    assert len(parts) == 1 and not parts[0].changed
