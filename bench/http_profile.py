"""Profile ``/api/tools/context`` appends through the ASGI application in
this process: the whole request (ASGI handler, middleware, routing, auth,
ninja, the tool and its service, the answer), every step on this thread so
cProfile sees all of it.  Prints Python function calls per request (a
figure a busy machine does not blur), this process's CPU time per request
in an unprofiled run before (less blurred than wall time), and the top
functions by own time and by calls.

Run: ``.venv/bin/python bench/http_profile.py`` (``--requests``, ``--top``;
``--app bench.http_floor:application`` for the floor, ``--dump`` to keep
the raw profile).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import io
import json
import pstats
import sys
import time
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The script's own directory first on the path would shadow the ``mcp``
# package with bench/mcp.py.
sys.path[0] = str(REPO)
from bench.common import django_setup

django_setup("pattern-bench-")

from django.core.management import call_command

from memory.blocks.services import block_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    constellation_create,
    user_get_or_create,
)


class _Here(Executor):
    """Runs each call at once on the calling thread (the event loop's), so
    the profiler, which watches one thread, sees the request's sync part;
    with the loop hidden meanwhile, as it is from a thread of the pool."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        loop = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(None)
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        finally:
            asyncio.events._set_running_loop(loop)
        return future


async def _post(app: Any, token: str, body: bytes) -> tuple[int, bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/tools/context",
        "raw_path": b"/api/tools/context",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def _run_here(module: str) -> None:
    """Make ``module``'s thread hop run on the loop's thread (``_Here``)."""
    if module == "pattern_site.asgi":
        from pattern_site.asgi import django_asgi_app as handler

        handler.executor = _Here()
    elif module == "bench.http_floor":
        from bench import http_floor

        http_floor._executor = _Here()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--dump", help="write the raw profile here (pstats)")
    parser.add_argument(
        "--app",
        default="pattern_site.asgi:application",
        help="the ASGI app (module:name), e.g. bench.http_floor:application",
    )
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    partner, _ = user_get_or_create(username="bench")
    constellation = constellation_create(name="Bench", partner=partner)
    agent, issued = agent_create(constellation=constellation, name="Bench")
    block_create(actor=Actor.system(), owner=agent, label="p", char_limit=500_000)

    module, name = args.app.split(":")
    application = getattr(importlib.import_module(module), name)
    _run_here(module)

    def body(n: int) -> bytes:
        return json.dumps(
            {"operation": "append", "label": "p", "content": f"h{n}"}
        ).encode()

    async def run(start: int, count: int) -> None:
        for n in range(start, start + count):
            status, answer = await _post(application, issued.raw, body(n))
            assert status == 200, answer[:300]

    loop = asyncio.new_event_loop()
    loop.run_until_complete(run(0, 50))  # warm up
    cpu = time.process_time()
    loop.run_until_complete(run(50, args.requests))
    cpu = time.process_time() - cpu
    profile = cProfile.Profile()
    profile.enable()
    loop.run_until_complete(run(50 + args.requests, args.requests))
    profile.disable()
    if args.dump:
        profile.dump_stats(args.dump)
    stats = pstats.Stats(profile)
    calls = stats.total_calls  # type: ignore[attr-defined]
    print(
        f"{calls / args.requests:,.0f} Python function calls per request;"
        f" {cpu / args.requests * 1e6:,.0f} us of CPU per request unprofiled"
    )
    for key in ("tottime", "ncalls"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(key).print_stats(args.top)
        print(out.getvalue().split("\n", 6)[-1])


if __name__ == "__main__":
    main()
