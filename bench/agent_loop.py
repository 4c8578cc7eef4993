"""Benchmark the agent tool loop: what the loop adds to each tool step, next
to the same tool's own latency over HTTP in the same run, and how long
composing a request takes with a long, compressed history.

Run: ``.venv/bin/python bench/agent_loop.py`` (20 turns of 5 tool steps,
10,000 stored messages, 200 compositions); ``--quick`` for 2 turns of 3
steps, 1,000 messages and 20 compositions; ``--turns``, ``--steps``,
``--messages``, ``--rounds`` to change the sizes.  Uses a throwaway
database in a temporary data directory and a loopback OpenAI-compatible
server that answers at once (streamed, as the loop asks), so a step's
time is the loop's own: composing the request, recording the step and the
call, running the tool as the agent, streaming the events.

Per tool step: each turn's model asks ``core_memory_append`` ``--steps``
times, then ``send_message``; the turn's time divided by its model calls.
Beside it, ``core_memory_append`` called over HTTP on a Daphne serving the
same database.  Composition: ``request_compose`` (the system prompt, then
the history truncated to the model's limits, whole batches) on a
conversation of ``--messages`` messages in turns of a user message, a tool
call, its result and an answer.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.common import daphne_running, django_setup, line, percentile

DATA_DIR = django_setup("pattern-bench-agent-loop-")

import httpx
from django.conf import settings
from django.core.management import call_command

from coordination.groups import turns
from coordination.groups.models import AgentTurn
from coordination.groups.services import (
    group_create,
    group_member_add,
    group_message_route,
)
from memory.blocks import tools as block_tools
from memory.blocks.schemas import CoreMemoryIn
from memory.blocks.services import block_create
from memory.context import context_build, request_compose
from memory.longterm.services import conversation_start, messages_append
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    agent_token_issue,
    agent_update,
    constellation_create,
    user_get_or_create,
)
from pattern_site.kernel.errors import ApplicationError


class InstantModel:
    """Answers every request at once: a ``core_memory_append`` call for the
    first ``steps`` requests of a turn, then ``send_message``."""

    def __init__(self, steps: int) -> None:
        self.steps, self.requests = steps, 0

    def next_call(self) -> tuple[str, dict[str, Any]]:
        index = self.requests % (self.steps + 1)
        self.requests += 1
        if index < self.steps:
            return "core_memory_append", {"label": "notes", "content": f"n{index}"}
        return "send_message", {"message": "done"}


def serve(model: InstantModel) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            name, arguments = model.next_call()
            head = {"id": "b", "object": "chat.completion.chunk", "created": 0}
            head["model"] = "gpt-4o-mini"
            call = {
                "index": 0,
                "id": f"call_{model.requests}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            events = [
                head | {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
                head
                | {
                    "choices": [
                        {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
                    ]
                },
                head
                | {
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 10,
                        "completion_tokens": 10,
                        "total_tokens": 20,
                    },
                },
            ]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for event in events:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def registry_or_core_memory_only() -> None:
    """The loop's tools: the agent tool registry; without it (a tree where
    it is not merged yet), ``core_memory_append`` alone, called as its
    HTTP endpoint calls it."""
    try:
        from pattern_site.kernel import tools  # noqa: F401
    except ImportError:

        def tool_call(*, actor: Actor, name: str, arguments: dict) -> Any:
            try:
                change = block_tools.core_memory_append_tool(
                    actor=actor, args=CoreMemoryIn(**arguments)
                )
            except ApplicationError as exc:
                return SimpleNamespace(ok=False, text=exc.message)
            return SimpleNamespace(ok=True, text=json.dumps(change, default=str))

        schema = {"type": "function", "function": {"name": "core_memory_append"}}
        shim = SimpleNamespace(tool_functions=lambda: [schema], tool_call=tool_call)
        turns.tool_registry = lambda: shim  # type: ignore[assignment]
        print("(tool registry not in this tree: core_memory_append only)")


def bench_steps(agent: Any, *, turns_count: int, steps: int) -> list[float]:
    """Seconds per model call of each turn."""
    model = InstantModel(steps)
    server = serve(model)
    settings.LLM_BASE_URL = f"http://127.0.0.1:{server.server_port}/v1"
    settings.LLM_API_KEY, settings.LLM_MODEL = "bench", "gpt-4o-mini"
    settings.LLM_DAILY_TOKEN_BUDGET = 10**9
    group = group_create(
        constellation=agent.constellation, name="loop", pattern="round_robin"
    )
    group_member_add(group=group, agent=agent)
    per_step: list[float] = []
    for i in range(turns_count):
        started = time.perf_counter()
        group_message_route(actor=Actor.system(), group=group, message=f"turn {i}")
        per_step.append((time.perf_counter() - started) / (steps + 1))
    server.shutdown()
    done = AgentTurn.objects.filter(status="completed").count()
    if done != turns_count:
        raise SystemExit(f"only {done} of {turns_count} turns completed")
    return per_step


def bench_http(agent: Any, *, calls: int, port: int) -> list[float]:
    """Seconds of each ``core_memory_append`` over HTTP."""
    token = agent_token_issue(agent=agent).raw
    http: list[float] = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        for i in range(calls):
            started = time.perf_counter()
            response = client.post(
                "/api/tools/core_memory_append",
                json={"label": "notes", "content": f"h{i}"},
                headers={"Authorization": f"Bearer {token}"},
            )
            http.append(time.perf_counter() - started)
            response.raise_for_status()
    return http


def report_steps(per_step: list[float], http: list[float], label: str) -> None:
    ms = 1000.0
    line(
        f"loop step (model call + tool), {label}, p50",
        f"{percentile(per_step, 0.5) * ms:.1f} ms",
        "beside the tool's HTTP latency",
    )
    line(
        "core_memory_append over HTTP, p50",
        f"{percentile(http, 0.5) * ms:.1f} ms",
        "(same run)",
    )


def bench_compose(agent: Any, *, messages: int, rounds: int) -> None:
    conversation = conversation_start(agent=agent, title="long")
    for start in range(0, messages, 200):
        rows = []
        for i in range(start, min(messages, start + 200), 4):
            call = {"id": f"c{i}", "name": "lookup", "arguments": '{"q": "tea"}'}
            rows += [
                {"role": "user", "content": f"question {i} about the week ahead"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": "found notes", "tool_call_id": f"c{i}"},
                {"role": "assistant", "content": f"answer {i}: plan the mornings"},
            ]
        for j in range(0, len(rows), 4):
            messages_append(
                conversation=conversation,
                messages=rows[j : j + 4],
                batch_id=f"b{start + j}",
            )
    built = context_build(agent=agent)
    timings: list[float] = []
    sent = 0
    for _ in range(rounds):
        started = time.perf_counter()
        request = request_compose(agent=agent, built=built, conversation=conversation)
        timings.append(time.perf_counter() - started)
        sent = len(request)
    line(
        f"request composition, {messages} stored, {sent} sent, p95",
        f"{percentile(timings, 0.95) * 1000:.1f} ms",
        "no target yet",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--turns", type=int)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--messages", type=int)
    parser.add_argument("--rounds", type=int)
    args = parser.parse_args()
    quick = (2, 3, 1_000, 20) if args.quick else (20, 5, 10_000, 200)
    turns_count = args.turns or quick[0]
    steps = args.steps or quick[1]
    messages = args.messages or quick[2]
    rounds = args.rounds or quick[3]
    call_command("migrate", verbosity=0)
    partner, _ = user_get_or_create(username="bench")
    constellation = constellation_create(name="Bench", partner=partner)
    agent, _ = agent_create(constellation=constellation, name="Flux")
    agent = agent_update(agent=agent, model_name="gpt-4o-mini", answered_by_llm=True)
    block_create(actor=Actor.system(), label="notes", owner=agent, char_limit=100_000)
    registry_or_core_memory_only()
    print(f"data directory: {DATA_DIR}")
    per_step = bench_steps(agent, turns_count=turns_count, steps=steps)
    with daphne_running() as port:
        http = bench_http(agent, calls=turns_count * steps, port=port)
    report_steps(per_step, http, f"{turns_count}x{steps + 1} steps")
    reader, _ = agent_create(constellation=constellation, name="Reader")
    bench_compose(reader, messages=messages, rounds=rounds)


if __name__ == "__main__":
    main()
