"""The agent tools and memory resources as an MCP server (the SDK's
low-level ``Server``).

The tools are the registry's (``pattern_site.kernel.tools``): listed with
the schema every surface uses (``tool_parameters``), called through
``tool_call`` in a worker thread (Django's ORM is synchronous) as the
request's caller (``pattern_site.mcp.caller``, authenticated in that same
hop).  An unknown tool, invalid arguments or a domain error is an MCP tool
error carrying the HTTP API's message.

Resources: ``memory://blocks/{label}`` (each block the agent can read,
listed, and read as the HTTP API's ``BlockOut``) and ``memory://context``
(the agent's built context, as ``ContextOut``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any
from urllib.parse import quote, unquote

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from memory.blocks import tools as block_tools
from memory.blocks.schemas import BlockOut
from memory.blocks.selectors import block_list_for_actor
from memory.schemas import ContextBuildIn, ContextOut
from memory.tools import build_context_tool
from pattern_site.kernel.errors import ApplicationError
from pattern_site.kernel.tools import (
    ToolCallResult,
    response_body,
    tool_call,
    tool_get,
    tool_parameters,
    tools_all,
)
from pattern_site.mcp.caller import CALLER_SCOPE_KEY, Caller

SERVER_NAME = "pattern-site"
INSTRUCTIONS = (
    "Your memory on this Pattern site: core and working blocks (context, "
    "core_memory_*; what others changed in them: context's changes "
    "operation), archival memory (recall, archival_memory_*), search "
    "across memory and conversations, and the system prompt built from it "
    "(build_context). Blocks are readable as memory://blocks/{label}. "
    "Work with the other agents of your constellation through coord (tasks, "
    "handoffs, shared notes), route_to_group and notable; read the folders "
    "attached to you with files_* (or Letta's open_files, grep_files, "
    "semantic_search_files)."
)


BLOCK_URI_PREFIX = "memory://blocks/"
CONTEXT_URI = "memory://context"


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    # The SDK hands handlers the HTTP request, whose scope carries the caller
    # pattern_site.mcp.http put there.
    request = ctx.request
    caller = None if request is None else request.scope.get(CALLER_SCOPE_KEY)
    if not isinstance(caller, Caller):
        raise MCPError(code=types.INVALID_REQUEST, message="not authenticated")
    return caller


async def run_sync(func: Callable[[], Any], *, executor: Executor | None) -> Any:
    """``func()`` in a worker thread, with the connection upkeep Django's
    request_started/finished signals give a request: broken or expired
    database connections are dropped before and after."""

    def call() -> Any:
        close_old_connections()
        try:
            return func()
        finally:
            close_old_connections()

    return await sync_to_async(call, thread_sensitive=False, executor=executor)()


def mcp_server_build(*, executor: Executor | None = None) -> Server[Any]:
    """The MCP server; sync work runs on ``executor`` (Django's request
    threads when given), like an HTTP request's."""

    async def in_thread(func: Callable[[], Any]) -> Any:
        return await run_sync(func, executor=executor)

    # No output schemas: the SDK's client would check every structured result
    # against its tool's schema with jsonschema, adding about as much time
    # as a quick tool call takes.  The answer shapes are the HTTP API's,
    # published in its OpenAPI document.
    listed = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool_parameters(tool),
            annotations=types.ToolAnnotations(read_only_hint=not tool.writes),
        )
        for tool in tools_all()
    ]
    input_schemas = {tool.name: tool.input_schema for tool in listed}

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = _caller(ctx)

        def run() -> ToolCallResult:
            return tool_call(
                actor=caller.authenticated(),
                name=params.name,
                arguments=params.arguments or {},
            )

        try:
            result = await in_thread(run)
        except ApplicationError as exc:
            # The caller's token was refused.
            return _tool_error(exc.message)
        if not result.ok:
            return _tool_error(result.text)
        tool = tool_get(params.name)
        many = tool is not None and tool.many
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text)],
            # Structured content is an object: a list answer goes in "result".
            structured_content={"result": result.value} if many else result.value,
        )

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        caller = _caller(ctx)

        def blocks() -> list[tuple[str, str]]:
            visible = block_list_for_actor(actor=caller.authenticated())
            return sorted(set(visible.values_list("label", "description")))

        try:
            labelled = await in_thread(blocks)
        except ApplicationError as exc:
            raise MCPError(code=types.INVALID_REQUEST, message=exc.message) from exc
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=CONTEXT_URI,
                    name="context",
                    description="Your system prompt, built from your memory.",
                    mime_type="application/json",
                ),
                *(
                    types.Resource(
                        uri=BLOCK_URI_PREFIX + quote(label, safe=""),
                        name=label,
                        description=description or None,
                        mime_type="application/json",
                    )
                    for label, description in labelled
                ),
            ]
        )

    async def list_resource_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=BLOCK_URI_PREFIX + "{label}",
                    name="block",
                    description="One of your memory blocks, by label.",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        caller = _caller(ctx)
        uri = str(params.uri)
        if uri == CONTEXT_URI:
            out, run = (
                ContextOut,
                lambda: build_context_tool(
                    actor=caller.authenticated(), args=ContextBuildIn()
                ),
            )
        elif uri.startswith(BLOCK_URI_PREFIX) and len(uri) > len(BLOCK_URI_PREFIX):
            label = unquote(uri[len(BLOCK_URI_PREFIX) :])
            out, run = (
                BlockOut,
                lambda: block_tools.block_detail_by_label(
                    actor=caller.authenticated(), label=label
                ),
            )
        else:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"no resource {uri!r}; read {CONTEXT_URI} or "
                f"{BLOCK_URI_PREFIX}{{label}}",
            )
        try:
            text = await in_thread(lambda: response_body(out, run()))
        except ApplicationError as exc:
            raise MCPError(
                code=types.INVALID_PARAMS, message=exc.message, data={"uri": uri}
            ) from exc
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=uri, text=text, mime_type="application/json"
                )
            ]
        )

    return Server(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
    )
