"""The embedded broker under concurrent producers and a real worker, and
its leases: a message is done only when acknowledged."""

import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from kombu import Connection

from coordination.models import Agent
from pattern_site.broker import (
    broker_prune,
    sqlite_broker_path,
    sqlite_broker_prepare,
    sqlite_broker_url,
)
from pattern_site.celery import app as celery_app
from pattern_site.kernel.agents.tasks import agent_touch_task
from tests.conftest import (
    READY_SECONDS,
    REPO,
    celery_configure,
    celery_worker,
    subprocess_env,
    wait_until,
)
from tests.factories import AgentFactory

# The embedded broker is a SQLite file of its own whatever database the site
# uses.
pytestmark = pytest.mark.any_database

PRODUCERS = 6
TASKS_EACH = 40
# One producer process: sends agent_touch for each agent id in its arguments.
PRODUCE = (
    "import sys, django; django.setup();"
    "from pattern_site.kernel.agents.tasks import agent_touch_task;"
    "[agent_touch_task.delay(int(pk), sys.argv[1]) for pk in sys.argv[2:]]"
)


def test_default_broker_is_a_sqlite_file_in_wal_mode():
    import sqlite3

    path = sqlite_broker_path(settings.CELERY_BROKER_URL)
    assert path == settings.DATA_DIR / "celery-broker.sqlite3"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_prepare_adds_queues_to_an_already_prepared_file(tmp_path: Any):
    path = tmp_path / "broker.sqlite3"
    sqlite_broker_prepare(path, ("first",))
    sqlite_broker_prepare(path, ("first",))
    sqlite_broker_prepare(path, ("first", "second"))
    with Connection(sqlite_broker_url(path)) as conn:
        channel = conn.default_channel
        names = {q.name for q in channel.session.query(channel.queue_cls)}
        channel.session.commit()
    assert names == {"first", "second"}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_producers_lose_no_task_and_the_worker_survives(
    celery_worker_process: Any, constellation: Any
):
    agents = [
        AgentFactory(constellation=constellation, name=f"agent {i}")
        for i in range(PRODUCERS * TASKS_EACH)
    ]
    at = datetime.now(UTC).isoformat()
    producers = [
        subprocess.Popen(
            [sys.executable, "-c", PRODUCE, at, *(str(a.pk) for a in chunk)],
            cwd=REPO,
            env=subprocess_env(PATTERN_CELERY_BROKER_URL=settings.CELERY_BROKER_URL),
        )
        for chunk in (agents[i::PRODUCERS] for i in range(PRODUCERS))
    ]
    assert [p.wait(timeout=READY_SECONDS) for p in producers] == [0] * PRODUCERS

    def touched() -> bool:
        return Agent.objects.filter(last_active_at__isnull=False).count() == len(agents)

    wait_until(touched, interval=0.5)
    assert celery_worker_process.poll() is None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_prune_deletes_delivered_messages_only(celery_worker_process: Any, agent: Any):
    at = datetime.now(UTC).isoformat()
    agent_touch_task.delay(agent.pk, at)
    wait_until(lambda: Agent.objects.get(pk=agent.pk).last_active_at is not None)
    with celery_app.connection_for_write() as conn:
        channel = conn.default_channel
        message = channel.message_cls
        delivered = channel.session.query(message).filter(message.visible.is_(False))
        assert delivered.count() >= 1
        channel.session.commit()
    # The worker records the acknowledgement at its next poll (a second).
    assert wait_until(broker_prune) >= 1
    with celery_app.connection_for_write() as conn:
        channel = conn.default_channel
        assert channel.session.query(channel.message_cls).count() == 0
        channel.session.commit()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_message_interrupted_mid_write_is_never_delivered(
    celery_worker_process: Any, agent: Any
):
    # A producer that dies mid-publish: its empty message is written inside
    # a transaction that never commits (the filesystem transport's worker
    # read such a file and died).
    with celery_app.connection_for_write() as conn:
        channel = conn.default_channel
        queue = channel._get_or_create(settings.CELERY_TASK_DEFAULT_QUEUE)
        channel.session.add(channel.message_cls("", queue))
        channel.session.flush()
        time.sleep(2)
        channel.session.rollback()
    agent_touch_task.delay(agent.pk, datetime.now(UTC).isoformat())
    wait_until(lambda: Agent.objects.get(pk=agent.pk).last_active_at is not None)
    assert celery_worker_process.poll() is None


# --- leases ---------------------------------------------------------------

QUEUE = "jobs"
# A process that fetches one message and is killed before acknowledging it.
FETCH_AND_DIE = (
    "import os, signal, sys; from kombu import Connection; import pattern_site.broker;"
    "Connection(sys.argv[1]).SimpleQueue(sys.argv[2]).get(timeout=10);"
    "os.kill(os.getpid(), signal.SIGKILL)"
)


def _broker_file(tmp_path: Path) -> Path:
    path = tmp_path / "broker.sqlite3"
    sqlite_broker_prepare(path, (QUEUE,))
    return path


