"""Waiting without holding a thread: run event streams and inbox long-polls.

Both are async iterators handed to Django as the body of a streaming
response, so under Daphne they wait on the event loop, not on one of the
few HTTP threads.  They read the database (in a worker thread) when woken
by ``coordination.groups.realtime`` or every ``GROUPS_POLL_SECONDS``,
whichever comes first.
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import close_old_connections
from django.http import HttpRequest, StreamingHttpResponse

from coordination.groups.models import GroupRunEvent
from coordination.groups.selectors import run_events_after
from pattern_site.kernel.realtime import group_for_inbox, group_for_run

# Comment lines keep proxies and clients from timing an idle stream out.
KEEPALIVE_SECONDS = 15.0


def _in_thread(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    def call(**kwargs: Any) -> Any:
        close_old_connections()
        return func(**kwargs)

    return sync_to_async(call, thread_sensitive=False)


@asynccontextmanager
async def woken_by(group: str) -> AsyncIterator[Callable[[float], Awaitable[None]]]:
    """A ``wait(seconds)`` that returns early when ``group`` is woken."""
    layer = get_channel_layer()
    channel = await layer.new_channel() if layer is not None else None
    if channel is not None:
        await layer.group_add(group, channel)

    async def wait(seconds: float) -> None:
        if channel is None:
            await asyncio.sleep(seconds)
            return
        with suppress(TimeoutError):
            await asyncio.wait_for(layer.receive(channel), timeout=seconds)

    try:
        yield wait
    finally:
        if channel is not None:
            await layer.group_discard(group, channel)


def sse_frame(event: GroupRunEvent) -> bytes:
    data = json.dumps({"seq": event.seq, "type": event.type, **event.data})
    return f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n".encode()


def event_stream_wanted(request: HttpRequest) -> bool:
    return "text/event-stream" in request.headers.get("Accept", "")


def run_event_stream_response(*, run_id: int, after: int) -> StreamingHttpResponse:
    """A run's events from ``after`` on as an HTTP response."""
    response = StreamingHttpResponse(
        run_event_stream(run_id=run_id, after=after),
        content_type="text/event-stream",
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


async def run_event_stream(*, run_id: int, after: int) -> AsyncIterator[bytes]:
    """Server-Sent Events of a run from ``after`` on, ending with the run."""
    read = _in_thread(run_events_after)
    poll = settings.GROUPS_POLL_SECONDS
    async with woken_by(group_for_run(run_id)) as wait:
        yield b"retry: 1000\n\n"
        idle_since = time.monotonic()
        while True:
            page = await read(run_id=run_id, after=after)
            for event in page.events:
                after = event.seq
                yield sse_frame(event)
            if page.finished:
                return
            if page.events:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > KEEPALIVE_SECONDS:
                idle_since = time.monotonic()
                yield b": keepalive\n\n"
            await wait(poll)


async def inbox_long_poll(
    *,
    agent_id: int,
    wait_seconds: float,
    take: Callable[[], list[dict[str, Any]]],
) -> AsyncIterator[bytes]:
    """One JSON list: the deliveries ``take`` claims, once there are any or
    ``wait_seconds`` passed (then an empty list)."""
    claim = _in_thread(lambda: take())
    deadline = time.monotonic() + wait_seconds
    poll = settings.GROUPS_POLL_SECONDS
    async with woken_by(group_for_inbox(agent_id)) as wait:
        while True:
            items = await claim()
            left = deadline - time.monotonic()
            if items or left <= 0:
                yield json.dumps(items).encode()
                return
            await wait(min(poll, left))
