"""How API requests authenticate, producing an ``Actor``.

Agents send ``Authorization: Bearer <token>``; humans use their Django
session (with CSRF enforced on writes).  No credential at all is a 401 (never
a CSRF failure).  A present but wrong bearer token is
a 401 with its reason; it never falls back to the session.
"""

from typing import Any

from django.http import HttpRequest
from ninja.security import HttpBearer, SessionAuth

from coordination.actors import Actor
from coordination.agents.services import agent_token_authenticate


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
