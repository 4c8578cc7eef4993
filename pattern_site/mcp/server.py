"""The agent tools and memory resources as an MCP server (the SDK's
low-level ``Server``).

Each tool is the HTTP tool API's, through the same code: its input schema is
the endpoint's ninja schema (``model_json_schema``), its description the
endpoint's constant, its body the function the endpoint calls
(``memory.blocks.tools``, ``memory.longterm.tools``,
``memory.context.context_build_for_actor``, ``coordination.work.tools``,
``coordination.groups.tools``, ``activity.tools``,
``folders.tools.agent``), and its structured result the
endpoint's answer serialised through the same output schema and JSON
encoder.  This module only adapts: it validates the arguments, runs the
function in a worker thread (Django's ORM is synchronous) as the request's
caller (``pattern_site.mcp.caller``, authenticated in that same hop), and
turns a domain error (``ApplicationError``) or invalid arguments into an MCP
tool error carrying the HTTP API's message.

Resources: ``memory://blocks/{label}`` (each block the agent can read,
listed, and read as the HTTP API's ``BlockOut``) and ``memory://context``
(the agent's built context, as ``ContextOut``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from ninja import Schema
from ninja.responses import NinjaJSONEncoder
from pydantic import BaseModel, ValidationError

from activity import tools as activity_tools
from activity.schemas import NotableIn, NotableOut
from coordination.groups import tools as group_tools
from coordination.groups.schemas import RouteToGroupIn, RunOut
from coordination.work import tools as work_tools
from coordination.work.schemas import CoordIn, CoordOut
from folders.schemas import (
    CloseOut,
    FileCloseIn,
    FileOpenIn,
    FileReadIn,
    FileRefIn,
    FileSearchIn,
    FileSearchOut,
    GrepIn,
    GrepOut,
    LettaGrepIn,
    LettaOpenFilesIn,
    LettaOpenFilesOut,
    LettaSearchFilesIn,
    WindowOut,
)
from folders.tools import agent as file_tools
from memory import context
from memory.blocks import tools as block_tools
from memory.blocks.schemas import (
    CHANGES_TOOL,
    CONTEXT_TOOL,
    CORE_MEMORY_APPEND,
    CORE_MEMORY_REPLACE,
    CORE_MEMORY_UPDATE,
    BlockOut,
    ChangeOut,
    ChangesIn,
    ChangesOut,
    ContextToolIn,
    ContextToolOut,
    CoreMemoryIn,
    CoreMemoryReplaceIn,
    CoreMemoryUpdateIn,
)
from memory.blocks.selectors import block_list_for_actor
from memory.longterm import tools as longterm_tools
from memory.longterm.schemas import (
    ARCHIVAL_MEMORY_INSERT,
    ARCHIVAL_MEMORY_SEARCH,
    RECALL_TOOL,
    SEARCH_TOOL,
    ArchivalEntryOut,
    LettaInsertIn,
    LettaSearchHitOut,
    LettaSearchIn,
    RecallIn,
    RecallOut,
    SearchIn,
    SearchOut,
)
from memory.schemas import BUILD_CONTEXT, ContextBuildIn, ContextOut
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import ApplicationError
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


@dataclass(frozen=True)
class AgentTool:
    """One tool: its input schema, the output schema that shapes its answer,
    its description and its function ``(actor=, args=) -> answer``.
    ``many``: the answer is a list, which MCP structured content carries as
    ``{"result": [...]}``."""

    name: str
    description: str
    args: type[Schema]
    out: type[BaseModel]
    run: Callable[..., Any]
    many: bool = False
    read_only: bool = False

    def answer(self, value: Any) -> str:
        return response_body(self.out, value, many=self.many)

    def structured(self, text: str) -> dict[str, Any]:
        value = json.loads(text)
        return {"result": value} if self.many else value


def response_body(schema: type[BaseModel], value: Any, *, many: bool = False) -> str:
    """``value`` as the HTTP API's response body: through the output schema
    and ninja's JSON encoder."""
    if many:
        dumped: Any = [
            schema.model_validate(v).model_dump(by_alias=True) for v in value
        ]
    else:
        dumped = schema.model_validate(value).model_dump(by_alias=True)
    return json.dumps(dumped, cls=NinjaJSONEncoder)


def _build_context(*, actor: Actor, args: ContextBuildIn) -> dict[str, Any]:
    return context.context_build_for_actor(actor=actor, args=args).as_dict()


