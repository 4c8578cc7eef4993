"""Helpers shared by the dashboard's views of every app."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from coordination.actors import Actor
from coordination.errors import ApplicationError

View = Callable[..., HttpResponse]


def page_actor(request: HttpRequest) -> Actor:
    """The signed-in person acting on a dashboard page."""
    return Actor.for_user(request.user)


def safe_next(request: HttpRequest, candidate: str | None) -> str:
    """``candidate`` if it points into this site, else the home page: a
    form's ``next`` or Referer must never send the user elsewhere."""
    if candidate and url_has_allowed_host_and_scheme(
        candidate,
        allowed_hosts={request.get_host()},
        require_https=request.is_secure(),
    ):
        return candidate
    return "/"


def form_action(view: View) -> View:
    """A POST-only form handler: errors become a message, then go back."""

    @login_required
    @require_POST
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        back = safe_next(
            request, request.POST.get("next") or request.headers.get("Referer")
        )
        try:
            result = view(request, *args, **kwargs)
        except ApplicationError as exc:
            messages.error(request, exc.message)
            return redirect(back)
        return result or redirect(back)

    return wrapper
