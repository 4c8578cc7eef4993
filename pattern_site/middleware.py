"""Dashboard pages show a domain error once, as a page with its message."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from coordination.errors import ApplicationError


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
