"""The embedded broker under concurrent producers and a real worker."""

import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from django.conf import settings

from coordination.agents.tasks import agent_touch_task
from coordination.models import Agent
from pattern_site.broker import (
    broker_prune,
    sqlite_broker_options,
    sqlite_broker_path,
    sqlite_broker_prepare,
    sqlite_broker_url,
)
from pattern_site.celery import app as celery_app
from tests.conftest import REPO, subprocess_env, wait_until
from tests.factories import AgentFactory

PRODUCERS = 6
TASKS_EACH = 40
# One producer process: sends agent_touch for each agent id in its arguments.
PRODUCE = (
    "import sys, django; django.setup();"
    "from coordination.agents.tasks import agent_touch_task;"
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
    from kombu import Connection

    path = tmp_path / "broker.sqlite3"
    sqlite_broker_prepare(path, ("first",))
    sqlite_broker_prepare(path, ("first",))
    sqlite_broker_prepare(path, ("first", "second"))
    url = sqlite_broker_url(path)
    with Connection(url, transport_options=sqlite_broker_options(path)) as conn:
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
    assert [p.wait(timeout=120) for p in producers] == [0] * PRODUCERS

    def touched() -> bool:
        return Agent.objects.filter(last_active_at__isnull=False).count() == len(agents)

    wait_until(touched, timeout=120, interval=0.5)
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
    assert broker_prune() >= 1
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
