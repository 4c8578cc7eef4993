"""ASGI entry point: ``/mcp`` through the MCP server, other HTTP through
Django, websockets through Channels.

``application`` is a small router in front of them: it answers the ASGI
lifespan protocol (neither Django's nor Channels' handlers do) by starting
and stopping the MCP session manager, and sends HTTP requests for ``/mcp``
to the MCP app.
"""

import asyncio
import contextvars
import os
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import django
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.http import FileResponse, HttpRequest, HttpResponseBase
from django.urls import ResolverMatch, URLResolver, get_resolver, set_script_prefix

from pattern_site.kernel.daphne_server import daphne_bodies_unparsed
from pattern_site.kernel.heap import heap_freeze, heap_freeze_if_grown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pattern_site.settings.dev")
django.setup(set_prefix=False)


daphne_bodies_unparsed()


# The most argument-free paths SyncChainASGIHandler remembers the view of:
# far more than the URLconf's fixed routes.
RESOLVED_MAX = 4096


class SyncChainASGIHandler(ASGIHandler):
    """Django over ASGI with a whole request in one thread hop, on a few
    long-lived threads.

    Stock Django runs the chain in async mode, and every sync-only piece
    (WhiteNoise, each ``MiddlewareMixin`` hook, sync views) then hops between
    the event loop and a thread - about ten hops per tool-API request - plus
    one hop each for the ``request_started`` and ``request_finished``
    signals; and each request gets a new thread (``ThreadSensitiveContext``),
    so a new database connection (with sqlite-vec loaded) every time.  Our
    views and middleware are all sync: here the signals, the request and the
    whole chain run as under WSGI, entered once from the loop, on
    ``PATTERN_HTTP_THREADS`` threads that keep their connections
    (``CONN_MAX_AGE``; the signals check them in the thread that uses them).
    Async views still work (Django adapts them).  A file response is read
    in that hop too (as Django would, whole); only an async streaming
    response is closed after it is sent, in a second hop.
    """

    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self.executor = ThreadPoolExecutor(
            max_workers=settings.HTTP_THREADS, thread_name_prefix="http"
        )
        self.loop_wait_seconds = settings.HTTP_LOOP_WAIT_MS / 1000
        # Requests handed to the threads and not yet answered.
        self._running = 0
        self._resolved: dict[tuple[URLResolver, str], ResolverMatch] = {}

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        """Django's, remembering the match of each path that captures no
        arguments (``/api/tools/context``) under the URLconf that matched
        it: trying a path against the ~370 patterns one by one cost a tool
        call more Python than checking its arguments.  Paths with
        arguments, requests with a URLconf of their own and misses are
        resolved as usual; ``RESOLVED_MAX`` bounds the memo even so."""
        if hasattr(request, "urlconf"):
            return super().resolve_request(request)  # type: ignore[no-any-return]
        key = (get_resolver(), request.path_info)
        match = self._resolved.get(key)
        if match is None:
            match = super().resolve_request(request)
            if (
                not match.args
                and not match.kwargs
                and len(self._resolved) < RESOLVED_MAX
            ):
                self._resolved[key] = match
        request.resolver_match = match
        return match

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django serves HTTP only, not {scope['type']}")
        await self.handle(scope, receive, send)

    async def handle(self, scope: dict, receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            response = await self._hop(self._respond, scope, body_file)
            try:
                await self.send_response(response, send)
            finally:
                if response.streaming and response.is_async:
                    await self._hop(response.close)
        finally:
            body_file.close()

    async def send_response(self, response: HttpResponseBase, send: Any) -> None:
        """Django's, for an answer held whole that fits one chunk (a tool
        call's): the same two messages, without the generic path's header
        checks and chunking generator; anything else goes through Django's."""
        if response.streaming:
            await super().send_response(response, send)
            return
        content = response.content  # type: ignore[attr-defined]
        if len(content) > self.chunk_size:
            await super().send_response(response, send)
            return
        headers = [
            (key.encode("ascii"), value.encode("latin1"))
            for key, value in response.items()
        ]
        for cookie in response.cookies.values():
            headers.append(
                (b"Set-Cookie", cookie.output(header="").encode("ascii").strip())
            )
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": headers,
            }
        )
        await send({"type": "http.response.body", "body": content, "more_body": False})

    async def _hop(self, func: Callable[..., Any], *args: Any) -> Any:
        """``func(*args)`` on one of the threads, in a copy of this task's
        context, as ``sync_to_async`` with our executor runs it - with what
        ``async_to_sync`` needs inside it (this loop, to send on the channel
        layer from the request) - but without its per-call machinery
        (thread-sensitivity lookup, partials, the context copied back into
        this task: nothing after the hop reads what the request set, a shield
        and a concurrent future chained to an asyncio one), which was a good
        part of a tool call's Python outside the tool.

        The loop first waits in place, up to ``PATTERN_HTTP_LOOP_WAIT_MS``,
        for the thread to finish.  A request is Python, and one process runs
        Python on one thread at a time: while the thread runs, the loop
        could only take the GIL from it, and the two trade it at every
        statement the SQLite driver runs and every socket call the loop
        makes (at concurrency 8, ~25 context switches and a third more CPU
        per request than at 1).  Waiting, the loop lets the request run
        alone and then reads and answers what came meanwhile in one go.  A
        request still running after the wait, or that needs the loop itself
        (``async_to_sync``), is awaited as before.  The loop waits in place
        only while no other request is running on the threads: a slow
        request holds the loop back once by the wait, and the requests that
        come while it runs (searches that embed, calls waiting on a lock)
        start beside it at once, as they did without the wait."""
        loop = asyncio.get_running_loop()
        hop = _Hop(loop)
        tasks: list[asyncio.Task[Any]] = []
        alone = self._running == 0
        self._running += 1
        try:
            self.executor.submit(
                _in_context, hop, tasks, contextvars.copy_context(), func, args
            )
            if alone and self.loop_wait_seconds > 0:
                hop.awake.acquire(timeout=self.loop_wait_seconds)
            future = hop.awaited()
            if future is None:  # finished while the loop waited
                return hop.outcome()
            try:
                return await future
            except asyncio.CancelledError:
                # As sync_to_async: a cancelled request cancels what the
                # thread awaits on this loop (async_to_sync's task), then
                # stops waiting.
                for task in tasks:
                    task.cancel()
                raise
        finally:
            # Counted on the loop only (here, before and after the hop).
            self._running -= 1

    def _respond(self, scope: dict, body_file: Any) -> HttpResponseBase:
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
            response._handler_class = self.__class__  # type: ignore[attr-defined]
            if isinstance(response, FileResponse):
                response.block_size = self.chunk_size
        assert response is not None
        if response.streaming and not response.is_async:
            # A file (WhiteNoise): Django would list the iterator in another
            # hop, with a warning; list it here and send it from the loop.
            response.streaming_content = _replay(list(response.streaming_content))
            response.close()  # request_finished, in this thread
        elif not response.streaming:
            response.close()
        return response


