"""The HTTP routes of the agent tools, generated from the registry
(``pattern_site.kernel.tools``): one ``POST`` operation per tool, whose
request body is the tool's arguments and whose answer is the tool's, with
the status, documented errors, tags, summary, description and examples the
tool declares."""

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from ninja import Body, Query, Router

from pattern_site.kernel.apitypes import error_responses
from pattern_site.kernel.auth import request_actor
from pattern_site.kernel.tools import AgentTool, tools_all

# The content type of ninja's JSON answers (``NinjaAPI.get_content_type``).
JSON = "application/json; charset=utf-8"


def _view(tool: AgentTool) -> Callable[..., Any]:
    def view(request: HttpRequest, payload: Any = None, query: Any = None) -> Any:
        extra = query.model_dump() if query is not None else {}
        args = tool.args() if payload is None else payload
        answer = tool.run(actor=request_actor(request), args=args, **extra)
        if tool.respond is not None:
            response = tool.respond(request, answer)
            if response is not None:
                return response
        # The body MCP and in-process callers get (``AgentTool.answer``),
        # shaped once by the tool's schema: ninja would validate the answer
        # again inside a wrapper of its own.
        return HttpResponse(tool.answer(answer), status=tool.status, content_type=JSON)

    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("request", keyword, annotation=HttpRequest)]
    if tool.body_optional:
        params.append(
            inspect.Parameter(
                "payload", keyword, annotation=Body[tool.args], default=None
            )
        )
    else:
        params.append(inspect.Parameter("payload", keyword, annotation=tool.args))
    if tool.query is not None:
        params.append(inspect.Parameter("query", keyword, annotation=Query[tool.query]))
    # ninja reads the operation's parameters from the signature.
    view.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    view.__name__ = view.__qualname__ = tool.name
    return view


def tool_routes_add(*, default: Router, routers: Iterable[Router]) -> None:
    """Add every tool's route to ``default``, or to the router of
    ``routers`` that already serves its path (ninja answers a path from one
    router only, so a GET and a tool's POST on one path must share it)."""
    if not apps.ready:
        # The apps register their tools in ready(): routes made before then
        # would silently miss some.
        raise ImproperlyConfigured("the tool routes are built once Django is set up")
    routers = list(routers)
    for tool in tools_all():
        path = tool.route
        owner = next((r for r in routers if path in r.path_operations), default)
        answer: Any = list[tool.out] if tool.many else tool.out
        examples = tool.examples
        owner.add_api_operation(
            path,
            ["POST"],
            _view(tool),
            response={tool.status: answer, **error_responses(*tool.errors, body=True)},
            # Answers by their documented names (a block's ``schema``), as
            # the MCP and in-process callers' ``response_body`` gives them.
            by_alias=True,
            exclude_none=tool.exclude_none,
            operation_id=tool.name,
            summary=tool.summary or tool.name,
            description=tool.description,
            tags=list(tool.tags),
            openapi_extra=(
                None
                if examples is None
                else {
                    "requestBody": {
                        "content": {"application/json": {"examples": examples}}
                    }
                }
            ),
        )
