"""The demo constellation's memory: blocks from templates and a few
archival facts."""

from __future__ import annotations

from django.db import (
    transaction,
)

from memory.blocks.models import BlockType, Permission
from memory.blocks.services import block_create
from memory.roles import role_blocks_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Constellation
from pattern_site.kernel.agents.roles import role_template_get

DEMO_ORGANIZATION_POLICIES = (
    "Be kind and direct. Small steps beat big plans. Ask before committing "
    "the partner's time. Never shame missed tasks; adjust the plan instead."
)


@transaction.atomic
def memory_demo_seed(*, constellation: Constellation) -> int:
    """Give a freshly seeded demo constellation's agents their first blocks.

    Each agent gets a persona, a human block, a pinned scratchpad and a
    pinned plain-text notes block (the kind the live editor edits as text);
    the constellation gets a read-only organization block and a shared task
    board.  Returns how many blocks were made.
    """
    system = Actor.system()
    made = 0
    block_create(
        actor=system,
        constellation=constellation,
        label="organization",
        template="organization",
        permission=Permission.READ_ONLY,
        content={"name": constellation.name, "policies": DEMO_ORGANIZATION_POLICIES},
    )
    block_create(
        actor=system,
        constellation=constellation,
        label="task_board",
        description="Shared task tracking for the whole constellation",
        schema={"kind": "list", "max_items": 50, "style": "checkbox"},
        block_type=BlockType.WORKING,
        pinned=True,
        content=[{"text": "Morning check-in with the partner", "done": False}],
    )
    made += 2
    for agent in constellation.agents.all():
        role_blocks_create(
            actor=system, agent=agent, template=role_template_get(agent.name)
        )
        block_create(
            actor=system,
            owner=agent,
            label="scratchpad",
            template="scratchpad",
            pinned=True,
        )
        block_create(
            actor=system,
            owner=agent,
            label="notes",
            template="custom",
            description="Free-form notes in plain text",
            pinned=True,
            content=f"{agent.name}'s notes. Anything worth keeping at hand.",
        )
        made += 4
    return made
