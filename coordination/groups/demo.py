"""The demo constellation's groups (seed 003's example) and its Archive
agent set up to consolidate memory in sleeptime.

Archive is answered by the LLM (``PATTERN_LLM_MODEL``, or gpt-4o-mini)
and holds the archival consolidator role; it owns ``shared_insights``, a
core block shared read-only with every other agent, so what it
consolidates reaches their next context.  Without an LLM provider its
turns cannot run: the sleeptime check skips it and the pages say why.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from coordination.groups.models import AgentGroup
from coordination.groups.services import (
    group_create,
    group_member_add,
    group_update,
)
from memory.blocks.models import BlockType, SharedAccess
from memory.blocks.services import block_create, block_share
from memory.longterm.services import archival_role_set
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.agents.services import agent_update

INSIGHTS_LABEL = "shared_insights"
ARCHIVE_DESCRIPTION = (
    "In sleeptime, reads every agent's recent observations"
    " (observations_search), stores the patterns across them"
    " (archival_memory_insert, domain meta_patterns) and keeps the key"
    f" insights in its {INSIGHTS_LABEL} block, which every agent reads."
)
# Seed 003's sleeptime triggers: a long stretch without a check-in, and
# enough constellation activity (or an hour) since the last consolidation.
SLEEPTIME_CONFIG = {
    "check_interval": 20 * 60,
    "triggers": [
        {
            "name": "hyperfocus_check",
            "condition": {"kind": "time_elapsed", "duration": 90 * 60},
            "priority": "high",
        },
        {
            "name": "constellation_sync",
            "condition": {
                "kind": "constellation_activity",
                "message_threshold": 20,
                "time_threshold": 60 * 60,
            },
            "priority": "medium",
        },
    ],
}


def _archive_set_up(archive: Agent, others: list[Agent]) -> None:
    agent_update(
        agent=archive,
        model_name=archive.model_name or settings.LLM_MODEL or "gpt-4o-mini",
        answered_by_llm=True,
        description=ARCHIVE_DESCRIPTION,
    )
    archival_role_set(actor=Actor.system(), agent=archive, role="consolidator")
    insights = block_create(
        actor=Actor.system(),
        label=INSIGHTS_LABEL,
        owner=archive,
        block_type=BlockType.CORE,
        description="Cross-agent insights Archive consolidates in sleeptime",
        content="Cross-agent insights: none yet.",
    )
    for agent in others:
        block_share(
            actor=Actor.system(),
            block=insights,
            agent=agent,
            access=SharedAccess.READ_ONLY,
        )


@transaction.atomic
def groups_demo_seed(*, constellation: Constellation) -> list[AgentGroup]:
    """Seed 003's groups for the demo agents (those missing are left out)
    and the Archive agent's consolidation; the groups made."""
    agents = {a.name: a for a in constellation.agents.all()}

    def make(
        name: str,
        pattern: str,
        members: list[tuple[str, str]],
        config: dict | None = None,
    ) -> AgentGroup | None:
        present = [(n, role) for n, role in members if n in agents]
        if not present:
            return None
        group = group_create(
            constellation=constellation, name=name, pattern=pattern, config={}
        )
        for member, role in present:
            group_member_add(group=group, agent=agents[member], role=role)
        if config:
            # A config naming agents is checked once they are members.
            group = group_update(group=group, config=config)
        return group

    everyone = [(n, "regular") for n in agents]
    made = [
        make("Main Support", "dynamic", everyone, {"selector": "capability"}),
        make(
            "Crisis Response",
            "round_robin",
            [("Pattern", "regular"), ("Momentum", "regular"), ("Anchor", "regular")],
        ),
        make(
            "Planning",
            "supervisor",
            [("Entropy", "supervisor"), ("Flux", "regular"), ("Pattern", "regular")],
        ),
    ]
    archive = agents.get("Archive")
    if archive is not None:
        _archive_set_up(archive, [a for a in agents.values() if a.pk != archive.pk])
        made.append(
            make(
                "Memory Consolidation",
                "sleeptime",
                [("Pattern", "regular"), ("Archive", "supervisor")],
                {**SLEEPTIME_CONFIG, "intervention_agent_id": archive.pk},
            )
        )
    return [g for g in made if g is not None]
