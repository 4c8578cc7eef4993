"""The one tool API: each app's router, mounted by dotted string.

Every answer under ``/api/`` that is an error is JSON of one shape,
``pattern_site.kernel.apitypes.ErrorOut``: ``{"detail": message, "code": code}``,
plus ``errors`` (one entry per invalid field, paths without the ``payload``
wrapper) for validation errors.  Domain errors
(``pattern_site.kernel.errors.ApplicationError``) become HTTP here and nowhere
else, with the error's status and its extra facts.

Request bodies are parsed by :class:`ToolApiParser`: a body is a JSON
object whose strings hold neither NUL characters nor lone surrogates, or it
is refused before any endpoint runs.
"""

import functools
import json
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFilesSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.utils.module_loading import import_string
from ninja import Field, NinjaAPI, Router, Schema
from ninja.errors import (
    AuthenticationError,
    HttpError,
    ValidationError,
    ValidationErrorContext,
)
from ninja.parser import Parser

from pattern_site.health import health_report
from pattern_site.kernel.apitypes import accepted_fields, error_responses
from pattern_site.kernel.auth import api_auth
from pattern_site.kernel.errors import ApplicationError, InvalidInput, MalformedRequest
from pattern_site.tool_routes import tool_routes_add
from pattern_site.tool_schemas import tool_schemas

AUTH_REQUIRED = (
    "send Authorization: Bearer <token> (agents) or log in to the dashboard (humans)"
)

TAGS = [
    {
        "name": "blocks",
        "description": "Memory blocks: create, read, configure, "
        "structured operations, history, sharing, export and import.",
    },
    {
        "name": "tools",
        "description": "The agent tools, called by an agent with "
        "its token: context and the Letta-compatible core_memory_* / archival_* "
        "tools.  GET /api/tools/schemas gives them as function-calling JSON.",
    },
    {
        "name": "archival",
        "description": "Archival memory: the facts an agent keeps outside its context.",
    },
    {"name": "conversations", "description": "Conversations and their messages."},
    {
        "name": "search",
        "description": "Search across archival memory and "
        "conversations (full-text, vector or both).",
    },
    {
        "name": "approvals",
        "description": "Changes agents asked to make to blocks a human must approve.",
    },
    {
        "name": "agents",
        "description": "Who you are, your constellations and their agents.",
    },
    {"name": "context", "description": "The system prompt an agent runs with."},
    {"name": "health", "description": "Whether each subsystem is up."},
    {
        "name": "tasks",
        "description": "Coordination: tasks, handoff notes, shared state and "
        "the /coord dialect.",
    },
    {
        "name": "groups",
        "description": "Agent groups, their coordination patterns, runs and inboxes.",
    },
    {
        "name": "activity",
        "description": "The activity stream, notable events and catch-up digests.",
    },
    {
        "name": "folders",
        "description": "Folders of files and the file tools agents read them with.",
    },
]


