"""The agent behind one MCP request's bearer token.

``pattern_site.mcp.http`` puts a ``Caller`` in the request's ASGI scope
(``CALLER_SCOPE_KEY``); it is authenticated once, in a worker thread, by the
first of: the tool or resource handler (in the same thread hop as the tool
itself, as Django's handler checks a token in the request's one hop), or
the HTTP layer when the response starts (requests that reach no handler:
initialize, listings).  A refused token turns the response into a 401
before anything of it is sent, so nothing a tool did with a bad token (it
does nothing: the check comes first) can reach the client.
"""

from __future__ import annotations

from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import agent_token_authenticate
from pattern_site.kernel.errors import AuthenticationFailed

CALLER_SCOPE_KEY = "pattern.mcp_caller"


class Caller:
    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.actor: Actor | None = None
        self.refused: AuthenticationFailed | None = None

    @property
    def settled(self) -> bool:
        return self.actor is not None or self.refused is not None

    def settle(self) -> None:
        """Authenticate, once (sync: call it in a worker thread)."""
        if self.settled:
            return
        try:
            self.actor = Actor.for_agent(agent_token_authenticate(raw=self.raw))
        except AuthenticationFailed as exc:
            self.refused = exc

    def authenticated(self) -> Actor:
        """The actor, or ``AuthenticationFailed`` (sync, like ``settle``)."""
        self.settle()
        if self.refused is not None:
            raise self.refused
        assert self.actor is not None
        return self.actor
