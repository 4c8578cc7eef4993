"""Errors shown once: dashboard pages show a domain error as a page with its
message; every error under ``/api/`` is JSON.

Errors raised inside the tool API are shaped by ``pattern_site.api``; the
ones Django and ninja answer before or around it (no such path, a method an
endpoint does not take, an unhandled exception) are reshaped here into the
same ``{"detail", "code"}`` body.
"""

from collections.abc import Callable

from django.contrib.auth import middleware as auth
from django.contrib.auth.models import AnonymousUser
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware import csrf
from django.shortcuts import render
from django.utils.deprecation import MiddlewareMixin

from pattern_site.kernel.auth import request_bearer
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


def agent_api_request(request: HttpRequest) -> bool:
    """Whether ``request`` is an agent's call of the tool API: under /api/
    with an ``Authorization: Bearer`` header, which authenticates it alone
    (``pattern_site.kernel.auth``: a bearer token is never joined by, nor
    falls back to, a session).  Asked by each browser-only middleware in
    turn, answered once per request: neither the path nor the header
    changes within one."""
    try:
        return request._agent_api_request  # type: ignore[attr-defined,no-any-return]
    except AttributeError:
        pass
    agent = request.path.startswith(API_PREFIX) and request_bearer(request) is not None
    request._agent_api_request = agent  # type: ignore[attr-defined]
    return agent


class _BrowserOnly(MiddlewareMixin):
    """Middleware for a browser's requests (session, CSRF cookie, session
    user, flash messages), left out of an agent's tool-API calls, which use
    none of them: their work was a good part of such a call's."""

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if agent_api_request(request):
            self.left_out(request)
            return self.get_response(request)  # type: ignore[no-any-return]
        return super().__call__(request)  # type: ignore[no-any-return]

    def left_out(self, request: HttpRequest) -> None:
        """What an agent's call gets instead of this middleware's work."""


class SessionMiddleware(_BrowserOnly, sessions.SessionMiddleware):
    pass


class CsrfViewMiddleware(_BrowserOnly, csrf.CsrfViewMiddleware):
    pass


class AuthenticationMiddleware(_BrowserOnly, auth.AuthenticationMiddleware):
    def left_out(self, request: HttpRequest) -> None:
        request.user = AnonymousUser()  # an agent's call has no session user


class MessageMiddleware(_BrowserOnly, messages.MessageMiddleware):
    pass
