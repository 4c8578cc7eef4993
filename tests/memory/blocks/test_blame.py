"""memory.blocks.blame: who inserted each stretch of a block's text, after
concurrent edits, rollbacks and compaction; and its endpoint."""

import pytest
from loro import ExportMode

from coordination.actors import Actor
from coordination.errors import InvalidInput
from memory.blocks.blame import block_blame
from memory.blocks.selectors import block_document_load, block_history
from memory.blocks.services import (
    block_append,
    block_compact,
    block_create,
    block_replace,
    block_rollback,
    block_share,
    block_update_import,
)
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
    assert spans[0] == ("keep ", 1)
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


def test_blame_covers_each_text_section_of_a_composite_block(agent, make_block):
    block = make_block("scratch", template="scratchpad")
    block_append(
        actor=Actor.for_agent(agent), block=block, content="plan", section="notes"
    )

    blame = block_blame(block=block)

    assert [p.name for p in blame.parts] == ["current_task", "notes"]
    assert blame.parts[0].spans == []
    assert [s.text for s in blame.parts[1].spans] == ["plan"]


def test_blame_of_a_map_block_is_a_clear_error(make_block):
    block = make_block("me", template="persona")
    with pytest.raises(InvalidInput, match="text blocks"):
        block_blame(block=block)


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
        {"name": None, "spans": [{"start": 0, "text": "hello", "version": 1}]}
    ]
    assert data["versions"][0]["actor_id"] == str(agent.pk)
    assert data["versions"][0]["number"] == 1
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


def test_block_page_renders_blame_without_javascript(partner_client, agent, make_block):
    block = make_block("notes", template="custom", schema={"kind": "text"})
    block_append(actor=Actor.for_agent(agent), block=block, content="hello")

    page = partner_client.get(f"/memory/blocks/{block.pk}/?blame=1").content.decode()
    fragment = partner_client.get(f"/memory/blocks/{block.pk}/blame/")

    assert 'data-testid="blame"' in page
    assert "Version 1 · Entropy (agent)" in fragment.content.decode()
    assert ">hello</span>" in fragment.content.decode()


def test_history_contains_finds_where_a_text_appeared_and_disappeared(
    agent_client, agent, make_block
):
    block = make_block("notes", template="custom", schema={"kind": "text"})
    a = Actor.for_agent(agent)
    block_append(actor=a, block=block, content="alpha")  # 1
    block_append(actor=a, block=block, content="beta")  # 2: appears
    block_replace(actor=a, block=block, old="beta", new="gamma")  # 3: gone
    block_append(actor=a, block=block, content="delta")  # 4
    block_replace(actor=a, block=block, old="gamma", new="beta")  # 5: back

    url = f"/api/blocks/{block.pk}/history?contains=beta"
    found = agent_client.get(url).json()

    assert [(v["number"], v["contains"]) for v in found] == [
        (2, "appeared"),
        (3, "disappeared"),
        (5, "appeared"),
    ]
    assert found[0]["summary"] == "append: beta"
    assert (
        agent_client.get(f"/api/blocks/{block.pk}/history?contains=").status_code == 422
    )
