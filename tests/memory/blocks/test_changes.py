"""Changes since an agent last looked: memory.blocks.changes (the read),
memory.blocks.seen (the looks), the tool and its endpoint."""

import pytest

from memory.blocks import diffs, doc_cache, selectors
from memory.blocks.changes import block_changes_for_agent
from memory.blocks.models import BlockSeen
from memory.blocks.schemas import ChangesIn
from memory.blocks.selectors import block_value
from memory.blocks.services import (
    block_append,
    block_operate,
    block_replace,
    block_share,
)
from memory.blocks.tools import block_changes_tool, block_detail_by_label
from memory.context import context_build
from pattern_site.kernel.actors import Actor
from tests.memory.blocks.test_blame import _human_edit

SYSTEM = Actor(kind="system")


@pytest.fixture
def shared(agent, other_agent, make_block):
    block = make_block(
        "plan", template="custom", schema={"kind": "text"}, content="start"
    )
    block_share(actor=SYSTEM, block=block, agent=other_agent, access="read_write")
    return block


def _take(agent, peek=False):
    return block_changes_tool(actor=Actor.for_agent(agent), args=ChangesIn(peek=peek))


def _who(answer):
    return [
        (b["label"], c.actor_kind, c.actor_id, c.summary)
        for b in answer["blocks"]
        for c in b["changes"]
    ]


def test_each_agent_sees_exactly_the_others_changes_once(
    shared, agent, other_agent, partner
):
    _take(agent), _take(other_agent)
    a, b = Actor.for_agent(agent), Actor.for_agent(other_agent)
    block_append(actor=a, block=shared, content="from A")
    send = _human_edit(shared, partner, lambda t: t.insert(0, "H: "))
    block_replace(actor=b, block=shared, old="start", new="begin")
    send()

    seen_by_a = _take(agent)
    seen_by_b = _take(other_agent)

    assert _who(seen_by_a) == [
        ("plan", "agent", str(other_agent.pk), "replace 'start' with 'begin'"),
        ("plan", "human", str(partner.pk), f"live edit by {partner.get_username()}"),
    ]
    assert _who(seen_by_b) == [
        ("plan", "agent", str(agent.pk), "append: from A"),
        ("plan", "human", str(partner.pk), f"live edit by {partner.get_username()}"),
    ]
    replace, human = seen_by_a["blocks"][0]["changes"]
    assert replace.diff == {
        "kind": "text",
        "spans": [
            {"op": "delete", "at": 0, "text": "start"},
            {"op": "insert", "at": 0, "text": "begin"},
        ],
    }
    # Positions are where each author made the edit: the human typed at
    # the start of the text as it was before Flux's replace.
    assert human.diff["spans"] == [{"op": "insert", "at": 0, "text": "H: "}]
    assert block_value(block=shared) == "beginH: \nfrom A"
    assert _take(agent)["blocks"] == [] and _take(other_agent)["blocks"] == []


def test_peek_does_not_move_the_look(shared, agent, other_agent):
    _take(agent)
    block_append(actor=Actor.for_agent(other_agent), block=shared, content="news")

    first = _take(agent, peek=True)
    second = _take(agent, peek=True)

    assert first["advanced"] is False
    assert (
        _who(first)
        == _who(second)
        == [("plan", "agent", str(other_agent.pk), "append: news")]
    )
    assert _who(_take(agent)) == _who(first)
    assert _take(agent)["blocks"] == []


def test_a_block_never_looked_at_reports_its_newest_changes(shared, agent, other_agent):
    for n in range(5):
        block_append(actor=Actor.for_agent(other_agent), block=shared, content=f"{n}")

    found = block_changes_for_agent(agent=agent, limit=3)

    assert [len(b.changes) for b in found] == [3]
    assert found[0].earlier == 3  # the creation and two appends
    assert [c.summary for c in found[0].changes] == [
        "append: 2",
        "append: 3",
        "append: 4",
    ]


def test_reading_a_block_or_building_context_marks_it_seen(
    shared, agent, other_agent, django_capture_on_commit_callbacks
):
    block_append(actor=Actor.for_agent(other_agent), block=shared, content="one")
    with django_capture_on_commit_callbacks(execute=True):
        block_detail_by_label(actor=Actor.for_agent(agent), label="plan")
    assert _take(agent, peek=True)["blocks"] == []

    block_append(actor=Actor.for_agent(other_agent), block=shared, content="two")
    shared.refresh_from_db()
    shared.pinned = True
    shared.save(update_fields=["pinned"])
    assert len(_take(agent, peek=True)["blocks"]) == 1
    with django_capture_on_commit_callbacks(execute=True):
        context_build(agent=agent)
    assert _take(agent, peek=True)["blocks"] == []
    assert BlockSeen.objects.filter(agent=agent, block=shared).count() == 1


def test_structured_blocks_report_changes_by_field(agent, other_agent, make_block):
    block = make_block("me", template="persona")
    block_share(actor=SYSTEM, block=block, agent=other_agent, access="read_write")
    _take(agent)
    block_operate(
        actor=Actor.for_agent(other_agent),
        block=block,
        operations=[
            {"op": "set_field", "field": "name", "value": "Ada"},
            {"op": "append_to_list_field", "field": "traits", "value": "curious"},
        ],
    )

    [change] = _take(agent)["blocks"][0]["changes"]

    assert change.diff == {
        "kind": "fields",
        "fields": [
            {"field": "name", "spans": [{"op": "insert", "at": 0, "text": "Ada"}]},
            {
                "field": "traits",
                "kind": "items",
                "added": ["curious"],
                "removed": [],
            },
        ],
    }


