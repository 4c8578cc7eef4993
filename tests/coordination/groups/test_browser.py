"""The run viewer shows a run as a conversation, live, in Chromium on real Daphne."""

import json
import time

import httpx
import pytest
from django.test import Client

from coordination.groups.services import group_message_route
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.conftest import BROWSER_WAIT_MS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


def _until(page, condition, timeout_ms=10_000):
    """Until ``condition()``, letting Playwright deliver the relay's events."""
    deadline = time.monotonic() + timeout_ms / 1000
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        page.wait_for_timeout(20)


def _viewer(browser, daphne_server, partner):
    """A page signed in as ``partner``, not yet at any address."""
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
    return context.new_page()


def test_the_run_viewer_shows_an_agents_answer_as_it_arrives(
    daphne_server, browser, make_group, agents, partner
):
    group = make_group("round_robin", [("Flux", "regular")])
    run = group_message_route(actor=Actor.system(), group=group, message="lunch?")
    page = _viewer(browser, daphne_server, partner)
    page.goto(f"{daphne_server}/groups/runs/{run.pk}/")
    page.wait_for_selector(".dot-on", timeout=BROWSER_WAIT_MS)
    # Drawn by the server: Flux was asked, and has no program to take it.
    assert "waiting to be taken" in page.locator("[data-testid=reply]").inner_text()
    assert page.locator("[data-testid=unattended]").is_visible()
    token = agent_token_issue(agent=agents["Flux"]).raw
    with httpx.Client(
        base_url=daphne_server, headers={"Authorization": f"Bearer {token}"}
    ) as http:
        work = http.get("/api/inbox").json()
        url = f"/api/deliveries/{work[0]['id']}"
        http.post(f"{url}/chunks", json={"text": "Noon"}).raise_for_status()
        page.wait_for_selector("[data-testid=reply-text]", timeout=BROWSER_WAIT_MS)
        # Taken: the notice about a missing program is gone without a reload.
        assert page.locator("[data-testid=unattended]").count() == 0
        http.post(f"{url}/chunks", json={"text": ", salad"}).raise_for_status()
        page.wait_for_function(
            "document.querySelector('[data-testid=reply-text]')"
            ".innerText === 'Noon, salad'",
            timeout=BROWSER_WAIT_MS,
        )
        http.post(f"{url}/answer", json={"text": "Noon, salad bar"}).raise_for_status()
    page.wait_for_function(
        "document.querySelector('[data-run-status]').innerText === 'completed'",
        timeout=BROWSER_WAIT_MS,
    )
    page.wait_for_function(
        "document.querySelector('[data-testid=reply-text]')"
        ".innerText === 'Noon, salad bar'",
        timeout=BROWSER_WAIT_MS,
    )
    # One reply, by name: the pieces were joined, then replaced by the answer.
    assert page.locator("[data-testid=reply]").count() == 1
    assert page.locator(".reply-who").inner_text() == "Flux"


def test_the_run_viewer_watches_again_after_its_socket_drops(
    daphne_server, browser, make_group, agents, partner
):
    group = make_group("round_robin", [("Flux", "regular")])
    run = group_message_route(actor=Actor.system(), group=group, message="lunch?")
    page = _viewer(browser, daphne_server, partner)
    # Every socket of the page passes through here: what the page sends is
    # recorded, then forwarded to Daphne.
    connections: list[tuple] = []

    def relay(route):
        server = route.connect_to_server()
        sent: list[dict] = []
        connections.append((route, sent))

        def forward(message):
            sent.append(json.loads(message))
            server.send(message)

        route.on_message(forward)

    page.route_web_socket("**/ws/groups/", relay)
    page.goto(f"{daphne_server}/groups/runs/{run.pk}/")
    page.wait_for_function(
        "document.querySelector('[data-live-dot]').classList.contains('dot-on')",
        timeout=BROWSER_WAIT_MS,
    )
    first, sent = connections[0]
    _until(page, lambda: sent)
    assert [m["type"] for m in sent] == ["run.watch"]
    shown = sent[0]["after"]

    first.close()
    page.wait_for_selector("[data-live-dot].dot-off", timeout=BROWSER_WAIT_MS)
    page.wait_for_selector("[data-live-dot].dot-on", timeout=BROWSER_WAIT_MS)
    assert len(connections) == 2
    _until(page, lambda: connections[1][1])
    assert connections[1][1] == [
        {"type": "run.watch", "run_id": run.pk, "after": shown}
    ]

    token = agent_token_issue(agent=agents["Flux"]).raw
    with httpx.Client(
        base_url=daphne_server, headers={"Authorization": f"Bearer {token}"}
    ) as http:
        work = http.get("/api/inbox").json()
        http.post(
            f"/api/deliveries/{work[0]['id']}/chunks", json={"text": "Noon"}
        ).raise_for_status()
    page.wait_for_selector("[data-testid=reply-text]", timeout=BROWSER_WAIT_MS)
    # What was shown before the drop is not shown twice.
    assert page.locator("[data-testid=reply]").count() == 1
    assert page.locator("[data-testid=reply-text]").inner_text() == "Noon"
