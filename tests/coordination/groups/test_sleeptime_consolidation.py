"""Sleeptime consolidation end to end, against the scripted LLM server: the
agents store observations with a domain, a sleeptime group's trigger wakes
the Archive agent in its tool loop (the real registry, its own rights), it
reads every agent's recent observations (the consolidator role's right),
stores a meta-pattern and updates the block it shares, and the other
agents' next context shows the update."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from coordination.groups.models import AgentTurn, RunStatus
from coordination.groups.services.sleeptime import group_sleeptime_check
from memory.blocks.models import BlockType, SharedAccess
from memory.blocks.services import block_create, block_share
from memory.context import context_build
from memory.longterm.models import ArchivalEntry
from memory.longterm.search import memory_search
from memory.longterm.services import archival_role_set
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_update
from pattern_site.kernel.errors import PermissionDenied
from pattern_site.kernel.tools import tool_call

pytestmark = pytest.mark.django_db

OBSERVATIONS = {
    "Entropy": (
        "Tasks labeled 'quick fix' average 3.2x estimated time",
        "task_patterns",
    ),
    "Flux": ("Meetings after 2pm overrun by 25 minutes on average", "time_patterns"),
}
INSIGHT = "Note: schedule creative work before meetings today"


@pytest.fixture(autouse=True)
def every_piece_a_chunk(settings):
    settings.GROUPS_LLM_CHUNK_SECONDS = 0


def observe(agents):
    for name, (content, domain) in OBSERVATIONS.items():
        stored = tool_call(
            actor=Actor.for_agent(agents[name]),
            name="archival_memory_insert",
            arguments={"content": content, "domain": domain},
        )
        assert stored.ok, stored.text
        assert stored.value["metadata"] == {"domain": domain}


@pytest.fixture
def archive(agents, partner):
    archive = agent_update(
        agent=agents["Archive"], model_name="gpt-4o-mini", answered_by_llm=True
    )
    archival_role_set(actor=Actor.for_user(partner), agent=archive, role="consolidator")
    insights = block_create(
        actor=Actor.system(),
        label="shared_insights",
        owner=archive,
        block_type=BlockType.CORE,
        content="Cross-agent insights: none yet.",
    )
    for name in ("Pattern", "Entropy", "Flux"):
        block_share(
            actor=Actor.system(),
            block=insights,
            agent=agents[name],
            access=SharedAccess.READ_ONLY,
        )
    return archive


@pytest.fixture
def consolidation(make_group):
    return make_group(
        "sleeptime",
        [("Pattern", "regular"), ("Archive", "supervisor")],
        config={
            "check_interval": 60,
            "triggers": [
                {
                    "name": "constellation_sync",
                    "condition": {"kind": "time_elapsed", "duration": 1800},
                    "priority": "medium",
                }
            ],
        },
        name="Memory Consolidation",
    )


def tool_result(request: dict, call_id: str) -> str:
    (content,) = [
        m["content"]
        for m in request["body"]["messages"]
        if m["role"] == "tool" and m["tool_call_id"] == call_id
    ]
    return content


def test_the_archive_agent_consolidates_every_agents_observations_on_a_trigger(
    agents, archive, consolidation, llm, django_capture_on_commit_callbacks
):
    observe(agents)
    llm.answer_tools(("s1", "observations_search", {"since_hours": 24}))
    llm.answer_tools(
        (
            "s2",
            "archival_memory_insert",
            {
                "content": "Cross-agent pattern: work after 2pm meetings overruns",
                "domain": "meta_patterns",
            },
        ),
        (
            "s3",
            "memory_replace",
            {
                "label": "shared_insights",
                "old_str": "none yet.",
                "new_str": INSIGHT,
            },
        ),
    )
    llm.answer_tools(("s4", "send_message", {"message": "Consolidated 2 notes."}))

    with django_capture_on_commit_callbacks(execute=True):
        # An hour after the group was made: its time_elapsed trigger fires.
        run = group_sleeptime_check(
            group_id=consolidation.pk, now=timezone.now() + timedelta(hours=1)
        )
    assert run is not None
    run.refresh_from_db()

    assert run.status == RunStatus.COMPLETED
    turn = AgentTurn.objects.get(agent=archive)
    assert (turn.status, turn.exit) == ("completed", "send_message")
    # The trigger's prompt reached Archive's model as its user message.
    first = llm.requests[0]["body"]["messages"]
    assert "constellation_sync" in first[-1]["content"]
    # It read the observations of other agents, with their domains.
    seen = json.loads(tool_result(llm.requests[1], "s1"))
    assert {(o["agent"], o["domain"], o["content"]) for o in seen} == {
        (name, domain, content) for name, (content, domain) in OBSERVATIONS.items()
    }
    (meta,) = ArchivalEntry.objects.filter(agent=archive)
    assert meta.metadata == {"domain": "meta_patterns"}
    # Every agent it shares the block with sees the insight next time.
    for name in ("Pattern", "Entropy", "Flux"):
        system = context_build(agent=agents[name]).system_prompt
        assert INSIGHT in system
        assert 'shared_from="Archive"' in system


def test_only_the_consolidator_reads_other_agents_observations(
    agents, archive, partner
):
    observe(agents)
    flux = Actor.for_agent(agents["Flux"])

    refused = tool_call(actor=flux, name="observations_search", arguments={})
    assert not refused.ok
    assert "consolidator role" in refused.text
    with pytest.raises(PermissionDenied):
        memory_search(actor=flux, query="meetings", all_agents=True)
    # Its own search still finds its own observation, never Entropy's.
    own = memory_search(actor=flux, query="tasks meetings overrun estimated")
    assert {hit.row.agent_id for _kind, hit in own.hits} == {agents["Flux"].pk}
    # An agent cannot give itself the role; the consolidator reads them all.
    with pytest.raises(PermissionDenied):
        archival_role_set(actor=flux, agent=agents["Flux"], role="consolidator")
    found = tool_call(
        actor=Actor.for_agent(archive),
        name="observations_search",
        arguments={"domain": "task_patterns"},
    )
    assert found.ok
    assert [o["agent"] for o in found.value] == ["Entropy"]
    # Taken back, the right is gone.
    archival_role_set(actor=Actor.for_user(partner), agent=archive, role=None)
    assert not tool_call(
        actor=Actor.for_agent(archive), name="observations_search", arguments={}
    ).ok
