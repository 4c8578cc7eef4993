"""Querysets compiled once and run with new parameters."""

import pytest
from django.db import connection
from django.db.models import Count
from django.db.models.signals import post_init

from coordination.models import Agent, AgentToken
from pattern_site.kernel.agents.services import agent_create
from pattern_site.kernel.db.compiled import CompiledQuery, RowReader

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


def test_all_returns_every_row_in_order_with_related_rows(constellation):
    in_constellation = CompiledQuery(
        lambda constellation_id: (
            Agent.objects.select_related("constellation")
            .filter(constellation_id=constellation_id)
            .order_by("name")
        ),
        constellation_id=-91_002,
    )
    for name in ("Flux", "Anchor", "Momentum"):
        agent_create(constellation=constellation, name=name)
    found = in_constellation.all(constellation_id=constellation.pk)
    assert [a.name for a in found] == ["Anchor", "Flux", "Momentum"]
    assert all(Agent.constellation.is_cached(a) for a in found)
    assert in_constellation.all(constellation_id=constellation.pk + 1) == []


def test_a_marker_in_several_places_takes_the_value_in_each(constellation):
    either = CompiledQuery(
        lambda key: (
            AgentToken.objects.filter(key_hash=key)
            | AgentToken.objects.filter(prefix=key)
        ).order_by("pk"),
        key="\x00key",
    )
    flux, _ = agent_create(constellation=constellation, name="Flux")
    AgentToken.objects.all().delete()
    by_hash = AgentToken.objects.create(agent=flux, prefix="p1", key_hash="k1")
    by_prefix = AgentToken.objects.create(agent=flux, prefix="k2", key_hash="h2")
    assert [t.pk for t in either.all(key="k1")] == [by_hash.pk]
    assert [t.pk for t in either.all(key="k2")] == [by_prefix.pk]
    assert either.all(key="zz") == []


def test_a_marker_that_is_no_parameter_is_refused(constellation):
    missing = CompiledQuery(
        lambda key: AgentToken.objects.filter(key_hash="fixed"), key="\x00key"
    )
    with pytest.raises(ValueError, match="not a parameter"):
        missing.first(key="x")


def test_an_annotation_is_set_on_each_instance(constellation):
    with_tokens = CompiledQuery(
        lambda constellation_id: (
            Agent.objects.filter(constellation_id=constellation_id)
            .annotate(token_count=Count("tokens"))
            .order_by("name")
        ),
        constellation_id=-91_004,
    )
    flux, _ = agent_create(constellation=constellation, name="Flux")
    agent_create(constellation=constellation, name="Anchor")
    AgentToken.objects.all().delete()
    AgentToken.objects.create(agent=flux, prefix="p1", key_hash="h1")
    found = with_tokens.all(constellation_id=constellation.pk)
    assert [(a.name, a.token_count) for a in found] == [("Anchor", 0), ("Flux", 1)]


def test_rows_of_one_related_row_share_its_instance_with_nested_rows(
    constellation, partner
):
    """``RowReader`` builds a related row once per call (search hits of one
    agent), nested ``select_related`` rows included, nulls kept."""
    flux, _ = agent_create(constellation=constellation, name="Flux")
    anchor, _ = agent_create(constellation=constellation, name="Anchor")
    AgentToken.objects.all().delete()
    for n, agent in enumerate((flux, flux, anchor)):
        AgentToken.objects.create(agent=agent, prefix=f"p{n}", key_hash=f"h{n}")
    qs = AgentToken.objects.select_related("agent__constellation").order_by("pk")
    compiler = qs.query.get_compiler(using="default")
    sql, params = compiler.as_sql()
    reader = RowReader.of(compiler, "default")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        tokens = list(reader.instances(cursor.fetchall()))
    assert [t.agent.name for t in tokens] == ["Flux", "Flux", "Anchor"]
    assert tokens[0].agent is tokens[1].agent
    assert tokens[0].agent is not tokens[2].agent
    assert tokens[0].agent.constellation is tokens[2].agent.constellation
    assert tokens[2].agent.constellation.partner_id == partner.pk
    assert tokens[0].agent.created_at == flux.created_at  # converters applied


