"""The MCP server through a real Daphne, with the official SDK's client:
the same tools, answers, errors and rights as the HTTP tool API."""

import json
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from activity.tools import NOTABLE_TOOL
from coordination.groups.schemas import RouteToGroupIn
from coordination.groups.services import group_create, group_member_add
from coordination.groups.tools import ROUTE_TO_GROUP_TOOL
from coordination.work.schemas import CoordIn
from coordination.work.tools import COORD_TOOL
from folders.files import services as folder_services
from folders.files.index import FILE_PASSAGE_INDEX
from folders.schemas import FileOpenIn, LettaGrepIn
from folders.tools.agent import GREP_FILES_HELP, OPEN_HELP, SEARCH_HELP
from memory.blocks.models import BlockType
from memory.blocks.schemas import CONTEXT_TOOL, CORE_MEMORY_APPEND, ContextToolIn
from memory.blocks.services import block_create
from memory.longterm.schemas import SEARCH_TOOL, LettaSearchIn
from memory.longterm.services import archival_entry_create
from memory.schemas import BUILD_CONTEXT
from memory.search.index import index_clear
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_issue
from tests.factories import AgentFactory, ConstellationFactory, UserFactory

JSON = {"content-type": "application/json", "accept": "application/json"}


@asynccontextmanager
async def connected(
    base: str, token: str, mode: str = "auto", statuses: list[int] | None = None
) -> Any:
    headers = {"Authorization": f"Bearer {token}"}

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    async with (
        httpx2.AsyncClient(
            headers=headers,
            event_hooks={"response": [record]},
            # A search's first vector query loads the embedding model in the
            # server, which takes seconds on a busy machine.
            timeout=httpx2.Timeout(30, read=120),
        ) as http,
        Client(
            streamable_http_client(f"{base}/mcp", http_client=http), mode=mode
        ) as client,
    ):
        yield client


def with_client(
    base: str,
    token: str,
    body: Callable[[Client], Awaitable[Any]],
    mode: str = "auto",
    statuses: list[int] | None = None,
) -> Any:
    async def main() -> Any:
        async with connected(base, token, mode, statuses) as client:
            return await body(client)

    return anyio.run(main)


