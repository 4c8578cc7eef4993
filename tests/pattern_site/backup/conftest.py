"""A constellation with something in every table, made through the services."""

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from activity.llm.services import llm_usage_add
from activity.summaries.services import constellation_summary_generate
from coordination.groups.services import (
    delivery_complete,
    delivery_take,
    group_create,
    group_member_add,
    group_message_route,
)
from coordination.groups.turns import agent_loop_config_update
from coordination.work.services import (
    coordination_state_set,
    handoff_create,
    handoff_mark_read,
    task_claim,
    task_create,
    task_dependency_add,
)
from folders.files.services import file_write, folder_attach, folder_create
from folders.tools.windows import file_open
from memory.blocks.seen import blocks_seen_flush, blocks_seen_record_later
from memory.blocks.services import (
    approval_decide,
    block_append,
    block_compact,
    block_create,
    block_operate,
    block_share,
)
from memory.blocks.services.retention import block_history_fold
from memory.longterm.consolidation import archival_consolidate
from memory.longterm.services import (
    agent_summary_from_messages,
    archival_entry_create,
    archival_role_set,
    context_config_update,
    conversation_start,
    messages_append,
    retrieval_config_update,
)
from memory.models import BlockUpdate, Permission
from memory.scratchpad.services import scratchpad_write
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_update
from tests.factories import AgentFactory, UserFactory


@pytest.fixture
def rich_constellation(
    constellation: Any,
    partner: Any,
    django_capture_on_commit_callbacks: Any,
    llm: Any,
    settings: Any,
) -> Any:
    # The activity events, indexing and group deliveries of a write happen
    # after its commit.  Only the agent's turn talks to the (fake) model:
    # everything else runs as on a site without one.
    model_url, settings.LLM_BASE_URL = settings.LLM_BASE_URL, ""
    with django_capture_on_commit_callbacks(execute=True):
        _fill(constellation, partner)
    settings.LLM_BASE_URL = model_url
    with django_capture_on_commit_callbacks(execute=True):
        _agent_turn(constellation, llm)
    _summarise(constellation)
    return constellation


