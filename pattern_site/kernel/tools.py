"""The agent tools, each declared once, by the package that owns it.

A package declares its tools with :func:`tool_register` when its tools
module is imported (each app's ``AppConfig.ready`` imports them, so the
registry is complete once Django is set up).  Every surface is generated
from here: the HTTP routes ``POST /api/tools/<name>`` (``pattern_site.tool_routes``),
the MCP server's tool list and calls (``pattern_site.mcp.server``), the
function-calling JSON of ``GET /api/tools/schemas`` and :func:`tool_call`,
the in-process caller.  All of them describe a tool's arguments with the one
schema :func:`tool_parameters` gives.
"""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ninja import Schema
from ninja.responses import NinjaJSONEncoder
from ninja.schema import NinjaGenerateJsonSchema
from pydantic import BaseModel, ValidationError

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import ApplicationError

TOOL_NAME = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class AgentTool:
    """One agent tool.

    ``run(actor=, args=)`` is the owning package's call and returns the
    answer, which ``out`` shapes (a list of them when ``many``).  The rest
    describes its HTTP route: ``path`` under ``/api`` (``/tools/<name>``
    unless given), the ``status`` of a success, the documented ``errors``,
    ``summary``, ``tags``, request body ``examples``, an optional ``query``
    schema whose fields the route takes as query parameters and passes to
    ``run`` as keywords (HTTP only), ``body_optional`` (a missing body is
    the arguments' defaults) and ``respond``, which may answer a request in
    a way only HTTP can (an event stream) or return None for the usual JSON.
    ``exclude_none``: the answer leaves out every null field (a model reads
    each answer, and nulls cost it tokens); ``out`` must then give each
    nullable field a default, so the document marks it optional.
    """

    name: str
    description: str
    args: type[Schema]
    out: type[BaseModel]
    run: Callable[..., Any]
    writes: bool
    many: bool = False
    status: int = 200
    errors: tuple[int, ...] = (403, 404)
    summary: str = ""
    tags: tuple[str, ...] = ("tools",)
    examples: dict[str, Any] | None = None
    path: str = ""
    query: type[Schema] | None = None
    body_optional: bool = False
    respond: Callable[[Any, Any], Any] | None = None
    exclude_none: bool = False

    def __post_init__(self) -> None:
        if not TOOL_NAME.fullmatch(self.name):
            raise ValueError(f"tool name {self.name!r} is not [a-z0-9_]+")

    @property
    def route(self) -> str:
        """The HTTP path under ``/api``."""
        return self.path or f"/tools/{self.name}"

    def answer(self, value: Any) -> str:
        """``value`` as the HTTP API's response body."""
        return response_body(
            self.out, value, many=self.many, exclude_none=self.exclude_none
        )


_TOOLS: dict[str, AgentTool] = {}


def tool_register(*tools: AgentTool) -> None:
    """Add ``tools``; a name already taken is a programming error."""
    for tool in tools:
        if tool.name in _TOOLS:
            raise ValueError(f"agent tool {tool.name!r} is registered twice")
        _TOOLS[tool.name] = tool


def tools_all() -> list[AgentTool]:
    """Every tool, in registration order."""
    return list(_TOOLS.values())


def tool_get(name: str) -> AgentTool | None:
    return _TOOLS.get(name)


def response_body(
    schema: type[BaseModel],
    value: Any,
    *,
    many: bool = False,
    exclude_none: bool = False,
) -> str:
    """``value`` as the HTTP API's response body: through the output schema
    and ninja's JSON encoder."""
    options = {"by_alias": True, "exclude_none": exclude_none}
    if many:
        dumped: Any = [schema.model_validate(v).model_dump(**options) for v in value]
    else:
        dumped = schema.model_validate(value).model_dump(**options)
    return json.dumps(dumped, cls=NinjaJSONEncoder)


def _inline(schema: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[1]
            return _inline(definitions[name], definitions)
        return {key: _inline(value, definitions) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_inline(item, definitions) for item in schema]
    return schema


def tool_parameters(tool: AgentTool) -> dict[str, Any]:
    """The arguments' JSON Schema, self-contained (function-calling APIs take
    one schema per tool, without references), generated as ninja generates
    the request body's in the OpenAPI document."""
    schema = tool.args.model_json_schema(
        by_alias=True, schema_generator=NinjaGenerateJsonSchema, mode="validation"
    )
    definitions = schema.pop("$defs", {})
    inlined = _inline(schema, definitions)
    # Discriminator mappings point into the definitions, gone once inlined.
    return {k: v for k, v in inlined.items() if k not in ("title", "discriminator")}


# Each tool's function, made once: a schema is fixed once its tool is
# registered, and generating them all costs a turn more than its steps.
_FUNCTIONS: dict[str, dict[str, Any]] = {}


def tool_functions() -> list[dict[str, Any]]:
    """Every tool in OpenAI's function-calling format.  The functions are
    the registry's own, shared: read them, never change them (copying them
    all costs a turn a few milliseconds of its first step)."""
    for tool in tools_all():
        if tool.name not in _FUNCTIONS:
            _FUNCTIONS[tool.name] = {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool_parameters(tool),
                },
            }
    return [_FUNCTIONS[name] for name in _TOOLS]


@dataclass(frozen=True)
class ToolCallResult:
    """``text``: the JSON answer, or the error message; ``value``: the
    answer parsed, when ``ok``."""

    ok: bool
    text: str
    value: Any = None


def invalid_arguments_message(exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
        for err in exc.errors()
    )
    return f"invalid arguments: {problems}"


def tool_call(*, actor: Actor, name: str, arguments: dict[str, Any]) -> ToolCallResult:
    """Call tool ``name`` as ``actor`` (whose rights the services check).  A
    tool-level failure (no such tool, invalid arguments, a domain error) is
    an answer with ``ok=False`` and the HTTP API's message, never raised."""
    tool = tool_get(name)
    if tool is None:
        known = ", ".join(_TOOLS)
        return ToolCallResult(False, f"no tool {name!r}; the tools are: {known}")
    try:
        args = tool.args.model_validate(arguments)
    except ValidationError as exc:
        return ToolCallResult(False, invalid_arguments_message(exc))
    try:
        text = tool.answer(tool.run(actor=actor, args=args))
    except ApplicationError as exc:
        return ToolCallResult(False, exc.message)
    return ToolCallResult(True, text, json.loads(text))
