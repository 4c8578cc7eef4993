"""A catalogue of hostile input for every endpoint that takes an id or text.

Another constellation's ids answer 404 to its agents and humans alike;
malformed JSON, oversized bodies, NUL characters, bad UTF-8, huge and
negative integers and emoji labels answer a clear 4xx (search text with
FTS syntax answers a valid result), and none of them stores anything.
"""

import json
import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from django.test import Client

from coordination.models import Agent
from memory.blocks.services import block_append, block_create
from memory.longterm.services import (
    archival_entry_create,
    conversation_start,
    messages_append,
)
from memory.models import (
    ArchivalEntry,
    BlockApproval,
    BlockUpdate,
    Conversation,
    MemoryBlock,
    Message,
)
from pattern_site.kernel.actors import Actor
from tests.factories import AgentFactory, ConstellationFactory, UserFactory

J = "application/json"


def stored() -> tuple[Any, ...]:
    """Everything a request could have written."""
    return (
        MemoryBlock.objects.count(),
        BlockUpdate.objects.count(),
        BlockApproval.objects.filter(status="pending").count(),
        ArchivalEntry.objects.count(),
        Conversation.objects.count(),
        Message.objects.count(),
        tuple(Agent.objects.order_by("pk").values_list("description", "role")),
        tuple(MemoryBlock.objects.order_by("pk").values_list("pinned", "permission")),
    )


def send(client: Client, method: str, url: str, body: Any = None) -> Any:
    data = body if isinstance(body, bytes | str) else json.dumps(body or {})
    return client.generic(method, url, data, content_type=J)


# --- other constellations' ids -----------------------------------------------


@pytest.fixture
def stranger(db: None) -> dict[str, Any]:
    """A whole other constellation with one of everything."""
    constellation = ConstellationFactory(
        name="Elsewhere", partner=UserFactory(username="someone")
    )
    agent = AgentFactory(constellation=constellation, name="Stranger")
    block = block_create(
        actor=Actor.system(),
        owner=agent,
        label="secret",
        permission="partner",
        content="their plans",
    )
    change = block_append(actor=Actor.for_agent(agent), block=block, content="hidden")
    entry = archival_entry_create(agent=agent, content="their private fact")
    conversation = conversation_start(agent=agent, title="theirs")
    messages_append(
        conversation=conversation,
        messages=[{"role": "user", "content": "private"}],
        author="someone",
    )
    return {
        "constellation": constellation.pk,
        "agent": agent.pk,
        "block": block.pk,
        "version": BlockUpdate.objects.filter(block=block).first().pk,
        "approval": change.approval.pk,
        "entry": entry.pk,
        "conversation": conversation.pk,
    }


