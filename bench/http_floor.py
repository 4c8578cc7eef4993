"""The floor of an authenticated, durable HTTP write on this stack.

An ASGI app for ``bench/blocks.py``, served by Daphne as ours is: a POST's
body is read on the event loop, then one hop to a thread of a small pool
(as ``pattern_site.asgi`` does) checks the bearer token the way the tool
API does (``agent_token_actor``) and commits one row holding the body to
the same SQLite database, with the project's connection settings; the
answer is a small JSON body.  No middleware, URL routing, view, schema or
service: what is left is what Daphne, one thread hop, the token lookup
and one durable write cost here, the most the real endpoint could reach.

    python -m daphne -b 127.0.0.1 -p PORT bench.http_floor:application
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pattern_site.settings.dev")
django.setup()

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection, transaction

from pattern_site.kernel.agents.services import agent_token_actor
from pattern_site.kernel.daphne_server import daphne_bodies_unparsed
from pattern_site.kernel.errors import AuthenticationFailed

daphne_bodies_unparsed()  # as pattern_site.asgi has Daphne serve ours

TABLE = "bench_http_floor"
_executor = ThreadPoolExecutor(max_workers=settings.HTTP_THREADS)

with connection.cursor() as _cursor:
    _cursor.execute(
        f"CREATE TABLE IF NOT EXISTS {TABLE} "
        "(id INTEGER PRIMARY KEY, agent INTEGER, body TEXT)"
    )
connection.close()  # the threads open their own


def _write(authorization: str, body: bytes) -> tuple[int, bytes]:
    close_old_connections()  # as Django's request signals do
    try:
        actor = agent_token_actor(raw=authorization.removeprefix("Bearer "))
    except AuthenticationFailed:
        return 401, b'{"error": "unauthenticated"}'
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (agent, body) VALUES (%s, %s)",
            [actor.agent.pk if actor.agent else None, body.decode()],
        )
        row = cursor.lastrowid
    return 200, json.dumps({"ok": True, "row": row}).encode()


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = dict(scope["headers"])
    status, answer = await sync_to_async(
        _write, thread_sensitive=False, executor=_executor
    )(headers.get(b"authorization", b"").decode(), body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(answer)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": answer})