class _Hop:
    """One call's trip to a thread and back: the loop waits on ``awake``
    (released when the call finishes, or when it needs the loop) and, if
    the call is still running then, awaits a future the thread settles.

    The thread sees it as its server's loop (``SyncToAsync.threadlocal``):
    ``async_to_sync`` schedules its work through
    :meth:`call_soon_threadsafe`, which wakes the loop first."""

    __slots__ = (
        "_done",
        "_exc",
        "_future",
        "_mutex",
        "_result",
        "_woken",
        "awake",
        "loop",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.awake = threading.Lock()
        self.awake.acquire()
        self._mutex = threading.Lock()
        self._woken = False
        self._done = False
        self._result: Any = None
        self._exc: BaseException | None = None
        self._future: asyncio.Future[Any] | None = None

    def awaited(self) -> "asyncio.Future[Any] | None":
        """In the loop, once done waiting: None if the call finished, else
        the future its thread will settle."""
        with self._mutex:
            if self._done:
                return None
            self._future = self.loop.create_future()
            return self._future

    def outcome(self) -> Any:
        if self._exc is not None:
            raise self._exc
        return self._result

    def finish(self, result: Any, exc: BaseException | None) -> None:
        """In the thread: hand the outcome to the loop, waiting or not."""
        with self._mutex:
            self._result, self._exc, self._done = result, exc, True
            future = self._future
        if future is None:
            self._wake()
        else:
            self.loop.call_soon_threadsafe(_settle, future, result, exc)

    def _wake(self) -> None:
        with self._mutex:
            if self._woken:
                return
            self._woken = True
        self.awake.release()

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any) -> Any:
        # async_to_sync in the thread: it waits on the loop, which must not
        # be waiting on it.
        self._wake()
        return self.loop.call_soon_threadsafe(callback, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loop, name)


def _in_context(
    hop: _Hop,
    tasks: list[asyncio.Task[Any]],
    context: contextvars.Context,
    func: Callable[..., Any],
    args: tuple[Any, ...],
) -> None:
    # What asgiref's thread handler records for async_to_sync in the thread.
    local = SyncToAsync.threadlocal
    local.main_event_loop = hop
    local.main_event_loop_pid = os.getpid()
    local.task_context = tasks
    try:
        result = context.run(func, *args)
    except BaseException as exc:  # the caller's to raise, as sync_to_async's
        local.main_event_loop = hop.loop  # the thread keeps no answer alive
        hop.finish(None, exc)
    else:
        local.main_event_loop = hop.loop
        hop.finish(result, None)


def _settle(
    future: "asyncio.Future[Any]", result: Any, exc: BaseException | None
) -> None:
    if future.cancelled():  # the request was cancelled meanwhile
        return
    if exc is None:
        future.set_result(result)
    else:
        future.set_exception(exc)


async def _replay(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


django_asgi_app = SyncChainASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from pattern_site.kernel.auth import websocket_auth  # noqa: E402
from pattern_site.kernel.daphne_server import with_frame_writers  # noqa: E402
from pattern_site.mcp.http import McpHttpApp  # noqa: E402
from pattern_site.routing import websocket_urlpatterns  # noqa: E402

channels_app = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": with_frame_writers(
            websocket_auth(URLRouter(websocket_urlpatterns))
        ),
    }
)

MCP_PATH = "/mcp"
mcp_app = McpHttpApp(executor=django_asgi_app.executor)


async def _lifespan(receive: Any, send: Any) -> None:
    await receive()  # lifespan.startup
    try:
        await mcp_app.start()
    except Exception as exc:
        await send({"type": "lifespan.startup.failed", "message": repr(exc)})
        return
    await send({"type": "lifespan.startup.complete"})
    await receive()  # lifespan.shutdown
    await mcp_app.stop()
    await send({"type": "lifespan.shutdown.complete"})


async def application(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
    elif scope["type"] == "http" and scope["path"].rstrip("/") == MCP_PATH:
        await mcp_app(scope, receive, send)
    else:
        await channels_app(scope, receive, send)


def _heap_freeze_after_imports(**_kwargs: object) -> None:
    # The first requests and sockets import what they need (the embedding
    # model's libraries on a first search, the SDKs a tool uses): freeze
    # those too, so that a collection inside a later request or a co-editing
    # frame does not walk them.
    heap_freeze_if_grown()


signals.request_finished.connect(_heap_freeze_after_imports)
# Everything the server holds once started lives as long as the process.
heap_freeze()