FOREIGN = [
    ("GET", "/api/agents/{agent}", None),
    ("PATCH", "/api/agents/{agent}", {"description": "taken over"}),
    ("GET", "/api/blocks?agent_id={agent}", None),
    ("GET", "/api/agents?constellation_id={constellation}", None),
    ("GET", "/api/blocks/{block}", None),
    ("PATCH", "/api/blocks/{block}", {"pinned": True}),
    ("DELETE", "/api/blocks/{block}", None),
    ("POST", "/api/blocks/{block}/operations", {"operations": [
        {"op": "append_text", "text": "x"}]}),
    ("GET", "/api/blocks/{block}/history", None),
    ("GET", "/api/blocks/{block}/versions/{version}", None),
    ("GET", "/api/blocks/{block}/diff?from_version={version}", None),
    ("POST", "/api/blocks/{block}/rollback", {"version_id": "{version}"}),
    ("GET", "/api/blocks/{block}/shares", None),
    ("POST", "/api/blocks/{block}/shares", {"agent_id": "{agent}",
                                            "access": "read_write"}),
    ("DELETE", "/api/blocks/{block}/shares/{agent}", None),
    ("GET", "/api/blocks/by-label/secret?agent_id={agent}", None),
    ("DELETE", "/api/blocks/by-label/secret?agent_id={agent}", None),
    ("GET", "/api/approvals?block_id={block}", None),
    ("POST", "/api/approvals/{approval}/decision", {"approve": True}),
    ("GET", "/api/agents/{agent}/memory/export", None),
    ("POST", "/api/agents/{agent}/memory/import", {"blocks": [
        {"label": "planted", "content": "x"}]}),
    ("POST", "/api/blocks", {"label": "planted", "agent_id": "{agent}"}),
    ("POST", "/api/archival", {"content": "planted", "agent_id": "{agent}"}),
    ("GET", "/api/archival?agent_id={agent}", None),
    ("GET", "/api/archival/{entry}", None),
    ("PATCH", "/api/archival/{entry}", {"content": "overwritten"}),
    ("DELETE", "/api/archival/{entry}", None),
    ("POST", "/api/tools/recall", {"action": "read", "entry_id": "{entry}"}),
    ("POST", "/api/tools/recall", {"action": "delete", "entry_id": "{entry}"}),
    ("POST", "/api/conversations", {"agent_id": "{agent}"}),
    ("GET", "/api/conversations?agent_id={agent}", None),
    ("GET", "/api/conversations/{conversation}", None),
    ("POST", "/api/conversations/{conversation}/status", {"status": "archived"}),
    ("GET", "/api/conversations/{conversation}/messages", None),
    ("POST", "/api/conversations/{conversation}/messages", {"messages": [
        {"role": "user", "content": "planted"}]}),
    ("POST", "/api/context/build", {"agent_id": "{agent}"}),
    ("GET", "/api/constellations/{constellation}/retrieval-config", None),
    ("PUT", "/api/constellations/{constellation}/retrieval-config",
     {"decay_rate": 0.9}),
]  # fmt: skip


def _fill(template: Any, ids: dict[str, Any]) -> Any:
    if isinstance(template, str):
        if template.startswith("{") and template.endswith("}"):
            value = ids[template[1:-1]]
            return value if isinstance(value, int) else str(value)
        return template.format(**ids)
    if isinstance(template, dict):
        return {k: _fill(v, ids) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, ids) for v in template]
    return template


@pytest.fixture(params=["agent", "partner"])
def caller(request: pytest.FixtureRequest, agent: Any, partner: Any) -> Client:
    if request.param == "agent":
        return request.getfixturevalue("agent_client")
    client = Client()
    client.force_login(partner)
    return client


@pytest.mark.parametrize(
    "method,url,body", FOREIGN, ids=[f"{m} {u}" for m, u, _ in FOREIGN]
)
def test_another_constellations_ids_are_404_and_change_nothing(
    caller: Client, stranger: dict[str, Any], method: str, url: str, body: Any
):
    before = stored()
    response = send(caller, method, _fill(url, stranger), _fill(body, stranger))
    assert response.status_code == 404, response.content
    assert response.json()["code"] == "not_found"
    assert stored() == before


def test_a_session_cannot_see_another_constellation_in_any_list(
    caller: Client, stranger: dict[str, Any]
):
    for url in ("/api/agents", "/api/blocks", "/api/conversations"):
        text = caller.get(url).content.decode()
        assert "Stranger" not in text and "secret" not in text, url
    assert caller.get("/api/archival").json()["count"] == 0


# --- hostile bodies on every endpoint that takes text -----------------------


@pytest.fixture
def mine(agent: Any) -> dict[str, Any]:
    block = block_create(actor=Actor.system(), owner=agent, label="notes")
    entry = archival_entry_create(agent=agent, content="Sam likes tea")
    conversation = conversation_start(agent=agent)
    return {
        "agent": agent.pk,
        "block": block.pk,
        "entry": entry.pk,
        "conversation": conversation.pk,
    }


