"""Reads of constellations and agents (rights:
``pattern_site.kernel.agents.permissions``).

A human sees the constellations they are partner or member of; an agent
sees only its own constellation.  Anything else does not exist for the
caller (``NotFound``), so ids of other constellations leak nothing.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent, AgentToken, Constellation
from pattern_site.kernel.agents.permissions import (
    agent_can_change,
    agent_private_allowed,
    constellation_check_administer,
    constellation_filter,
)
from pattern_site.kernel.errors import InvalidInput, NotFound, PermissionDenied


def constellation_list_for_actor(*, actor: Actor) -> QuerySet[Constellation]:
    qs = Constellation.objects.select_related("partner")
    condition = constellation_filter(actor)
    return qs.all() if condition is None else qs.filter(condition).distinct()


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
    """The agents of the actor's constellations (of one, which must be
    visible: otherwise ``NotFound``)."""
    visible = constellation_list_for_actor(actor=actor).values("pk")
    qs = Agent.objects.select_related("constellation").filter(constellation__in=visible)
    if constellation_id is not None:
        constellation_get_for_actor(actor=actor, constellation_id=constellation_id)
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


def agent_get_by_name_for_agent(*, agent: Agent, name: str) -> Agent:
    """The agent called ``name`` in ``agent``'s constellation (as agents name
    each other); one of another constellation does not exist for it."""
    found = (
        Agent.objects.select_related("constellation")
        .filter(constellation_id=agent.constellation_id, name=name)
        .first()
    )
    if found is None:
        raise NotFound(f"no agent named {name!r} in your constellation")
    return found


def agent_get_for_change(*, actor: Actor, agent_id: int) -> Agent:
    """An agent the actor may reconfigure: humans of its constellation only."""
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    if not agent_can_change(actor):
        raise PermissionDenied(
            "agents cannot reconfigure agents; the partner or a member can"
        )
    return agent


def agent_get_for_partner(*, actor: Actor, agent_id: int) -> Agent:
    """An agent whose credentials and chat ``actor`` may use: its
    constellation's partner only."""
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    constellation_check_administer(actor=actor, constellation=agent.constellation)
    return agent


def constellation_get_for_partner(
    *, actor: Actor, constellation_id: int
) -> Constellation:
    """A constellation ``actor`` may add agents to: as its partner."""
    constellation = constellation_get_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    constellation_check_administer(actor=actor, constellation=constellation)
    return constellation


def agent_token_list(*, agent: Agent, limit: int = 5) -> list[AgentToken]:
    """The agent's newest tokens (active first is the newest: issuing one
    revokes the others)."""
    return list(AgentToken.objects.filter(agent=agent).order_by("-created_at")[:limit])


def agent_get_private(*, actor: Actor, agent_id: int | None) -> Agent:
    """The agent whose private memory ``actor`` means: an agent itself
    (``agent_id`` may be left out), or for humans any agent of their
    constellations (``agent_id`` required).  Other agents: ``NotFound``."""
    if agent_id is None:
        if actor.agent is None:
            raise InvalidInput("say which agent this is about (agent_id)")
        return actor.agent
    if actor.agent is not None and agent_id == actor.agent.pk:
        return actor.agent
    agent = agent_get_for_actor(actor=actor, agent_id=agent_id)
    if not agent_private_allowed(actor, agent):
        raise NotFound(f"agent {agent_id} does not exist")
    return agent


def constellation_for_actor(
    *, actor: Actor, constellation_id: int | None, what: str
) -> Constellation:
    """The constellation ``actor`` means: an agent's own; for a human the
    one named, or the only one they belong to."""
    if actor.agent is not None:
        return actor.agent.constellation
    if constellation_id is not None:
        return constellation_get_for_actor(
            actor=actor, constellation_id=constellation_id
        )
    visible = list(constellation_list_for_actor(actor=actor)[:2])
    if len(visible) != 1:
        raise InvalidInput(
            f"say which constellation to {what} (constellation_id)"
            if visible
            else "you belong to no constellation"
        )
    return visible[0]


DEMO_LOGIN_FILE = "demo-login.txt"


def demo_login_path() -> Path:
    """Where the demo partner's login is kept for the operator: the data
    directory, beside the database it belongs to."""
    return Path(settings.DATA_DIR) / DEMO_LOGIN_FILE


@dataclass(frozen=True)
class DemoLogin:
    username: str
    password: str
    path: Path


def demo_login_get() -> DemoLogin | None:
    """The demo partner's login as ``demo_login_write`` kept it, or None when
    this site was not seeded with the demo (or the file was removed)."""
    path = demo_login_path()
    try:
        username, password = path.read_text().splitlines()[:2]
    except (OSError, ValueError):
        return None
    return DemoLogin(username=username, password=password, path=path)


def actor_names(*, refs: Iterable[str]) -> dict[str, str]:
    """What people call each actor named by an ``Actor.ref`` ("agent:3",
    "human:7", "system:system"): an agent by its name, a person by their
    username, the system as "System"; anything else stays as it is.  At
    most two queries however many refs."""
    agent_ids, user_ids = set(), set()
    for ref in refs:
        kind, _, pk = ref.partition(":")
        if pk.isdigit() and kind == "agent":
            agent_ids.add(int(pk))
        elif pk.isdigit() and kind == "human":
            user_ids.add(int(pk))
    # No lookup without ids: putting an empty one together costs the ORM a
    # millisecond, and every message an agent's turn stores has no author.
    names = (
        {
            f"agent:{pk}": name
            for pk, name in Agent.objects.filter(pk__in=agent_ids).values_list(
                "pk", "name"
            )
        }
        if agent_ids
        else {}
    )
    if user_ids:
        User = get_user_model()
        names.update(
            (f"human:{pk}", username)
            for pk, username in User.objects.filter(pk__in=user_ids).values_list(
                "pk", User.USERNAME_FIELD
            )
        )
    return {
        ref: names.get(ref, "System" if ref.startswith("system") else ref)
        for ref in refs
    }
