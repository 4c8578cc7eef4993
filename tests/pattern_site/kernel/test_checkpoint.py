"""The worker's checkpoint between tasks: it runs once enough rows changed,
and afterwards the database file itself holds them."""

import sqlite3
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from pattern_site.kernel.db.checkpoint import wal_checkpoint_if_written

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

User = get_user_model()


def checkpointed() -> int:
    """Users the file holds after a checkpoint that surely ran: one more row
    changed first (a table emptied by an earlier test's flush counts no
    changed rows, yet leaves its deletions in the log)."""
    User.objects.create(username="baseline")
    assert wal_checkpoint_if_written(min_changes=1)
    return users_in_the_file()


def users_in_the_file() -> int:
    """Users the database file holds, without its write-ahead log."""
    path = connection.settings_dict["NAME"]
    with sqlite3.connect(f"file:{path}?immutable=1", uri=True) as reader:
        return reader.execute(f"SELECT COUNT(*) FROM {User._meta.db_table}").fetchone()[
            0
        ]


def test_a_checkpoint_copies_the_log_once_enough_rows_changed() -> None:
    before = checkpointed()

    User.objects.bulk_create([User(username=f"u{i}") for i in range(5)])
    assert not wal_checkpoint_if_written(min_changes=10), "5 rows: not yet"
    assert users_in_the_file() == before, "the rows are in the log only"

    User.objects.bulk_create([User(username=f"v{i}") for i in range(5)])
    assert wal_checkpoint_if_written(min_changes=10)
    assert users_in_the_file() == before + 10

    assert not wal_checkpoint_if_written(min_changes=10), "counted from the last"


def test_never_inside_a_transaction_nor_when_off() -> None:
    from django.db import transaction

    User.objects.bulk_create([User(username=f"w{i}") for i in range(5)])
    with transaction.atomic():
        assert not wal_checkpoint_if_written(min_changes=1)
    assert not wal_checkpoint_if_written(min_changes=0)
    assert wal_checkpoint_if_written(min_changes=1)


def test_a_worker_checkpoints_after_a_task_not_after_an_eager_one(
    settings: Any,
) -> None:
    from types import SimpleNamespace

    from celery.signals import task_postrun

    settings.WORKER_CHECKPOINT_CHANGES = 3
    before = checkpointed()
    User.objects.bulk_create([User(username=f"t{i}") for i in range(3)])

    eager = SimpleNamespace(request=SimpleNamespace(is_eager=True))
    task_postrun.send(sender=None, task=eager)
    assert users_in_the_file() == before, "inline, a request may be waiting"

    worker = SimpleNamespace(request=SimpleNamespace(is_eager=False))
    task_postrun.send(sender=None, task=worker)
    assert users_in_the_file() == before + 3
