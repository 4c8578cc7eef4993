"""Two Chromium pages co-edit one block through the live editor on real Daphne."""

import json
import signal
import urllib.request
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from memory.blocks.selectors import block_document_load
from memory.blocks.services import block_append, block_create
from memory.blocks.services.retention import block_history_fold
from memory.models import BlockPeer, BlockUpdate
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.conftest import (
    BROWSER_WAIT_MS,
    daphne,
    daphne_process,
    free_port,
    wait_until,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

EDITOR = "[data-block-editor]"


def _page(
    browser,
    base_url,
    user,
    path,
    *,
    viewport=None,
    ready=True,
    color_scheme="light",
    sockets=None,
):
    """A page signed in as ``user`` at ``path``; with ``ready``, once the
    block editor has started.  ``sockets``: a Playwright websocket route
    handler for the page's sockets."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(
        viewport=viewport or {"width": 1280, "height": 720}, color_scheme=color_scheme
    )
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
        page.route_web_socket("**/ws/sync/**", sockets)
    logs: list[str] = []
    page.on("console", lambda message: logs.append(message.text))
    page.on("pageerror", lambda error: logs.append(str(error)))
    page.goto(f"{base_url}{path}")
    if not ready:
        return page
    try:
        page.wait_for_selector(f"{EDITOR}[data-ready=true]", timeout=BROWSER_WAIT_MS)
    except Exception as exc:
        raise AssertionError(f"the editor did not start: {logs}") from exc
    return page


def _agent_operates(base_url, agent, block, operation) -> None:
    """The agent changes the block through the HTTP tool API of the server."""
    request = urllib.request.Request(
        f"{base_url}/api/blocks/{block.pk}/operations",
        data=json.dumps({"operations": [operation]}).encode(),
        headers={
            "Authorization": f"Bearer {agent_token_issue(agent=agent).raw}",
            "Content-Type": "application/json",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def _text(page) -> str:
    return page.evaluate(f"document.querySelector('{EDITOR}').editor.text()")


def _wait_text(page, predicate, timeout=BROWSER_WAIT_MS):
    page.wait_for_function(
        f"(() => {{ const t = document.querySelector('{EDITOR}').editor.text();"
        f" return {predicate}; }})()",
        timeout=timeout,
    )


@pytest.fixture
def plan_block(agent):
    return block_create(
        actor=Actor.system(), label="plan", owner=agent, content="hello"
    )


def test_two_pages_co_edit_see_cursors_and_an_agents_append(
    built_assets, plan_block, daphne_server, browser, partner, agent
):
    block = plan_block
    path = f"/memory/blocks/{block.pk}/"
    first = _page(browser, daphne_server, partner, path)
    second = _page(browser, daphne_server, partner, path)
    for page in (first, second):
        assert _text(page) == "hello"
        assert "Connected" in page.inner_text("[data-editor-status]")

    # Both type at the same time at different ends of the text.
    first.click(".cm-content")
    second.click(".cm-content")
    first.keyboard.press("Control+Home")
    second.keyboard.press("Control+End")
    for a, b in zip("AAAA", "BBBB", strict=True):
        first.keyboard.type(a)
        second.keyboard.type(b)
    for page in (first, second):
        _wait_text(page, "t.includes('AAAA') && t.includes('BBBB')")
    assert _text(first) == _text(second) == "AAAAhelloBBBB"

    # Each sees the other's cursor.
    first.wait_for_selector(".loro-cursor", timeout=BROWSER_WAIT_MS)
    second.wait_for_selector(".loro-cursor", timeout=BROWSER_WAIT_MS)

    # An agent appends through the HTTP tool API: both pages show it live.
    _agent_operates(
        daphne_server, agent, block, {"op": "append_text", "text": " +agent"}
    )
    for page in (first, second):
        _wait_text(page, "t.endsWith(' +agent')")
    assert _text(first) == _text(second) == "AAAAhelloBBBB +agent"
    stored = block_document_load(block=block).get_text("content").to_string()
    assert stored == "AAAAhelloBBBB +agent"

    # Offline: the badge counts pending edits; they merge on reconnect.
    second.context.set_offline(True)
    second.wait_for_selector("[data-editor-status][data-status=offline]")
    second.keyboard.press("Control+End")
    second.keyboard.type("!!")
    badge = second.inner_text("[data-editor-status]")
    assert "Offline" in badge and "2 pending edits" in badge
    second.context.set_offline(False)
    second.wait_for_selector("[data-editor-status][data-status=connected]")
    for page in (first, second):
        _wait_text(page, "t.endsWith('+agent!!')")
    stored = block_document_load(block=block).get_text("content").to_string()
    assert stored == "AAAAhelloBBBB +agent!!"

    # Leaving the page takes its cursor off the other page at once.
    first.wait_for_selector(".loro-cursor")
    second.goto("about:blank")
    first.wait_for_selector(".loro-cursor", state="detached", timeout=BROWSER_WAIT_MS)


@pytest.fixture
def list_block(agent):
    return block_create(
        actor=Actor.system(),
        label="todo",
        owner=agent,
        schema={"kind": "list"},
        content=["first"],
    )


def test_structured_block_view_updates_live_on_an_agents_change(
    built_assets, list_block, daphne_server, browser, partner, agent
):
    page = _page(browser, daphne_server, partner, f"/memory/blocks/{list_block.pk}/")
    rendered = page.locator("[data-testid=rendered]")
    assert "first" in rendered.inner_text()
    assert "Live" in page.inner_text("[data-editor-status]")
    operation = {"op": "push_item", "value": "second from agent"}
    _agent_operates(daphne_server, agent, list_block, operation)
    page.wait_for_function(
        "document.querySelector('[data-testid=rendered]').textContent"
        ".includes('second from agent')",
        timeout=BROWSER_WAIT_MS,
    )


def test_a_page_offline_across_a_fold_of_its_history_reloads_from_a_fresh_snapshot(
    built_assets, plan_block, browser, partner, agent, settings, transactional_db
):
    settings.MEMORY_HISTORY_KEEP_DAYS = {"core": 1.0, "working": 1.0}
    settings.MEMORY_HISTORY_KEEP_VERSIONS = {"core": 3, "working": 3}
    block = plan_block
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with daphne(port=port) as (_, proc):
        page = _page(browser, base_url, partner, f"/memory/blocks/{block.pk}/")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    page.wait_for_selector("[data-editor-status][data-status=reconnecting]")
    page.click(".cm-content")
    page.keyboard.press("Control+End")
    page.keyboard.type(" mine")

    # Meanwhile an agent writes on, and the history the page's copy builds
    # on is folded (the page was away longer than the peer hours).
    for n in range(6):
        block_append(actor=Actor.for_agent(agent), block=block, content=f"a{n}")
    BlockUpdate.objects.filter(block=block).update(
        created_at=timezone.now() - timedelta(days=3)
    )
    BlockPeer.objects.update(seen_at=timezone.now() - timedelta(days=30))
    assert block_history_fold(block=block) > 0

    with daphne(port=port):
        stash = page.wait_for_selector(
            "[data-testid=folded-edits]", timeout=BROWSER_WAIT_MS
        )
        assert "hello mine" in stash.inner_text()
        page.wait_for_selector(f"{EDITOR}[data-ready=true]")
        _wait_text(page, "t.endsWith('a5')")
        assert "mine" not in _text(page)
        # The reloaded page edits the folded block as usual.
        page.wait_for_selector("[data-editor-status][data-status=connected]")
        page.click(".cm-content")
        page.keyboard.press("Control+End")
        page.keyboard.type("!")
        _wait_text(page, "t.endsWith('a5!')")
        wait_until(
            lambda: (
                block_document_load(block=block)
                .get_text("content")
                .to_string()
                .endswith("a5!")
            )
        )


def test_a_page_whose_edit_builds_on_folded_history_reloads_and_keeps_its_text(
    built_assets, plan_block, browser, partner, agent, settings, transactional_db
):
    """The page is connected, but its copy fell behind (what the server sent
    it is held back) and the server stopped keeping its version: its next
    edit is refused as built on folded history, and the page starts again
    from a fresh snapshot, showing the refused text to copy back."""
    settings.MEMORY_HISTORY_KEEP_DAYS = {"core": 1.0, "working": 1.0}
    settings.MEMORY_HISTORY_KEEP_VERSIONS = {"core": 3, "working": 3}
    block = plan_block
    holding = {"on": False}
    held: list[bytes] = []

    def sockets(route) -> None:
        server = route.connect_to_server()

        def to_page(message) -> None:
            # Pongs pass: the socket stays up, the copy only falls behind.
            if holding["on"] and isinstance(message, bytes):
                held.append(message[:4])
            else:
                route.send(message)

        server.on_message(to_page)

    with daphne_process() as base_url:
        page = _page(
            browser, base_url, partner, f"/memory/blocks/{block.pk}/", sockets=sockets
        )
        page.wait_for_selector("[data-editor-status][data-status=connected]")
        holding["on"] = True
        for n in range(6):
            _agent_operates(
                base_url, agent, block, {"op": "append_text", "text": f"\na{n}"}
            )
        # Evaluating lets Playwright deliver the socket's messages meanwhile.
        wait_until(lambda: page.evaluate("1") and held.count(b"%LOR") >= 6)
        BlockUpdate.objects.filter(block=block).update(
            created_at=timezone.now() - timedelta(days=3)
        )
        BlockPeer.objects.all().delete()  # its version is no longer kept
        assert block_history_fold(block=block) > 0
        holding["on"] = False

        page.click(".cm-content")
        page.keyboard.press("Control+End")
        # One edit: typed key by key, the first key's refusal can come back
        # before the last key is typed, and the stash holds the text then.
        page.keyboard.insert_text(" mine")
        stash = page.wait_for_selector(
            "[data-testid=folded-edits]", timeout=BROWSER_WAIT_MS
        )
        assert "hello mine" in stash.inner_text()
        page.wait_for_selector(f"{EDITOR}[data-ready=true]")
        _wait_text(page, "t.endsWith('a5')")
        assert "mine" not in _text(page)
        # The reloaded page goes on editing the folded block.
        page.wait_for_selector("[data-editor-status][data-status=connected]")
        page.click(".cm-content")
        page.keyboard.press("Control+End")
        page.keyboard.type("!")
        wait_until(
            lambda: (
                block_document_load(block=block)
                .get_text("content")
                .to_string()
                .endswith("a5!")
            )
        )
