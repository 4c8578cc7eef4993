"""Who may read activity, flag notable events and read a catch-up digest.

Every right about activity events, summaries and digests is decided here.
A constellation the actor cannot see does not exist for it (``NotFound``).
"""

from collections.abc import Callable

from django.db.models import Q, QuerySet

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.agents.selectors import (
    agent_get_for_actor,
    constellation_get_for_actor,
)
from pattern_site.kernel.errors import NotFound, PermissionDenied

# kind -> the ids of the objects of that kind ``actor`` may read, as decided
# by that kind's own permission module (registered by its app).
ReadableIds = Callable[[Actor], QuerySet]
_READABLE: dict[str, ReadableIds] = {}


def activity_object_kind_register(*, kind: str, readable_ids: ReadableIds) -> None:
    """Events about objects of ``kind`` are read by whoever may read the
    object (``readable_ids(actor)``: a queryset of the ids they may read),
    decided afresh at each read so that losing a right hides them at once.
    Called by the app that owns the kind, from its ``AppConfig.ready``."""
    _READABLE[kind] = readable_ids


def activity_visible(actor: Actor, *, via: str = "") -> Q:
    """The events ``actor`` may read within a constellation it reads: those
    about the constellation as a whole, and those about an object it may
    read.  An object of a kind nobody registered is read by nobody.  ``via``
    prefixes the lookups for a query that reaches events through a relation
    (``"event__"`` from the keyword postings)."""
    visible = Q(**{f"{via}object_kind": ""})
    for kind, readable_ids in _READABLE.items():
        visible |= Q(
            **{f"{via}object_kind": kind, f"{via}object_id__in": readable_ids(actor)}
        )
    return visible


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