def http_post(base: str, token: str, path: str, body: dict[str, Any]) -> Any:
    return httpx.post(
        f"{base}/api{path}",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def http_get(base: str, token: str, path: str) -> Any:
    response = httpx.get(
        f"{base}/api{path}", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return response.json()


def without_timings(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k != "timings_ms"}


@pytest.fixture
def memory(agent: Any) -> dict[str, Any]:
    system = Actor.system()
    persona = block_create(
        actor=system,
        owner=agent,
        label="persona",
        block_type=BlockType.CORE,
        content="I am Entropy. I like tea.",
    )
    notes = block_create(actor=system, owner=agent, label="notes")
    entry = archival_entry_create(
        agent=agent, content="The partner's cat is called Miso.", tags=["pets"]
    )
    return {"persona": persona, "notes": notes, "entry": entry}


def test_client_lists_the_http_apis_tools_with_their_descriptions_and_schemas(
    daphne_server, agent_token
):
    async def body(client: Client) -> Any:
        return await client.list_tools(), await client.list_resource_templates()

    tools, templates = with_client(daphne_server, agent_token.raw, body)
    listed = {tool.name: tool for tool in tools.tools}
    # Every tool of the HTTP tool API.
    http_tools = http_get(daphne_server, agent_token.raw, "/tools/schemas")
    assert set(listed) == {t["name"] for t in http_tools["anthropic"]}
    assert {"coord", "route_to_group", "notable", "files_open", "open_files"} < set(
        listed
    )
    for http_tool in http_tools["anthropic"]:
        name = http_tool["name"]
        assert listed[name].description == http_tool["description"], name
    assert listed["context"].description == CONTEXT_TOOL
    assert listed["core_memory_append"].description == CORE_MEMORY_APPEND
    assert listed["search"].description == SEARCH_TOOL
    assert listed["build_context"].description == BUILD_CONTEXT
    # Each schema is self-contained, with the request schema's fields.
    for name, schema in [
        ("context", ContextToolIn),
        ("archival_memory_search", LettaSearchIn),
        ("coord", CoordIn),
        ("route_to_group", RouteToGroupIn),
        ("files_open", FileOpenIn),
        ("grep_files", LettaGrepIn),
    ]:
        input_schema = listed[name].input_schema
        assert "$ref" not in json.dumps(input_schema), name
        assert set(input_schema["properties"]) == set(schema.model_fields), name
    assert listed["coord"].description == COORD_TOOL
    assert listed["route_to_group"].description == ROUTE_TO_GROUP_TOOL
    assert listed["notable"].description == NOTABLE_TOOL
    assert listed["files_open"].description == OPEN_HELP
    assert listed["grep_files"].description == GREP_FILES_HELP
    assert listed["semantic_search_files"].description == SEARCH_HELP
    assert listed["files_grep"].annotations.read_only_hint
    assert not listed["files_open"].annotations.read_only_hint
    # The OpenAPI document describes the same endpoints with the same words.
    openapi = httpx.get(f"{daphne_server}/api/openapi.json", timeout=30).json()
    for path, name in [
        ("/api/tools/search", "search"),
        ("/api/tools/coord", "coord"),
        ("/api/tools/route_to_group", "route_to_group"),
        ("/api/tools/notable", "notable"),
        ("/api/tools/files/open", "files_open"),
        ("/api/tools/files/grep", "files_grep"),
        ("/api/tools/grep_files", "grep_files"),
    ]:
        operation = openapi["paths"][path]["post"]
        assert operation["description"] == listed[name].description, path
    assert [t.uri_template for t in templates.resource_templates] == [
        "memory://blocks/{label}"
    ]


def test_each_tool_answers_what_the_http_api_answers(
    daphne_server, agent_token, memory
):
    token = agent_token.raw
    persona_id = memory["persona"].pk

    async def body(client: Client) -> dict[str, Any]:
        async def call(name: str, args: dict[str, Any]) -> Any:
            result = await client.call_tool(name, args)
            assert not result.is_error, result.content
            return result.structured_content

        async def read(uri: str) -> str:
            result = await client.read_resource(uri)
            return result.contents[0].text

        return {
            "context": await call(
                "context",
                {
                    "operation": "replace",
                    "label": "persona",
                    "old": "tea",
                    "new": "rain",
                },
            ),
            "append": await call(
                "core_memory_append", {"label": "notes", "content": "Miso is grey."}
            ),
            "replace": await call(
                "core_memory_replace",
                {"label": "notes", "old_content": "grey", "new_content": "ginger"},
            ),
            "update": await call(
                "core_memory_update",
                {"label": "notes", "content": "Miso is ginger, and old."},
            ),
            "inserted": await call(
                "archival_memory_insert", {"content": "Miso eats fish.", "tags": ["x"]}
            ),
            "recalled": await call(
                "recall", {"action": "insert", "content": "Tea at 5."}
            ),
            "search": await call("search", {"query": "Miso", "mode": "fts"}),
            "recall_search": await call("recall", {"query": "Miso"}),
            "letta_search": await call("archival_memory_search", {"query": "Miso"}),
            "context_built": await call("build_context", {}),
            "block_resource": await read("memory://blocks/persona"),
            "context_resource": await read("memory://context"),
        }

    got = with_client(daphne_server, token, body)

    assert got["context"]["status"] == "applied"
    assert got["context"]["message"].startswith("block 'persona' updated")
    block = http_get(daphne_server, token, f"/blocks/{persona_id}")
    assert block["content"] == "I am Entropy. I like rain."
    history = http_get(daphne_server, token, f"/blocks/{persona_id}/history")
    assert got["context"]["version_id"] == history[0]["id"]
    assert got["context"]["block_id"] == block["id"]
    assert got["context"]["size"] == block["size"]

    notes = http_get(daphne_server, token, f"/blocks/{memory['notes'].pk}")
    assert notes["content"] == "Miso is ginger, and old."
    assert got["update"]["size"] == notes["size"]
    assert got["append"]["status"] == got["replace"]["status"] == "applied"
    assert got["update"]["status"] == "applied"

    inserted = got["inserted"]
    assert inserted == http_get(daphne_server, token, f"/archival/{inserted['id']}")
    # recall answers leave their null fields out.
    recalled = got["recalled"]["entry"]
    stored = http_get(daphne_server, token, f"/archival/{recalled['id']}")
    assert recalled == {k: v for k, v in stored.items() if v is not None}
    assert got["recalled"]["message"] == "stored"

    search = http_post(
        daphne_server, token, "/tools/search", {"query": "Miso", "mode": "fts"}
    ).json()
    assert without_timings(got["search"]) == without_timings(search)
    # The two entries naming Miso first; a later entry matches by its context.
    assert all("Miso" in hit["content"] for hit in search["results"][:2])
    recall = http_post(daphne_server, token, "/tools/recall", {"query": "Miso"})
    assert got["recall_search"] == recall.json()
    letta = http_post(
        daphne_server, token, "/tools/archival_memory_search", {"query": "Miso"}
    )
    assert got["letta_search"] == {"result": letta.json()}
    built = http_post(daphne_server, token, "/context/build", {}).json()
    assert got["context_built"] == built
    assert "I like rain" in built["system_prompt"]

    assert json.loads(got["block_resource"]) == block
    assert json.loads(got["context_resource"]) == built


def test_context_tools_changes_answer_what_memory_changes_answers(
    daphne_server, agent_token, memory
):
    token = agent_token.raw

    async def body(client: Client) -> types.CallToolResult:
        return await client.call_tool("context", {"operation": "changes", "peek": True})

    result = with_client(daphne_server, token, body)

    assert not result.is_error, result.content
    http = http_post(daphne_server, token, "/tools/memory_changes", {"peek": True})
    assert result.structured_content == http.json()
    assert json.loads(result.content[0].text) == http.json()
    assert "persona" in [b["label"] for b in http.json()["blocks"]]


def test_tool_errors_carry_the_http_apis_messages(daphne_server, agent_token, memory):
    token = agent_token.raw
    missing = {"operation": "replace", "label": "persona", "old": "coffee", "new": "x"}

    async def body(client: Client) -> list[types.CallToolResult]:
        return [
            await client.call_tool("context", missing),
            await client.call_tool("core_memory_append", {"content": "no label"}),
            await client.call_tool(
                "search", {"query": "x", "mode": "telepathy", "limit": 0}
            ),
        ]

    replace, no_label, bad_search = with_client(daphne_server, token, body)
    http = http_post(daphne_server, token, "/tools/context", missing)
    assert http.status_code == 422
    assert replace.is_error
    assert replace.content[0].text == http.json()["detail"]
    assert no_label.is_error
    assert no_label.content[0].text == "invalid arguments: label: Field required"
    assert bad_search.is_error
    assert "mode:" in bad_search.content[0].text
    assert "limit:" in bad_search.content[0].text
    persona = http_get(daphne_server, token, f"/blocks/{memory['persona'].pk}")
    assert persona["content"] == "I am Entropy. I like tea."


def test_another_agents_memory_and_another_constellation_do_not_exist(
    daphne_server, agent_token, constellation, memory
):
    token = agent_token.raw
    sibling = AgentFactory(constellation=constellation, name="Flux")
    secret = block_create(actor=Actor.system(), owner=sibling, label="secret")
    hidden = archival_entry_create(agent=sibling, content="sibling's private fact")
    stranger = AgentFactory(
        constellation=ConstellationFactory(
            partner=UserFactory(username="other"), name="Other"
        ),
        name="Stranger",
    )
    probes = [
        ("context", "/tools/context", {"operation": "append", "label": "secret"}),
        ("core_memory_append", "/tools/core_memory_append", {"label": "secret"}),
        ("recall", "/tools/recall", {"action": "read", "entry_id": hidden.pk}),
        ("build_context", "/context/build", {"agent_id": sibling.pk}),
        ("build_context", "/context/build", {"agent_id": stranger.pk}),
    ]
    for _, _, args in probes[:2]:
        args.setdefault("content", "probe")

    async def body(client: Client) -> Any:
        results = [await client.call_tool(name, args) for name, _, args in probes]
        listed = await client.list_resources()
        try:
            await client.read_resource("memory://blocks/secret")
        except MCPError as exc:
            return results, listed, exc
        return results, listed, None

    results, listed, resource_error = with_client(daphne_server, token, body)
    assert {str(r.uri) for r in listed.resources} == {
        "memory://context",
        "memory://blocks/notes",
        "memory://blocks/persona",
    }
    search_args = {"query": "private fact", "domain": "all", "mode": "fts"}
    searched = with_client(
        daphne_server, token, lambda client: client.call_tool("search", search_args)
    )
    http_search = http_post(daphne_server, token, "/tools/search", search_args).json()
    assert searched.structured_content["results"] == http_search["results"] == []
    for (name, path, args), result in zip(probes, results, strict=True):
        http = http_post(daphne_server, token, path, args)
        assert http.status_code in (403, 404), (name, http.text)
        assert result.is_error, (name, result)
        assert result.content[0].text == http.json()["detail"], name
    assert resource_error is not None
    assert "no block labelled 'secret'" in resource_error.error.message
    secret.refresh_from_db()
    assert secret.size == 0


def test_a_wrong_missing_or_revoked_token_is_refused_at_connect(daphne_server, agent):
    notes = block_create(actor=Actor.system(), owner=agent, label="notes")
    old = agent_token_issue(agent=agent)
    agent_token_issue(agent=agent)  # revokes the first
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    append = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "core_memory_append",
            "arguments": {"label": "notes", "content": "intruder"},
        },
    }
    versioned = {**JSON, "mcp-protocol-version": "2025-06-18"}
    answers = {
        "missing": httpx.post(f"{daphne_server}/mcp", json=initialize, headers=JSON),
        "wrong": httpx.post(
            f"{daphne_server}/mcp",
            json=initialize,
            headers={**JSON, "Authorization": "Bearer pat_not-a-token"},
        ),
        "revoked": httpx.post(
            f"{daphne_server}/mcp",
            json=initialize,
            headers={**JSON, "Authorization": f"Bearer {old.raw}"},
        ),
        "revoked, calling a tool": httpx.post(
            f"{daphne_server}/mcp",
            json=append,
            headers={**versioned, "Authorization": f"Bearer {old.raw}"},
        ),
    }
    for why, response in answers.items():
        assert response.status_code == 401, why
        assert response.headers["www-authenticate"].startswith("Bearer"), why
    assert answers["wrong"].json()["detail"] == "invalid agent token"
    assert "revoked" in answers["revoked"].json()["detail"]
    assert answers["revoked, calling a tool"].json() == answers["revoked"].json()
    notes.refresh_from_db()
    assert notes.size == 0

    async def body(client: Client) -> Any:
        return await client.list_tools()

    statuses: list[int] = []
    with pytest.raises(BaseExceptionGroup):
        with_client(daphne_server, old.raw, body, statuses=statuses)
    assert statuses and set(statuses) == {401}


