"""memory.blocks.selectors: lookups by id and label, history paging, counts."""

import uuid

import pytest

from memory.blocks import doc_cache
from memory.blocks.selectors import (
    approval_list_for_actor,
    approval_pending_count_for_actor,
    approval_preview,
    block_counts_by_owner,
    block_document_load,
    block_get_by_label_for_agent,
    block_get_for_actor,
    block_history,
    block_history_count,
    block_history_document,
    block_history_numbered,
    block_shared_from,
    block_value,
    block_version_by_number,
    block_version_number,
)
from memory.blocks.services import block_create, block_operate, block_share
from memory.models import BlockUpdate, Permission
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import InvalidInput, NotFound
from tests.factories import UserFactory

SYSTEM = Actor(kind="system")


def test_a_label_means_the_agents_own_block_then_shared_then_constellations(
    agent, other_agent, constellation
):
    org = block_create(
        actor=SYSTEM,
        constellation=constellation,
        label="notes",
        template="custom",
        schema={"kind": "text"},
    )
    assert block_get_by_label_for_agent(agent=agent, label="notes") == org
    theirs = block_create(actor=SYSTEM, owner=other_agent, label="notes")
    block_share(actor=SYSTEM, block=theirs, agent=agent, access="read_only")
    assert block_get_by_label_for_agent(agent=agent, label="notes") == theirs
    mine = block_create(actor=SYSTEM, owner=agent, label="notes")
    assert block_get_by_label_for_agent(agent=agent, label="notes") == mine
    with pytest.raises(NotFound, match="no block labelled 'missing'"):
        block_get_by_label_for_agent(agent=agent, label="missing")


def test_malformed_and_unknown_block_ids_are_404(agent):
    actor = Actor.for_agent(agent)
    for block_id in ("not-a-uuid", uuid.uuid4(), "'; DROP TABLE x; --"):
        with pytest.raises(NotFound):
            block_get_for_actor(actor=actor, block_id=block_id)


def test_history_pages_newest_first_and_counts(agent):
    block = block_create(
        actor=SYSTEM,
        owner=agent,
        label="journal",
        template="custom",
        schema={"kind": "text"},
    )
    for i in range(5):
        block_operate(
            actor=SYSTEM,
            block=block,
            operations=[{"op": "append_text", "text": f"line {i}"}],
            summary=f"edit {i}",
        )
    first = block_history(block=block, limit=2)
    assert [row.summary for row in first] == ["edit 4", "edit 3"]
    older = block_history(block=block, limit=2, before=first[-1].id)
    assert [row.summary for row in older] == ["edit 2", "edit 1"]
    oldest = block_history(block=block, limit=10, before=older[-1].id)
    assert [row.summary for row in oldest] == ["edit 0", "created"]
    assert first[0].created_at.tzinfo is not None
    # The five edits and the block's creation, its version 1.
    assert block_history_count(block=block) == 6


def test_shared_from_names_the_owner_for_agents_only(agent, other_agent, partner):
    theirs = block_create(actor=SYSTEM, owner=other_agent, label="plans")
    block_share(actor=SYSTEM, block=theirs, agent=agent, access="read_only")
    assert block_shared_from(actor=Actor.for_agent(agent), block=theirs) == "Flux"
    assert block_shared_from(actor=Actor.for_agent(other_agent), block=theirs) is None
    assert block_shared_from(actor=Actor.for_user(partner), block=theirs) is None


def test_counts_by_owner_include_constellation_blocks(agent, constellation, partner):
    block_create(actor=SYSTEM, owner=agent, label="a")
    block_create(actor=SYSTEM, owner=agent, label="b")
    block_create(
        actor=SYSTEM,
        constellation=constellation,
        label="org",
        template="organization",
    )
    counts = block_counts_by_owner(
        actor=Actor.for_user(partner), constellation_id=constellation.pk
    )
    assert counts == {agent.pk: 2, None: 1}


def test_approval_list_rejects_an_unknown_status(agent):
    block_create(actor=SYSTEM, owner=agent, label="p", permission=Permission.PARTNER)
    with pytest.raises(InvalidInput, match="status is one of"):
        approval_list_for_actor(actor=Actor.for_agent(agent), status="maybe")


def test_version_numbers_are_per_block_and_name_the_same_version(agent):
    first = block_create(actor=Actor.system(), label="a", owner=agent, content="1")
    second = block_create(actor=Actor.system(), label="b", owner=agent, content="1")
    for n in (2, 3):
        for block in (first, second):
            block_operate(
                actor=Actor.system(),
                block=block,
                operations=[{"op": "set_text", "text": str(n)}],
            )
    numbered = block_history_numbered(block=second, limit=2)
    assert [v.number for v in numbered] == [3, 2]
    assert [v.number for v in block_history_numbered(block=second, before=2)] == [1]
    third = block_version_by_number(block=second, number=3)
    assert block_version_number(block=second, version_id=third.pk) == 3
    with pytest.raises(NotFound, match="has no version 4; its versions are 1 to 3"):
        block_version_by_number(block=second, number=4)
    with pytest.raises(NotFound):
        block_version_by_number(block=second, number=0)


def test_approval_preview_diffs_the_block_with_the_request_applied(agent, partner):
    block = block_create(
        actor=Actor.system(),
        label="human",
        owner=agent,
        template="human",
        permission=Permission.PARTNER,
    )
    change = block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "set_field", "field": "name", "value": "Sam"}],
    )
    parts = approval_preview(approval=change.approval)
    assert [p.name for p in parts] == ["name"]
    assert [(r.kind, r.old, r.new) for r in parts[0].rows] == [("added", None, "Sam")]
    assert block_value(block=block)["name"] == ""  # the preview changed nothing

    assert approval_pending_count_for_actor(actor=Actor.for_user(partner)) == 1
    member = UserFactory(username="member")
    agent.constellation.members.add(member)
    assert approval_pending_count_for_actor(actor=Actor.for_user(member)) == 0
    assert approval_pending_count_for_actor(actor=Actor.for_agent(agent)) == 0


def test_history_document_is_the_cached_one_only_when_it_holds_the_version(agent):
    block = block_create(actor=Actor.system(), owner=agent, label="notes")
    block_operate(
        actor=Actor.system(),
        block=block,
        operations=[{"op": "append_text", "text": "one"}],
    )
    old = block_document_load(block=block)
    block_operate(
        actor=Actor.system(),
        block=block,
        operations=[{"op": "append_text", "text": " two"}],
    )
    newest = BlockUpdate.objects.filter(block=block).latest("pk").frontiers
    first = BlockUpdate.objects.filter(block=block).earliest("pk").frontiers

    doc_cache.put(block.pk, 1, old)
    try:
        assert block_history_document(block=block, upto=bytes(first)) is old
        loaded = block_history_document(block=block, upto=bytes(newest))
    finally:
        doc_cache.discard(block.pk)

    assert loaded is not old
    assert loaded.get_text("content").to_string() == "one two"
