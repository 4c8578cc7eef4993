"""Benchmark coordination work: task claims with N agents racing, and the
``/coord`` tool through HTTP under a real Daphne, each beside a reference
measured in the same run.

- Claims: N agent threads (own connections) each claim the next open task
  until none is left; every task is claimed exactly once and the losers of
  each race get ``Conflict``.  Reference: the same number of single-row
  UPDATEs in a transaction through one Django connection.
- HTTP: ``/coord status`` and ``/coord claim`` latencies (p50/p95) from N
  concurrent agent clients; reference: ``GET /api/whoami`` (token
  authentication and an empty endpoint) from the same clients.

Run: ``.venv/bin/python bench/coordination.py`` (``--agents``, ``--tasks``,
``--requests`` to change the sizes).  Uses a throwaway database in a
temporary data directory.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.common import daphne_running, django_setup, percentile

DATA_DIR = django_setup("pattern-bench-coord-")

from django.core.management import call_command
from django.db import connection, transaction

from coordination.models import Agent, Constellation
from coordination.work.models import Task, TaskStatus
from coordination.work.services import task_claim, task_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    constellation_create,
    user_get_or_create,
)
from pattern_site.kernel.errors import Conflict


def line(name: str, value: str, note: str) -> None:
    print(f"{name:<56} {value:>18}   {note}")


def seed_tasks(constellation: Constellation, count: int) -> list[Task]:
    actor = Actor.system()
    return [
        task_create(actor=actor, constellation=constellation, title=f"job {n}")
        for n in range(count)
    ]


def bench_claims(
    constellation: Constellation, agents: list[Agent], tasks: int, plain: float
) -> None:
    """Claims/s of ``agents`` racing through ``tasks`` fresh open tasks."""
    ids = [task.pk for task in seed_tasks(constellation, tasks)]
    connection.close()
    claimed = [0] * len(agents)
    conflicts = [0] * len(agents)
    start_line = threading.Barrier(len(agents))

    def agent_loop(n: int) -> None:
        actor = Actor.for_agent(agents[n])
        start_line.wait()
        # Every agent goes for the oldest open task, so most claims race.
        while True:
            task = (
                Task.objects.filter(constellation=constellation, status="open")
                .order_by("pk")
                .first()
            )
            if task is None:
                break
            try:
                task_claim(actor=actor, task=task)
                claimed[n] += 1
            except Conflict:
                conflicts[n] += 1
        connection.close()

    threads = [
        threading.Thread(target=agent_loop, args=(n,)) for n in range(len(agents))
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rate = tasks / (time.perf_counter() - start)
    in_progress = Task.objects.filter(pk__in=ids, status=TaskStatus.IN_PROGRESS)
    assert sum(claimed) == tasks == in_progress.count(), claimed
    line(
        f"task claims, {len(agents)} agent(s) racing (claims/s)",
        f"{rate:,.0f}",
        f"reference is {plain / rate:.1f}x; "
        f"{sum(conflicts)} lost races answered Conflict",
    )


def bench_plain_update(tasks: int) -> float:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE bench_plain (id INTEGER PRIMARY KEY, status TEXT)")
        cursor.executemany(
            "INSERT INTO bench_plain (id, status) VALUES (?, 'open')",
            [(n,) for n in range(tasks)],
        )
    ref_start = time.perf_counter()
    for n in range(tasks):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "UPDATE bench_plain SET status = 'in_progress' "
                "WHERE id = ? AND status = 'open'",
                [n],
            )
    plain = tasks / (time.perf_counter() - ref_start)
    line("plain UPDATE of one row in a transaction (/s)", f"{plain:,.0f}", "reference")
    return plain


def bench_http(tokens: list[str], tasks: list[Task], requests: int) -> None:
    with daphne_running() as port:
        per = max(1, requests // len(tokens))

        def client(n: int, make: object, out: dict[str, list[float]]) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            headers = {
                "Authorization": f"Bearer {tokens[n]}",
                "Content-Type": "application/json",
            }
            for i in range(per):
                method, path, body = make(n, i)  # type: ignore[operator]
                start = time.perf_counter()
                conn.request(method, path, body, headers)
                response = conn.getresponse()
                response.read()
                took = time.perf_counter() - start
                key = "ok" if response.status in (200, 409) else "failed"
                out[key].append(took * 1000)
                if response.status == 409:
                    out["conflict"].append(0)
            conn.close()

        def run(label: str, make: object) -> None:
            out: dict[str, list[float]] = {"ok": [], "failed": [], "conflict": []}
            threads = [
                threading.Thread(target=client, args=(n, make, out))
                for n in range(len(tokens))
            ]
            start = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            rate = len(out["ok"]) / (time.perf_counter() - start)
            times = out["ok"]
            extra = f", {len(out['conflict'])} answered 409" if out["conflict"] else ""
            line(
                f"{label}, {len(tokens)} clients (p50/p95 ms)",
                f"{statistics.median(times):.1f} / {percentile(times, 0.95):.1f}",
                f"{rate:,.0f} req/s{extra}"
                + (f"; {len(out['failed'])} FAILED" if out["failed"] else ""),
            )

        def coord(command: str) -> tuple[str, str, str]:
            return "POST", "/api/tools/coord", json.dumps({"command": command})

        run("warm-up GET /api/whoami", lambda n, i: ("GET", "/api/whoami", None))
        run("GET /api/whoami", lambda n, i: ("GET", "/api/whoami", None))
        run("/coord status", lambda n, i: coord("status"))
        # Every client claims the same tasks in the same order: one wins each.
        run("/coord claim", lambda n, i: coord(f"claim {tasks[i].ref}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=1_000)
    parser.add_argument("--requests", type=int, default=800)
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    partner, _ = user_get_or_create(username="bench")
    constellation = constellation_create(name="Bench", partner=partner)
    made = [
        agent_create(constellation=constellation, name=f"Agent{n}")
        for n in range(args.agents)
    ]
    print(f"database: {connection.settings_dict['NAME']}")
    agents = [agent for agent, _ in made]
    plain = bench_plain_update(args.tasks)
    for racing in (agents[:1], agents):
        bench_claims(constellation, racing, args.tasks, plain)
    http_tasks = seed_tasks(constellation, args.requests // args.agents + 1)
    connection.close()
    bench_http([issued.raw for _, issued in made], http_tasks, args.requests)


if __name__ == "__main__":
    main()
