"""Agents made from role templates: the agent, and its first memory (a
persona block that starts with the template's persona text and an empty
human block)."""

from django.db import transaction

from memory.blocks.services import block_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.agents.permissions import constellation_check_administer
from pattern_site.kernel.agents.roles import RoleTemplate, role_template_get
from pattern_site.kernel.agents.services import (
    IssuedToken,
    agent_create,
    agent_update,
)


@transaction.atomic
def role_blocks_create(*, actor: Actor, agent: Agent, template: RoleTemplate) -> None:
    block_create(
        actor=actor,
        owner=agent,
        label="persona",
        template="persona",
        content={
            "name": agent.name,
            "style": template.role,
            "guidelines": template.persona,
            "traits": [],
        },
    )
    block_create(actor=actor, owner=agent, label="human", template="human")


@transaction.atomic
def agent_create_from_role(
    *,
    actor: Actor,
    constellation: Constellation,
    template: str,
    name: str,
    model_name: str = "",
    answered_by_llm: bool = False,
) -> tuple[Agent, IssuedToken]:
    """A new agent of ``constellation`` from the role template named
    ``template``: its role, its first blocks, its model and first token."""
    constellation_check_administer(actor=actor, constellation=constellation)
    role = role_template_get(template)
    agent, issued = agent_create(
        constellation=constellation,
        name=name.strip(),
        role=role.role,
        model_name=model_name.strip(),
    )
    if answered_by_llm:
        agent = agent_update(agent=agent, answered_by_llm=True, actor=actor)
    role_blocks_create(actor=actor, agent=agent, template=role)
    return agent, issued