TEXT_ENDPOINTS = [
    ("POST", "/api/blocks", {"label": "fresh", "description": "@"}),
    ("POST", "/api/blocks/{block}/operations",
     {"operations": [{"op": "append_text", "text": "@"}]}),
    ("PATCH", "/api/blocks/{block}", {"description": "@"}),
    ("POST", "/api/tools/context", {"operation": "append", "label": "notes",
                                    "content": "@"}),
    ("POST", "/api/tools/core_memory_append", {"label": "notes", "content": "@"}),
    ("POST", "/api/tools/core_memory_update", {"label": "notes", "content": "@"}),
    ("POST", "/api/tools/archival_memory_insert", {"content": "@"}),
    ("POST", "/api/tools/recall", {"action": "insert", "content": "@"}),
    ("POST", "/api/archival", {"content": "@", "tags": ["@"]}),
    ("PATCH", "/api/archival/{entry}", {"content": "@"}),
    ("POST", "/api/conversations", {"title": "@"}),
    ("POST", "/api/conversations/{conversation}/messages",
     {"messages": [{"role": "user", "content": "@"}]}),
    ("PATCH", "/api/agents/{agent}", {"description": "@"}),
]  # fmt: skip

TEN_MB = 10 * 1024 * 1024


def _with_text(body: Any, text: str) -> Any:
    return json.loads(json.dumps(body).replace('"@"', json.dumps(text)))


def _hostile_bodies(body: Any) -> dict[str, tuple[bytes | str, int]]:
    """Raw body -> the status it must get."""
    valid = json.dumps(body)
    return {
        "malformed JSON": (valid[:-2], 400),
        "not an object": (json.dumps([body]), 400),
        "bad UTF-8": (valid.replace('"@"', '"\xff\xfe"').encode("latin-1"), 400),
        "NUL": (json.dumps(_with_text(body, "a\x00b")), 422),
        "lone surrogate": (json.dumps(_with_text(body, "a\ud800b")), 422),
        "10 MB": (json.dumps(_with_text(body, "x" * TEN_MB)), 413),
    }


CASES = [
    (method, url, body, kind)
    for method, url, body in TEXT_ENDPOINTS
    for kind in _hostile_bodies(body)
]


@pytest.mark.parametrize(
    "method,url,body,kind",
    CASES,
    ids=[f"{m} {u} {k}" for m, u, _, k in CASES],
)
def test_hostile_bodies_get_a_clear_4xx_and_store_nothing(
    agent_client: Client, mine: dict[str, Any], method: str, url: str, body: Any,
    kind: str,
):  # fmt: skip
    raw, status = _hostile_bodies(_fill(body, mine))[kind]
    before = stored()
    response = send(agent_client, method, _fill(url, mine), raw)
    assert response.status_code == status, response.content[:300]
    error = response.json()
    assert error["detail"] and error["code"]
    assert stored() == before


@pytest.mark.parametrize(
    "url",
    [
        "/api/agents/-1",
        "/api/agents/0",
        "/api/archival/-5",
        "/api/archival/18446744073709551616",
        "/api/conversations/-1/messages",
        "/api/conversations/1/messages?after=-1",
        "/api/archival?offset=-1",
        "/api/blocks?agent_id=-9223372036854775809",
        "/api/approvals?block_id=not-a-uuid",
        "/api/blocks/00000000-0000-0000-0000-000000000000/diff?from_version=0",
    ],
)
def test_negative_zero_and_huge_ids_are_a_422(agent_client: Client, url: str):
    response = agent_client.get(url)
    assert response.status_code == 422, response.content
    assert response.json()["code"] == "validation_error"


@pytest.mark.parametrize(
    "url,body",
    [
        ("/api/blocks", {"label": "x", "agent_id": 2**64}),
        ("/api/archival", {"content": "x", "agent_id": -1}),
        ("/api/tools/recall", {"action": "read", "entry_id": 2**63}),
        ("/api/blocks/{block}/rollback", {"version_id": -3}),
        ("/api/blocks", {"label": "x", "char_limit": 10**30}),
        ("/api/tools/search", {"query": "x", "limit": 10**20}),
    ],
)
def test_huge_and_negative_integers_in_bodies_are_a_422(
    agent_client: Client, mine: dict[str, Any], url: str, body: Any
):
    before = stored()
    response = send(agent_client, "POST", _fill(url, mine), body)
    assert response.status_code == 422, response.content
    assert stored() == before


