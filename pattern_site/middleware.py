"""Errors shown once: dashboard pages show a domain error as a page with its
message; every error under ``/api/`` is JSON.

Errors raised inside the tool API are shaped by ``pattern_site.api``; the
ones Django and ninja answer before or around it (no such path, a method an
endpoint does not take, an unhandled exception) are reshaped here into the
same ``{"detail", "code"}`` body.
"""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from pattern_site.kernel.errors import ApplicationError

API_PREFIX = "/api/"


class ApplicationErrorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(
        self, request: HttpRequest, exception: Exception
    ) -> HttpResponse | None:
        if not isinstance(exception, ApplicationError):
            return None
        return render(
            request,
            "error.html",
            {"error": exception},
            status=exception.status_code,
        )


def _api_error(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    status = response.status_code
    if status == 404:
        detail = (
            f"no endpoint at {request.path}; the endpoints are listed at "
            "/api/openapi.json and /api/docs"
        )
        code = "not_found"
    elif status == 405:
        allowed = response.get("Allow", "")
        detail = f"{request.method} is not allowed on {request.path}; allowed: "
        detail += allowed
        code = "method_not_allowed"
    else:
        detail = f"the server could not answer ({status} {response.reason_phrase})"
        code = "server_error" if status >= 500 else f"http_{status}"
    out = JsonResponse({"detail": detail, "code": code}, status=status)
    if response.has_header("Allow"):
        out["Allow"] = response["Allow"]
    return out


class ApiJsonErrorMiddleware:
    """Any non-JSON error response under /api/ becomes the JSON error shape."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and request.path.startswith(API_PREFIX)
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            return _api_error(request, response)
        return response
