"""The real npm ``loro-websocket`` client against our /ws/sync/ on real Daphne
processes: convergence, scale-out over Redis, durability across kill -9."""

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from memory.blocks.selectors import block_document_load
from tests.conftest import REPO, daphne, free_port, sync_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
CLIENTS = Path(__file__).parent / "node" / "coedit_clients.mjs"


def drive(node: str, *args: str, timeout: float = 90) -> dict:
    """Run the node driver; its last line of output, as JSON."""
    result = subprocess.run(
        [node, str(CLIENTS), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_clients(node: str, mode: str, block, token: str, *urls: str, edits=10):
    return drive(
        node,
        *(mode, "--room", str(block.pk), "--token", token),
        *("--container", "content", "--edits", str(edits), *urls),
    )


def stored_text(block) -> str:
    return block_document_load(block=block).get_text("content").to_string()


def test_two_npm_clients_converge_through_daphne_and_the_store_matches(
    node, text_block, token, daphne_server
):
    url = sync_url(daphne_server)
    out = run_clients(node, "edit", text_block, token, url, url, edits=15)
    first, second = out["texts"]
    assert first == second
    assert out["errors"] == [[], []]
    for i in range(2):
        for k in range(15):
            assert f"<c{i}e{k}>" in first
    assert "start;" in first
    assert stored_text(text_block) == first


@pytest.mark.redis
def test_clients_on_two_daphne_processes_sharing_redis_see_each_others_edits(
    node, text_block, token, redis_url
):
    with (
        daphne(PATTERN_REDIS_URL=redis_url) as (url_a, _),
        daphne(PATTERN_REDIS_URL=redis_url) as (url_b, _),
    ):
        assert url_a != url_b
        out = run_clients(node, "edit", text_block, token, url_a, url_b, edits=10)
    first, second = out["texts"]
    assert first == second
    assert all(f"<c1e{k}>" in first and f"<c0e{k}>" in first for k in range(10))
    assert stored_text(text_block) == first


def test_every_acknowledged_edit_survives_kill_9_of_the_server(node, text_block, token):
    with daphne() as (url, proc):
        out = run_clients(node, "edit", text_block, token, url, edits=25)
        # The client printed only after every ack; kill the server at once.
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    acked_text = out["texts"][0]
    with daphne() as (url, _):
        fresh = run_clients(node, "read", text_block, token, url)
    assert fresh["texts"] == [acked_text]
    assert all(f"<c0e{k}>" in acked_text for k in range(25))


def offline_session(
    node: str,
    block: Any,
    token: str,
    *,
    edits: int,
    flags: tuple[str, ...] = (),
    while_down: Callable[[], None] = lambda: None,
) -> dict:
    """The driver's offline mode: a client edits (acked); the server is
    killed; the client edits offline; ``while_down`` runs; a server comes
    back on the same port and the client reconnects.  The driver's last
    answer."""
    port = free_port()
    clients = subprocess.Popen(
        [
            *(node, str(CLIENTS), "offline", "--room", str(block.pk)),
            *("--token", token, "--edits", str(edits), *flags),
            f"ws://127.0.0.1:{port}/ws/sync/",
        ],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def said() -> dict:
        return json.loads(clients.stdout.readline())

    try:
        with daphne(port=port) as (_, proc):
            assert said() == {"phase": "online"}
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        clients.stdin.write("down\n")
        clients.stdin.flush()
        assert said()["phase"] == "offline"
        assert "<off0>" not in stored_text(block)
        while_down()
        with daphne(port=port):
            clients.stdin.write("up\n")
            clients.stdin.flush()
            final = said()
        assert clients.wait(timeout=30) == 0
    finally:
        if clients.poll() is None:
            clients.kill()
    return final


def test_edits_made_offline_merge_when_the_client_reconnects(node, text_block, token):
    final = offline_session(node, text_block, token, edits=5)["texts"][0]
    markers = [f"<on{k}>" for k in range(5)] + [f"<off{k}>" for k in range(5)]
    assert all(marker in final for marker in markers)
    assert stored_text(text_block) == final


def join_once(node: str, url: str, block, **options: str) -> dict:
    """One npm client's attempt to connect and join (see the driver)."""
    flags = [part for name, value in options.items() for part in (f"--{name}", value)]
    return drive(node, "join", "--room", str(block.pk), *flags, url, timeout=60)


def test_an_agent_client_sending_no_origin_joins_with_its_token(
    node, text_block, token, daphne_server
):
    url = sync_url(daphne_server)
    out = join_once(node, url, text_block, token=token, origin="none")
    assert out == {"joined": True, "texts": ["start;"]}


def test_a_session_cookie_joins_only_with_a_same_site_origin(
    node, text_block, partner, daphne_server
):
    browser = Client()
    browser.force_login(partner)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    url = sync_url(daphne_server)
    without_origin = join_once(node, url, text_block, cookie=cookie, origin="none")
    same_site = join_once(node, url, text_block, cookie=cookie)
    assert without_origin["joined"] is False
    assert same_site == {"joined": True, "texts": ["start;"]}