@pytest.mark.parametrize("label", ["🦜", "notes🦜", "ノート", "a b", "a:b", "</block>"])
def test_emoji_and_markup_labels_are_refused_or_not_found(
    agent_client: Client, mine: dict[str, Any], label: str
):
    before = stored()
    created = send(agent_client, "POST", "/api/blocks", {"label": label})
    # Letters of any script are fine; emoji, spaces and markup are not.
    if label == "ノート":
        assert created.status_code == 201, created.content
        return
    assert created.status_code == 422, created.content
    assert stored() == before
    found = agent_client.get(f"/api/blocks/by-label/{label}")
    assert found.status_code == 404


FTS = ['"foo" NEAR( AND *', "NEAR(", '"', "*", "AND OR NOT", "col:x", "^x"]


@pytest.mark.parametrize("query", FTS)
@pytest.mark.parametrize(
    "url,field",
    [
        ("/api/tools/search", "query"),
        ("/api/tools/archival_memory_search", "query"),
        ("/api/tools/recall", "query"),
    ],
)
def test_fts_syntax_is_searched_as_text(
    agent_client: Client, mine: dict[str, Any], url: str, field: str, query: str
):
    before = stored()
    response = send(agent_client, "POST", url, {field: query})
    assert response.status_code == 200, response.content
    assert stored() == before


# --- the largest accepted bodies -----------------------------------------------

WRITES = ("post", "put", "patch", "delete")


