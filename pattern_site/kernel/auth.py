"""How API requests authenticate, producing an ``Actor``.

Agents send ``Authorization: Bearer <token>``; humans use their Django
session (with CSRF enforced on writes).  No credential at all is a 401 (never
a CSRF failure).  A present but wrong bearer token is a 401 with its reason;
it never falls back to the session.  Websockets: :func:`websocket_auth`.
"""

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.security.websocket import AllowedHostsOriginValidator, WebsocketDenier
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, parse_cookie
from ninja.security import HttpBearer, SessionAuth

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_token_actor,
    agent_token_authenticate,
)
from pattern_site.kernel.errors import ApplicationError


def request_bearer(request: HttpRequest) -> str | None:
    """The token a request's ``Authorization: Bearer`` header carries (""
    when it is empty), read as ninja's ``HttpBearer`` reads it; None
    without such a header.  From ``META``: ``request.headers`` would build
    a dict of every header for the one."""
    value = request.META.get("HTTP_AUTHORIZATION")
    if not value:
        return None
    scheme, *rest = value.split(" ")
    return " ".join(rest) if scheme.lower() == "bearer" else None


class AgentTokenAuth(HttpBearer):
    def __call__(self, request: HttpRequest) -> Actor | None:
        token = request_bearer(request)
        return None if token is None else self.authenticate(request, token)

    def authenticate(self, request: HttpRequest, token: str) -> Actor | None:
        return Actor.for_agent(agent_token_authenticate(raw=token))


class HumanSessionAuth(SessionAuth):
    def __call__(self, request: HttpRequest) -> Actor | None:
        # Without a logged-in user there is no session to forge a request
        # for: answer "no credential" (401) rather than a CSRF failure.
        if not request.user.is_authenticated:
            return None
        return super().__call__(request)  # type: ignore[no-any-return]

    def authenticate(self, request: HttpRequest, key: str | None) -> Actor | None:
        if request.user.is_authenticated:
            return Actor.for_user(request.user)
        return None


def api_auth() -> list[Any]:
    """The auth callbacks every authenticated endpoint accepts, in order."""
    return [AgentTokenAuth(), HumanSessionAuth()]


def request_actor(request: HttpRequest) -> Actor:
    actor = request.auth  # type: ignore[attr-defined]
    assert isinstance(actor, Actor)
    return actor


def websocket_auth(application: Any) -> Any:
    """Authenticate a websocket once, on its upgrade request, and put the
    actor in ``scope["actor"]`` (None: no credential, or a refused one).

    A browser always sends ``Origin``: such a connection is authenticated by
    its session only, and only from a same-site ``Origin`` (Channels'
    ``AllowedHostsOriginValidator``), so another site's page cannot open a
    socket with a partner's session cookie; an ``Authorization`` header on
    it is ignored.  A connection without ``Origin`` is not a browser's: it
    is authenticated by an agent token (``Authorization: Bearer``) or not at
    all, and one that carries a session cookie is refused, as a session
    cookie without ``Origin`` is no browser's either.  The actor is bound to
    its token (``agent_token_actor``): a socket outlives the check.
    """
    browser = AllowedHostsOriginValidator(
        AuthMiddlewareStack(_session_actor(application))
    )

    async def authenticate(scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers") or ())
        if b"origin" in headers:
            return await browser(scope, receive, send)
        if _has_session_cookie(headers):
            return await WebsocketDenier()(scope, receive, send)
        token = _bearer(headers)
        actor = None if token is None else await _token_actor(token)
        scope = {**scope, "user": AnonymousUser(), "actor": actor}
        return await application(scope, receive, send)

    return authenticate


def _session_actor(application: Any) -> Any:
    async def with_actor(scope: dict[str, Any], receive: Any, send: Any) -> Any:
        user = scope.get("user")
        actor = (
            Actor.for_user(user) if user is not None and user.is_authenticated else None
        )
        return await application({**scope, "actor": actor}, receive, send)

    return with_actor


@database_sync_to_async
def _token_actor(raw: str) -> Actor | None:
    try:
        return agent_token_actor(raw=raw)
    except ApplicationError:
        return None


def _bearer(headers: dict[bytes, bytes]) -> str | None:
    value = headers.get(b"authorization", b"")
    if not value.lower().startswith(b"bearer "):
        return None
    return value[7:].decode("latin1").strip() or None


def _has_session_cookie(headers: dict[bytes, bytes]) -> bool:
    cookies = parse_cookie(headers.get(b"cookie", b"").decode("latin1"))
    return settings.SESSION_COOKIE_NAME in cookies
