"""How API requests authenticate, producing an ``Actor``.

Agents send ``Authorization: Bearer <token>``; humans use their Django
session (with CSRF enforced on writes).  No credential at all is a 401 (never
a CSRF failure).  A present but wrong bearer token is a 401 with its reason;
it never falls back to the session.  Websockets:
:func:`websocket_origin_validator` (agents join with their token).
"""

from typing import Any

from channels.security.websocket import AllowedHostsOriginValidator
from django.conf import settings
from django.http import HttpRequest, parse_cookie
from ninja.security import HttpBearer, SessionAuth

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_authenticate


class AgentTokenAuth(HttpBearer):
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


def websocket_origin_validator(application: Any) -> Any:
    """Channels' same-site ``Origin`` check for websockets, except for a
    connection that sends neither an ``Origin`` nor a session cookie.

    The check stops another site's page from opening a socket with the
    partner's session cookie; a browser always sends ``Origin``.  Agent
    clients (not browsers) send no ``Origin`` and no cookie: they
    authenticate with their token in each join, so nothing of a session can
    be borrowed, and they are let through (as anonymous).  A session
    cookie without an ``Origin`` is refused.
    """
    checked = AllowedHostsOriginValidator(application)

    async def validate(scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers") or ())
        if b"origin" not in headers and not _has_session_cookie(headers):
            return await application(scope, receive, send)
        return await checked(scope, receive, send)

    return validate


def _has_session_cookie(headers: dict[bytes, bytes]) -> bool:
    cookies = parse_cookie(headers.get(b"cookie", b"").decode("latin1"))
    return settings.SESSION_COOKIE_NAME in cookies
