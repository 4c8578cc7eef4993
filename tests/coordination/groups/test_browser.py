"""The run viewer shows a run's events live in Chromium, on real Daphne."""

import httpx
import pytest
from django.test import Client

from coordination.groups.services import group_message_route
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


def test_the_run_viewer_shows_an_agents_answer_as_it_arrives(
    daphne_server, browser, make_group, agents, partner
):
    group = make_group("round_robin", [("Flux", "regular")])
    run = group_message_route(actor=Actor.system(), group=group, message="lunch?")
    client = Client()
    client.force_login(partner)
    context = browser.new_context()
    context.add_cookies(
        [
            {
                "name": "sessionid",
                "value": client.cookies["sessionid"].value,
                "url": daphne_server,
            }
        ]
    )
    page = context.new_page()
    page.goto(f"{daphne_server}/groups/runs/{run.pk}/")
    page.wait_for_selector(".dot-on", timeout=20_000)
    assert page.locator(".event").count() == 1  # Started, rendered by the server
    token = agent_token_issue(agent=agents["Flux"]).raw
    with httpx.Client(
        base_url=daphne_server, headers={"Authorization": f"Bearer {token}"}
    ) as http:
        work = http.get("/api/inbox").json()
        url = f"/api/deliveries/{work[0]['id']}"
        http.post(f"{url}/chunks", json={"text": "Noon"}).raise_for_status()
        page.wait_for_selector(".event-textchunk", timeout=20_000)
        http.post(f"{url}/answer", json={"text": "Noon, salad"}).raise_for_status()
    page.wait_for_selector(".event-complete", timeout=20_000)
    assert page.locator("[data-run-status]").inner_text() == "completed"
    assert "Noon, salad" in page.locator("[data-run-events]").inner_text()
