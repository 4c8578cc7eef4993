"""Dragging a card on the task board in Chromium, against a real Daphne."""

import json
import urllib.request

import pytest
from django.test import Client

from coordination.work.models import Task, TaskStatus
from coordination.work.services import task_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.conftest import BROWSER_WAIT_MS

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _board(browser, base_url, user, constellation, *, sockets=None):
    client = Client()
    client.force_login(user)
    context = browser.new_context()
    context.add_cookies(
        [
            {
                "name": "sessionid",
                "value": client.cookies["sessionid"].value,
                "url": base_url,
            }
        ]
    )
    page = context.new_page()
    if sockets is not None:
        page.on("websocket", lambda socket: sockets.append(socket.url))
    page.goto(f"{base_url}/constellations/{constellation.pk}/tasks/")
    page.wait_for_selector("[data-task-board][data-live=true]", timeout=BROWSER_WAIT_MS)
    return page


def _card_in(page, task, status):
    return f"[data-column={status}] [data-testid=task-{task.pk}]"


def test_dragging_a_card_changes_the_task_status(
    daphne_server, browser, partner, constellation, agent
):
    actor = Actor.for_user(partner)
    design = task_create(actor=actor, constellation=constellation, title="design")
    build = task_create(
        actor=actor, constellation=constellation, title="build", dependencies=[design]
    )
    page = _board(browser, daphne_server, partner, constellation)

    page.drag_and_drop(
        f"[data-testid=task-{design.pk}]", "[data-testid=column-in_progress]"
    )
    page.wait_for_selector(
        _card_in(page, design, "in_progress"), timeout=BROWSER_WAIT_MS
    )
    assert Task.objects.get(pk=design.pk).status == TaskStatus.IN_PROGRESS

    # A refused move says why and leaves the card where it was.
    page.drag_and_drop(f"[data-testid=task-{build.pk}]", "[data-testid=column-done]")
    page.wait_for_selector("[data-board-error]:not([hidden])", timeout=BROWSER_WAIT_MS)
    assert "depends on" in page.inner_text("[data-board-error]")
    assert page.locator(_card_in(page, build, "open")).count() == 1
    assert Task.objects.get(pk=build.pk).status == TaskStatus.OPEN

    # An agent's change through the tool API arrives live.
    request = urllib.request.Request(
        f"{daphne_server}/api/tools/coord",
        data=json.dumps({"command": f"complete {design.ref}"}).encode(),
        headers={
            "Authorization": f"Bearer {agent_token_issue(agent=agent).raw}",
            "Content-Type": "application/json",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    page.wait_for_selector(_card_in(page, design, "done"), timeout=BROWSER_WAIT_MS)
    assert page.inner_text("[data-testid=column-done] [data-column-count]") == "1"


def test_the_board_and_its_presence_panel_share_one_socket(
    daphne_server, browser, partner, constellation
):
    sockets: list[str] = []
    page = _board(browser, daphne_server, partner, constellation, sockets=sockets)
    page.wait_for_selector("[data-presence-dot].dot-on", timeout=BROWSER_WAIT_MS)
    assert page.inner_text("[data-presence-label]").startswith(("Live", "Here now"))
    host = daphne_server.removeprefix("http://")
    assert sockets == [f"ws://{host}/ws/constellations/{constellation.pk}/"]
