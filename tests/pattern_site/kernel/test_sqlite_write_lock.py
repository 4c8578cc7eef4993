"""SQLite write transactions of one process queue on the engine's lock
(``pattern_site.kernel.db.sqlite_vec.base``): held from ``BEGIN IMMEDIATE``
to the transaction's end however it ends (commit, rollback, an error, a
closed connection), so that it can never be left held; a writer that
cannot get it in the busy timeout fails as SQLite would."""

import threading

import pytest
from django.db import OperationalError, connection, transaction

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