def test_text_spans_of_a_small_edit_in_a_long_text_name_only_the_edit():
    old = "x" * 1000 + "middle" + "y" * 1000
    new = "x" * 1000 + "centre" + "y" * 1000
    assert diffs.text_spans(old, new) == [
        {"op": "delete", "at": 1000, "text": "middl"},
        {"op": "insert", "at": 1000, "text": "centr"},
    ]


def test_changes_endpoint_lists_only_readable_blocks_and_peeks(
    agent_client, agent, other_agent, make_block
):
    mine = make_block("notes", template="custom", schema={"kind": "text"})
    hidden = make_block(
        "private", owner=other_agent, template="custom", schema={"kind": "text"}
    )
    block_append(actor=Actor.for_agent(other_agent), block=hidden, content="secret")
    block_append(actor=SYSTEM, block=mine, content="hello")

    other = agent_client.get("/api/blocks/changes?peek=true&labels=other").json()
    peeked = agent_client.get("/api/blocks/changes?peek=true").json()
    taken = agent_client.get("/api/blocks/changes").json()
    again = agent_client.get("/api/blocks/changes").json()

    assert other["blocks"] == []
    assert [b["label"] for b in peeked["blocks"]] == ["notes"]
    assert peeked["advanced"] is False
    assert peeked["blocks"] == taken["blocks"]
    created, change = taken["blocks"][0]["changes"]
    # The block's creation (empty: nothing inserted), then the append.
    assert (created["summary"], created["diff"]["spans"]) == ("created", [])
    assert change["actor_kind"] == "system"
    assert change["diff"]["spans"] == [{"op": "insert", "at": 0, "text": "hello"}]
    assert again["blocks"] == []


def test_changes_are_for_agents(partner_client):
    assert partner_client.get("/api/blocks/changes").status_code in (403, 404)


def _post(client, url, body):
    return client.post(url, body, content_type="application/json")


def test_context_tool_changes_operation_answers_as_memory_changes(
    agent_client, shared, agent, other_agent, make_block
):
    _take(agent)
    block_append(actor=Actor.for_agent(other_agent), block=shared, content="news")
    elsewhere = make_block("elsewhere", template="custom", schema={"kind": "text"})
    block_append(actor=SYSTEM, block=elsewhere, content="aside")

    peeked = _post(
        agent_client, "/api/tools/context", {"operation": "changes", "peek": True}
    )
    same = _post(agent_client, "/api/tools/memory_changes", {"peek": True})
    one = _post(
        agent_client,
        "/api/tools/context",
        {"operation": "changes", "label": "plan", "peek": True},
    )
    taken = _post(
        agent_client, "/api/tools/context", {"operation": "changes", "labels": ["plan"]}
    )

    assert peeked.status_code == 200, peeked.content
    assert peeked.json() == same.json()
    assert [b["label"] for b in peeked.json()["blocks"]] == ["elsewhere", "plan"]
    assert [b["label"] for b in one.json()["blocks"]] == ["plan"]
    assert taken.json()["advanced"] is True
    assert taken.json()["blocks"] == one.json()["blocks"]
    assert [c["summary"] for c in taken.json()["blocks"][0]["changes"]] == [
        "append: news"
    ]
    left = _post(agent_client, "/api/tools/memory_changes", {}).json()["blocks"]
    assert [b["label"] for b in left] == ["elsewhere"]


def test_context_tool_block_operations_still_need_a_label(agent_client, make_block):
    make_block("plan", template="custom", schema={"kind": "text"})

    response = _post(
        agent_client, "/api/tools/context", {"operation": "append", "content": "x"}
    )

    assert response.status_code == 422
    assert response.json()["detail"] == "append needs 'label', the block to act on"
    applied = _post(
        agent_client,
        "/api/tools/context",
        {"operation": "append", "label": "plan", "content": "x"},
    )
    assert applied.json()["status"] == "applied"


def test_context_tool_documents_both_answers(client, db):
    openapi = client.get("/api/openapi.json").json()
    ok = openapi["paths"]["/api/tools/context"]["post"]["responses"]["200"]
    ref = ok["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    shapes = openapi["components"]["schemas"][ref]["anyOf"]

    assert {s["$ref"].rsplit("/", 1)[1] for s in shapes} == {"ChangeOut", "ChangesOut"}
    request = openapi["components"]["schemas"]["ContextToolIn"]["properties"]
    assert "changes" in request["operation"]["enum"]
    assert {"labels", "peek"} <= set(request)


@pytest.mark.django_db(transaction=True)
def test_changes_read_the_cached_document_without_copying_it(
    agent, other_agent, make_block, monkeypatch
):
    block = make_block("plan", template="custom", schema={"kind": "text"})
    block_share(actor=SYSTEM, block=block, agent=other_agent, access="read_write")
    _take(agent)
    block_append(actor=Actor.for_agent(other_agent), block=block, content="one")
    block_replace(actor=Actor.for_agent(other_agent), block=block, old="one", new="1")
    cached = doc_cache.history(block.pk)
    assert cached is not None, "the last write cached its document"

    def no_load(*args, **kwargs):
        raise AssertionError("the document was loaded or copied")

    monkeypatch.setattr(selectors, "block_document_load", no_load)
    monkeypatch.setattr(doc_cache, "fork", no_load)
    [found] = block_changes_for_agent(agent=agent)

    assert [c.diff["spans"] for c in found.changes] == [
        [{"op": "insert", "at": 0, "text": "one"}],
        [
            {"op": "delete", "at": 0, "text": "one"},
            {"op": "insert", "at": 0, "text": "1"},
        ],
    ]
    assert doc_cache.history(block.pk) is cached