def test_a_values_query_returns_rows_with_each_column_converted(constellation):
    """``first_row``/``rows`` read a ``values_list`` queryset as tuples, with
    the columns the database stores as text (a time) converted back."""
    latest = CompiledQuery(
        lambda constellation_id: (
            Agent.objects.filter(constellation_id=constellation_id)
            .order_by("name")
            .values_list("name", "created_at")
        ),
        constellation_id=-91_003,
    )
    flux, _ = agent_create(constellation=constellation, name="Flux")
    anchor, _ = agent_create(constellation=constellation, name="Anchor")

    assert latest.rows(constellation_id=constellation.pk) == [
        ("Anchor", anchor.created_at),
        ("Flux", flux.created_at),
    ]
    assert latest.first_row(constellation_id=constellation.pk) == (
        "Anchor",
        anchor.created_at,
    )
    assert latest.first_row(constellation_id=constellation.pk + 1) is None
    assert latest.rows(constellation_id=constellation.pk + 1) == []


def test_a_big_integer_column_s_marker_is_found_and_takes_values(constellation):
    # PostgreSQL's driver wraps a big integer column's parameter (psycopg's
    # Int8, an int subclass): the marker must still be found, and each
    # value passed the same way.
    from memory.longterm.services import conversation_start, messages_append
    from memory.models import Message

    agent, _ = agent_create(constellation=constellation, name="Flux")
    conversation = conversation_start(agent=agent)
    messages_append(
        conversation=conversation,
        messages=[{"role": "user", "content": f"m{n}"} for n in range(4)],
    )
    before = CompiledQuery(
        lambda conversation_id, position: (
            Message.objects.filter(
                conversation_id=conversation_id, position__lt=position
            )
            .order_by("position")
            .values_list("content", flat=True)
        ),
        conversation_id=-91_011,
        position=2_052_010_301,
    )
    third = Message.objects.filter(conversation=conversation).order_by("position")[2]

    assert before.rows(conversation_id=conversation.pk, position=third.position) == [
        ("m0",),
        ("m1",),
    ]


def _fields(instance):
    return {k: v for k, v in instance.__dict__.items() if k != "_state"}


def test_an_instance_is_the_one_django_builds_without_its_init(constellation):
    """``model_from_db`` fills the instance itself: the same attributes,
    related rows and state as Django's own query, and it saves as one."""
    flux, _ = agent_create(constellation=constellation, name="Flux")
    found = BY_NAME.first(constellation_id=constellation.pk, name="Flux")
    django = Agent.objects.select_related("constellation").get(pk=flux.pk)

    assert list(found.__dict__) == list(django.__dict__)
    assert _fields(found) == _fields(django)
    assert _fields(found.constellation) == _fields(django.constellation)
    assert (found._state.adding, found._state.db) == (False, "default")
    assert found.get_deferred_fields() == set()
    found.name = "Flux II"
    found.save(update_fields=["name"])
    assert Agent.objects.get(pk=flux.pk).name == "Flux II"


def test_an_init_signal_receiver_gets_django_s_init_a_deferred_field_loads_on_use(
    constellation,
):
    agent_create(constellation=constellation, name="Flux")
    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(receiver, sender=Agent)
    try:
        found = BY_NAME.first(constellation_id=constellation.pk, name="Flux")
    finally:
        post_init.disconnect(receiver, sender=Agent)
    assert seen == [found]

    names_only = CompiledQuery(
        lambda name: Agent.objects.only("name").filter(name=name).order_by()[:1],
        name="\x00name",
    )
    found = names_only.first(name="Flux")
    assert "created_at" in found.get_deferred_fields()
    assert found.created_at is not None  # loaded on access, as Django does
