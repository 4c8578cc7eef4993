"""Benchmark MCP tool calls against the same HTTP tool endpoints, in one run
through one real Daphne.

For each tool of a mix (a block append, an archival search, a full-text
search, a context build), three paths call it in turn from one event loop,
so all see the same load on the machine: the HTTP endpoint with a plain
client (``httpx2``, keep-alive: the SDK's HTTP library), the MCP tool with
the official SDK's client (Streamable HTTP, one connected client), and the
same JSON-RPC ``tools/call`` posted with the plain client (the server's
share of the MCP cost, without the SDK client's).  Each call's wall time is
one sample; prints p50/p95 of each path and the MCP/HTTP ratios next to
the target (<= 1.3x).

Run: ``.venv/bin/python bench/mcp.py`` (``--calls`` per tool and path,
``--entries`` archival entries to search, embedded as they are seeded).
Uses a throwaway database in a temporary data directory.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Python puts this script's folder first on the path, where this file would
# shadow the ``mcp`` package: the repository takes its place.
sys.path[0] = str(REPO)
from bench.common import daphne_running, django_setup, line, percentile

DATA_DIR = django_setup("pattern-bench-mcp-")

import httpx2
from django.core.management import call_command
from django.db import connection
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from memory.blocks.models import BlockType
from memory.blocks.services import block_create
from memory.longterm.services import archival_entry_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    constellation_create,
    user_get_or_create,
)

TOPICS = ["tea", "rain", "cats", "music", "running", "books", "trains", "code"]

# (tool, HTTP path, arguments): the same call through both transports.
MIX: list[tuple[str, str, dict[str, Any]]] = [
    (
        "core_memory_append",
        "/api/tools/core_memory_append",
        {"label": "notes", "content": "the partner slept well"},
    ),
    ("archival_memory_search", "/api/tools/archival_memory_search", {"query": "rain"}),
    ("search", "/api/tools/search", {"query": "music books", "mode": "fts"}),
    ("build_context", "/api/context/build", {}),
]


def row(name: str, value: str, target: str, ok: bool | None = None) -> None:
    line(name, value, target, ok, widths=(52, 22))


def seed(entries: int) -> str:
    call_command("migrate", verbosity=0)
    partner, _ = user_get_or_create(username="bench")
    constellation = constellation_create(name="Bench", partner=partner)
    agent, issued = agent_create(constellation=constellation, name="Bench")
    system = Actor.system()
    block_create(
        actor=system,
        owner=agent,
        label="persona",
        block_type=BlockType.CORE,
        content="I am Bench, a careful assistant.",
    )
    block_create(
        actor=system,
        owner=agent,
        label="notes",
        block_type=BlockType.CORE,
        char_limit=1_000_000,
    )
    for n in range(entries):
        topic, other = TOPICS[n % len(TOPICS)], TOPICS[(n * 3 + 1) % len(TOPICS)]
        archival_entry_create(
            agent=agent,
            content=f"Note {n}: the partner talked about {topic} and {other}.",
            tags=[topic],
        )
    connection.close()
    return issued.raw


async def timed(call: Callable[[], Awaitable[None]], samples: list[float]) -> None:
    start = time.perf_counter()
    await call()
    samples.append(time.perf_counter() - start)


async def run(base: str, token: str, calls: int) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    rpc_headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
    }
    async with (
        httpx2.AsyncClient(base_url=base, headers=headers, timeout=60) as http,
        httpx2.AsyncClient(headers=headers, timeout=60) as mcp_http,
        Client(streamable_http_client(f"{base}/mcp", http_client=mcp_http)) as client,
    ):
        for tool, path, args in MIX:

            async def over_http(path: str = path, args: dict = args) -> None:
                response = await http.post(path, json=args)
                if response.status_code not in (200, 201):
                    status = response.status_code
                    raise RuntimeError(f"{path}: {status} {response.text}")
                response.json()

            async def over_mcp(tool: str = tool, args: dict = args) -> None:
                result = await client.call_tool(tool, args)
                if result.is_error:
                    raise RuntimeError(f"{tool}: {result.content}")

            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": args},
            }

            async def over_rpc(call: dict = call, tool: str = tool) -> None:
                response = await http.post("/mcp", json=call, headers=rpc_headers)
                result = response.json()["result"]
                if response.status_code != 200 or result.get("isError"):
                    raise RuntimeError(f"{tool}: {response.text}")

            paths = (over_http, over_mcp, over_rpc)
            samples: tuple[list[float], ...] = ([], [], [])
            for _ in range(3):  # warm every path
                for path_call in paths:
                    await path_call()
            for n in range(calls):
                # Rotate who goes first, so none always follows another.
                for k in range(3):
                    i = (n + k) % 3
                    await timed(paths[i], samples[i])
            (hp50, hp95), (mp50, mp95), (rp50, rp95) = (
                (percentile(s, 0.5) * 1000, percentile(s, 0.95) * 1000) for s in samples
            )
            row(f"{tool}: HTTP p50/p95 (ms)", f"{hp50:.2f} / {hp95:.2f}", "reference")
            row(
                f"{tool}: MCP, SDK client p50/p95 (ms)",
                f"{mp50:.2f} / {mp95:.2f}",
                "<= 1.3x HTTP",
            )
            row(
                f"{tool}: MCP, plain JSON-RPC p50/p95 (ms)",
                f"{rp50:.2f} / {rp95:.2f}",
                "<= 1.3x HTTP",
            )
            for name, p50, p95 in (("SDK", mp50, mp95), ("JSON-RPC", rp50, rp95)):
                row(
                    f"{tool}: MCP ({name})/HTTP p50 / p95",
                    f"{p50 / hp50:.2f}x / {p95 / hp95:.2f}x",
                    "<= 1.3x",
                    p50 / hp50 <= 1.3 and p95 / hp95 <= 1.3,
                )
            print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--entries", type=int, default=500)
    args = parser.parse_args()
    start = time.perf_counter()
    token = seed(args.entries)
    print(
        f"database: {DATA_DIR}; seeded {args.entries:,} archival entries in "
        f"{time.perf_counter() - start:.1f} s"
    )
    print(f"{args.calls} calls per tool and path, taking turns\n")
    with daphne_running() as port:
        asyncio.run(run(f"http://127.0.0.1:{port}", token, args.calls))


if __name__ == "__main__":
    main()
