"""The MCP endpoint over Streamable HTTP: an ASGI app for ``/mcp``.

A request must carry ``Authorization: Bearer <agent token>``; a missing,
wrong or revoked token, or a deactivated agent, is a 401 with the HTTP
API's message, and none of the MCP answer is sent.  The token is checked
once per request, in the first worker-thread hop that needs it
(``pattern_site.mcp.caller``): a tool call's own hop, or this app's when the
response starts.

The manager runs stateless with JSON responses: every request stands alone,
so any web process answers any request, whether the client speaks the
sessionless protocol revision or an older one that still sends a session
header.  Host and Origin headers are checked against ``ALLOWED_HOSTS``
(``PATTERN_ALLOWED_HOSTS``) and ``CSRF_TRUSTED_ORIGINS``.

The manager needs a running task group (its ``run()``): ``start()`` enters
it in a task of its own and ``stop()`` leaves it.  The host ASGI application
calls them on the ASGI lifespan protocol (``pattern_site.asgi``); a server
that does not speak it (Daphne) gets it started by the first MCP request.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import Executor
from typing import Any

from django.conf import settings
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from pattern_site.kernel.errors import AuthenticationFailed
from pattern_site.mcp.caller import CALLER_SCOPE_KEY, Caller
from pattern_site.mcp.server import mcp_server_build, run_sync


def transport_security() -> TransportSecuritySettings:
    """DNS-rebinding protection from Django's own host settings.

    ``*`` in ``ALLOWED_HOSTS`` turns the check off, as it does for Django.
    A leading-dot entry (``.example.com``) admits the bare domain here: the
    SDK matches hosts exactly or with any port."""
    hosts = settings.ALLOWED_HOSTS
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = [h.lstrip(".") for h in hosts]
    allowed_hosts = [form for name in names for form in (name, f"{name}:*")]
    origins = [
        f"{scheme}://{name}{port}"
        for name in names
        for scheme in ("http", "https")
        for port in ("", ":*")
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts,
        allowed_origins=[*origins, *settings.CSRF_TRUSTED_ORIGINS],
    )


def _bearer(scope: dict[str, Any]) -> str | None:
    for key, value in scope["headers"]:
        if key == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


async def _refuse(send: Any, message: str) -> None:
    body = json.dumps({"detail": message, "code": AuthenticationFailed.code})
    await send(
        {
            "type": "http.response.start",
            "status": AuthenticationFailed.status_code,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="pattern-site"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})


class McpHttpApp:
    """ASGI app: authenticate the agent, then serve MCP as that agent.

    ``executor``: the threads that run Django code (the project's HTTP
    handler's, so MCP and HTTP tool calls share one bounded pool)."""

    def __init__(self, *, executor: Executor | None = None) -> None:
        self.executor = executor
        self.session_manager = StreamableHTTPSessionManager(
            app=mcp_server_build(executor=executor),
            json_response=True,
            stateless=True,
            security_settings=transport_security(),
            max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
        )

        self._runner: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._starting = asyncio.Lock()

    async def start(self) -> None:
        """Run the session manager until ``stop()``; idempotent."""
        async with self._starting:
            if self._runner is not None:
                return
            ready = asyncio.Event()

            async def run() -> None:
                async with self.session_manager.run():
                    ready.set()
                    await self._stopping.wait()

            self._runner = asyncio.create_task(run(), name="mcp-session-manager")
            waiter = asyncio.ensure_future(ready.wait())
            await asyncio.wait(
                [self._runner, waiter], return_when=asyncio.FIRST_COMPLETED
            )
            waiter.cancel()
            if self._runner.done():
                self._runner.result()  # raise why it could not start

    async def stop(self) -> None:
        if self._runner is None:
            return
        self._stopping.set()
        await self._runner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = _bearer(scope)
        if raw is None:
            await _refuse(
                send, "send your agent token as 'Authorization: Bearer <token>'"
            )
            return
        if self._runner is None:
            await self.start()
        caller = Caller(raw)
        refused = False

        async def send_if_authenticated(message: dict[str, Any]) -> None:
            nonlocal refused
            if message["type"] == "http.response.start":
                if not caller.settled:
                    await run_sync(caller.settle, executor=self.executor)
                if caller.refused is not None:
                    refused = True
                    await _refuse(send, caller.refused.message)
                    return
            if not refused:
                await send(message)

        scope = {**scope, CALLER_SCOPE_KEY: caller}
        await self.session_manager.handle_request(scope, receive, send_if_authenticated)