def _no_bad_text(value: Any, path: str = "") -> None:
    """Refuse NUL characters and lone surrogates anywhere in parsed JSON:
    neither can be stored (PostgreSQL text, UTF-8 encoding)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidInput(f"{path or 'the body'} contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(
                f"{path or 'the body'} contains a lone surrogate (\\ud800-\\udfff); "
                "send valid Unicode text"
            ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_bad_text(key, f"{path}.{key!r} (a key)" if path else "a key")
            _no_bad_text(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_bad_text(item, f"{path}[{index}]")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "an array"


class ToolApiParser(Parser):
    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        try:
            data = json.loads(request.body)
        except UnicodeDecodeError as exc:
            raise MalformedRequest(
                f"the request body is not UTF-8: {exc.reason}"
            ) from None
        except ValueError as exc:
            raise MalformedRequest(
                f"the request body is not valid JSON: {exc}"
            ) from None
        if not isinstance(data, dict):
            raise MalformedRequest(
                f"the request body must be a JSON object, not {_json_kind(data)}"
            )
        _no_bad_text(data)
        return data


class ToolApi(NinjaAPI):
    def validation_error_from_error_contexts(
        self, error_contexts: list[ValidationErrorContext]
    ) -> ValidationError:
        # Only here is the schema that refused a field at hand: an unknown
        # field's error keeps the fields the schema accepts beside it, for
        # the handler's message.
        error = super().validation_error_from_error_contexts(error_contexts)
        raw = [
            (context.model, item)
            for context in error_contexts
            for item in context.pydantic_validation_error.errors()
        ]
        for out, (model, item) in zip(error.errors, raw, strict=True):
            if item["type"] == "extra_forbidden":
                accepted = accepted_fields(model, item["loc"][:-1])
                out["ctx"] = {"accepted": accepted}
        return error


api = ToolApi(
    title="Pattern site tool API",
    version="1.0.0",
    description=(
        "Memory and coordination tools for the agents of a constellation. "
        "Agents authenticate with `Authorization: Bearer <token>`; humans "
        "with their dashboard session (CSRF token required on writes). "
        "Every error is JSON: `detail` (what was wrong and what is allowed), "
        "`code`, and for invalid fields `errors`."
    ),
    auth=api_auth(),
    urls_namespace="api",
    docs_url="/docs",
    parser=ToolApiParser(),
    openapi_extra={"tags": TAGS},
)


def _error(
    request: HttpRequest, status: int, detail: str, code: str, /, **extra: Any
) -> HttpResponse:
    # Positional-only: an error's own facts may be named ``status`` too.
    return api.create_response(
        request, {"detail": detail, "code": code, **extra}, status=status
    )


@api.exception_handler(ApplicationError)
def application_error(request: HttpRequest, exc: ApplicationError) -> HttpResponse:
    return _error(request, exc.status_code, exc.message, exc.code, **exc.extra)


@api.exception_handler(DjangoValidationError)
def model_validation_error(
    request: HttpRequest, exc: DjangoValidationError
) -> HttpResponse:
    # A model's own constraints (full_clean in a service) as a domain error.
    messages = getattr(exc, "message_dict", None) or {"": exc.messages}
    detail = "; ".join(
        f"{field}: {' '.join(texts)}" if field else " ".join(texts)
        for field, texts in messages.items()
    )
    return _error(request, 422, detail, "invalid_input")


@api.exception_handler(RequestDataTooBig)
def request_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return _error(
        request, 413, f"request body is too large: {exc}", "payload_too_large"
    )


@api.exception_handler(TooManyFilesSent)
def too_many_files(request: HttpRequest, exc: TooManyFilesSent) -> HttpResponse:
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FILES
    return _error(
        request,
        413,
        f"a request may carry at most {limit} files; send the rest in further"
        " requests, or as a .zip",
        "too_many_files",
    )


@api.exception_handler(MultiPartParserError)
def multipart_unreadable(
    request: HttpRequest, exc: MultiPartParserError
) -> HttpResponse:
    return _error(
        request, 400, f"the multipart body could not be read: {exc}", "malformed_body"
    )


def _field_errors(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for error in errors:
        loc = list(error.get("loc", ()))
        # ninja nests a body under the endpoint's parameter name ("payload").
        if len(loc) > 1 and loc[0] == "body" and loc[1] == "payload":
            del loc[1]
        out.append({"loc": loc, "msg": _field_message(error), "type": error["type"]})
    return out


def _field_message(error: dict[str, Any]) -> str:
    if error["type"] != "extra_forbidden":
        return str(error.get("msg", ""))
    accepted = error.get("ctx", {}).get("accepted", [])
    fields = ", ".join(accepted) if accepted else "none"
    return f"unknown field {error['loc'][-1]!r}; the accepted fields are: {fields}"


@api.exception_handler(ValidationError)
def validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = _field_errors(exc.errors)
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(p) for p in first["loc"]) or "request"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return _error(
        request,
        422,
        f"{where}: {first['msg']}{more}",
        "validation_error",
        errors=errors,
    )


@api.exception_handler(AuthenticationError)
def authentication_error(
    request: HttpRequest, exc: AuthenticationError
) -> HttpResponse:
    return _error(request, 401, AUTH_REQUIRED, "auth_required")


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # ninja wraps whatever the parser raised in a 400 "Cannot parse".
    if isinstance(exc.__cause__, ApplicationError):
        return application_error(request, exc.__cause__)
    if exc.status_code == 400:
        return _error(request, 400, str(exc), "malformed_body")
    if exc.status_code == 403:
        detail = f"{exc}: send the csrftoken cookie's value as X-CSRFToken"
        return _error(request, 403, detail, "csrf_failed")
    return _error(request, exc.status_code, str(exc), f"http_{exc.status_code}")


@api.exception_handler(Http404)
def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _error(request, 404, str(exc) or "not found", "not_found")


class ToolSchemasOut(Schema):
    openai: list[dict[str, Any]] = Field(
        description='OpenAI chat "tools": {"type": "function", "function": '
        "{name, description, parameters}}."
    )
    anthropic: list[dict[str, Any]] = Field(
        description="Anthropic tools: {name, description, input_schema}."
    )
    endpoints: dict[str, str] = Field(
        description="Where each tool is called: POST /api/tools/<name> with "
        "the model's arguments as the JSON body."
    )


@api.get(
    "/tools/schemas",
    response={200: ToolSchemasOut, **error_responses(body=False)},
    tags=["tools"],
    summary="The agent tools as function-calling JSON",
)
def list_tool_schemas(request: HttpRequest) -> dict[str, Any]:
    """Every agent tool with its description and JSON-Schema parameters, in
    OpenAI's and Anthropic's function-calling formats, generated from the
    tool registry that this document's tool routes are generated from."""
    return _tool_schemas()


@functools.cache
def _tool_schemas() -> dict[str, Any]:
    return tool_schemas(path_prefix="/api")


@api.get(
    "/health",
    auth=None,
    tags=["health"],
    summary="Subsystem health",
    response={200: dict[str, Any], 503: dict[str, Any]},
)
def health(request: HttpRequest) -> HttpResponse:
    healthy, report = health_report()
    return api.create_response(request, report, status=200 if healthy else 503)


ROUTERS: list[Router] = [
    import_string(f"{module}.router")
    for module in (
        "pattern_site.kernel.agents.api",
        "memory.blocks.api",
        "memory.longterm.api",
        "coordination.work.api",
        "activity.api",
        "coordination.groups.api",
        "folders.api",
    )
]
for _router in ROUTERS:
    api.add_router("/", _router)
tool_routes_add(default=api.default_router, routers=ROUTERS)