def _fill(constellation: Any, partner: Any) -> None:
    member = UserFactory(username="member")
    constellation.members.add(member)
    lead = AgentFactory(constellation=constellation, name="Lead")
    helper = AgentFactory(constellation=constellation, name="Helper")
    human, as_lead = Actor.for_user(partner), Actor.for_agent(lead)

    # Blocks: one with several versions, folded into its snapshot and edited
    # after; one shared; one needing approval; one of the constellation.
    notes = block_create(actor=as_lead, label="notes", owner=lead, content="one")
    block_append(actor=as_lead, block=notes, content="two")
    block_compact(block=notes)
    block_append(actor=human, block=notes, content="three")
    block_share(actor=human, block=notes, agent=helper, access="read_only")
    persona = block_create(
        actor=human, label="persona", owner=lead, permission=Permission.PARTNER
    )
    change = block_operate(
        actor=as_lead,
        block=persona,
        operations=[{"op": "append_text", "text": "calm"}],
        summary="be calm",
    )
    approval_decide(actor=human, approval=change.approval, approve=True)
    block_create(actor=human, label="mission", constellation=constellation)
    # One whose old history retention folded (a shallow snapshot).
    journal = block_create(
        actor=as_lead,
        label="journal",
        owner=lead,
        content="day 1",
        block_type="working",
    )
    for day in range(2, 7):
        block_append(actor=as_lead, block=journal, content=f"day {day}")
    BlockUpdate.objects.filter(block=journal).update(
        created_at=timezone.now() - timedelta(days=3)
    )
    with override_settings(
        MEMORY_HISTORY_KEEP_DAYS={"working": 1},
        MEMORY_HISTORY_KEEP_VERSIONS={"working": 2},
    ):
        block_history_fold(block=journal)  # keeps versions 4 (the horizon) to 6
    block_append(actor=human, block=journal, content="day 7")

    archival_entry_create(agent=lead, content="The partner takes tea at five.")
    archival_entry_create(
        agent=lead, content="Deploys happen on Tuesdays.", label="deploys"
    )
    archival_entry_create(agent=lead, content="the partner takes tea at five.")
    archival_consolidate(agent=lead)
    conversation = conversation_start(agent=lead, title="planning")
    messages_append(
        conversation=conversation,
        messages=[
            {"role": "user", "content": "What is next?"},
            {"role": "assistant", "content": "The quarterly report, due Friday."},
            {"role": "user", "content": "Who gathers the sales figures?"},
            {"role": "assistant", "content": "Helper gathers them by Wednesday."},
            {"role": "user", "content": "And the charts for the board?"},
            {"role": "assistant", "content": "I draw the charts on Thursday."},
        ],
    )
    scratchpad_write(
        conversation=conversation, key="agenda", value={"open": ["charts"], "n": 2}
    )
    retrieval_config_update(constellation=constellation, keyword_weight=0.5)
    blocks_seen_record_later(agent=lead, blocks=[notes, persona])

    parent = task_create(actor=human, constellation=constellation, title="Report")
    child = task_create(
        actor=human, constellation=constellation, title="Figures", assignee=helper
    )
    task_dependency_add(actor=human, task=parent, depends_on=child)
    task_claim(actor=Actor.for_agent(helper), task=child)
    note = handoff_create(actor=as_lead, to_agent=helper, content="the figures")
    handoff_mark_read(actor=Actor.for_agent(helper), note=note)
    coordination_state_set(
        actor=as_lead,
        constellation=constellation,
        key="phase",
        value={"name": "drafting", "owner": lead.pk},
        expected_version=0,
    )

    group = group_create(
        constellation=constellation,
        name="Desk",
        pattern="supervisor",
        config={"leader_id": lead.pk},
    )
    group_member_add(group=group, agent=lead, role="supervisor")
    group_member_add(group=group, agent=helper)
    group_message_route(actor=human, group=group, message="Plan the week")
    for delivery in delivery_take(agent=lead):
        delivery_complete(delivery=delivery, text="Monday: figures.")

    folder = folder_create(actor=human, constellation_id=constellation.pk, name="docs")
    file_write(
        actor=human, folder=folder, path="guide.md", text="# Guide\n\nTea at five.\n"
    )
    folder_attach(actor=human, folder=folder, agent_id=lead.pk, access="read")
    file_open(agent=lead, file=folder.files.get(), lines=2)
    llm_usage_add(constellation_id=constellation.pk, tokens=120)


def _agent_turn(constellation: Any, llm: Any) -> None:
    """An agent answered by a model takes a turn with a tool call."""
    scribe = agent_update(
        agent=AgentFactory(constellation=constellation, name="Scribe"),
        model_name="gpt-4o-mini",
        answered_by_llm=True,
    )
    agent_loop_config_update(
        agent=scribe, tool_rules=[{"tool": "send_message", "kind": "exit_loop"}]
    )
    context_config_update(constellation=constellation, keep_recent=50)
    archival_role_set(actor=Actor.system(), agent=scribe, role="consolidator")
    block_create(actor=Actor.system(), label="log", owner=scribe)
    llm.answer_tools(("c1", "core_memory_append", {"label": "log", "content": "met"}))
    llm.answer_tools(("c2", "send_message", {"message": "Logged."}))
    group = group_create(constellation=constellation, name="Log", pattern="round_robin")
    group_member_add(group=group, agent=scribe)
    group_message_route(actor=Actor.system(), group=group, message="log the meeting")


def _summarise(constellation: Any) -> None:
    blocks_seen_flush()
    lead = constellation.agents.get(name="Lead")
    assert agent_summary_from_messages(agent_id=lead.pk) is not None
    now = timezone.now()
    assert constellation_summary_generate(
        constellation=constellation,
        period_start=now - timedelta(hours=1),
        period_end=now + timedelta(minutes=1),
    )
