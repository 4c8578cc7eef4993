"""The SQLite engine (``pattern_site.kernel.db.sqlite_vec.base``).

Write transactions of one process queue on the engine's lock: held from
``BEGIN IMMEDIATE`` to the transaction's end however it ends (commit,
rollback, an error, a closed connection), so that it can never be left
held; a writer that cannot get it in the busy timeout fails as SQLite
would.  Statements converted to SQLite's placeholders are remembered,
the same as Django converts them, within bounds."""

import os
import threading

import pytest
from django.db import OperationalError, connection, transaction

from pattern_site.kernel.db.sqlite_vec import base as engine
from pattern_site.kernel.db.sqlite_vec.base import _write_lock

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


def _lock() -> threading.Lock:
    return _write_lock(str(connection.settings_dict["NAME"]))


def test_held_for_the_transaction_and_released_by_commit():
    assert not _lock().locked()
    with transaction.atomic():
        assert _lock().locked()
        with transaction.atomic():  # a savepoint takes nothing more
            assert _lock().locked()
        assert _lock().locked()
    assert not _lock().locked()


def test_released_by_rollback_and_by_error():
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        assert _lock().locked()
        _ = 1 / 0
    assert not _lock().locked()
    with transaction.atomic():
        transaction.set_rollback(True)
    assert not _lock().locked()


def test_released_when_the_connection_closes_in_a_transaction():
    with transaction.atomic():
        assert _lock().locked()
        connection.close()
    assert not _lock().locked()
    with transaction.atomic():  # the next transaction gets it
        assert _lock().locked()
    assert not _lock().locked()


def test_a_forked_child_is_not_held_by_its_parents_lock():
    # A fork while some thread of the parent writes: the child has no such
    # thread, so the lock it inherited held would stall its every write.
    with transaction.atomic():
        assert _lock().locked()
        pid = os.fork()
        if pid == 0:  # the child
            os._exit(0 if not _lock().locked() else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_second_writer_waits_for_the_first_then_writes():
    order: list[str] = []
    holding, trying = threading.Event(), threading.Event()
    go = threading.Event()

    def first() -> None:
        try:
            with transaction.atomic():
                holding.set()
                go.wait(10)
                order.append("first")
        finally:
            connection.close()

    def second() -> None:
        try:
            trying.set()
            with transaction.atomic():
                order.append("second")
        finally:
            connection.close()

    one = threading.Thread(target=first)
    one.start()
    assert holding.wait(10)
    two = threading.Thread(target=second)
    two.start()
    assert trying.wait(10)
    assert order == []  # the second cannot have begun: the first holds the lock
    go.set()
    one.join(10)
    two.join(10)
    assert order == ["first", "second"]
    assert not _lock().locked()


def test_a_writer_that_waits_past_the_busy_timeout_fails_as_sqlite_would():
    holding, done = threading.Event(), threading.Event()

    def holder() -> None:
        try:
            with transaction.atomic():
                holding.set()
                done.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    assert holding.wait(10)
    options = connection.settings_dict["OPTIONS"]
    timeout = options["timeout"]
    options["timeout"] = 0.01
    try:
        with (
            pytest.raises(OperationalError, match="database is locked"),
            transaction.atomic(),
        ):
            pass
        assert connection.get_autocommit()
    finally:
        options["timeout"] = timeout
        done.set()
        thread.join(10)
    assert not _lock().locked()
    with transaction.atomic():  # nothing left held
        pass


def test_statements_convert_as_djangos_and_are_remembered_within_bounds(
    monkeypatch,
):
    from django.db.backends.sqlite3.base import SQLiteCursorWrapper

    monkeypatch.setattr(engine, "_CONVERTED", {})
    monkeypatch.setattr(engine, "_CONVERTED_MAX", 3)
    monkeypatch.setattr(engine, "_CONVERTED_LONGEST", 100)
    with connection.cursor() as cursor:
        wrapper = cursor.cursor
        assert isinstance(wrapper, engine.CursorWrapper)
        statements = [
            "SELECT %s, '100%%', '%%s' WHERE x = %s",
            "SELECT 1",
            "UPDATE t SET a = %s",
            "SELECT %s",
        ]
        for sql in statements:
            expected = SQLiteCursorWrapper.convert_query(wrapper, sql)
            assert wrapper.convert_query(sql) == expected
            assert wrapper.convert_query(sql) == expected  # remembered
            assert len(engine._CONVERTED) <= 3
        long = "SELECT %s" + " " * 100
        assert wrapper.convert_query(long) == "SELECT ?" + " " * 100
        assert long not in engine._CONVERTED
        names = ["a"]
        assert wrapper.convert_query("SELECT %(a)s", param_names=names) == (
            SQLiteCursorWrapper.convert_query(
                wrapper, "SELECT %(a)s", param_names=names
            )
        )
        cursor.execute("SELECT %s, %s", [1, "100%"])
        assert cursor.fetchone() == (1, "100%")
