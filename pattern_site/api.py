"""The one tool API: each app's router, mounted by dotted string.

Domain errors (``coordination.errors.ApplicationError``) become HTTP here
and nowhere else: ``{"detail": message, "code": code, ...extra}`` with the
error's status.
"""

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from coordination.auth import api_auth
from coordination.errors import ApplicationError
from pattern_site.health import health_report

api = NinjaAPI(
    title="Pattern site tool API",
    version="1.0.0",
    description=(
        "Memory and coordination tools for the agents of a constellation. "
        "Agents authenticate with `Authorization: Bearer <token>`; humans "
        "with their dashboard session (CSRF token required on writes)."
    ),
    auth=api_auth(),
    urls_namespace="api",
    docs_url="/docs",
)


@api.exception_handler(ApplicationError)
def application_error(request: HttpRequest, exc: ApplicationError) -> HttpResponse:
    body = {"detail": exc.message, "code": exc.code, **exc.extra}
    return api.create_response(request, body, status=exc.status_code)


@api.exception_handler(RequestDataTooBig)
def request_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return api.create_response(
        request,
        {"detail": f"request body is too large: {exc}", "code": "payload_too_large"},
        status=413,
    )


@api.get("/health", auth=None, tags=["health"], summary="Subsystem health")
def health(request: HttpRequest) -> HttpResponse:
    healthy, report = health_report()
    return api.create_response(request, report, status=200 if healthy else 503)


api.add_router("/", "coordination.agents.api.router")
api.add_router("/", "memory.blocks.api.router")
api.add_router("/", "memory.longterm.api.router")
api.add_router("/", "memory.api.router")
api.add_router("/", "coordination.work.api.router")
api.add_router("/", "activity.api.router")
api.add_router("/", "coordination.groups.api.router")
api.add_router("/", "folders.api.router")