TOOLS: dict[str, AgentTool] = {
    tool.name: tool
    for tool in (
        AgentTool(
            "context",
            CONTEXT_TOOL,
            ContextToolIn,
            ContextToolOut,
            block_tools.context_tool,
        ),
        AgentTool(
            "core_memory_append",
            CORE_MEMORY_APPEND,
            CoreMemoryIn,
            ChangeOut,
            block_tools.core_memory_append_tool,
        ),
        AgentTool(
            "core_memory_replace",
            CORE_MEMORY_REPLACE,
            CoreMemoryReplaceIn,
            ChangeOut,
            block_tools.core_memory_replace_tool,
        ),
        AgentTool(
            "memory_changes",
            CHANGES_TOOL,
            ChangesIn,
            ChangesOut,
            block_tools.block_changes_tool,
        ),
        AgentTool(
            "core_memory_update",
            CORE_MEMORY_UPDATE,
            CoreMemoryUpdateIn,
            ChangeOut,
            block_tools.core_memory_update_tool,
        ),
        AgentTool(
            "recall", RECALL_TOOL, RecallIn, RecallOut, longterm_tools.recall_tool
        ),
        AgentTool(
            "search",
            SEARCH_TOOL,
            SearchIn,
            SearchOut,
            longterm_tools.search_tool,
            read_only=True,
        ),
        AgentTool(
            "archival_memory_insert",
            ARCHIVAL_MEMORY_INSERT,
            LettaInsertIn,
            ArchivalEntryOut,
            longterm_tools.archival_memory_insert_tool,
        ),
        AgentTool(
            "archival_memory_search",
            ARCHIVAL_MEMORY_SEARCH,
            LettaSearchIn,
            LettaSearchHitOut,
            longterm_tools.archival_memory_search_tool,
            many=True,
            read_only=True,
        ),
        AgentTool(
            "build_context",
            BUILD_CONTEXT,
            ContextBuildIn,
            ContextOut,
            _build_context,
            read_only=True,
        ),
        AgentTool(
            "coord", work_tools.COORD_TOOL, CoordIn, CoordOut, work_tools.coord_tool
        ),
        AgentTool(
            "route_to_group",
            group_tools.ROUTE_TO_GROUP_TOOL,
            RouteToGroupIn,
            RunOut,
            group_tools.route_to_group_tool,
        ),
        AgentTool(
            "notable",
            activity_tools.NOTABLE_TOOL,
            NotableIn,
            NotableOut,
            activity_tools.notable_tool,
        ),
        AgentTool(
            "open_files",
            file_tools.OPEN_FILES_HELP,
            LettaOpenFilesIn,
            LettaOpenFilesOut,
            file_tools.open_files_tool,
        ),
        AgentTool(
            "grep_files",
            file_tools.GREP_FILES_HELP,
            LettaGrepIn,
            GrepOut,
            file_tools.grep_files_tool,
            read_only=True,
        ),
        AgentTool(
            "semantic_search_files",
            file_tools.SEARCH_HELP,
            LettaSearchFilesIn,
            FileSearchOut,
            file_tools.semantic_search_files_tool,
            read_only=True,
        ),
        AgentTool(
            "files_open",
            file_tools.OPEN_HELP,
            FileOpenIn,
            WindowOut,
            file_tools.files_open_tool,
        ),
        AgentTool(
            "files_read",
            file_tools.READ_HELP,
            FileReadIn,
            WindowOut,
            file_tools.files_read_tool,
            read_only=True,
        ),
        AgentTool(
            "files_next",
            file_tools.NEXT_HELP,
            FileRefIn,
            WindowOut,
            file_tools.files_next_tool,
        ),
        AgentTool(
            "files_prev",
            file_tools.PREV_HELP,
            FileRefIn,
            WindowOut,
            file_tools.files_prev_tool,
        ),
        AgentTool(
            "files_close",
            file_tools.CLOSE_HELP,
            FileCloseIn,
            CloseOut,
            file_tools.files_close_tool,
        ),
        AgentTool(
            "files_grep",
            file_tools.GREP_HELP,
            GrepIn,
            GrepOut,
            file_tools.files_grep_tool,
            read_only=True,
        ),
        AgentTool(
            "files_search",
            file_tools.SEARCH_HELP,
            FileSearchIn,
            FileSearchOut,
            file_tools.files_search_tool,
            read_only=True,
        ),
    )
}


BLOCK_URI_PREFIX = "memory://blocks/"
CONTEXT_URI = "memory://context"


def _invalid_arguments(exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
        for err in exc.errors()
    )
    return f"invalid arguments: {problems}"


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
            input_schema=tool.args.model_json_schema(),
            annotations=types.ToolAnnotations(read_only_hint=tool.read_only),
        )
        for tool in TOOLS.values()
    ]
    input_schemas = {tool.name: tool.input_schema for tool in listed}

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = TOOLS.get(params.name)
        if tool is None:
            return _tool_error(
                f"no tool {params.name!r}; the tools are: {', '.join(TOOLS)}"
            )
        caller = _caller(ctx)
        try:
            args = tool.args.model_validate(params.arguments or {})
        except ValidationError as exc:
            return _tool_error(_invalid_arguments(exc))

        def run() -> str:
            actor = caller.authenticated()
            return tool.answer(tool.run(actor=actor, args=args))

        try:
            text = await in_thread(run)
        except ApplicationError as exc:
            return _tool_error(exc.message)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=tool.structured(text),
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
                lambda: _build_context(
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
