"""Who may read activity, flag notable events and read a catch-up digest.

Every right about activity events, summaries and digests is decided here.
A constellation the actor cannot see does not exist for it (``NotFound``).
"""

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.agents.selectors import (
    agent_get_for_actor,
    constellation_get_for_actor,
)
from pattern_site.kernel.errors import NotFound, PermissionDenied


def activity_constellation_for_read(
    *, actor: Actor, constellation_id: int | None
) -> Constellation:
    """The constellation whose activity ``actor`` reads.  An agent reads
    its own (it may omit the id); a human must name one they belong to."""
    if actor.kind == "agent":
        assert actor.agent is not None
        own = actor.agent.constellation_id
        if constellation_id not in (None, own):
            raise NotFound(f"constellation {constellation_id} does not exist")
        return actor.agent.constellation
    if constellation_id is None:
        raise NotFound("name the constellation (constellation_id)")
    return constellation_get_for_actor(actor=actor, constellation_id=constellation_id)


def notable_constellation_for_flag(
    *, actor: Actor, constellation_id: int | None
) -> Constellation:
    """Anyone who reads a constellation's activity may flag a notable event."""
    return activity_constellation_for_read(
        actor=actor, constellation_id=constellation_id
    )


def agents_involved_for_flag(
    *, actor: Actor, constellation: Constellation, agent_ids: list[int]
) -> list[Agent]:
    agents = []
    for agent_id in dict.fromkeys(agent_ids):
        agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
        if agent.constellation_id != constellation.pk:
            raise NotFound(f"agent {agent_id} does not exist")
        agents.append(agent)
    return agents


def catch_up_agent_for_read(*, actor: Actor, agent_id: int | None) -> Agent:
    """An agent reads its own catch-up; a human, any agent they can see."""
    if actor.kind == "agent":
        assert actor.agent is not None
        if agent_id is None or agent_id == actor.agent.pk:
            return actor.agent
        other = agent_get_for_actor(actor=actor, agent_id=agent_id)
        raise PermissionDenied(
            f"an agent reads only its own catch-up, not {other.name}'s"
        )
    if agent_id is None:
        raise NotFound("name the agent (agent_id)")
    return agent_get_for_actor(actor=actor, agent_id=agent_id)
