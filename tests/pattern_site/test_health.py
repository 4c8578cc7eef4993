"""/api/health says when writes are failing, and every page says so too."""

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from pattern_site.heartbeat import database_writes_problem
from pattern_site.tasks import worker_heartbeat_task

pytestmark = pytest.mark.sqlite


@pytest.fixture
def write_lock_held() -> Iterator[None]:
    """Another connection holds SQLite's write lock, as a long transaction
    (or a runaway request) would."""
    holder = connection.Database.connect(
        connection.settings_dict["NAME"], isolation_level=None
    )
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.fixture
def data_dir(settings: Any, tmp_path: Any) -> None:
    settings.DATA_DIR = tmp_path
    settings.REDIS_URL = ""


@pytest.mark.django_db(transaction=True)
def test_health_degrades_while_writes_cannot_go_through(
    client: Any, write_lock_held: None
) -> None:
    body = client.get("/api/health").json()
    assert body["status"] == "degraded"
    assert body["database"]["ok"] is True  # reads go on
    assert body["database_writes"]["ok"] is False
    assert "locked" in body["database_writes"]["error"]
    assert "writes wait for the database" in body["degraded"]["database_writes"]


@pytest.mark.django_db(transaction=True)
def test_health_reports_writes_ok_when_they_go_through(client: Any) -> None:
    body = client.get("/api/health").json()
    assert body["database_writes"] == {"ok": True}
    assert "database_writes" not in body["degraded"]


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_records_failing_writes_and_every_page_shows_a_banner(
    data_dir: None, partner: Any
) -> None:
    from django.test import Client

    page = Client()
    page.force_login(partner)
    lock = threading.Event()
    release = threading.Event()

    def hold() -> None:
        holder = connection.Database.connect(
            connection.settings_dict["NAME"], isolation_level=None
        )
        holder.execute("BEGIN IMMEDIATE")
        lock.set()
        release.wait()
        holder.execute("ROLLBACK")
        holder.close()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert lock.wait(10)
        worker_heartbeat_task()
        assert "locked" in database_writes_problem()
        html = page.get("/login/").content.decode()
    finally:
        release.set()
        thread.join()
    assert 'data-testid="writes-banner"' in html
    worker_heartbeat_task()
    assert database_writes_problem() == ""
    assert 'data-testid="writes-banner"' not in page.get("/login/").content.decode()
