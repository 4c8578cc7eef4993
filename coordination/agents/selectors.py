"""Reads of constellations and agents, and who may see them.

A human sees the constellations they are partner or member of; an agent
sees only its own constellation.  Anything else does not exist for the
caller (``NotFound``), so ids of other constellations leak nothing.
"""

from django.db.models import Q, QuerySet

from coordination.actors import Actor
from coordination.errors import NotFound, PermissionDenied
from coordination.models import Agent, Constellation


def constellation_list_for_actor(*, actor: Actor) -> QuerySet[Constellation]:
    qs = Constellation.objects.select_related("partner")
    if actor.kind == "system":
        return qs.all()
    if actor.kind == "agent":
        assert actor.agent is not None
        return qs.filter(pk=actor.agent.constellation_id)
    assert actor.user is not None
    return qs.filter(Q(partner=actor.user) | Q(members=actor.user)).distinct()


def constellation_get_for_actor(
    *, actor: Actor, constellation_id: int
) -> Constellation:
    constellation = (
        constellation_list_for_actor(actor=actor).filter(pk=constellation_id).first()
    )
    if constellation is None:
        raise NotFound(f"constellation {constellation_id} does not exist")
    return constellation


def agent_list_for_actor(
    *, actor: Actor, constellation_id: int | None = None
) -> QuerySet[Agent]:
    visible = constellation_list_for_actor(actor=actor).values("pk")
    qs = Agent.objects.select_related("constellation").filter(constellation__in=visible)
    if constellation_id is not None:
        qs = qs.filter(constellation_id=constellation_id)
    return qs


def agent_get_for_actor(*, actor: Actor, agent_id: int) -> Agent:
    agent = agent_list_for_actor(actor=actor).filter(pk=agent_id).first()
    if agent is None:
        raise NotFound(f"agent {agent_id} does not exist")
    return agent


def agent_get_by_name(*, constellation_name: str, agent_name: str) -> Agent:
    """For operators (management commands): look an agent up by names."""
    agent = (
        Agent.objects.select_related("constellation")
        .filter(constellation__name=constellation_name, name=agent_name)
        .first()
    )
    if agent is None:
        raise NotFound(
            f"no agent named {agent_name!r} in constellation {constellation_name!r}"
        )
    return agent


def agent_get_for_change(*, actor: Actor, agent_id: int) -> Agent:
    """An agent the actor may reconfigure: humans of its constellation only."""
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    if actor.kind == "agent":
        raise PermissionDenied(
            "agents cannot reconfigure agents; the partner or a member can"
        )
    return agent