def _largest(doc: dict[str, Any], schema: dict[str, Any], budget: list[int]) -> Any:
    """A value of ``schema`` with every string and list at its declared
    maximum, as long as ``budget`` (characters left) lasts, every optional
    field filled, one branch of each union; flags and numbers as the
    schema's example has them (an agent stays active)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _largest(doc, doc["components"]["schemas"][name], budget)
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            branches = [s for s in schema[key] if s.get("type") != "null"]
            if not branches:
                return None
            outer = {k: v for k, v in schema.items() if k != key}
            return _largest(doc, {**outer, **branches[0]}, budget)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    example = schema.get("examples", [False])[0]
    scalar = kind in ("boolean", "integer", "number") and not isinstance(example, str)
    if scalar and (example is None or isinstance(example, bool) == (kind == "boolean")):
        return example
    if kind == "object":
        return {
            name: _largest(doc, sub, budget)
            for name, sub in schema.get("properties", {}).items()
        }
    if kind == "array":
        items = []
        for _ in range(schema["maxItems"]):
            items.append(_largest(doc, schema["items"], budget))
            if budget[0] <= 0:
                break
        return items
    if kind == "string":
        if schema.get("format") == "date-time":
            return "2026-05-01T12:00:00Z"
        if schema.get("format") == "date":
            return "2026-05-01"
        size = max(min(schema["maxLength"], budget[0]), schema.get("minLength", 0))
        budget[0] -= size
        return "a" * size
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0) + 1)
        return int(low) if kind == "integer" else float(low)
    return None


def _largest_body(doc: dict[str, Any], schema: dict[str, Any], cap: int) -> bytes:
    """The largest body of ``schema`` that fits the request size limit."""
    budget = cap
    while True:
        body = json.dumps(_largest(doc, schema, [budget])).encode()
        if len(body) <= cap:
            return body
        budget -= len(body) - cap + 4096


@pytest.fixture
def objects(agent: Any, constellation: Any, partner: Any) -> dict[str, Any]:
    """One of each object a writing endpoint's path names, in ``agent``'s
    constellation."""
    from coordination.groups.services import group_create
    from coordination.work.services import task_create
    from folders.files.services import folder_create

    block = block_create(actor=Actor.system(), owner=agent, label="notes")
    human = Actor.for_user(partner)
    return {
        "agent_id": agent.pk,
        "constellation_id": constellation.pk,
        "block_id": block.pk,
        "label": "notes",
        "entry_id": archival_entry_create(agent=agent, content="a fact").pk,
        "conversation_id": conversation_start(agent=agent).pk,
        "task_id": task_create(actor=human, constellation=constellation, title="t").pk,
        "group_id": group_create(
            constellation=constellation, name="g", pattern="round_robin"
        ).pk,
        "folder_id": folder_create(
            actor=human, constellation_id=constellation.pk, name="docs"
        ).pk,
        "key": "plans",
        "call_id": "call-1",
    }


def _timed(client: Client, content: str) -> float:
    started = time.perf_counter()
    response = client.post("/api/archival", {"content": content}, content_type=J)
    took = time.perf_counter() - started
    assert response.status_code == 201, response.content
    return took


@pytest.mark.django_db(transaction=True)
def test_the_largest_bodies_never_stall_another_constellations_writes(
    agent_client: Client, partner: Any, objects: dict[str, Any], settings: Any
):
    """Every writing endpoint, sent the largest body its schema accepts
    (every string and list at its maximum, within the request size limit),
    leaves another constellation's small write as quick as ever: what the
    schema lets through never holds the write lock for long."""
    from django.db import connection

    from pattern_site.kernel.agents.services import agent_token_issue

    stranger = AgentFactory(
        constellation=ConstellationFactory(
            name="Elsewhere", partner=UserFactory(username="someone")
        ),
        name="Stranger",
    )
    other = Client(HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(agent=stranger).raw}")
    human = Client(raise_request_exception=False)
    human.force_login(partner)
    agent_client.raise_request_exception = False
    # The same small write alone, in this run, on this machine: the bound
    # is a second beyond it, so a slow machine does not fail the test and
    # a held lock (minutes) still does.
    alone = max(_timed(other, f"alone {n}") for n in range(3))
    bound = 1.0 + 4 * alone
    doc = agent_client.get("/api/openapi.json").json()
    cap = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    slow: list[tuple[str, float]] = []
    answered: dict[str, int] = {}
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            if method not in WRITES or "application/json" not in content:
                continue
            url = path.format_map(defaultdict(lambda: 1, objects))
            body = _largest_body(doc, content["application/json"]["schema"], cap)
            name = f"{method.upper()} {path}"

            def meanwhile(
                url: str = url,
                body: bytes = body,
                method: str = method,
                name: str = name,
            ) -> tuple[float, dict[str, Any]]:
                """The other constellation's write latencies while the big
                request runs, and the big request's answer."""
                result: dict[str, Any] = {}
                sent = threading.Event()

                def big() -> None:
                    try:
                        for client in (agent_client, human):
                            sent.set()
                            response = client.generic(method.upper(), url, body, J)
                            # Some writes are for humans, or for what an agent
                            # cannot see (a folder not attached to it).
                            if response.status_code not in (403, 404):
                                break
                        result["status"] = response.status_code
                        result["body"] = response.content[:300]
                    finally:
                        connection.close()

                thread = threading.Thread(target=big)
                thread.start()
                assert sent.wait(10)
                latencies = [_timed(other, f"meanwhile {name}")]
                while thread.is_alive():
                    latencies.append(_timed(other, f"meanwhile {name}"))
                thread.join()
                return max(latencies), result

            worst, result = meanwhile()
            answered[name] = result["status"]
            assert result["status"] < 500, (name, result["body"])
            # The body is one the schema accepts, at the size limit.
            assert result["status"] != 413, (name, result["body"])
            assert b'"validation_error"' not in result["body"], (name, result["body"])
            if worst > bound:
                # A held lock stalls every time; a busy machine's spike (the
                # other test pass, a background flush) does not repeat.
                worst = min(worst, meanwhile()[0])
            if worst > bound:
                slow.append((name, worst))
    assert slow == [], f"bound {bound:.2f}s"
    assert len(answered) > 50
