"""pattern_site.kernel.agents.permissions and the selectors built on them: who sees
which constellation and whose private memory an actor may use."""

import pytest

from coordination.models import Constellation
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.permissions import (
    agent_can_change,
    agent_private_allowed,
    constellation_filter,
)
from pattern_site.kernel.agents.selectors import (
    agent_get_private,
    constellation_for_actor,
)
from pattern_site.kernel.errors import InvalidInput, NotFound
from tests.factories import AgentFactory, ConstellationFactory, UserFactory


def _names(actor) -> set[str]:
    condition = constellation_filter(actor)
    qs = Constellation.objects.all()
    return set(
        (qs if condition is None else qs.filter(condition)).values_list(
            "name", flat=True
        )
    )


def test_constellations_visible_to_partner_member_agent_and_system(
    agent, constellation, partner
):
    ConstellationFactory(name="Elsewhere")
    member = UserFactory(username="member")
    constellation.members.add(member)
    assert _names(Actor.for_user(partner)) == {"Pattern"}
    assert _names(Actor.for_user(member)) == {"Pattern"}
    assert _names(Actor.for_agent(agent)) == {"Pattern"}
    assert _names(Actor.for_user(UserFactory(username="nobody"))) == set()
    assert _names(Actor(kind="system")) == {"Pattern", "Elsewhere"}


def test_only_people_reconfigure_agents(agent, partner):
    assert agent_can_change(Actor.for_user(partner))
    assert not agent_can_change(Actor.for_agent(agent))


def test_an_agents_private_memory_is_its_own_and_its_peoples(
    agent, constellation, partner
):
    other = AgentFactory(constellation=constellation, name="Anchor")
    assert agent_private_allowed(Actor.for_agent(agent), agent)
    assert not agent_private_allowed(Actor.for_agent(other), agent)
    assert agent_private_allowed(Actor.for_user(partner), agent)


def test_agent_get_private_answers_404_for_another_agent(agent, constellation):
    other = AgentFactory(constellation=constellation, name="Anchor")
    assert agent_get_private(actor=Actor.for_agent(agent), agent_id=None) == agent
    with pytest.raises(NotFound):
        agent_get_private(actor=Actor.for_agent(agent), agent_id=other.pk)
    far = AgentFactory(constellation=ConstellationFactory())
    with pytest.raises(NotFound):
        agent_get_private(actor=Actor.for_agent(agent), agent_id=far.pk)


def test_people_name_the_agent_they_mean(agent, partner):
    human = Actor.for_user(partner)
    assert agent_get_private(actor=human, agent_id=agent.pk) == agent
    with pytest.raises(InvalidInput, match="agent_id"):
        agent_get_private(actor=human, agent_id=None)


def test_constellation_for_actor_needs_a_choice_only_when_there_is_one(
    agent, constellation, partner
):
    human = Actor.for_user(partner)
    assert constellation_for_actor(actor=human, constellation_id=None, what="x") == (
        constellation
    )
    ConstellationFactory(partner=partner, name="Second")
    with pytest.raises(InvalidInput, match="say which constellation to x"):
        constellation_for_actor(actor=human, constellation_id=None, what="x")
    assert (
        constellation_for_actor(
            actor=Actor.for_agent(agent), constellation_id=None, what="x"
        )
        == constellation
    )
