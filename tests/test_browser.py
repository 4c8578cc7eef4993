"""Headless Chromium against a real Daphne process."""

import pytest

from pattern_site.kernel.agents.services import demo_constellation_seed
from tests.conftest import BROWSER_WAIT_MS

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def demo_seed(transactional_db):
    return demo_constellation_seed(password="demo-password-1")


def test_partner_logs_in_and_sees_the_demo_agents(demo_seed, daphne_server, browser):
    seed = demo_seed
    page = browser.new_page()
    page.goto(f"{daphne_server}/")
    page.fill("#id_username", seed.username)
    page.fill("#id_password", "demo-password-1")
    page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=agents]")
    names = page.locator(".agent-name").all_inner_texts()
    assert names == sorted(seed.tokens)
    # The presence socket connects through Daphne with the session.
    page.wait_for_selector(".dot-on", timeout=BROWSER_WAIT_MS)


def test_api_docs_render_with_no_network_beyond_the_server(
    transactional_db, daphne_server, browser
):
    page = browser.new_page()
    outside: list[str] = []

    def only_the_server(route):
        if route.request.url.startswith(daphne_server):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_server)
    page.goto(f"{daphne_server}/api/docs")
    page.wait_for_selector(".opblock-tag", timeout=BROWSER_WAIT_MS)
    tags = page.locator(".opblock-tag").all_inner_texts()
    assert any("blocks" in tag for tag in tags)
    assert page.locator(".opblock").count() > 20
    assert outside == []
