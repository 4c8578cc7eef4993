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

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import ApplicationError

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


def form_problems(form: Any) -> str:
    """A bound form's errors as one line: ``field: error; field: error``."""
    return "; ".join(
        f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()
    )


FORM_RETRY = "form_retry"


def form_action(view: View) -> View:
    """A POST-only form handler: errors go back to the page the form was on.

    A form that names itself (a ``form`` input) gets its input and the error
    back through :func:`form_retry`, to show them beside its fields (the
    error's ``extra["field"]`` names the field, when one was wrong); any
    other form's error becomes a message.
    """

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
            form = request.POST.get("form")
            if form:
                request.session[FORM_RETRY] = {
                    "form": form,
                    "data": {
                        key: request.POST.getlist(key)
                        for key in request.POST
                        if key != "csrfmiddlewaretoken"
                    },
                    "error": exc.message,
                    "field": str(exc.extra.get("field") or ""),
                }
            else:
                messages.error(request, exc.message)
            return redirect(back)
        return result or redirect(back)

    return wrapper


def form_retry(request: HttpRequest, form: str | None = None) -> dict[str, Any] | None:
    """The failed post a page shows again, once: ``form`` (its name),
    ``data`` (input name -> posted values), ``error`` and ``field``.  With
    ``form``, only that form's (another page's stays for it)."""
    retry = request.session.get(FORM_RETRY)
    if retry is None or (form is not None and retry["form"] != form):
        return None
    return request.session.pop(FORM_RETRY)


class ReadOnlyMixin:
    """Admin listing and viewing only: no add, change or delete (the
    models change through their services)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
