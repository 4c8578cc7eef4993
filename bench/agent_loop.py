"""Benchmark the agent tool loop: what the loop adds to each tool step, next
to the same tool's own latency over HTTP in the same run, and how long
composing a request takes with a long, compressed history.

Run: ``.venv/bin/python bench/agent_loop.py`` (20 turns of 5 tool steps,
10,000 stored messages, 200 compositions); ``--quick`` for 2 turns of 3
steps, 1,000 messages and 20 compositions; ``--turns``, ``--steps``,
``--messages``, ``--rounds`` to change the sizes.  Uses a throwaway
database and broker in a temporary data directory and a loopback
OpenAI-compatible server that answers at once (streamed, as the loop
asks), so a step's time is the loop's own: composing the request,
recording the step and the call, running the tool as the agent, streaming
the events.

Per tool step: the turns run on a real ``celery worker`` process (solo
pool), as in a deployment, so what the loop queues (embedding each stored
message) runs beside it, not inside it.  Each turn's model asks
``core_memory_append`` ``--steps`` times, then ``send_message``; a step is
the turn's time as the worker recorded it (its start to its end) over its
model calls.  A first turn warms the worker up and is not counted.
Beside it, ``core_memory_append`` called over HTTP on a Daphne serving the
same database; the overhead is a step's time less that call's median.
Composition: ``request_compose`` (the system prompt, then the history
compressed to the model's limits, whole batches) on a conversation of
``--messages`` messages in turns of a user message, a tool call, its
result and an answer.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.common import daphne_running, django_setup, line, percentile

DATA_DIR = django_setup("pattern-bench-agent-loop-", eager=False)

import httpx
from django.conf import settings
from django.core.management import call_command

from coordination.groups.models import AgentTurn
from coordination.groups.services import (
    group_create,
    group_member_add,
    group_message_route,
)
from memory.blocks.services import block_create
from memory.context import context_build, request_compose
from memory.longterm.compose import history_config_for
from memory.longterm.services import conversation_start, messages_append
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    agent_token_issue,
    agent_update,
    constellation_create,
    user_get_or_create,
)
from pattern_site.processes import SOLO_WORKER_OPTIONS, celery_worker_command

# The longest wait for the worker (a ceiling, not a pace: every wait ends
# on the turn's own end).
READY_SECONDS = float(os.environ.get("PATTERN_TEST_READY_SECONDS") or 180)


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
        # Keep-alive, as a provider's endpoint: a new connection per model
        # call would be the bench's cost, not the loop's.
        protocol_version = "HTTP/1.1"
        # No Nagle, as a provider's server: its head and body are two
        # writes, and on a kept connection the body would wait for the
        # client's delayed acknowledgement (40 ms).
        disable_nagle_algorithm = True

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
            body = "".join(f"data: {json.dumps(event)}\n\n" for event in events)
            data = (body + "data: [DONE]\n\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def worker_start(log: Path) -> subprocess.Popen:
    """A real ``celery worker`` (solo pool, as the tests' and the other
    benches') on this run's database and broker, with this environment."""
    return subprocess.Popen(
        celery_worker_command(*SOLO_WORKER_OPTIONS, "--loglevel", "WARNING"),
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )


def turn_done(count: int, worker: subprocess.Popen, log: Path) -> None:
    """Return once ``count`` turns have ended (the worker's own record of
    them is the signal); fail if the worker dies or nothing ends in time."""
    deadline = time.monotonic() + READY_SECONDS
    while AgentTurn.objects.exclude(status="running").count() < count:
        if worker.poll() is not None:
            raise SystemExit(f"the worker exited:\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise SystemExit(
                f"no turn ended in {READY_SECONDS:g} s:\n{log.read_text()}"
            )
        time.sleep(0.01)


def bench_steps(agent: Any, *, turns_count: int, steps: int) -> list[float]:
    """Seconds per model call of each turn, run by a real Celery worker:
    each turn's time as the worker recorded it (from the turn's start to
    its end), over its model calls.  A first turn warms the worker up
    (imports, the tokenizer) and is not counted."""
    model = InstantModel(steps)
    server = serve(model)
    base_url = f"http://127.0.0.1:{server.server_port}/v1"
    os.environ.update(
        {
            "PATTERN_LLM_BASE_URL": base_url,
            "PATTERN_LLM_API_KEY": "bench",
            "PATTERN_LLM_MODEL": "gpt-4o-mini",
            "PATTERN_LLM_DAILY_TOKEN_BUDGET": str(10**9),
        }
    )
    settings.LLM_BASE_URL, settings.LLM_API_KEY = base_url, "bench"
    group = group_create(
        constellation=agent.constellation, name="loop", pattern="round_robin"
    )
    group_member_add(group=group, agent=agent)
    log = Path(DATA_DIR) / "worker.log"
    worker = worker_start(log)
    try:
        for i in range(turns_count + 1):
            group_message_route(actor=Actor.system(), group=group, message=f"turn {i}")
            turn_done(i + 1, worker, log)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        server.shutdown()
    turns_run = list(AgentTurn.objects.order_by("started_at", "id"))[1:]
    failed = [t.reason for t in turns_run if t.status != "completed"]
    if failed:
        raise SystemExit(f"{len(failed)} turns failed: {failed[0]}")
    return [(t.finished_at - t.started_at).total_seconds() / t.steps for t in turns_run]


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
    tool = percentile(http, 0.5)
    overhead = percentile([step - tool for step in per_step], 0.95) * ms
    line(
        f"loop step (model call + tool), worker, {label}, p50",
        f"{percentile(per_step, 0.5) * ms:.1f} ms",
        "(the model answers at once)",
    )
    line(
        "loop step, p95",
        f"{percentile(per_step, 0.95) * ms:.1f} ms",
        "(same run)",
    )
    line(
        "core_memory_append over HTTP, p50 / p95",
        f"{tool * ms:.1f} / {percentile(http, 0.95) * ms:.1f} ms",
        "(same run)",
    )
    line(
        "loop overhead per step over the tool's HTTP p50, p95",
        f"{overhead:.1f} ms",
        "<= 15 ms",
        overhead <= 15,
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
    p95 = percentile(timings, 0.95) * 1000
    config = history_config_for(constellation=agent.constellation)
    line(
        f"request composition, {messages} stored, {sent} sent, p95",
        f"{p95:.1f} ms",
        "<= 20 ms",
        p95 <= 20,
    )
    print(f"  (compression: {config.compression})")


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
    print(f"data directory: {DATA_DIR}")
    per_step = bench_steps(agent, turns_count=turns_count, steps=steps)
    with daphne_running() as port:
        http = bench_http(agent, calls=turns_count * steps, port=port)
    report_steps(per_step, http, f"{turns_count}x{steps + 1} steps")
    reader, _ = agent_create(constellation=constellation, name="Reader")
    bench_compose(reader, messages=messages, rounds=rounds)


if __name__ == "__main__":
    main()
