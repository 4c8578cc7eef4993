"""What an agent's tool-API call (a bearer token) does and skips: the block
it changes read once, under its lock; the browser middleware (session, CSRF
cookie, session user, messages) left out; the same answers as before."""

from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from memory.blocks.models import MemoryBlock
from memory.blocks.selectors import block_get_by_label_for_agent
from memory.blocks.services import block_create, block_share
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.auth import request_bearer
from pattern_site.kernel.db.rows import row_is_locked, row_lock
from pattern_site.middleware import agent_api_request
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def notes(agent: Any) -> MemoryBlock:
    return block_create(actor=Actor.system(), owner=agent, label="notes")


def _append(client: Client, label: str = "notes", content: str = "hi") -> Any:
    return client.post(
        "/api/tools/context",
        {"operation": "append", "label": label, "content": content},
        content_type="application/json",
    )


def test_an_append_reads_the_block_once_under_its_lock(agent_client, notes):
    _append(agent_client, content="warm up")
    with CaptureQueriesContext(connection) as queries:
        response = _append(agent_client)
    assert response.status_code == 200, response.content
    block_reads = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and '"memory_memoryblock"' in q["sql"]
    ]
    assert len(block_reads) == 1
    # Found inside the write transaction, not before it.
    sql = [q["sql"] for q in queries.captured_queries]
    begin = next(i for i, s in enumerate(sql) if s.startswith("BEGIN"))
    assert sql.index(block_reads[0]) > begin
    assert not any(s.startswith("SAVEPOINT") for s in sql)
    notes.refresh_from_db()
    assert notes.rendered.endswith("hi")
    assert response.json()["version_id"] is not None


def test_an_append_is_four_statements_in_one_transaction(agent_client, notes):
    # Up to its commit, the token, the block under its lock, the update row
    # and the block row: nothing more (the activity event is handed over
    # after commit, stored here at once since the tests store each event
    # as it comes, by the worker in batches when served).
    _append(agent_client, content="warm up")
    with CaptureQueriesContext(connection) as queries:
        response = _append(agent_client)
    assert response.status_code == 200, response.content
    sql = [q["sql"] for q in queries.captured_queries]
    committed = sql[: next(i for i, s in enumerate(sql) if s.startswith("COMMIT"))]
    statements = [s.split()[0] for s in committed if not s.startswith("BEGIN")]
    assert statements == ["SELECT", "SELECT", "INSERT", "UPDATE"], sql


def test_a_failed_change_of_a_locked_block_changes_nothing(agent_client, notes):
    created = notes.version
    response = _append(agent_client, content="")
    assert response.status_code == 422
    notes.refresh_from_db()
    assert notes.version == created
    assert _append(agent_client, label="no-such-block").status_code == 404


def test_a_shared_block_is_still_found_by_label(agent_client, agent, constellation):
    other_agent = AgentFactory(constellation=constellation, name="Flux")
    theirs = block_create(actor=Actor.system(), owner=other_agent, label="plans")
    block_share(actor=Actor.system(), block=theirs, agent=agent, access="read_write")
    response = _append(agent_client, label="plans", content="shared note")
    assert response.status_code == 200, response.content
    theirs.refresh_from_db()
    assert theirs.rendered.endswith("shared note")


def test_a_lock_mark_lasts_as_long_as_its_transaction(agent, notes):
    assert not row_is_locked(notes)
    with transaction.atomic():
        found = block_get_by_label_for_agent(agent=agent, label="notes", lock=True)
        assert row_is_locked(found)
        assert not row_is_locked(notes)
        assert row_is_locked(row_lock(MemoryBlock, notes.pk))
    assert not row_is_locked(found)
    with transaction.atomic():
        # A later transaction is not the one that locked it.
        assert not row_is_locked(found)
    try:
        with transaction.atomic():
            rolled = row_lock(MemoryBlock, notes.pk)
            raise RuntimeError
    except RuntimeError:
        pass
    with transaction.atomic():
        assert not row_is_locked(rolled)


def test_an_agent_call_gets_no_session_or_csrf_cookie(agent_client, notes):
    response = _append(agent_client)
    assert response.status_code == 200
    assert "sessionid" not in response.cookies
    assert "csrftoken" not in response.cookies
    # The security headers every answer carries stay.
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Content-Type"] == "application/json; charset=utf-8"


def test_a_bearer_call_never_falls_back_to_the_session(partner, notes):
    client = Client()
    client.force_login(partner)
    assert client.get("/api/whoami").status_code == 200
    created = notes.version
    refused = client.post(
        "/api/tools/context",
        {"operation": "append", "label": "notes", "content": "x"},
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer not-a-token",
    )
    assert refused.status_code == 401
    notes.refresh_from_db()
    assert notes.version == created


def test_the_dashboard_still_has_its_session(partner_client):
    response = partner_client.get("/")
    assert response.status_code == 200
    assert response.wsgi_request.user.is_authenticated
    assert response.wsgi_request.session.session_key


@pytest.mark.parametrize(
    "header,token",
    [
        (None, None),
        ("", None),
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("Bearer ", ""),
        ("Bearer a b", "a b"),
        ("Basic abc", None),
        ("Token abc", None),
    ],
)
def test_the_bearer_token_is_read_as_ninja_reads_it(rf, header, token):
    extra = {} if header is None else {"HTTP_AUTHORIZATION": header}
    request = rf.post("/api/tools/context", **extra)
    assert request_bearer(request) == token
    assert agent_api_request(request) is (token is not None)
    assert not agent_api_request(rf.post("/memory/", **extra))
