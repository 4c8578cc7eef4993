"""The agent tools' three published surfaces agree: the OpenAPI document's
tool operations (their request bodies, inlined), the MCP server's tool list
(through the official SDK client) and GET /api/tools/schemas name the same
tools with the same parameter schemas."""

from typing import Any

import httpx
from mcp import Client

from tests.pattern_site.mcp.test_server import http_get, with_client

TOOLS_PREFIX = "/api/tools/"


def _inline(schema: Any, components: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline(components[schema["$ref"].rsplit("/", 1)[1]], components)
        return {key: _inline(value, components) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_inline(item, components) for item in schema]
    return schema


def openapi_tools(openapi: dict[str, Any]) -> dict[str, Any]:
    """Each agent tool operation (a POST with a JSON body under /api/tools/,
    and the context builder) by operation id, with its body inlined."""
    components = openapi["components"]["schemas"]
    tools = {}
    for path, operations in openapi["paths"].items():
        operation = operations.get("post")
        if operation is None or "requestBody" not in operation:
            continue
        if not (path.startswith(TOOLS_PREFIX) or path == "/api/context/build"):
            continue
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        schema = _inline(body, components)
        # ninja wraps an optional body in a single allOf.
        while set(schema) == {"allOf"} and len(schema["allOf"]) == 1:
            schema = schema["allOf"][0]
        tools[operation["operationId"]] = {
            k: v for k, v in schema.items() if k not in ("title", "discriminator")
        }
    return tools


def test_openapi_mcp_and_function_calling_list_the_same_tools_and_schemas(
    daphne_server, agent_token
):
    async def body(client: Client) -> Any:
        return await client.list_tools()

    listed = with_client(daphne_server, agent_token.raw, body)
    mcp = {tool.name: tool.input_schema for tool in listed.tools}
    schemas = http_get(daphne_server, agent_token.raw, "/tools/schemas")
    function_calling = {
        t["function"]["name"]: t["function"]["parameters"] for t in schemas["openai"]
    }
    openapi = httpx.get(f"{daphne_server}/api/openapi.json", timeout=30).json()
    documented = openapi_tools(openapi)

    assert len(mcp) == len(listed.tools)
    assert set(documented) == set(mcp) == set(function_calling)
    assert {"build_context", "coord", "files_open", "search"} <= set(mcp)
    for name, parameters in documented.items():
        assert mcp[name] == parameters, name
        assert function_calling[name] == parameters, name
    # Each tool is called where the document says it is.
    for name, endpoint in schemas["endpoints"].items():
        method, path = endpoint.split()
        assert openapi["paths"][path][method.lower()]["operationId"] == name


def test_the_api_docs_name_every_tool_the_mcp_server_offers():
    from pathlib import Path

    from pattern_site.kernel.tools import tools_all

    docs = (Path(__file__).resolve().parents[3] / "docs" / "api.md").read_text()
    missing = [tool.name for tool in tools_all() if f"`{tool.name}`" not in docs]
    assert missing == []
