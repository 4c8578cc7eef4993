"""The live activity feed in headless Chromium against a real Daphne."""

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from pattern_site.kernel.agents.services import demo_constellation_seed
from tests.conftest import BROWSER_WAIT_MS

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def inline_daphne(shared_daphne_server: Callable[..., str]) -> str:
    """Daphne storing each event as it commits, in its own process, so the
    push reaches its websockets without a worker or Redis."""
    return shared_daphne_server(
        PATTERN_CELERY_EAGER="true", PATTERN_ACTIVITY_BATCH_SIZE="1"
    )


def test_feed_shows_a_notable_event_flagged_by_an_agent_live(
    inline_daphne: str, browser: Any
) -> None:
    seed = demo_constellation_seed(password="demo-password-1")
    assert seed is not None
    page = browser.new_page()
    page.goto(f"{inline_daphne}/activity/constellations/{seed.constellation.pk}/")
    page.fill("#id_username", seed.username)
    page.fill("#id_password", "demo-password-1")
    page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=feed]")
    page.wait_for_selector(".dot-on", timeout=BROWSER_WAIT_MS)
    page.select_option("select[name=importance]", "high")
    page.wait_for_selector(".dot-on", timeout=BROWSER_WAIT_MS)  # reloaded, filtered
    for description, importance in [
        ("Low detail nobody needs", "low"),
        ("Partner moved the dentist to Tuesday", "high"),
    ]:
        request = urllib.request.Request(
            f"{inline_daphne}/api/tools/notable",
            data=json.dumps(
                {"description": description, "importance": importance}
            ).encode(),
            headers={
                "Authorization": f"Bearer {seed.tokens['Flux']}",
                "Content-Type": "application/json",
            },
            method="POST",
        )
        assert urllib.request.urlopen(request).status == 201
    page.wait_for_selector(".feed-new", timeout=BROWSER_WAIT_MS)
    live = page.locator(".feed-new").all_inner_texts()
    assert len(live) == 1
    assert "Flux flagged: Partner moved the dentist to Tuesday" in live[0]
