"""Who may see constellations and agents, and act on an agent's private
memory: the one place that decides.

A human sees the constellations they are partner or member of; an agent
sees only its own constellation; the system sees all.  An agent's private
memory (its blocks, long-term memory and built context) is the agent's
own and its constellation's humans'; for other agents it does not exist.
"""

from django.db.models import Q

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.errors import PermissionDenied


def constellation_filter(actor: Actor) -> Q | None:
    """The constellations ``actor`` belongs to, as a filter (None: all)."""
    if actor.kind == "system":
        return None
    if actor.kind == "agent":
        assert actor.agent is not None
        return Q(pk=actor.agent.constellation_id)
    assert actor.user is not None
    return Q(partner=actor.user) | Q(members=actor.user)


def agent_can_change(actor: Actor) -> bool:
    """Reconfiguring agents is for the partner and members, never agents."""
    return actor.kind != "agent"


def agent_private_allowed(actor: Actor, agent: Agent) -> bool:
    """Whether ``actor`` may use ``agent``'s private memory (``agent`` is
    already known to be visible to ``actor``)."""
    if actor.kind == "agent":
        assert actor.agent is not None
        return agent.pk == actor.agent.pk
    return True


def agent_is_self(actor: Actor, agent_id: int | None) -> bool:
    """Whether ``actor`` is the agent ``agent_id`` (or, without an id, an
    agent speaking for itself)."""
    if actor.agent is None:
        return False
    return agent_id is None or agent_id == actor.agent.pk


def constellation_can_export(actor: Actor, constellation: Constellation) -> bool:
    """Taking a whole constellation away (its backup) is for its partner."""
    return actor.user is not None and constellation.partner_id == actor.user.pk


def constellation_can_import(actor: Actor) -> bool:
    """Any person may bring a constellation in: they become its partner."""
    return actor.kind == "human"


def constellation_can_administer(actor: Actor, constellation: Constellation) -> bool:
    """Making agents, handing out their credentials and talking with them
    directly is for the constellation's partner."""
    return actor.user is not None and constellation.partner_id == actor.user.pk


def constellation_check_administer(
    *, actor: Actor, constellation: Constellation
) -> None:
    if not constellation_can_administer(actor, constellation):
        raise PermissionDenied(
            f"only the partner of {constellation.name!r} may create its agents,"
            " manage their API tokens and chat with them"
        )
