"""memory.blocks.permissions, cell by cell: what each actor may do with each
kind of block, decided by the permission module alone."""

import itertools

import pytest

from memory.blocks.models import BlockApproval, MemoryBlock
from memory.blocks.permissions import (
    approval_decide_check,
    approvals_visible,
    block_access_for_actor,
    block_approval_needed,
    block_can_configure,
    block_can_delete,
    block_can_share,
    block_change_check,
    block_configure_check,
    block_create_check,
    blocks_visible,
    read_only_binds,
)
from memory.blocks.services import block_create, block_share
from memory.models import Permission, SharedAccess
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import NotFound, PermissionDenied
from tests.factories import AgentFactory, ConstellationFactory, UserFactory

SYSTEM = Actor(kind="system")

# An owner agent's right on its own block, by the block's permission.
OWN = {
    Permission.READ_ONLY: "read",
    Permission.PARTNER: "read",
    Permission.HUMAN: "read",
    Permission.APPEND: "append",
    Permission.READ_WRITE: "write",
    Permission.ADMIN: "write",
}
SHARED = {
    SharedAccess.READ_ONLY: "read",
    SharedAccess.APPEND_ONLY: "append",
    SharedAccess.READ_WRITE: "write",
}
RANK = {"read": 0, "append": 1, "write": 2}


def _block(owner, permission, *, label="notes"):
    return block_create(
        actor=SYSTEM,
        owner=owner,
        label=label,
        template="scratchpad",
        permission=permission,
    )


def _visible(actor, block) -> MemoryBlock:
    """The block as the actor's visibility query returns it (with the
    annotations the rights are read from)."""
    return blocks_visible(MemoryBlock.objects.all(), actor=actor).get(pk=block.pk)


@pytest.fixture
def other(constellation):
    return AgentFactory(constellation=constellation, name="Anchor")


@pytest.mark.parametrize("permission", list(Permission))
def test_owner_agent_right_follows_the_block_permission(agent, permission):
    block = _block(agent, permission)
    actor = Actor.for_agent(agent)
    assert (
        block_access_for_actor(actor=actor, block=_visible(actor, block))
        == (OWN[permission])
    )


@pytest.mark.parametrize(
    ("permission", "access"),
    list(itertools.product(list(Permission), list(SharedAccess))),
)
def test_shared_right_is_the_weaker_of_permission_and_attachment(
    agent, other, permission, access
):
    block = _block(agent, permission)
    block_share(actor=SYSTEM, block=block, agent=other, access=access)
    actor = Actor.for_agent(other)
    expected = min(OWN[permission], SHARED[access], key=RANK.__getitem__)
    assert block_access_for_actor(actor=actor, block=_visible(actor, block)) == (
        expected
    )


@pytest.mark.parametrize("permission", list(Permission))
def test_constellation_block_right_for_every_agent(agent, constellation, permission):
    block = block_create(
        actor=SYSTEM,
        constellation=constellation,
        label="org",
        template="organization",
        permission=permission,
    )
    actor = Actor.for_agent(agent)
    assert (
        block_access_for_actor(actor=actor, block=_visible(actor, block))
        == (OWN[permission])
    )


def test_another_agents_unshared_block_does_not_exist_for_an_agent(agent, other):
    block = _block(agent, Permission.READ_WRITE)
    actor = Actor.for_agent(other)
    assert not blocks_visible(MemoryBlock.objects.all(), actor=actor).filter(
        pk=block.pk
    )
    with pytest.raises(NotFound):
        block_access_for_actor(actor=actor, block=block)


@pytest.mark.parametrize("permission", list(Permission))
def test_humans_of_the_constellation_write_every_block(agent, partner, permission):
    block = _block(agent, permission)
    human = Actor.for_user(partner)
    assert block_access_for_actor(actor=human, block=_visible(human, block)) == (
        "write"
    )
    assert block_can_delete(actor=human, block=block)
    assert block_can_configure(actor=human, block=block)
    assert block_can_share(actor=human, block=block)
    assert not block_approval_needed(actor=human, block=block)


def test_people_outside_the_constellation_see_no_block(agent):
    block = _block(agent, Permission.READ_WRITE)
    stranger = Actor.for_user(UserFactory(username="stranger"))
    outsider = Actor.for_agent(AgentFactory(constellation=ConstellationFactory()))
    for actor in (stranger, outsider):
        assert not blocks_visible(MemoryBlock.objects.all(), actor=actor).filter(
            pk=block.pk
        )


def test_the_system_sees_and_writes_everything(agent):
    block = _block(agent, Permission.READ_ONLY)
    assert _visible(SYSTEM, block) == block
    assert block_access_for_actor(actor=SYSTEM, block=block) == "write"


@pytest.mark.parametrize(
    ("permission", "needs_approval"),
    [(p, p in (Permission.PARTNER, Permission.HUMAN)) for p in Permission],
)
def test_partner_and_human_blocks_turn_agent_writes_into_requests(
    agent, permission, needs_approval
):
    block = _block(agent, permission)
    actor = Actor.for_agent(agent)
    assert block_approval_needed(actor=actor, block=block) is needs_approval


@pytest.mark.parametrize(
    ("access", "needs_approval"),
    [
        (SharedAccess.READ_ONLY, False),
        (SharedAccess.APPEND_ONLY, True),
        (SharedAccess.READ_WRITE, True),
    ],
)
def test_a_shared_partner_block_needs_approval_only_where_writes_are_shared(
    agent, other, access, needs_approval
):
    block = _block(agent, Permission.PARTNER)
    block_share(actor=SYSTEM, block=block, agent=other, access=access)
    actor = Actor.for_agent(other)
    assert (
        block_approval_needed(actor=actor, block=_visible(actor, block))
        is needs_approval
    )


