"""The worker's heartbeat and what /api/health makes of it."""

import time
from collections.abc import Iterator
from typing import Any

import pytest

from pattern_site.celery import app as celery_app
from pattern_site.heartbeat import worker_heartbeat_at, worker_heartbeat_record
from pattern_site.tasks import worker_heartbeat_task
from tests.conftest import wait_until


@pytest.fixture
def not_eager() -> Iterator[None]:
    old = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = old


@pytest.fixture
def fresh_data_dir(settings: Any, tmp_path: Any) -> None:
    settings.DATA_DIR = tmp_path
    settings.REDIS_URL = ""


def test_health_is_degraded_without_any_heartbeat(
    client: Any, db: None, not_eager: None, fresh_data_dir: None
):
    response = client.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["worker"]["ok"] is False
    assert body["worker"]["last_heartbeat_seconds_ago"] is None


@pytest.mark.parametrize(
    ("age", "status", "detail"),
    [(5, "ok", ""), (61, "degraded", "no worker heartbeat for 6")],
)
def test_health_reports_the_heartbeat_age_and_degrades_after_a_minute(
    client: Any,
    transactional_db: None,
    not_eager: None,
    fresh_data_dir: None,
    age: int,
    status: str,
    detail: str,
):
    worker_heartbeat_record(at=time.time() - age)
    body = client.get("/api/health").json()
    assert body["status"] == status
    assert body["worker"]["ok"] is (status == "ok")
    assert age <= body["worker"]["last_heartbeat_seconds_ago"] < age + 30
    assert body["worker"]["detail"].startswith(detail)


def test_heartbeat_is_kept_in_redis_when_redis_is_configured(
    settings: Any, redis_url: str, tmp_path: Any
):
    import redis

    from pattern_site.heartbeat import REDIS_KEY

    settings.DATA_DIR = tmp_path
    settings.REDIS_URL = redis_url
    redis.Redis.from_url(redis_url).delete(REDIS_KEY)
    assert worker_heartbeat_at() is None
    worker_heartbeat_record(at=1234.5)
    assert worker_heartbeat_at() == 1234.5
    assert not (tmp_path / "worker-heartbeat").exists()


def test_beat_schedules_the_heartbeat_more_often_than_health_gives_up(settings):
    from pattern_site.heartbeat import STALE_AFTER_SECONDS

    entry = settings.CELERY_BEAT_SCHEDULE["worker-heartbeat"]
    assert entry["task"] == worker_heartbeat_task.name
    assert entry["schedule"] * 3 < STALE_AFTER_SECONDS


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_records_the_heartbeat(celery_worker_process: Any):
    before = time.time()
    worker_heartbeat_task.delay()
    wait_until(lambda: (worker_heartbeat_at() or 0) >= before)


def test_a_heartbeat_on_an_idle_worker_sets_the_embedding_backfill_going(
    agent: Any, monkeypatch: Any, fresh_data_dir: None
):
    from memory.longterm.services import archival_entry_create
    from memory.search import tasks as search_tasks
    from memory.search.embedder import embedding_status
    from tests.conftest import missing

    if not embedding_status().available:
        missing(f"no embedding model: {embedding_status().reason}")
    sent: list[str] = []
    monkeypatch.setattr(search_tasks.embeddings_refresh_task, "delay", lambda *a: None)
    monkeypatch.setattr(
        search_tasks.embedding_backfill_task, "delay", lambda: sent.append("run")
    )
    worker_heartbeat_task()
    assert sent == []  # nothing waits for a vector
    archival_entry_create(agent=agent, content="its own task was lost")
    worker_heartbeat_task()
    assert sent == ["run"]