def _rows(path: Path) -> list[tuple[int, bool]]:
    """(visible, leased) of each message row."""
    conn = sqlite3.connect(path)
    try:
        return [
            (visible, owner is not None)
            for visible, owner in conn.execute(
                "SELECT visible, lease_owner FROM kombu_message ORDER BY id"
            )
        ]
    finally:
        conn.close()


def _publish(path: Path, *bodies: str) -> None:
    with Connection(sqlite_broker_url(path)) as conn:
        queue = conn.SimpleQueue(QUEUE)
        for body in bodies:
            queue.put(body)
        queue.close()


def test_a_fetched_message_is_kept_until_acknowledged(tmp_path: Path):
    path = _broker_file(tmp_path)
    _publish(path, "first", "second")
    with Connection(sqlite_broker_url(path)) as conn:
        queue = conn.SimpleQueue(QUEUE)
        first, _unacknowledged = queue.get(timeout=5), queue.get(timeout=5)
        assert _rows(path) == [(False, True), (False, True)]
        first.ack()
        queue.close()
    # Closing put the unacknowledged one back; only the other is done.
    assert _rows(path) == [(False, False), (True, False)]
    with Connection(sqlite_broker_url(path)) as conn:
        assert conn.default_channel.prune() == 1
    assert _rows(path) == [(True, False)]


def test_the_messages_a_killed_process_fetched_are_delivered_again(tmp_path: Path):
    path = _broker_file(tmp_path)
    _publish(path, "held by the dead", "untouched")
    url = sqlite_broker_url(path)
    dead = subprocess.run(
        [sys.executable, "-c", FETCH_AND_DIE, url, QUEUE], cwd=REPO, check=False
    )
    assert dead.returncode == -signal.SIGKILL
    assert _rows(path) == [(False, True), (True, False)]
    with Connection(url) as conn:
        assert conn.default_channel.restore_orphans() == 1
        queue = conn.SimpleQueue(QUEUE)
        received = [queue.get(timeout=5), queue.get(timeout=5)]
        assert [m.payload for m in received] == ["held by the dead", "untouched"]
        for message in received:
            message.ack()
        queue.close()
    assert _rows(path) == [(False, False), (False, False)]


def test_a_lease_past_the_visibility_timeout_is_restored(tmp_path: Path):
    path = _broker_file(tmp_path)
    _publish(path, "slow")
    url = sqlite_broker_url(path)
    with Connection(url) as holder:
        queue = holder.SimpleQueue(QUEUE)
        message = queue.get(timeout=5)
        with Connection(url) as patient:
            assert patient.default_channel.restore_orphans() == 0  # alive, in time
        with Connection(url, transport_options={"visibility_timeout": 0}) as eager:
            assert eager.default_channel.restore_orphans() == 1
        assert _rows(path) == [(True, False)]
        # A late acknowledgement still settles the message for good.
        message.ack()
        queue.close()
    assert _rows(path) == [(False, False)]


def test_closing_with_messages_unacknowledged_requeues_them_without_copies(
    tmp_path: Path,
):
    path = _broker_file(tmp_path)
    _publish(path, "one", "two")
    with Connection(sqlite_broker_url(path)) as conn:
        queue = conn.SimpleQueue(QUEUE)
        queue.get(timeout=5)
        queue.get(timeout=5)
        assert _rows(path) == [(False, True), (False, True)]
        queue.close()
    assert _rows(path) == [(True, False), (True, False)]


def test_prepare_gives_a_file_of_kombus_own_transport_the_lease_columns(
    tmp_path: Path,
):
    path = tmp_path / "broker.sqlite3"
    with Connection(f"sqla+sqlite:///{path}") as conn:
        conn.default_channel._new_queue(QUEUE)
    sqlite_broker_prepare(path, (QUEUE,))
    _publish(path, "after the upgrade")
    assert _rows(path) == [(True, False)]


# Long enough for the first worker to fetch every task before it runs one.
COUNTDOWN = 10


def _pending(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT count(*) FROM kombu_message WHERE visible"
        ).fetchone()[0]
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_tasks_a_killed_worker_held_run_on_the_next_worker(constellation: Any):
    """A worker killed with -9 loses nothing it had fetched: tasks with a
    countdown wait reserved (fetched, unacknowledged) in the worker."""
    agents = [AgentFactory(constellation=constellation) for _ in range(6)]
    broker = settings.CELERY_BROKER_URL
    path = sqlite_broker_path(broker)
    assert path is not None
    old = (celery_app.conf.task_always_eager, celery_app.conf.broker_url)
    celery_configure(eager=False, broker_url=broker)
    try:
        with celery_worker(broker) as first:
            at = datetime.now(UTC).isoformat()
            for agent in agents:
                agent_touch_task.apply_async((agent.pk, at), countdown=COUNTDOWN)
            wait_until(lambda: _pending(path) == 0)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        assert (
            not Agent.objects.filter(pk__in=[a.pk for a in agents])
            .filter(last_active_at__isnull=False)
            .exists()
        )
        with celery_worker(broker):

            def touched() -> bool:
                return not Agent.objects.filter(
                    pk__in=[a.pk for a in agents], last_active_at__isnull=True
                ).exists()

            wait_until(touched, interval=0.5)
    finally:
        celery_configure(eager=old[0], broker_url=old[1])
