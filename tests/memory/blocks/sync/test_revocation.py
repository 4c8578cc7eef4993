"""Losing a right ends the agent's open sync sockets at once, in every
process: the real npm ``loro-websocket`` client on a real Daphne, the
revocation made elsewhere (a ``manage.py`` process, an API request)."""

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from django.test import Client

from memory.blocks.sync import protocol as sp
from pattern_site.kernel.realtime import CLOSE_UNAUTHENTICATED
from tests.conftest import REPO, subprocess_env, sync_url
from tests.memory.blocks.sync.test_interop import CLIENTS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# The socket is told and closed within this many ms of the revocation.
DEADLINE_MS = 2000


@contextmanager
def watched_socket(node: str, url: str, block, raw: str) -> Iterator[Callable]:
    """An npm client joined to the block with token ``raw``; yields a
    function that starts the clock and returns what the socket saw."""
    client = subprocess.Popen(
        [
            *(node, str(CLIENTS), "revoked", "--room", str(block.pk)),
            *("--token", raw, "--origin", "none", url),
        ],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def finish() -> dict:
        assert client.stdin is not None and client.stdout is not None
        client.stdin.write("go\n")
        client.stdin.flush()
        return json.loads(client.stdout.readline())

    try:
        assert client.stdout is not None
        assert json.loads(client.stdout.readline()) == {"phase": "joined"}
        yield finish
    finally:
        if client.poll() is None:
            client.kill()
        client.wait(timeout=10)


def manage(command: str, agent, **env: str) -> None:
    """``manage.py command <constellation> <agent>`` in a process of its own."""
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            command,
            "--skip-checks",
            agent.constellation.name,
            agent.name,
        ],
        cwd=REPO,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def deactivate(agent, **env: str) -> None:
    browser = Client()
    browser.force_login(agent.constellation.partner)
    response = browser.patch(
        f"/api/agents/{agent.pk}",
        {"is_active": False},
        content_type="application/json",
    )
    assert response.status_code == 200


REVOCATIONS = {
    "revoke_agent_token": lambda agent, **env: manage(
        "revoke_agent_token", agent, **env
    ),
    "rotate_agent_token": lambda agent, **env: manage(
        "rotate_agent_token", agent, **env
    ),
    "deactivate_over_the_api": deactivate,
}


def assert_evicted_and_closed(seen: dict) -> None:
    assert seen["roomErrors"] == [sp.RoomErrorCode.EVICTED]
    assert seen["closeCode"] == CLOSE_UNAUTHENTICATED
    assert seen["ms"] is not None and seen["ms"] <= DEADLINE_MS


@pytest.mark.parametrize("how", sorted(REVOCATIONS))
def test_a_revocation_elsewhere_closes_the_socket_on_the_embedded_layer(
    node, text_block, token, agent, how, daphne_server
):
    url = sync_url(daphne_server)
    with watched_socket(node, url, text_block, token) as go:
        REVOCATIONS[how](agent)
        seen = go()
    assert_evicted_and_closed(seen)


@pytest.mark.redis
@pytest.mark.parametrize("how", ["revoke_agent_token", "deactivate_over_the_api"])
def test_a_revocation_elsewhere_closes_the_socket_on_redis(
    node, text_block, token, agent, redis_url, how, shared_daphne_server
):
    url = sync_url(shared_daphne_server(PATTERN_REDIS_URL=redis_url))
    with watched_socket(node, url, text_block, token) as go:
        REVOCATIONS[how](agent, PATTERN_REDIS_URL=redis_url)
        seen = go()
    assert_evicted_and_closed(seen)