def test_stateless_requests_without_a_session_and_old_clients_with_one(
    daphne_server, agent_token, memory
):
    token = agent_token.raw
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "core_memory_append",
            "arguments": {"label": "notes", "content": "line"},
        },
    }
    auth = {**JSON, "Authorization": f"Bearer {token}"}
    # No initialize, no session: each request stands alone.
    first = httpx.post(
        f"{daphne_server}/mcp",
        json=call,
        headers={**auth, "mcp-protocol-version": "2025-06-18"},
    )
    # An older client still sends the session id it was once given.
    second = httpx.post(
        f"{daphne_server}/mcp",
        json={**call, "id": 8},
        headers={
            **auth,
            "mcp-protocol-version": "2025-06-18",
            "mcp-session-id": "a1b2c3d4e5f60718293a4b5c6d7e8f90",
        },
    )
    for response in (first, second):
        assert response.status_code == 200, response.text
        assert "mcp-session-id" not in response.headers
        result = response.json()["result"]
        assert not result.get("isError"), result
    assert second.json()["result"]["structuredContent"]["size"] == len("line\nline")

    # The SDK's client on the handshake-era protocol works end to end too.
    async def body(client: Client) -> Any:
        return await client.call_tool(
            "core_memory_append", {"label": "notes", "content": "third"}
        )

    legacy = with_client(daphne_server, token, body, mode="legacy")
    assert not legacy.is_error
    notes = http_get(daphne_server, token, f"/blocks/{memory['notes'].pk}")
    assert notes["content"] == "line\nline\nthird"


