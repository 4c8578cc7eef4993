"""Benchmark agent groups: routing decisions per pattern, routing overhead
per message, and end-to-end runs with external agents on a real Daphne.

1. Decisions/s of each pattern's routing engine alone (six members), beside
   a bare ``random.choice`` of a member as the reference.
2. Routing overhead of one message through the service (lock the group,
   decide, store the run, deliveries and Started event), p50/p95 per
   pattern, beside a one-row INSERT in its own transaction as reference.
3. Over HTTP on Daphne: ``POST /api/groups/{id}/messages`` latency beside
   ``GET /api/whoami`` (the floor of an authenticated request); then whole
   runs: callers stream each run's events (SSE) while agents, simulated by
   client threads, long-poll their inboxes and post a chunk and an answer.
   One run alone is the reference for the latency of ``--runs`` concurrent
   ones.

Run: ``.venv/bin/python bench/groups.py`` (``--decisions``, ``--messages``,
``--runs`` to change the sizes).  Uses a throwaway database; prints each
figure next to its target.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from pattern_site.processes import (
    daphne_command,
    free_port,
    throwaway_dir,
    wait_for_port,
)

DATA_DIR = throwaway_dir("pattern-bench-groups-")
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "pattern_site.settings.dev",
        "PATTERN_DATA_DIR": DATA_DIR,
        "PATTERN_DEBUG": "false",
        # Deadline tasks are queued on the embedded broker as in production;
        # no worker runs them (none falls due during the benchmark).
        "PATTERN_CELERY_EAGER": "false",
        "PATTERN_LOG_LEVEL": "WARNING",
    }
)

import django

django.setup()

from django.core.management import call_command
from django.db import connection, transaction

from coordination.groups.models import GroupRunEvent
from coordination.groups.patterns import PATTERNS
from coordination.groups.patterns.base import Member
from coordination.groups.selectors import group_members
from coordination.groups.services import (
    group_create,
    group_member_add,
    group_message_route,
)
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    constellation_create,
    user_get_or_create,
)

NAMES = ("Pattern", "Entropy", "Flux", "Momentum", "Anchor", "Archive")
CAPABILITIES = (
    ["conversation", "coordination"],
    ["task breakdown", "planning"],
    ["schedules", "estimates", "time"],
    ["energy", "focus"],
    ["habits", "medication", "routines"],
    ["memory", "recall"],
)
# What a simulated agent answers, by delivery kind.
DONE = {"text": "done"}
ANSWERS = {"vote": {"text": "agreed", "vote": "yes"}, "select": {"text": "Flux"}}
MESSAGE = "Can you help me plan my schedules and estimates for the week?"


def line(name: str, value: str, target: str, ok: bool | None = None) -> None:
    mark = "" if ok is None else ("  ok" if ok else "  MISSED")
    print(f"{name:<58} {value:>16}   target {target}{mark}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def configs(agent_ids: list[int]) -> dict[str, dict]:
    return {
        "supervisor": {"leader_id": agent_ids[1]},
        "round_robin": {},
        "voting": {"quorum": 3},
        "pipeline": {
            "stages": [
                {"name": "analysis", "agent_ids": [agent_ids[1]]},
                {"name": "scheduling", "agent_ids": [agent_ids[2]]},
            ]
        },
        "dynamic": {"selector": "capability"},
        "sleeptime": {"intervention_agent_id": agent_ids[5]},
    }


def bench_decisions(agent_ids: list[int], decisions: int) -> None:
    members = tuple(
        Member(agent_id=i, name=n, role="regular", capabilities=tuple(c))
        for i, n, c in zip(agent_ids, NAMES, CAPABILITIES, strict=True)
    )
    rng = random.Random(1)
    start = time.perf_counter()
    for _ in range(decisions):
        rng.choice(members)
    reference = decisions / (time.perf_counter() - start)
    line("reference: random.choice of a member (decisions/s)", f"{reference:,.0f}", "-")
    for name, config in configs(agent_ids).items():
        engine = PATTERNS[name]
        typed = engine.validate(config)
        state = engine.initial_state(typed)
        start = time.perf_counter()
        for _ in range(decisions):
            decision = engine.route(
                config=typed, state=state, members=members, message=MESSAGE, rng=rng
            )
            state = decision.group_state
        rate = decisions / (time.perf_counter() - start)
        line(f"{name} routing engine (decisions/s)", f"{rate:,.0f}", "-")


def bench_service(groups: dict[str, object], messages: int) -> None:
    actor = Actor.system()
    seed = group_message_route(actor=actor, group=groups["round_robin"], message="x")
    timings = []
    for n in range(messages):
        start = time.perf_counter()
        with transaction.atomic():
            GroupRunEvent.objects.create(run=seed, seq=10_000 + n, type="TextChunk")
        timings.append((time.perf_counter() - start) * 1000)
    line(
        "reference: one-row INSERT in a transaction (p50/p95 ms)",
        f"{statistics.median(timings):.2f} / {percentile(timings, 0.95):.2f}",
        "-",
    )
    for name, group in groups.items():
        timings = []
        for _ in range(messages):
            start = time.perf_counter()
            group_message_route(actor=actor, group=group, message=MESSAGE)
            timings.append((time.perf_counter() - start) * 1000)
        p95 = percentile(timings, 0.95)
        line(
            f"{name}: route one message, service (p50/p95 ms)",
            f"{statistics.median(timings):.2f} / {p95:.2f}",
            "p95 <= 10 ms",
            p95 <= 10,
        )


class Api:
    """A keep-alive HTTP connection with a bearer token."""

    def __init__(self, port: int, token: str, timeout: float = 60) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
        }

    def call(self, method: str, path: str, body: object = None) -> object:
        data = json.dumps(body) if body is not None else None
        self.conn.request(method, path, data, self.headers)
        response = self.conn.getresponse()
        raw = response.read()
        if response.status >= 400:
            raise RuntimeError(f"{method} {path}: {response.status} {raw[:200]!r}")
        return json.loads(raw) if raw else None

    def stream_run(self, path: str, body: object) -> list[str]:
        """POST a message accepting SSE; the event types until the run ends."""
        headers = {**self.headers, "Accept": "text/event-stream"}
        self.conn.request("POST", path, json.dumps(body), headers)
        response = self.conn.getresponse()
        if response.status >= 400:
            raise RuntimeError(f"POST {path}: {response.status} {response.read()!r}")
        kinds = []
        while True:
            raw = response.readline()
            if not raw:
                break
            text = raw.decode().rstrip("\n")
            if text.startswith("event: "):
                kinds.append(text[7:])
        response.read()
        return kinds

    def close(self) -> None:
        self.conn.close()


def bench_http(
    port: int,
    *,
    caller_token: str,
    agent_tokens: list[str],
    latency_group: int,
    served_group: int,
    messages: int,
    runs: int,
) -> None:
    caller = Api(port, caller_token)
    for _ in range(20):  # warm up both paths
        caller.call("GET", "/api/whoami")
    timings = []
    for _ in range(messages):
        start = time.perf_counter()
        caller.call("GET", "/api/whoami")
        timings.append((time.perf_counter() - start) * 1000)
    line(
        "reference: GET /api/whoami over HTTP (p50/p95 ms)",
        f"{statistics.median(timings):.2f} / {percentile(timings, 0.95):.2f}",
        "-",
    )
    timings = []
    path = f"/api/groups/{latency_group}/messages"
    for _ in range(messages):
        start = time.perf_counter()
        caller.call("POST", path, {"message": MESSAGE})
        timings.append((time.perf_counter() - start) * 1000)
    line(
        "POST .../messages over HTTP (p50/p95 ms)",
        f"{statistics.median(timings):.2f} / {percentile(timings, 0.95):.2f}",
        "-",
    )
    caller.close()
    caller_token = agent_tokens[0]  # a member of the served group
    path = f"/api/groups/{served_group}/messages"

    stop = threading.Event()
    agent_failures: list[str] = []

    def agent_loop(token: str) -> None:
        api = Api(port, token)
        while not stop.is_set():
            try:
                work = api.call("GET", "/api/inbox?wait=2&limit=50")
                for delivery in work:
                    url = f"/api/deliveries/{delivery['id']}"
                    api.call("POST", f"{url}/chunks", {"text": "thinking "})
                    api.call(
                        "POST", f"{url}/answer", ANSWERS.get(delivery["kind"], DONE)
                    )
            except Exception as exc:
                agent_failures.append(str(exc))
                api.close()
                api = Api(port, token)
        api.close()

    agents = [threading.Thread(target=agent_loop, args=(t,)) for t in agent_tokens]
    for thread in agents:
        thread.start()

    def one_run(results: list[float], failures: list[str]) -> None:
        api = Api(port, caller_token)
        try:
            start = time.perf_counter()
            kinds = api.stream_run(path, {"message": MESSAGE})
            if not kinds or kinds[-1] != "Complete":
                failures.append(f"run ended with {kinds[-3:]}")
            else:
                results.append((time.perf_counter() - start) * 1000)
        except Exception as exc:
            failures.append(str(exc))
        finally:
            api.close()

    try:
        alone: list[float] = []
        for _ in range(5):
            one_run(alone, agent_failures)
        line(
            "reference: one run alone, end to end (median ms)",
            f"{statistics.median(alone):.1f}" if alone else "-",
            "-",
        )
        results: list[float] = []
        failures: list[str] = []
        threads = [
            threading.Thread(target=one_run, args=(results, failures))
            for _ in range(runs)
        ]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        ok = not failures and len(results) == runs
        line(
            f"{runs} concurrent runs: completed without error",
            f"{len(results)}/{runs}",
            f"{runs}/{runs}",
            ok,
        )
        if results:
            line(
                f"{runs} concurrent runs: latency (p50/p95 ms)",
                f"{statistics.median(results):.0f} / {percentile(results, 0.95):.0f}",
                "-",
            )
            line(
                f"{runs} concurrent runs: throughput (runs/s)",
                f"{runs / elapsed:.1f}",
                "-",
            )
        if failures:
            print(f"   {len(failures)} failed, e.g. {failures[0]}")
    finally:
        stop.set()
        for thread in agents:
            thread.join()
    if agent_failures:
        print(f"   agent errors: {len(agent_failures)}, e.g. {agent_failures[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    partner, _ = user_get_or_create(username="bench")
    constellation = constellation_create(name="Bench", partner=partner)
    created = [agent_create(constellation=constellation, name=n) for n in NAMES]
    agent_ids = [agent.pk for agent, _ in created]
    tokens = [issued.raw for _, issued in created]
    print(f"database: {connection.settings_dict['NAME']}\n")

    bench_decisions(agent_ids, args.decisions)
    print()
    groups = {}
    for name, config in configs(agent_ids).items():
        group = group_create(
            constellation=constellation, name=name, pattern=name, config=config
        )
        for (agent, _), caps in zip(created, CAPABILITIES, strict=True):
            group_member_add(group=group, agent=agent, capabilities=caps)
        assert len(group_members(group=group)) == len(NAMES)
        groups[name] = group
    bench_service(groups, args.messages)
    print()

    # The HTTP part: routing latency through a group of the agents above
    # (nobody answers those runs), and whole runs through a group of fresh
    # agents with empty inboxes, simulated by the client threads.
    latency = group_create(
        constellation=constellation, name="latency", pattern="round_robin"
    )
    workers = [
        agent_create(constellation=constellation, name=f"Worker{n}") for n in range(6)
    ]
    served = group_create(
        constellation=constellation, name="served", pattern="round_robin"
    )
    for (agent, _), (worker, _) in zip(created, workers, strict=True):
        group_member_add(group=latency, agent=agent)
        group_member_add(group=served, agent=worker)
    connection.close()
    port = free_port()
    proc = subprocess.Popen(
        daphne_command(port=port),
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc=proc)
        bench_http(
            port,
            caller_token=tokens[0],
            agent_tokens=[issued.raw for _, issued in workers],
            latency_group=latency.pk,
            served_group=served.pk,
            messages=args.messages,
            runs=args.runs,
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
