"""Statements of the hot write paths: one cursor per transaction, with
Django's error translation, logging and refusals kept."""

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from coordination.models import Agent
from pattern_site.kernel.db.compiled import model_new, statement_run
from pattern_site.kernel.db.rows import row_insert, row_lock, row_update

pytestmark = pytest.mark.django_db

MISSING_TABLE = "SELECT 1 FROM no_such_table_here"


def test_a_transaction_s_statements_are_logged_while_queries_are_captured(agent):
    with transaction.atomic():
        statement_run(connection, "SELECT 1", [], "fetchone")
        with CaptureQueriesContext(connection) as captured:
            agent.name = "Anchor"
            assert row_update(agent, ("name",)) == 1
            assert statement_run(connection, "SELECT 2", [], "fetchone") == (2,)
    assert [q["sql"] for q in captured.captured_queries][-1] == "SELECT 2"
    assert len(captured.captured_queries) == 2
    assert Agent.objects.get(pk=agent.pk).name == "Anchor"


def test_a_database_error_in_a_transaction_is_django_s(agent):
    with pytest.raises(DatabaseError), transaction.atomic():
        statement_run(connection, MISSING_TABLE, [])


def test_a_transaction_that_must_roll_back_refuses_the_next_statement(agent):
    with transaction.atomic():
        with pytest.raises(DatabaseError), transaction.atomic(savepoint=False):
            statement_run(connection, MISSING_TABLE, [])
        with pytest.raises(TransactionManagementError):
            statement_run(connection, "SELECT 1", [], "fetchone")


def test_a_row_built_without_init_inserts_as_django_s_would(agent):
    values = {f.attname: getattr(agent, f.attname) for f in Agent._meta.fields}
    values.update(id=None, name="Momentum")
    copy = model_new(Agent, values)
    copy.pk = row_insert(copy)

    stored = Agent.objects.get(pk=copy.pk)
    assert stored.name == "Momentum"
    assert stored.constellation_id == agent.constellation_id
    assert stored.created_at == agent.created_at


def test_a_locked_row_s_deferred_field_loads_on_first_use(agent):
    with transaction.atomic():
        locked = row_lock(Agent, agent.pk, defer=("name",))
        assert "name" in locked.get_deferred_fields()
        assert locked.constellation_id == agent.constellation_id
        assert locked.name == agent.name


def test_one_row_of_several_is_the_first(constellation):
    for name in ("Flux", "Anchor"):
        Agent.objects.create(constellation=constellation, name=name)
    table = connection.ops.quote_name(Agent._meta.db_table)
    with transaction.atomic():
        first = statement_run(
            connection, f"SELECT name FROM {table} ORDER BY name", [], "fetchone"
        )
        assert first == ("Anchor",)
        assert statement_run(connection, "SELECT 1", [], "fetchone") == (1,)
