"""Block services: the permission table, sharing, approvals, limits, history,
rollback, export/import."""

import base64

import pytest
from django.db import transaction

from memory.blocks import doc_cache, documents
from memory.blocks.permissions import block_access_for_actor
from memory.blocks.selectors import (
    approval_get_for_decision,
    block_diff,
    block_document_load,
    block_get_by_label_for_agent,
    block_get_for_actor,
    block_history,
    block_history_numbered,
    block_list_for_actor,
    block_value,
    block_version_view,
)
from memory.blocks.services import (
    approval_decide,
    block_configure,
    block_create,
    block_delete,
    block_log_append,
    block_move,
    block_operate,
    block_rollback,
    block_share,
    block_swap,
    block_unshare,
)
from memory.blocks.transfer import blocks_export, blocks_import
from memory.models import (
    ApprovalStatus,
    BlockApproval,
    BlockType,
    BlockUpdate,
    MemoryBlock,
    Permission,
    SharedAccess,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.services import agent_token_actor, agent_token_revoke
from pattern_site.kernel.errors import (
    AuthenticationFailed,
    Conflict,
    InvalidInput,
    LimitExceeded,
    NotFound,
    PermissionDenied,
)
from tests.factories import AgentFactory, ConstellationFactory, UserFactory

APPEND = [{"op": "append_text", "text": " more"}]
OVERWRITE = [{"op": "set_text", "text": "replaced"}]

# Seed 003: what an agent may do with a block of each permission.
TABLE = {
    Permission.READ_ONLY: ("denied", "denied", False),
    Permission.PARTNER: ("request", "request", False),
    Permission.HUMAN: ("request", "request", False),
    Permission.APPEND: ("applied", "denied", False),
    Permission.READ_WRITE: ("applied", "applied", False),
    Permission.ADMIN: ("applied", "applied", True),
}


def outcome(actor, block, operations):
    try:
        change = block_operate(actor=actor, block=block, operations=operations)
    except PermissionDenied:
        return "denied"
    return {"applied": "applied", "pending_approval": "request"}[change.status]


@pytest.mark.parametrize("permission", list(TABLE))
def test_permission_table_for_the_owner_agent(make_block, agent, permission):
    appended, overwritten, deletes = TABLE[permission]
    actor = Actor.for_agent(agent)
    block = make_block(content="base", permission=permission)

    seen = block_get_for_actor(actor=actor, block_id=block.pk)  # read: always
    assert block_value(block=seen) == "base"
    assert outcome(actor, seen, APPEND) == appended
    assert outcome(actor, seen, OVERWRITE) == overwritten
    if deletes:
        block_delete(actor=actor, block=seen)
        assert not MemoryBlock.objects.filter(pk=block.pk).exists()
    else:
        with pytest.raises(PermissionDenied):
            block_delete(actor=actor, block=seen)


@pytest.mark.parametrize("permission", list(TABLE))
def test_permission_table_content_effects(make_block, agent, permission):
    appended = TABLE[permission][0]
    actor = Actor.for_agent(agent)
    block = make_block(content="base", permission=permission)
    if appended != "denied":
        block_operate(actor=actor, block=block, operations=APPEND)
    expected = "base more" if appended == "applied" else "base"
    assert block_value(block=block) == expected
    pending = BlockApproval.objects.filter(block=block, status="pending").count()
    assert pending == (1 if appended == "request" else 0)


ACCESS = [
    (Permission.READ_WRITE, SharedAccess.READ_ONLY, "read"),
    (Permission.READ_WRITE, SharedAccess.APPEND_ONLY, "append"),
    (Permission.READ_WRITE, SharedAccess.READ_WRITE, "write"),
    (Permission.APPEND, SharedAccess.READ_WRITE, "append"),
    (Permission.APPEND, SharedAccess.READ_ONLY, "read"),
    (Permission.READ_ONLY, SharedAccess.READ_WRITE, "read"),
    (Permission.ADMIN, SharedAccess.APPEND_ONLY, "append"),
]


@pytest.mark.parametrize(("permission", "access", "effective"), ACCESS)
def test_shared_access_combinations(
    make_block, other_agent, permission, access, effective
):
    block = make_block(content="base", permission=permission)
    block_share(actor=Actor.system(), block=block, agent=other_agent, access=access)
    actor = Actor.for_agent(other_agent)
    seen = block_get_for_actor(actor=actor, block_id=block.pk)

    assert block_access_for_actor(actor=actor, block=seen) == effective
    assert outcome(actor, seen, APPEND) == (
        "denied" if effective == "read" else "applied"
    )
    assert outcome(actor, seen, OVERWRITE) == (
        "applied" if effective == "write" else "denied"
    )
    with pytest.raises(PermissionDenied):
        block_delete(actor=actor, block=seen)


def test_unshared_blocks_of_others_do_not_exist_and_unsharing_hides_again(
    make_block, other_agent
):
    block = make_block()
    actor = Actor.for_agent(other_agent)
    assert not block_list_for_actor(actor=actor).filter(pk=block.pk).exists()
    block_share(
        actor=Actor.system(), block=block, agent=other_agent, access="read_only"
    )
    assert block_get_for_actor(actor=actor, block_id=block.pk)
    block_unshare(actor=Actor.system(), block=block, agent=other_agent)
    with pytest.raises(NotFound):
        block_get_for_actor(actor=actor, block_id=block.pk)


def test_agent_of_another_constellation_cannot_be_shared_with(make_block):
    stranger = AgentFactory(constellation=ConstellationFactory())
    with pytest.raises(NotFound):
        block_share(
            actor=Actor.system(),
            block=make_block(),
            agent=stranger,
            access="read_only",
        )


def test_constellation_level_block_is_visible_to_every_agent_with_its_access(
    constellation, agent, other_agent
):
    block = block_create(
        actor=Actor.system(),
        constellation=constellation,
        label="organization",
        template="organization",
        permission=Permission.READ_ONLY,
    )
    stranger = AgentFactory(constellation=ConstellationFactory())
    for member in (agent, other_agent):
        actor = Actor.for_agent(member)
        seen = block_get_for_actor(actor=actor, block_id=block.pk)
        assert block_access_for_actor(actor=actor, block=seen) == "read"
    with pytest.raises(NotFound):
        block_get_for_actor(actor=Actor.for_agent(stranger), block_id=block.pk)


def test_shared_agent_cannot_share_or_configure(make_block, other_agent):
    block = make_block()
    block_share(
        actor=Actor.system(), block=block, agent=other_agent, access="read_write"
    )
    actor = Actor.for_agent(other_agent)
    with pytest.raises(PermissionDenied):
        block_share(actor=actor, block=block, agent=other_agent, access="read_write")
    with pytest.raises(PermissionDenied):
        block_configure(actor=actor, block=block, description="mine now")


def test_agents_cannot_loosen_permission_or_create_in_others_memory(
    make_block, agent, other_agent
):
    block = make_block(permission=Permission.APPEND)
    actor = Actor.for_agent(agent)
    with pytest.raises(PermissionDenied):
        block_configure(actor=actor, block=block, permission=Permission.ADMIN)
    with pytest.raises(PermissionDenied):
        block_create(actor=actor, owner=other_agent, label="x")


def test_labels_are_unique_per_owner(make_block):
    make_block(label="persona")
    with pytest.raises(Conflict):
        make_block(label="persona")


# --- approvals ----------


def test_partner_block_write_becomes_request_and_approval_applies_as_agent(
    make_block, agent, partner
):
    block = make_block(content="likes tea", permission=Permission.PARTNER)
    change = block_operate(
        actor=Actor.for_agent(agent),
        block=block,
        operations=[{"op": "append_text", "text": ", coffee"}],
        summary="add coffee",
    )
    assert change.status == "pending_approval"
    assert block_value(block=block) == "likes tea"

    human = Actor.for_user(partner)
    approval = approval_get_for_decision(actor=human, approval_id=change.approval.pk)
    approval_decide(actor=human, approval=approval, approve=True)

    assert block_value(block=block) == "likes tea, coffee"
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.result == "version 2"  # the block's own numbering
    last = BlockUpdate.objects.filter(block=block).last()
    assert (last.actor_kind, last.actor_id) == ("agent", str(agent.pk))
    assert "approved by partner" in last.summary
    with pytest.raises(InvalidInput, match="already approved"):
        approval_get_for_decision(actor=human, approval_id=approval.pk)


def test_rejected_request_changes_nothing_and_keeps_its_reason(
    make_block, agent, partner
):
    block = make_block(content="x", permission=Permission.HUMAN)
    change = block_operate(actor=Actor.for_agent(agent), block=block, operations=APPEND)
    human = Actor.for_user(partner)
    approval_decide(
        actor=human,
        approval=approval_get_for_decision(actor=human, approval_id=change.approval.pk),
        approve=False,
        reason="  not   what we agreed  ",
    )
    assert block_value(block=block) == "x"
    rejected = BlockApproval.objects.get()
    assert rejected.status == ApprovalStatus.REJECTED
    assert rejected.result == "not what we agreed"  # for the agent to read


def test_only_partner_decides_partner_blocks_any_member_human_blocks(
    make_block, agent, constellation
):
    member = UserFactory(username="member")
    constellation.members.add(member)
    actor = Actor.for_agent(agent)
    partner_block = make_block(label="p", content="x", permission=Permission.PARTNER)
    human_block = make_block(label="h", content="x", permission=Permission.HUMAN)
    on_partner = block_operate(actor=actor, block=partner_block, operations=APPEND)
    on_human = block_operate(actor=actor, block=human_block, operations=APPEND)

    as_member = Actor.for_user(member)
    with pytest.raises(PermissionDenied, match="partner's approval"):
        approval_get_for_decision(actor=as_member, approval_id=on_partner.approval.pk)
    assert approval_get_for_decision(actor=as_member, approval_id=on_human.approval.pk)
    with pytest.raises(PermissionDenied):
        approval_get_for_decision(actor=actor, approval_id=on_human.approval.pk)


def test_request_that_cannot_apply_is_refused_up_front(make_block, agent):
    block = make_block(content="x" * 9, permission=Permission.PARTNER, char_limit=10)
    with pytest.raises(LimitExceeded):
        block_operate(actor=Actor.for_agent(agent), block=block, operations=APPEND)
    assert not BlockApproval.objects.exists()


# --- an open connection's credentials --------


@pytest.mark.parametrize("lost", ["token revoked", "agent deactivated"])
def test_a_write_bound_to_a_token_checks_it_is_still_live(
    make_block, agent, agent_token, lost
):
    block = make_block(content="kept")
    actor = agent_token_actor(raw=agent_token.raw)
    block_operate(actor=actor, block=block, operations=APPEND)
    if lost == "token revoked":
        agent_token_revoke(agent=agent)
    else:
        Agent.objects.filter(pk=agent.pk).update(is_active=False)
    stored = BlockUpdate.objects.filter(block=block).count()

    with pytest.raises(AuthenticationFailed):
        block_operate(actor=actor, block=block, operations=APPEND)
    assert BlockUpdate.objects.filter(block=block).count() == stored
    assert block_value(block=block) == "kept more"


def test_a_change_s_block_holds_the_content_stored_even_when_unchanged(
    make_block, agent
):
    block = make_block(label="notes", content="kept")
    stale = MemoryBlock.objects.get(pk=block.pk)
    block_operate(actor=Actor.system(), block=block, operations=APPEND)

    # The caller's copy predates the append: the change reads the row.
    same = block_operate(
        actor=Actor.system(),
        block=stale,
        operations=[{"op": "set_text", "text": "kept more"}],
    )
    assert same.status == "unchanged"
    assert same.block.rendered == "kept more"
    assert same.block.description == block.description

    changed = block_operate(actor=Actor.system(), block=stale, operations=APPEND)
    assert changed.status == "applied"
    assert changed.block.rendered == stale.rendered == "kept more more"
    assert changed.block.created_at == block.created_at


# --- limits and log blocks ----------


def test_append_over_char_limit_is_refused_with_sizes(make_block, agent):
    block = make_block(label="human", content="x" * 4980)
    with pytest.raises(LimitExceeded) as caught:
        block_operate(
            actor=Actor.for_agent(agent),
            block=block,
            operations=[{"op": "append_text", "text": "y" * 120}],
        )
    assert str(caught.value) == "block 'human' is 4980/5000 chars; this change adds 120"
    assert block_value(block=block) == "x" * 4980


def test_create_with_content_over_limit_is_refused(agent):
    with pytest.raises(LimitExceeded):
        block_create(
            actor=Actor.system(),
            owner=agent,
            label="big",
            content="x" * 11,
            char_limit=10,
        )
    assert not MemoryBlock.objects.filter(label="big").exists()


def test_log_blocks_are_system_maintained_and_prune_to_max_entries(make_block, agent):
    log = make_block(
        label="events",
        schema={"kind": "log", "display_limit": 2, "max_entries": 3},
    )
    assert log.block_type == BlockType.LOG
    pruned = []
    for n in range(5):
        pruned += block_log_append(block=log, entry={"message": f"e{n}"}).pruned
    assert [e["message"] for e in pruned] == ["e0", "e1"]
    assert [e["message"] for e in block_value(block=log)] == ["e2", "e3", "e4"]
    assert log.rendered.count("\n") == 1 and "e4" in log.rendered.split("\n")[0]
    with pytest.raises(PermissionDenied, match="log blocks"):
        block_operate(
            actor=Actor.for_agent(agent),
            block=log,
            operations=[{"op": "append_log_entry", "entry": {"message": "x"}}],
        )
    # Pruned entries stay in the history: the first append's version (the
    # one after the log's creation) still shows e0.
    created, first = block_history(block=log, limit=10)[:-3:-1]
    assert created.summary == "created"
    assert block_version_view(block=log, version_id=created.id).rendered == ""
    assert "e0" in block_version_view(block=log, version_id=first.id).rendered


def test_agent_cannot_change_read_only_field(make_block, agent, partner):
    block = make_block(label="org", template="organization")
    with pytest.raises(PermissionDenied, match="read-only"):
        block_operate(
            actor=Actor.for_agent(agent),
            block=block,
            operations=[{"op": "set_field", "field": "name", "value": "X"}],
        )
    block_operate(
        actor=Actor.for_user(partner),
        block=block,
        operations=[{"op": "set_field", "field": "name", "value": "X"}],
    )
    assert block_value(block=block)["name"] == "X"


# --- history, diff, rollback ----------


def test_history_view_diff_and_rollback(make_block, agent, partner):
    block = make_block(content="one")
    actor = Actor.for_agent(agent)
    block_operate(
        actor=actor, block=block, operations=[{"op": "append_text", "text": "\ntwo"}]
    )
    block_operate(
        actor=Actor.for_user(partner),
        block=block,
        operations=[{"op": "replace_text", "old": "one", "new": "ONE"}],
        summary="capitalise",
    )
    versions = block_history(block=block)
    assert [v.actor_kind for v in versions] == ["human", "agent", "system"]
    assert versions[0].summary == "capitalise"
    assert [v.size for v in versions] == [7, 7, 3]
    first = versions[-1]

    assert block_version_view(block=block, version_id=first.id).rendered == "one"
    assert block_value(block=block) == "ONE\ntwo"  # the live block is untouched
    diff = block_diff(block=block, from_version=first.id)
    assert "-one" in diff["unified"] and "+ONE" in diff["unified"]

    change = block_rollback(actor=actor, block=block, version_id=first.id)
    assert block_value(block=block) == "one"
    # Versions are numbered per block: the first is 1, whatever its row id.
    assert change.update.summary == "rolled back to version 1"
    assert len(block_history(block=block)) == 4


def test_an_empty_blocks_creation_is_its_version_1(agent, partner):
    creator = Actor.for_user(partner)
    block = block_create(actor=creator, owner=agent, label="plans")

    [created] = block_history_numbered(block=block)
    assert created.number == 1
    assert (created.row.summary, created.row.actor_kind, created.row.actor_id) == (
        "created",
        "human",
        creator.id,
    )
    assert block_version_view(block=block, version_id=created.row.id).rendered == ""
    # Read back from the database, not from the cache the creation left.
    doc_cache.clear()
    assert block_value(block=block) == ""
    block_operate(actor=Actor.for_agent(agent), block=block, operations=APPEND)
    doc_cache.clear()
    assert block_value(block=block) == " more"
    assert [v.number for v in block_history_numbered(block=block)] == [2, 1]


# Compacting at every version (the creation's row folded at once), at the
# first edit after it, and never in this test.
@pytest.mark.parametrize("compact_every", [1, 2, 1000])
@pytest.mark.parametrize(
    ("template", "edits"),
    [
        ("custom", [APPEND, [{"op": "replace_text", "old": "more", "new": "less"}]]),
        (
            "human",
            [
                [{"op": "set_field", "field": "name", "value": "Sam"}],
                [
                    {
                        "op": "append_to_list_field",
                        "field": "preferences",
                        "value": "tea",
                    }
                ],
            ],
        ),
    ],
)
def test_rollback_to_version_1_empties_a_block_after_edits(
    make_block, agent, settings, compact_every, template, edits
):
    settings.MEMORY_COMPACT_UPDATES = compact_every
    block = make_block(label="plans", template=template)
    empty_value, empty_rendered = block_value(block=block), block.rendered
    actor = Actor.for_agent(agent)
    for operations in edits:
        block_operate(actor=actor, block=block, operations=operations)
    assert block_value(block=block) != empty_value
    first = block_history(block=block)[-1]

    diff = block_diff(block=block, from_version=first.id)
    assert diff != block_diff(
        block=block, from_version=block_history(block=block)[0].id
    )
    change = block_rollback(actor=actor, block=block, version_id=first.id)

    assert change.update.summary == "rolled back to version 1"
    assert block_value(block=block) == empty_value
    assert block.rendered == empty_rendered
    doc_cache.clear()
    assert block_value(block=block) == empty_value
    assert [v.number for v in block_history_numbered(block=block)] == [4, 3, 2, 1]


def test_field_level_diff_for_structured_blocks(make_block, partner):
    block = make_block(label="human", template="human")
    human = Actor.for_user(partner)
    block_operate(
        actor=human,
        block=block,
        operations=[{"op": "set_field", "field": "name", "value": "Orual"}],
    )
    v1 = block_history(block=block)[0].id
    block_operate(
        actor=human,
        block=block,
        operations=[{"op": "set_field", "field": "name", "value": "Sam"}],
    )
    assert block_diff(block=block, from_version=v1) == {
        "kind": "fields",
        "changes": [{"field": "name", "before": "Orual", "after": "Sam"}],
    }


def test_rollback_needs_write_access(make_block, agent):
    block = make_block(content="a", permission=Permission.APPEND)
    with pytest.raises(PermissionDenied):
        block_rollback(
            actor=Actor.for_agent(agent),
            block=block,
            version_id=block_history(block=block)[0].id,
        )


def test_version_of_another_block_is_not_found(make_block):
    a, b = make_block(label="a", content="x"), make_block(label="b", content="y")
    with pytest.raises(NotFound):
        block_version_view(block=a, version_id=block_history(block=b)[0].id)


# --- context tool moves ----------


def test_archive_load_and_swap_move_blocks_between_working_and_archival(
    make_block, agent
):
    actor = Actor.for_agent(agent)
    working = make_block(label="task", block_type="working", pinned=True)
    stored = make_block(label="old", block_type="archival")
    block_swap(actor=actor, working=working, archival=stored)
    working.refresh_from_db()
    stored.refresh_from_db()
    assert (working.block_type, working.pinned) == ("archival", False)
    assert stored.block_type == "working"
    core = make_block(label="persona", template="persona")
    with pytest.raises(InvalidInput, match="core memory"):
        block_move(actor=actor, block=core, to_type="archival")


# --- export / import ----------


def test_export_import_round_trip_keeps_content_settings_and_history(
    make_block, agent, other_agent, partner
):
    make_block(label="notes", content="first")
    human = make_block(label="human", template="human", permission="partner")
    block_operate(
        actor=Actor.for_user(partner),
        block=human,
        operations=[
            {"op": "append_to_list_field", "field": "preferences", "value": "tea"}
        ],
    )
    exported = blocks_export(actor=Actor.system(), agent=agent)
    assert exported["version"] == 1

    imported = blocks_import(actor=Actor.system(), agent=other_agent, data=exported)

    assert {b.label for b in imported} == {"notes", "human"}
    copy = MemoryBlock.objects.get(owner=other_agent, label="human")
    assert copy.permission == "partner" and copy.schema == human.schema
    assert block_value(block=copy)["preferences"] == ["tea"]
    assert copy.rendered == MemoryBlock.objects.get(pk=human.pk).rendered
    again = blocks_export(actor=Actor.system(), agent=other_agent)
    assert [b["content"] for b in again["blocks"]] == [
        b["content"] for b in exported["blocks"]
    ]
    # The Loro history came along: the earlier version is still viewable.
    doc_versions = block_history(block=copy)
    assert doc_versions[0].summary == "imported with its history"


def test_import_of_v1_blocks_creates_new_documents(agent):
    data = {
        "blocks": [
            {
                "label": "persona",
                "content": "I am Entropy",
                "memory_type": "core",
                "pinned": True,
                "permission": "ReadWrite",
            },
            {
                "label": "scratch",
                "content": "todo",
                "memory_type": "working",
                "pinned": False,
                "permission": "append",
            },
        ]
    }
    blocks = blocks_import(actor=Actor.system(), agent=agent, data=data)
    persona, scratch = blocks
    assert (persona.block_type, persona.permission) == ("core", "read_write")
    assert persona.description.startswith("Stores details about your current persona")
    assert (scratch.block_type, scratch.permission) == ("working", "append")
    assert block_value(block=scratch) == "todo"


def test_import_with_corrupt_snapshot_imports_nothing(agent):
    data = blocks_export(actor=Actor.system(), agent=agent)
    data["blocks"] = [
        {
            "label": "ok",
            "schema": {"kind": "text"},
            "loro_snapshot": base64.b64encode(b"garbage").decode(),
        },
    ]
    with pytest.raises(InvalidInput):
        blocks_import(actor=Actor.system(), agent=agent, data=data)
    assert not MemoryBlock.objects.exists()


def test_loro_document_carries_who_changed_it(make_block, agent, partner):
    block = make_block(content="a")
    block_operate(actor=Actor.for_agent(agent), block=block, operations=APPEND)
    block_operate(actor=Actor.for_user(partner), block=block, operations=OVERWRITE)
    messages = documents.change_messages(block_document_load(block=block))
    actors = sorted(m["actor"] for m in messages)
    assert actors == sorted(
        ["system:system", f"agent:{agent.pk}", f"human:{partner.pk}"]
    )
    assert {"set_text", "append_text"} <= {m["summary"] for m in messages}


def test_pruned_log_entries_move_into_the_owners_archival_memory(make_block, agent):
    from memory.models import ArchivalEntry

    log = make_block(
        label="tool_log",
        schema={"kind": "log", "display_limit": 2, "max_entries": 2},
    )
    for n in range(3):
        block_log_append(block=log, entry={"message": f"called search #{n}"})
    moved = ArchivalEntry.objects.get(agent=agent)
    assert "called search #0" in moved.content
    assert moved.tags == ["tool_log", "log"]
    assert moved.source == "system"
    assert moved.metadata["block_id"] == str(log.pk)


@pytest.mark.parametrize("locked", [True, False])
def test_a_failed_change_in_a_callers_transaction_rolls_it_back(
    make_block, agent, locked
):
    # A block read under its row lock in the caller's transaction is changed
    # with no block of its own; either way, a change that fails leaves the
    # caller's transaction to roll back (or, unlocked, its own savepoint).
    make_block(label="tight", char_limit=10)
    actor = Actor.for_agent(agent)
    with transaction.atomic():
        block = block_get_by_label_for_agent(agent=agent, label="tight", lock=locked)
        with pytest.raises(LimitExceeded):
            block_operate(
                actor=actor,
                block=block,
                operations=[{"op": "append_text", "text": "far too long for it"}],
            )
        assert transaction.get_rollback() is locked
    assert block_value(block=MemoryBlock.objects.get(pk=block.pk)) == ""
