"""What the HTTP API answered 2xx survives ``kill -9`` of the web process.

Writers stream archival inserts and block appends with an agent token at a
real Daphne on the file SQLite test database; the server is killed outright
while requests are in flight, and every answered write must be there.  Each
round's server is a restart of the one killed before it, on the same
database; a last restart must serve again.
"""

import json
import random
import signal
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable

import pytest

from memory.blocks.selectors import block_value
from memory.blocks.services import block_create
from memory.longterm.models import ArchivalEntry
from pattern_site.kernel.actors import Actor
from tests.conftest import daphne, http_url, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
ROUNDS = 3


def _post(base: str, path: str, token: str, body: dict) -> int:
    request = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


class Writer(threading.Thread):
    """Sends one kind of write until stopped; keeps the markers of the
    writes the server answered 2xx."""

    def __init__(self, send: Callable[[str], int], kind: str) -> None:
        super().__init__(daemon=True)
        self.send, self.kind = send, kind
        self.answered: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            marker = f"<{self.kind}-{uuid.uuid4().hex[:12]}>"
            try:
                status = self.send(marker)
            except (OSError, urllib.error.URLError):
                continue  # the server is gone (or going): not answered
            if 200 <= status < 300:
                self.answered.append(marker)


def _writing(url: str, token: str) -> list[Writer]:
    """Writers at the server, once each has had 10-40 answers (still
    writing)."""
    base = http_url(url)

    def fact(marker: str) -> int:
        return _post(base, "/api/archival", token, {"content": marker})

    def note(marker: str) -> int:
        body = {"label": "journal", "content": marker}
        return _post(base, "/api/tools/core_memory_append", token, body)

    writers = [Writer(fact, "fact"), Writer(note, "note")]
    for writer in writers:
        writer.start()
    target = random.randint(10, 40)
    wait_until(lambda: min(len(w.answered) for w in writers) >= target)
    return writers


def test_every_write_answered_2xx_survives_kill_9_of_daphne(agent, agent_token):
    journal = block_create(
        actor=Actor.system(),
        label="journal",
        owner=agent,
        content="start",
        char_limit=1_000_000,
    )
    answered: dict[str, list[str]] = {"fact": [], "note": []}
    for _ in range(ROUNDS):
        with daphne() as (url, proc):
            writers = _writing(url, agent_token.raw)
            proc.send_signal(signal.SIGKILL)  # with requests in flight
            proc.wait(timeout=10)
            for writer in writers:
                writer.stop.set()
                writer.join(timeout=20)
                answered[writer.kind] += writer.answered
        stored_facts = set(
            ArchivalEntry.objects.filter(agent=agent).values_list("content", flat=True)
        )
        assert set(answered["fact"]) <= stored_facts
        text = block_value(block=journal)
        assert all(marker in text for marker in answered["note"])
    with daphne() as (url, _):  # the last kill left a database that serves
        base = http_url(url)
        body = {"content": "after the last kill"}
        assert _post(base, "/api/archival", agent_token.raw, body) == 201
    assert min(len(markers) for markers in answered.values()) >= 10 * ROUNDS
