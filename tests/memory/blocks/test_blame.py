"""memory.blocks.blame: who inserted each stretch of a block's text, after
concurrent edits, rollbacks and compaction; and its endpoint."""

import pytest
from django.test import Client
from loro import ExportMode

from memory.blocks.blame import blame_histories_clear, block_blame
from memory.blocks.selectors import block_document_load, block_history, block_value
from memory.blocks.services import (
    block_append,
    block_compact,
    block_create,
    block_operate,
    block_replace,
    block_rollback,
    block_share,
    block_update_import,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import InvalidInput
from tests.factories import UserFactory

SYSTEM = Actor(kind="system")


def _who(blame, part=0):
    """(text, actor_id) per span, with the actor of the span's version."""
    by_number = {v.number: v for v in blame.versions}
    return [
        (span.text, by_number[span.version].actor_id if span.version else None)
        for span in blame.parts[part].spans
    ]


@pytest.fixture
def shared(agent, other_agent, make_block):
    block = make_block("plan", template="custom", schema={"kind": "text"})
    block_share(actor=SYSTEM, block=block, agent=other_agent, access="read_write")
    return block


def _human_edit(block, human, edit):
    """A browser's edit: a Loro peer of its own, on the document as it was
    when ``edit`` forked it, sent as an update."""
    doc = block_document_load(block=block)
    doc.peer_id = 987_654_321
    before = doc.oplog_vv
    edit(doc.get_text("content"))
    doc.commit()

    def send():
        return block_update_import(
            block=block,
            actor=Actor.for_user(human),
            updates=[doc.export(ExportMode.Updates(before))],
        )

    return send


def test_blame_attributes_concurrent_edits_of_two_agents_and_a_human(
    shared, agent, other_agent, partner
):
    a, b = Actor.for_agent(agent), Actor.for_agent(other_agent)
    block_append(actor=a, block=shared, content="alpha")
    # The human's edit is made on the document before Flux's change, and
    # arrives after it: Loro merges the two.
    send = _human_edit(shared, partner, lambda t: t.insert(0, "HUMAN "))
    block_append(actor=b, block=shared, content="beta")
    send()
    block_replace(actor=a, block=shared, old="beta", new="bETa")

    blame = block_blame(block=shared)

    text = "".join(s.text for s in blame.parts[0].spans)
    assert text == "HUMAN alpha\nbETa"
    assert _who(blame) == [
        ("HUMAN ", str(partner.pk)),
        ("alpha", str(agent.pk)),
        ("\n", str(other_agent.pk)),
        # replace_text deletes the old text whole and inserts the new.
        ("bETa", str(agent.pk)),
    ]
    assert [v.actor_kind for v in blame.versions] == [
        "agent",
        "agent",
        "human",
        "agent",
    ]
    numbers = [v.number for v in blame.versions]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert blame.parts[0].spans[1].start == len("HUMAN ")


def test_blame_after_a_rollback_gives_restored_text_to_the_rollback(
    shared, agent, other_agent
):
    a, b = Actor.for_agent(agent), Actor.for_agent(other_agent)
    block_append(actor=a, block=shared, content="keep this")
    version = block_history(block=shared, limit=1)[0].id
    block_replace(actor=b, block=shared, old="this", new="that")
    block_append(actor=b, block=shared, content="later")
    block_rollback(actor=a, block=shared, version_id=version)

    blame = block_blame(block=shared)

    rollback = max(v.number for v in blame.versions)
    spans = [(s.text, s.version) for s in blame.parts[0].spans]
    assert "".join(t for t, _ in spans) == "keep this"
    # Version 1 is the empty block's creation, 2 the append.
    assert spans[0] == ("keep ", 2)
    assert spans[-1][1] == rollback
    assert "this".endswith(spans[-1][0])
    assert all(b_id != str(other_agent.pk) for _, b_id in _who(blame))


def test_blame_survives_compaction_of_the_update_log(
    shared, agent, other_agent, settings
):
    settings.MEMORY_COMPACT_UPDATES = 3
    a, b = Actor.for_agent(agent), Actor.for_agent(other_agent)
    for n in range(4):
        block_append(actor=a if n % 2 == 0 else b, block=shared, content=f"line{n}")
    before = block_blame(block=shared)
    block_compact(block=shared)
    shared.refresh_from_db()

    after = block_blame(block=shared)

    assert _who(after) == _who(before)
    assert [t for t, _ in _who(after)] == ["line0", "\nline1", "\nline2", "\nline3"]
    assert [w for _, w in _who(after)] == [str(agent.pk), str(other_agent.pk)] * 2


def test_blame_after_new_versions_is_the_blame_read_from_scratch(
    shared, agent, other_agent, partner
):
    a, b = Actor.for_agent(agent), Actor.for_agent(other_agent)
    block_append(actor=a, block=shared, content="alpha")
    block_blame(block=shared)  # its history is kept from here
    # A burst of live edits: its one version grows with each update.
    _human_edit(shared, partner, lambda t: t.insert(0, "H1 "))()
    block_blame(block=shared)
    _human_edit(shared, partner, lambda t: t.insert(0, "H2 "))()
    block_append(actor=b, block=shared, content="beta")

    kept = block_blame(block=shared)
    blame_histories_clear()
    fresh = block_blame(block=shared)

    assert kept == fresh
    assert _who(kept) == [
        ("H2 H1 ", str(partner.pk)),
        ("alpha", str(agent.pk)),
        ("\nbeta", str(other_agent.pk)),
    ]
    assert len(kept.versions) == 3


def test_blame_covers_each_text_section_of_a_composite_block(agent, make_block):
    block = make_block("scratch", template="scratchpad")
    block_append(
        actor=Actor.for_agent(agent), block=block, content="plan", section="notes"
    )

    blame = block_blame(block=block)

    assert [p.name for p in blame.parts] == ["current_task", "notes"]
    assert blame.parts[0].spans == []
    assert [s.text for s in blame.parts[1].spans] == ["plan"]


def test_blame_of_a_log_block_is_a_clear_error(make_block):
    block = make_block("events", template="custom", schema={"kind": "log"})
    with pytest.raises(InvalidInput, match="text, map and list blocks"):
        block_blame(block=block)


def _fields(blame):
    """{part name: [(text, actor_id)]} of a structured block's blame."""
    return {part.name: _who(blame, n) for n, part in enumerate(blame.parts)}


def _set(actor, block, field, value):
    block_operate(
        actor=actor,
        block=block,
        operations=[{"op": "set_field", "field": field, "value": value}],
    )


def _human_sets(block, human, field, value):
    """A browser's write of a field: a Loro peer of its own, on the document
    as it is now, sent as an update (``send()``)."""
    doc = block_document_load(block=block)
    doc.peer_id = 987_654_321
    before = doc.oplog_vv
    doc.get_map("fields").insert(field, value)
    doc.commit()
    return lambda: block_update_import(
        block=block,
        actor=Actor.for_user(human),
        updates=[doc.export(ExportMode.Updates(before))],
    )


@pytest.fixture
def card(agent, other_agent, make_block):
    block = make_block("sam", template="human")
    block_share(actor=SYSTEM, block=block, agent=other_agent, access="read_write")
    return block


def test_blame_of_a_map_block_names_who_set_each_field(
    card, agent, other_agent, partner, settings
):
    settings.MEMORY_COMPACT_UPDATES = 3
    a, b = Actor.for_agent(agent), Actor.for_agent(other_agent)
    _set(a, card, "name", "Sam")
    block_operate(
        actor=b,
        block=card,
        operations=[
            {"op": "append_to_list_field", "field": "preferences", "value": "tea"}
        ],
    )
    _human_sets(card, partner, "context", "Works from home")()
    for n in range(5):  # many later writes, none to name or context
        block_operate(
            actor=a if n % 2 else b,
            block=card,
            operations=[
                {"op": "append_to_list_field", "field": "preferences", "value": f"p{n}"}
            ],
        )
    block_compact(block=card)

    blame = block_blame(block=card)

    assert [p.name for p in blame.parts] == ["name", "preferences", "context"]
    assert [p.kind for p in blame.parts] == ["field", "field", "field"]
    assert _fields(blame) == {
        "name": [("Sam", str(agent.pk))],
        "preferences": [
            ("tea\n", str(other_agent.pk)),
            ("p0\n", str(other_agent.pk)),
            ("p1\n", str(agent.pk)),
            ("p2\n", str(other_agent.pk)),
            ("p3\n", str(agent.pk)),
            ("p4", str(other_agent.pk)),
        ],
        "context": [("Works from home", str(partner.pk))],
    }
    by_number = {v.number: v for v in blame.versions}
    assert by_number[blame.parts[2].spans[0].version].actor_kind == "human"


def test_blame_of_a_field_is_the_write_that_holds_not_the_newest_one(
    card, agent, partner
):
    a = Actor.for_agent(agent)
    # A browser writes the name on the document as it is now and sends it
    # late; meanwhile the agent wrote twice, the name last.  Loro keeps the
    # write with the higher clock, the agent's, whatever came in last.
    send = _human_sets(card, partner, "name", "Samantha")
    _set(a, card, "context", "Office")
    _set(a, card, "name", "Sam")
    send()

    blame = block_blame(block=card)

    assert block_value(block=card)["name"] == "Sam"
    assert _fields(blame)["name"] == [("Sam", str(agent.pk))]
    assert blame.versions[-1].actor_kind == "agent"


def test_blame_of_a_map_block_after_a_rollback(card, agent, other_agent, partner):
    a, b = Actor.for_agent(agent), Actor.for_agent(other_agent)
    _set(a, card, "name", "Sam")
    _set(b, card, "context", "Office")
    _set(Actor.for_user(partner), card, "name", "Samuel")
    target = block_history(block=card, limit=1)[0].id
    _set(b, card, "context", "Home")
    block_rollback(actor=Actor.for_user(partner), block=card, version_id=target)

    blame = block_blame(block=card)

    rollback = max(v.number for v in blame.versions)
    assert block_value(block=card)["context"] == "Office"
    # The rollback wrote the context back; the name it left alone.
    assert _fields(blame)["name"] == [("Samuel", str(partner.pk))]
    assert [(s.text, s.version) for s in blame.parts[2].spans] == [("Office", rollback)]
    assert blame.versions[-1].summary.startswith("rolled back to version")
    assert _fields(blame)["preferences"] == []


def test_blame_covers_the_map_sections_and_counters_of_a_composite_block(
    agent, other_agent, make_block
):
    block = make_block(
        "desk",
        template="custom",
        schema={
            "kind": "composite",
            "sections": [
                {"name": "notes", "schema": {"kind": "text"}},
                {
                    "name": "status",
                    "schema": {
                        "kind": "map",
                        "fields": [
                            {"name": "mood", "type": "text"},
                            {"name": "done", "type": "counter"},
                            {"name": "busy", "type": "boolean"},
                        ],
                    },
                },
            ],
        },
    )
    block_share(actor=SYSTEM, block=block, agent=other_agent, access="read_write")
    a, b = Actor.for_agent(agent), Actor.for_agent(other_agent)
    ops = [
        (a, {"op": "set_field", "field": "mood", "value": "calm"}),
        (a, {"op": "increment_counter", "field": "done"}),
        (b, {"op": "set_field", "field": "busy", "value": True}),
        (b, {"op": "increment_counter", "field": "done", "delta": 2}),
        (a, {"op": "append_text", "text": "plan"}),
    ]
    for actor, op in ops:
        section = "notes" if op["op"] == "append_text" else "status"
        block_operate(actor=actor, block=block, operations=[{**op, "section": section}])

    blame = block_blame(block=block)

    assert _fields(blame) == {
        "notes": [("plan", str(agent.pk))],
        "status/mood": [("calm", str(agent.pk))],
        "status/done": [("3", str(other_agent.pk))],
        "status/busy": [("true", str(other_agent.pk))],
    }


def test_blame_endpoint_gives_a_map_block_a_part_per_field(agent_client, card, agent):
    _set(Actor.for_agent(agent), card, "name", "Sam")

    data = agent_client.get(f"/api/blocks/{card.pk}/blame").json()

    assert data["parts"] == [
        {
            "name": "name",
            "spans": [{"start": 0, "text": "Sam", "version": 2, "folded_before": None}],
        },
        {"name": "preferences", "spans": []},
        {"name": "context", "spans": []},
    ]
    # Version 1, the empty card's creation, wrote nothing still there.
    assert [v["number"] for v in data["versions"]] == [2]
    assert data["versions"][0]["actor_id"] == str(agent.pk)


def test_blame_endpoint_shows_spans_and_versions_and_hides_others_blocks(
    agent_client, agent, other_agent, make_block
):
    block = make_block("notes", template="custom", schema={"kind": "text"})
    block_append(actor=Actor.for_agent(agent), block=block, content="hello")
    hidden = make_block(
        "private", owner=other_agent, template="custom", schema={"kind": "text"}
    )

    data = agent_client.get(f"/api/blocks/{block.pk}/blame").json()

    assert data["parts"] == [
        {
            "name": None,
            "spans": [
                {"start": 0, "text": "hello", "version": 2, "folded_before": None}
            ],
        }
    ]
    assert data["versions"][0]["actor_id"] == str(agent.pk)
    assert data["versions"][0]["number"] == 2
    assert agent_client.get(f"/api/blocks/{hidden.pk}/blame").status_code == 404


def test_blame_endpoint_for_a_human_of_the_constellation(
    partner_client, make_block, agent
):
    block = make_block("notes", template="custom", schema={"kind": "text"})
    block_append(actor=Actor.for_agent(agent), block=block, content="x")
    assert partner_client.get(f"/api/blocks/{block.pk}/blame").status_code == 200
    stranger = UserFactory(username="stranger")
    partner_client.force_login(stranger)
    assert partner_client.get(f"/api/blocks/{block.pk}/blame").status_code == 404


def test_block_created_with_content_is_blamed_on_its_creation(constellation):
    block = block_create(
        actor=SYSTEM,
        constellation=constellation,
        label="org",
        template="custom",
        schema={"kind": "text"},
        content="start",
    )
    blame = block_blame(block=block)
    assert [(s.text, s.version) for s in blame.parts[0].spans] == [("start", 1)]
    assert blame.versions[0].actor_kind == "system"


def test_block_page_shows_who_set_each_field_of_a_map_block(
    partner_client, card, agent
):
    _set(Actor.for_agent(agent), card, "name", "Sam")

    page = partner_client.get(f"/memory/blocks/{card.pk}/")
    fragment = partner_client.get(f"/memory/blocks/{card.pk}/blame/").content.decode()

    assert 'data-testid="blame-toggle"' in page.content.decode()
    assert 'data-blame-part="name"' in fragment
    assert ">Sam</span>" in fragment
    assert "Version 2 · Entropy (agent)" in fragment
    assert 'data-blame-part="context"' in fragment


def test_block_page_renders_blame_without_javascript(partner_client, agent, make_block):
    block = make_block("notes", template="custom", schema={"kind": "text"})
    block_append(actor=Actor.for_agent(agent), block=block, content="hello")

    page = partner_client.get(f"/memory/blocks/{block.pk}/?blame=1").content.decode()
    fragment = partner_client.get(f"/memory/blocks/{block.pk}/blame/")

    assert 'data-testid="blame"' in page
    assert "Version 2 · Entropy (agent)" in fragment.content.decode()
    assert ">hello</span>" in fragment.content.decode()


def test_history_contains_finds_where_a_text_appeared_and_disappeared(
    agent_client, agent, make_block
):
    block = make_block("notes", template="custom", schema={"kind": "text"})
    a = Actor.for_agent(agent)
    # 1: the (empty) block's creation
    block_append(actor=a, block=block, content="alpha")  # 2
    block_append(actor=a, block=block, content="beta")  # 3: appears
    block_replace(actor=a, block=block, old="beta", new="gamma")  # 4: gone
    block_append(actor=a, block=block, content="delta")  # 5
    block_replace(actor=a, block=block, old="gamma", new="beta")  # 6: back

    url = f"/api/blocks/{block.pk}/history?contains=beta"
    found = agent_client.get(url).json()

    assert [(v["number"], v["contains"]) for v in found] == [
        (3, "appeared"),
        (4, "disappeared"),
        (6, "appeared"),
    ]
    assert found[0]["summary"] == "append: beta"
    assert (
        agent_client.get(f"/api/blocks/{block.pk}/history?contains=").status_code == 422
    )


def _authors(blame, part):
    """(text, actor kind, actor name) per span: ids alone do not tell an
    agent from a person (both tables count from 1)."""
    by_number = {v.number: v for v in blame.versions}
    return [
        (
            span.text,
            by_number[span.version].actor_kind,
            by_number[span.version].actor_name,
        )
        for span in blame.parts[part].spans
    ]


def test_adding_one_item_through_the_form_leaves_the_agents_items_to_the_agent(
    card, agent, partner
):
    a = Actor.for_agent(agent)
    for preference in ("tea", "jazz"):
        block_operate(
            actor=a,
            block=card,
            operations=[
                {
                    "op": "append_to_list_field",
                    "field": "preferences",
                    "value": preference,
                }
            ],
        )
    _set(a, card, "name", "Sam")
    web = Client()
    web.force_login(partner)
    # What the page posts when one preference is added: the list, in order.
    response = web.post(
        f"/memory/blocks/{card.pk}/edit",
        {
            "l:preferences": "1",
            "i:preferences": ["0", "1", "new"],
            "i:preferences#0": "tea",
            "i:preferences#1": "jazz",
            "i:preferences#new": "walks",
        },
    )
    assert response.status_code == 302

    blame = block_blame(block=card)

    assert block_value(block=card)["preferences"] == ["tea", "jazz", "walks"]
    assert _authors(blame, 1) == [
        ("tea\n", "agent", agent.name),
        ("jazz\n", "agent", agent.name),
        ("walks", "human", partner.username),
    ]
    assert _authors(blame, 0) == [("Sam", "agent", agent.name)]


def test_removing_and_reordering_through_the_form_keeps_the_items_that_stay(
    make_block, agent, partner
):
    block = make_block("todo", template="custom", schema={"kind": "list"})
    a = Actor.for_agent(agent)
    for item in ("a", "b", "c"):
        block_operate(
            actor=a, block=block, operations=[{"op": "push_item", "value": item}]
        )
    web = Client()
    web.force_login(partner)
    web.post(
        f"/memory/blocks/{block.pk}/edit",
        {
            "l:": "1",
            "i:": ["0", "2", "n"],
            "i:#0": "a",
            "i:#2": "c",
            "i:#n": "d",
        },
    )

    blame = block_blame(block=block)

    assert block_value(block=block) == ["a", "c", "d"]
    assert _authors(blame, 0) == [
        ("a\n", "agent", agent.name),
        ("c\n", "agent", agent.name),
        ("d", "human", partner.username),
    ]
