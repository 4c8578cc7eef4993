"""Redis down while the site takes writes (``PATTERN_REDIS_URL`` set).

The test starts a Redis of its own (the ``redis-server`` binary, without
persistence, so a restart comes back empty as after a crash) and two Daphne
processes on it, stops it in the middle, and restarts it: writes keep being
answered with their data committed, ``/api/health`` says what is degraded,
and afterwards a websocket on the other process gets the change it missed.
The machine's shared Redis is never touched.
"""

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import loro
import pytest

from memory.blocks.selectors import block_value
from memory.blocks.services import block_create
from memory.blocks.sync import protocol as sp
from memory.longterm.models import ArchivalEntry
from memory.search.embedder import embedding_status
from memory.search.pipeline import embedding_backfill
from memory.search.registry import EmbeddingState
from pattern_site.kernel.actors import Actor
from tests.conftest import daphne, free_port, missing, wait_for_port, wait_until
from tests.wsclient import WebSocket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
LOR = sp.CrdtType.LORO
EPH = sp.CrdtType.LORO_EPHEMERAL


class OwnRedis:
    """A redis-server process of this test's, stopped and started at will."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no"),
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_for_port(self.port, proc=self.proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        missing("the redis-server binary is not installed")
    port = int(os.environ.get("PATTERN_TEST_OWN_REDIS_PORT") or free_port())
    redis = OwnRedis(port)
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()


def _call(base: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    request = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
        },
        method="GET" if body is None else "POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def _http(ws_url: str) -> str:
    return ws_url.removesuffix("/ws/sync/").replace("ws://", "http://")


def _join(ws: WebSocket, room: str, token: str, doc: loro.LoroDoc) -> None:
    ws.send_binary(
        sp.encode(sp.JoinRequest(LOR, room, token.encode(), doc.oplog_vv.encode()))
    )
    assert isinstance(sp.decode(ws.receive_binary()), sp.JoinResponseOk)
    backfill = sp.decode(ws.receive_binary())
    assert isinstance(backfill, sp.DocUpdate)
    doc.import_batch(list(backfill.updates))


def test_writes_go_on_while_redis_is_down_and_what_was_missed_follows(
    agent, agent_token, own_redis
):
    journal = block_create(
        actor=Actor.system(), label="journal", owner=agent, content="start"
    )
    token = agent_token.raw
    with (
        daphne(PATTERN_REDIS_URL=own_redis.url) as (url_a, _),
        daphne(PATTERN_REDIS_URL=own_redis.url) as (url_b, _),
    ):
        a = _http(url_a)
        ws = WebSocket(url_b, headers={"Origin": "http://127.0.0.1"})
        doc = loro.LoroDoc()
        _join(ws, str(journal.pk), token, doc)

        own_redis.stop()

        status, entry = _call(a, "/api/archival", token, {"content": "a fact kept"})
        assert status == 201, entry
        status, change = _call(
            a,
            "/api/tools/core_memory_append",
            token,
            {"label": "journal", "content": "<while down>"},
        )
        assert status == 200, change
        stored = ArchivalEntry.objects.get(pk=entry["id"])
        assert stored.embedding_state == EmbeddingState.PENDING
        assert "<while down>" in block_value(block=journal)

        status, health = _call(a, "/api/health", token)
        assert status == 200
        assert health["status"] == "degraded"
        assert health["database"]["ok"] is True
        assert health["channel_layer"]["ok"] is False
        assert health["broker"]["ok"] is False
        # No worker runs in this test: its heartbeat is missing too.
        assert set(health["degraded"]) - {"worker"} == {"channel_layer", "broker"}

        own_redis.start()  # empty: groups and queued tasks are gone

        # The socket on the other process is asked to rejoin; rejoining
        # with its version brings what it missed.
        message = sp.decode(ws.receive_binary())
        assert message == sp.RoomError(
            LOR, str(journal.pk), sp.RoomErrorCode.REJOIN_SUGGESTED, message.message
        )
        _join(ws, str(journal.pk), token, doc)
        assert "<while down>" in doc.get_text("content").to_string()
        ws.close()

        wait_until(
            lambda: not set(_call(a, "/api/health", token)[1]["degraded"]) - {"worker"}
        )

    # The row's embedding task was never queued: the backfill embeds it.
    if not embedding_status().available:
        missing(f"no embedding model: {embedding_status().reason}")
    embedding_backfill()
    stored.refresh_from_db()
    assert stored.embedding_state == EmbeddingState.READY


def test_presence_between_processes_comes_back_after_redis_restarts(
    agent, agent_token, own_redis
):
    block = block_create(actor=Actor.system(), label="notes", owner=agent)
    room, token = str(block.pk), agent_token.raw.encode()
    with (
        daphne(PATTERN_REDIS_URL=own_redis.url) as (url_a, _),
        daphne(PATTERN_REDIS_URL=own_redis.url) as (url_b, _),
    ):
        sender, watcher = (
            WebSocket(url, headers={"Origin": "http://127.0.0.1"})
            for url in (url_a, url_b)
        )
        for ws in (sender, watcher):
            ws.send_binary(sp.encode(sp.JoinRequest(EPH, room, token)))
            assert isinstance(sp.decode(ws.receive_binary()), sp.JoinResponseOk)

        own_redis.stop()
        own_redis.start()  # empty: the presence groups are gone

        store = loro.EphemeralStore(30_000)
        store.set("cursor", "line 3")
        update = store.encode("cursor")
        watcher.sock.settimeout(0.5)

        def relayed() -> bool:
            # Sent until the watcher's process has joined its group again.
            sender.send_binary(
                sp.encode(sp.DocUpdate(EPH, room, (update,), sp.new_batch_id()))
            )
            sender.receive_binary()  # the ack
            try:
                message = sp.decode(watcher.receive_binary())
            except TimeoutError:
                return False
            return isinstance(message, sp.DocUpdate) and message.updates == (update,)

        wait_until(relayed)
        sender.close()
        watcher.close()
