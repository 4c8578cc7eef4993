"""Querysets compiled once and run with new parameters."""

import pytest

from coordination.models import Agent, AgentToken
from coordination.services import agent_create
from pattern_site.db.compiled import CompiledQuery

pytestmark = pytest.mark.django_db

BY_NAME = CompiledQuery(
    lambda constellation_id, name: (
        Agent.objects.select_related("constellation")
        .filter(constellation_id=constellation_id, name=name)
        .order_by()[:1]
    ),
    constellation_id=-91_001,
    name="\x00name",
)


def test_runs_with_each_call_s_values_and_attaches_related_rows(constellation):
    first, _ = agent_create(constellation=constellation, name="Flux")
    second, _ = agent_create(constellation=constellation, name="Anchor")

    for expected in (first, second, first):
        found = BY_NAME.first(constellation_id=constellation.pk, name=expected.name)
        assert found == expected
        assert found.created_at == expected.created_at  # converters applied
        assert Agent.constellation.is_cached(found)
        assert found.constellation.name == constellation.name

    assert BY_NAME.first(constellation_id=constellation.pk, name="Nobody") is None
    assert BY_NAME.first(constellation_id=constellation.pk + 1, name="Flux") is None


def test_a_marker_that_is_not_one_parameter_is_refused(constellation):
    twice = CompiledQuery(
        lambda key: (
            AgentToken.objects.filter(key_hash=key)
            | AgentToken.objects.filter(prefix=key)
        ),
        key="\x00key",
    )
    with pytest.raises(ValueError, match="not one parameter"):
        twice.first(key="x")
