"""ASGI entry point: HTTP through Django, websockets through Channels."""

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import django
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponseBase

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pattern_site.settings.dev")
django.setup(set_prefix=False)


class SyncChainASGIHandler(ASGIHandler):
    """Django over ASGI with the middleware chain and view in one thread hop,
    on a few long-lived threads.

    Stock Django runs the chain in async mode, and every sync-only piece
    (WhiteNoise, each ``MiddlewareMixin`` hook, sync views) then hops between
    the event loop and a thread - about ten hops per tool-API request - and
    each request gets a new thread (``ThreadSensitiveContext``), so a new
    database connection (with sqlite-vec loaded) every time.  Our views and
    middleware are all sync: the whole chain runs as under WSGI, entered once
    from the loop, on ``PATTERN_HTTP_THREADS`` threads that keep their
    connections (``CONN_MAX_AGE``; checked before each request as Django's
    request signals would).  Async views still work (Django adapts them).
    """

    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self.executor = ThreadPoolExecutor(
            max_workers=settings.HTTP_THREADS, thread_name_prefix="http"
        )

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django serves HTTP only, not {scope['type']}")
        await self.handle(scope, receive, send)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        return await sync_to_async(
            self._get_response_in_thread, thread_sensitive=False, executor=self.executor
        )(request)

    def _get_response_in_thread(self, request: HttpRequest) -> HttpResponseBase:
        close_old_connections()
        return self.get_response(request)


django_asgi_app = SyncChainASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from pattern_site.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
