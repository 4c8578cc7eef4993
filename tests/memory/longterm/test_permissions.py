"""memory.longterm.permissions: whose long-term memory each caller sees."""

import pytest

from memory.longterm.models import ArchivalEntry
from memory.longterm.permissions import (
    longterm_own_agent,
    longterm_rows_visible,
    retrieval_config_change_check,
)
from memory.longterm.services import archival_entry_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import PermissionDenied
from tests.factories import AgentFactory, ConstellationFactory, UserFactory


@pytest.fixture
def entries(agent, constellation):
    other = AgentFactory(constellation=constellation, name="Anchor")
    elsewhere = AgentFactory(constellation=ConstellationFactory(), name="Far")
    return {
        name: archival_entry_create(agent=owner, content=f"fact of {name}")
        for name, owner in (("mine", agent), ("other", other), ("far", elsewhere))
    }


def _seen(actor, agent_id=None) -> set[str]:
    qs = longterm_rows_visible(
        ArchivalEntry.objects.all(), actor=actor, agent_id=agent_id
    )
    return {entry.content.removeprefix("fact of ") for entry in qs}


def test_an_agent_sees_only_its_own_long_term_memory(agent, entries):
    actor = Actor.for_agent(agent)
    assert _seen(actor) == {"mine"}
    assert _seen(actor, agent_id=agent.pk) == {"mine"}
    assert _seen(actor, agent_id=entries["other"].agent_id) == set()


def test_humans_see_their_constellations_agents_memory(partner, entries):
    human = Actor.for_user(partner)
    assert _seen(human) == {"mine", "other"}
    assert _seen(human, agent_id=entries["other"].agent_id) == {"other"}
    assert _seen(human, agent_id=entries["far"].agent_id) == set()


def test_people_outside_every_constellation_see_nothing(entries):
    assert _seen(Actor.for_user(UserFactory(username="stranger"))) == set()


def test_agents_search_only_their_own_memory_humans_everyones(agent, partner):
    assert longterm_own_agent(Actor.for_agent(agent)) == agent.pk
    assert longterm_own_agent(Actor.for_user(partner)) is None


def test_only_people_tune_search(agent, partner):
    retrieval_config_change_check(Actor.for_user(partner))
    with pytest.raises(PermissionDenied):
        retrieval_config_change_check(Actor.for_agent(agent))