def test_log_blocks_are_read_only_to_agents_and_need_no_approval(agent):
    block = block_create(
        actor=SYSTEM,
        owner=agent,
        label="events",
        template="custom",
        schema={"kind": "log"},
        permission=Permission.PARTNER,
    )
    actor = Actor.for_agent(agent)
    assert block_access_for_actor(actor=actor, block=block) == "read"
    assert not block_approval_needed(actor=actor, block=block)


@pytest.mark.parametrize("permission", list(Permission))
def test_only_admin_blocks_may_be_deleted_by_their_owner(agent, other, permission):
    block = _block(agent, permission)
    assert block_can_delete(actor=Actor.for_agent(agent), block=block) is (
        permission == Permission.ADMIN
    )
    assert not block_can_delete(actor=Actor.for_agent(other), block=block)


@pytest.mark.parametrize("permission", list(Permission))
def test_owner_configures_and_shares_only_with_write_access(agent, other, permission):
    block = _block(agent, permission)
    writes = OWN[permission] == "write"
    assert block_can_configure(actor=Actor.for_agent(agent), block=block) is writes
    assert block_can_share(actor=Actor.for_agent(agent), block=block) is writes
    assert not block_can_share(actor=Actor.for_agent(other), block=block)


def test_agents_create_blocks_in_their_own_memory_only(agent, other):
    actor = Actor.for_agent(agent)
    block_create_check(actor=actor, owner=agent)
    with pytest.raises(PermissionDenied, match="own memory"):
        block_create_check(actor=actor, owner=other)
    with pytest.raises(PermissionDenied, match="constellation-level"):
        block_create_check(actor=actor, owner=None)
    block_create_check(actor=Actor.for_user(agent.constellation.partner), owner=None)


def test_agents_tighten_but_never_loosen_permission_nor_change_limits(agent):
    block = _block(agent, Permission.APPEND)
    actor = Actor.for_agent(agent)
    block_configure_check(actor=actor, block=block, permission=Permission.READ_ONLY)
    with pytest.raises(PermissionDenied, match="loosen"):
        block_configure_check(actor=actor, block=block, permission=Permission.ADMIN)
    with pytest.raises(PermissionDenied, match="char limit"):
        block_configure_check(actor=actor, block=block, char_limit=10)
    human = Actor.for_user(agent.constellation.partner)
    block_configure_check(
        actor=human, block=block, permission=Permission.ADMIN, char_limit=10
    )


def test_append_right_allows_extending_only(agent):
    block = block_create(
        actor=SYSTEM,
        owner=agent,
        label="journal",
        template="custom",
        schema={"kind": "text"},
        permission=Permission.APPEND,
    )
    actor = Actor.for_agent(agent)
    block_change_check(actor=actor, block=block, access="append", old="ab", new="abc")
    with pytest.raises(PermissionDenied, match="only append"):
        block_change_check(
            actor=actor, block=block, access="append", old="ab", new="xb"
        )


def test_read_only_fields_bind_agents_not_humans(agent):
    schema = {
        "kind": "map",
        "fields": [
            {"name": "name", "type": "text", "read_only": True},
            {"name": "mood", "type": "text"},
        ],
    }
    block = block_create(
        actor=SYSTEM, owner=agent, label="persona", template="custom", schema=schema
    )
    old, new = {"name": "Pattern", "mood": "calm"}, {"name": "Other", "mood": "calm"}
    with pytest.raises(PermissionDenied, match="read-only"):
        block_change_check(
            actor=Actor.for_agent(agent), block=block, access="write", old=old, new=new
        )
    human = Actor.for_user(agent.constellation.partner)
    block_change_check(actor=human, block=block, access="write", old=old, new=new)
    assert read_only_binds(Actor.for_agent(agent))
    assert not read_only_binds(human)


def _request(agent, permission) -> BlockApproval:
    block = _block(agent, permission, label=f"b-{permission}")
    return BlockApproval.objects.create(
        block=block, agent=agent, operations=[], summary="change"
    )


def test_approvals_are_visible_to_their_agent_and_the_constellations_humans(
    agent, other, partner
):
    mine = _request(agent, Permission.HUMAN)
    qs = BlockApproval.objects.all()
    assert list(approvals_visible(qs, actor=Actor.for_agent(agent))) == [mine]
    assert not approvals_visible(qs, actor=Actor.for_agent(other))
    assert list(approvals_visible(qs, actor=Actor.for_user(partner))) == [mine]
    stranger = Actor.for_user(UserFactory(username="stranger"))
    assert not approvals_visible(qs, actor=stranger)


def test_partner_blocks_are_decided_by_the_partner_human_blocks_by_any_member(
    agent, constellation, partner
):
    member = UserFactory(username="member")
    constellation.members.add(member)
    partner_request = _request(agent, Permission.PARTNER)
    human_request = _request(agent, Permission.HUMAN)
    approval_decide_check(actor=Actor.for_user(partner), approval=partner_request)
    approval_decide_check(actor=Actor.for_user(member), approval=human_request)
    with pytest.raises(PermissionDenied, match="partner"):
        approval_decide_check(actor=Actor.for_user(member), approval=partner_request)
    with pytest.raises(PermissionDenied, match="agents cannot"):
        approval_decide_check(actor=Actor.for_agent(agent), approval=human_request)