def test_requests_for_a_host_not_allowed_are_refused(daphne_server, agent_token):
    response = httpx.post(
        f"{daphne_server}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            **JSON,
            "Authorization": f"Bearer {agent_token.raw}",
            "host": "attacker.example",
            "mcp-protocol-version": "2025-06-18",
        },
    )
    assert response.status_code == 421


def call_all(
    base: str, token: str, calls: list[tuple[str, dict[str, Any]]]
) -> list[types.CallToolResult]:
    async def body(client: Client) -> list[types.CallToolResult]:
        return [await client.call_tool(name, args) for name, args in calls]

    return with_client(base, token, body)


def answered(result: types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def test_coordination_tools_answer_what_the_http_api_answers(
    daphne_server, agent_token, agent, constellation
):
    token = agent_token.raw
    flux = AgentFactory(constellation=constellation, name="Flux")
    group = group_create(
        constellation=constellation, name="Planning", pattern="round_robin", config={}
    )
    group_member_add(group=group, agent=agent, role="regular")
    group_member_add(group=group, agent=flux, role="regular")
    closed_group = group_create(
        constellation=constellation, name="Crisis", pattern="round_robin", config={}
    )
    group_member_add(group=closed_group, agent=flux, role="regular")
    not_member = {"group_id": str(closed_group.pk), "message": "let me in"}
    assign = {"command": 'assign "Draft the plan" to @Flux'}
    notable = {
        "description": "Chose SQLite over Postgres",
        "importance": "high",
        "agents_involved": [flux.pk],
    }
    route = {"group_id": str(group.pk), "message": "Plan the week"}

    stranger = {**notable, "agents_involved": [flux.pk + 1000]}
    (
        assigned,
        listed,
        noted,
        routed,
        bad_group,
        bad_command,
        bad_notable,
        outsider,
    ) = call_all(
        daphne_server,
        token,
        [
            ("coord", assign),
            ("coord", {"command": "tasks all"}),
            ("notable", notable),
            ("route_to_group", route),
            ("route_to_group", {"group_id": "Planning", "message": "x"}),
            ("coord", {"command": "claim twelve"}),
            ("notable", stranger),
            ("route_to_group", not_member),
        ],
    )

    assert answered(assigned)["command"] == "assign"
    task = answered(assigned)["data"]
    assert (task["title"], task["assignee"]) == ("Draft the plan", "Flux")
    assert task == {
        k: v
        for k, v in http_get(daphne_server, token, f"/tasks/{task['id']}").items()
        if k in task
    }
    http_listed = http_post(
        daphne_server, token, "/tools/coord", {"command": "tasks all"}
    )
    assert http_listed.status_code == 200, http_listed.text
    assert answered(listed) == http_listed.json()
    assert task["ref"] in answered(listed)["text"]

    http_noted = http_post(daphne_server, token, "/tools/notable", notable)
    assert http_noted.status_code == 201, http_noted.text
    assert answered(noted) == http_noted.json() == {"recorded": True}

    run = answered(routed)
    assert run["group_id"] == group.pk
    assert run["message"] == "Plan the week"
    assert run["events_url"] == f"/api/runs/{run['id']}/events"
    stored = http_get(daphne_server, token, f"/runs/{run['id']}")
    assert {k: stored[k] for k in ("id", "group_id", "pattern", "message")} == {
        k: run[k] for k in ("id", "group_id", "pattern", "message")
    }

    for result, path, args, status in [
        (
            bad_group,
            "/tools/route_to_group",
            {"group_id": "Planning", "message": "x"},
            422,
        ),
        (bad_command, "/tools/coord", {"command": "claim twelve"}, 422),
        (bad_notable, "/tools/notable", stranger, 404),
        (outsider, "/tools/route_to_group", not_member, 403),
    ]:
        http = http_post(daphne_server, token, path, args)
        assert http.status_code == status, http.text
        assert result.is_error
        assert result.content[0].text == http.json()["detail"]


PLAN = "".join(
    f"line {n}: {'the budget' if n == 42 else 'filler'}\n" for n in range(1, 251)
)


@pytest.fixture
def folders(partner: Any, constellation: Any, agent: Any) -> dict[str, Any]:
    """``docs`` attached to the agent (read), ``private`` attached to no one."""
    index_clear(FILE_PASSAGE_INDEX)
    human = Actor.for_user(partner)
    made = {}
    for name in ("docs", "private"):
        made[name] = folder_services.folder_create(
            actor=human, constellation_id=constellation.pk, name=name, description=""
        )
        folder_services.files_upload(
            actor=human,
            folder=made[name],
            uploads=[("plan.md", PLAN.encode()), ("todo.md", b"buy the budget tea\n")],
        )
    folder_services.folder_attach(
        actor=human, folder=made["docs"], agent_id=agent.pk, access="read"
    )
    return made


def test_file_tools_answer_what_the_http_api_answers(
    daphne_server, agent_token, folders
):
    token = agent_token.raw
    plan = {"folder": "docs", "path": "plan.md"}
    opened = {**plan, "line": 11, "lines": 10}
    read = {**plan, "start": 40, "end": 44}
    grep = {"folder": "docs", "pattern": "budget", "context": 1}
    search = {"query": "budget", "mode": "fts"}
    letta_open = {"file_requests": [{"file_name": "docs/todo.md"}]}
    letta_grep = {"pattern": "budget"}
    letta_search = {"query": "budget tea"}

    results = call_all(
        daphne_server,
        token,
        [
            ("files_open", opened),
            ("files_next", plan),
            ("files_read", read),
            ("files_grep", grep),
            ("files_search", search),
            ("open_files", letta_open),
            ("grep_files", letta_grep),
            ("semantic_search_files", letta_search),
        ],
    )
    (
        mcp_open,
        mcp_next,
        mcp_read,
        mcp_grep,
        mcp_search,
        mcp_letta_open,
        mcp_letta_grep,
        mcp_letta_search,
    ) = (answered(r) for r in results)

    assert (mcp_open["start_line"], mcp_open["end_line"]) == (11, 20)
    assert (mcp_next["start_line"], mcp_next["end_line"]) == (21, 30)
    windows = http_get(daphne_server, token, "/tools/files/open")
    assert [w["path"] for w in windows] == ["todo.md", "plan.md"]
    assert windows[1] == mcp_next
    assert windows[0] == mcp_letta_open["windows"][0]

    def http(path: str, args: dict[str, Any]) -> Any:
        response = http_post(daphne_server, token, path, args)
        assert response.status_code == 200, response.text
        return response.json()

    def no_elapsed(answer: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in answer.items() if k != "elapsed_ms"}

    assert mcp_open == http("/tools/files/open", opened)
    assert mcp_read == http("/tools/files/read", read)
    assert "line 42: the budget" in mcp_read["content"]
    assert no_elapsed(mcp_grep) == no_elapsed(http("/tools/files/grep", grep))
    assert [m["line"] for m in mcp_grep["matches"]] == [42, 1]
    assert mcp_search == http("/tools/files/search", search)
    assert {hit["path"] for hit in mcp_search["results"]} == {"plan.md", "todo.md"}
    assert mcp_letta_open == http("/tools/open_files", letta_open)
    assert no_elapsed(mcp_letta_grep) == no_elapsed(
        http("/tools/grep_files", letta_grep)
    )
    assert {m["path"] for m in mcp_letta_grep["matches"]} == {
        "docs/plan.md",
        "docs/todo.md",
    }
    assert mcp_letta_search == http("/tools/semantic_search_files", letta_search)

    # Paging and closing change the same windows, whichever way they come.
    http("/tools/files/next", plan)
    prev, closed_one, closed_all = (
        answered(r)
        for r in call_all(
            daphne_server,
            token,
            [
                ("files_prev", plan),
                ("files_close", plan),
                ("files_close", {}),
            ],
        )
    )
    assert (prev["start_line"], prev["end_line"]) == (11, 20)
    assert closed_one == {"closed": 1}
    assert closed_all == {"closed": 1}
    assert http_get(daphne_server, token, "/tools/files/open") == []
    assert http("/tools/files/close", {}) == {"closed": 0}


def test_a_folder_not_attached_answers_as_over_http(
    daphne_server, agent_token, folders
):
    token = agent_token.raw
    private = {"folder": "private", "path": "plan.md"}
    probes = [
        ("files_open", "/tools/files/open", private),
        ("files_read", "/tools/files/read", {**private, "start": 1, "end": 2}),
        ("files_next", "/tools/files/next", private),
        ("files_close", "/tools/files/close", private),
        ("files_grep", "/tools/files/grep", {"folder": "private", "pattern": "x"}),
        (
            "files_search",
            "/tools/files/search",
            {"query": "budget", "folder": "private", "mode": "fts"},
        ),
        (
            "open_files",
            "/tools/open_files",
            {"file_requests": [{"file_name": "private/plan.md"}]},
        ),
    ]
    results = call_all(daphne_server, token, [(n, a) for n, _, a in probes])
    for (name, path, args), result in zip(probes, results, strict=True):
        http = http_post(daphne_server, token, path, args)
        assert http.status_code == 404, (name, http.text)
        assert result.is_error, name
        assert result.content[0].text == http.json()["detail"], name
        assert "no folder named 'private' is attached to you" in result.content[0].text
    # Search and grep over every attached folder never reach it.
    grep, search = call_all(
        daphne_server,
        token,
        [
            ("grep_files", {"pattern": "budget"}),
            ("semantic_search_files", {"query": "budget tea"}),
        ],
    )
    assert all(m["path"].startswith("docs/") for m in answered(grep)["matches"])
    assert {hit["folder"] for hit in answered(search)["results"]} == {"docs"}
    assert http_get(daphne_server, token, "/tools/files/open") == []


def test_search_tool_searches_files_and_blocks_as_over_http(
    daphne_server, agent_token, memory, folders
):
    token = agent_token.raw
    blocks = {"query": "tea", "domain": "blocks", "mode": "fts"}
    files = {"query": "budget tea", "domain": "files", "mode": "fts"}
    as_of_all = {"query": "tea", "domain": "all", "as_of": "2026-05-01T12:00:00Z"}
    got_blocks, got_files, refused = call_all(
        daphne_server,
        token,
        [("search", blocks), ("search", files), ("search", as_of_all)],
    )
    over_http = http_post(daphne_server, token, "/tools/search", blocks).json()
    assert without_timings(answered(got_blocks)) == without_timings(over_http)
    [hit] = over_http["results"]
    assert (hit["kind"], hit["label"], hit["version"]) == ("block", "persona", 1)
    found_files = answered(got_files)["results"]
    assert (
        found_files
        == http_post(daphne_server, token, "/tools/search", files).json()["results"]
    )
    # The folder attached to the agent only, never "private".
    assert {h["kind"] for h in found_files} == {"file"}
    assert {h["cite"].split("/")[0] for h in found_files} == {"docs"}
    http = http_post(daphne_server, token, "/tools/search", as_of_all)
    assert http.status_code == 422
    assert refused.is_error
    assert refused.content[0].text == http.json()["detail"]


def test_a_tool_argument_the_tool_lacks_is_refused(daphne_server, agent_token, memory):
    token = agent_token.raw
    args = {"query": "tea", "domian": "blocks"}

    async def body(client: Client) -> types.CallToolResult:
        return await client.call_tool("search", args)

    result = with_client(daphne_server, token, body)
    assert result.is_error
    assert "domian" in result.content[0].text
    http = http_post(daphne_server, token, "/tools/search", args)
    assert http.status_code == 422
    assert "unknown field 'domian'" in http.json()["detail"]
