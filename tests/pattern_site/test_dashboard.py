"""The dashboard's frame and error pages: approvals badge, worker banner,
404/500 pages, favicon, and the secret key a site without one makes."""

import stat

import pytest
from django.template import loader
from django.test import Client

from memory.blocks.services import block_create, block_operate
from pattern_site.dashboard import worker_banner
from pattern_site.kernel.actors import Actor
from pattern_site.settings.base import _persisted_secret_key
from tests.factories import UserFactory


@pytest.fixture
def web(partner):
    client = Client()
    client.force_login(partner)
    return client


@pytest.mark.parametrize(
    ("worker", "shown"),
    [
        (None, ""),
        ({"ok": True, "last_heartbeat_seconds_ago": 3.0}, ""),
        ({"ok": False, "last_heartbeat_seconds_ago": 30.0}, ""),
        (
            {"ok": False, "last_heartbeat_seconds_ago": 61.0},
            "No background worker seen for 1 minute:",
        ),
        (
            {"ok": False, "last_heartbeat_seconds_ago": 600.0},
            "No background worker seen for 10 minutes:",
        ),
        (
            {"ok": False, "last_heartbeat_seconds_ago": None},
            "No background worker has been seen yet:",
        ),
        ({"ok": False, "error": "ConnectionError: refused"}, "has been seen yet"),
    ],
)
def test_worker_banner_reads_the_health_reports_worker_section(worker, shown):
    banner = worker_banner(worker)
    assert banner.startswith(shown) if shown.endswith(":") else shown in banner
    assert bool(banner) == bool(shown)


def test_banner_source_comes_from_settings_and_its_failure_shows_a_banner(
    web, settings
):
    assert "worker-banner" not in web.get("/memory/approvals/").content.decode()
    settings.DASHBOARD_WORKER_STATUS = "no.such.module.status"
    page = web.get("/memory/approvals/").content.decode()
    assert 'data-testid="worker-banner"' in page


def test_pending_approvals_badge_counts_only_what_the_person_may_decide(
    web, partner, agent, constellation
):
    for label in ("a", "b"):
        block = block_create(
            actor=Actor.system(),
            label=label,
            owner=agent,
            content="x",
            permission="partner",
        )
        block_operate(
            actor=Actor.for_agent(agent),
            block=block,
            operations=[{"op": "append_text", "text": "y"}],
        )
    page = web.get("/memory/approvals/").content.decode()
    assert 'data-testid="approvals-badge" title="2 waiting for you">2<' in page

    other = UserFactory(username="member")
    constellation.members.add(other)  # a member, not the partner
    member = Client()
    member.force_login(other)
    assert "approvals-badge" not in member.get("/memory/approvals/").content.decode()


def test_missing_pages_get_the_styled_404(web):
    response = web.get("/no/such/page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "This page does not exist" in page and "css/app.css" in page


def test_server_error_page_renders_without_a_request():
    page = loader.get_template("500.html").render()
    assert "Something went wrong on our side" in page and "favicon.svg" in page


def test_favicon_and_styles_are_served_without_collectstatic(web):
    for path in ("/static/favicon.svg", "/static/css/app.css"):
        response = web.get(path)
        assert response.status_code == 200, path


def test_a_site_without_a_secret_key_makes_one_and_keeps_it(tmp_path):
    path = tmp_path / "secret_key"
    key = _persisted_secret_key(path)
    assert len(key) >= 50
    assert _persisted_secret_key(path) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
