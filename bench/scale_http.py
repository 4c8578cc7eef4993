"""HTTP throughput on PostgreSQL + Redis against one and three Daphne processes.

A throwaway PostgreSQL with pgvector (``pattern_site.pgserver``, started by
re-running this script under it), Redis (``--redis``) for the channel layer
and the broker, one Celery worker.  ``--agents`` agents, each with a block
and a token; against one Daphne process and then three (requests spread
round-robin over them), ``--threads`` client threads send ``--requests``
requests of each kind in turn: block appends (``/api/tools/context``),
archival inserts (``/api/tools/archival_memory_insert``) and hybrid
searches (``/api/tools/search``), after one warm-up request per thread.
Prints req/s, p50/p95 and failures per
kind and process count, side by side.

    .venv/bin/python bench/scale_http.py [--requests 600] [--threads 12]
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pattern_site.processes import (
    SOLO_WORKER_OPTIONS,
    celery_worker_command,
    daphne_start,
    processes_stop,
    throwaway_dir,
)


def kinds(n: int, label: str) -> dict[str, tuple[str, dict]]:
    return {
        "append": (
            "/api/tools/context",
            {"operation": "append", "label": label, "content": f"line {n}"},
        ),
        "archival insert": (
            "/api/tools/archival_memory_insert",
            {"content": f"fact {n}: the heron nests by lake {n % 97}"},
        ),
        "hybrid search": (
            "/api/tools/search",
            {"query": f"heron lake {n % 97}", "mode": "hybrid", "limit": 10},
        ),
    }


def drive(ports: list[int], tokens: list[str], kind: str, args) -> dict:
    times: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    per = args.requests // args.threads

    def client(t: int) -> None:
        port = ports[t % len(ports)]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        token = tokens[t % len(tokens)]
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
        }
        for n in range(per):
            path, body = kinds(t * per + n, "notes")[kind]
            t0 = time.perf_counter()
            conn.request("POST", path, json.dumps(body), headers)
            response = conn.getresponse()
            data = response.read()
            elapsed = (time.perf_counter() - t0) * 1000
            with lock:
                times.append(elapsed)
                if response.status not in (200, 201):
                    failures.append(f"{response.status} {data[:120]!r}")
        conn.close()

    threads = [threading.Thread(target=client, args=(t,)) for t in range(args.threads)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    q = statistics.quantiles(times, n=100, method="inclusive")
    return {
        "rate": len(times) / wall,
        "p50": q[49],
        "p95": q[94],
        "failures": failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--threads", type=int, default=12)
    parser.add_argument("--agents", type=int, default=6)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/3")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        command = [sys.executable, "-m", "pattern_site.pgserver", sys.executable]
        sys.exit(subprocess.call([*command, __file__, *sys.argv[1:]], cwd=ROOT))

    env = {
        "DJANGO_SETTINGS_MODULE": "pattern_site.settings.dev",
        "PATTERN_DEBUG": "false",
        "PATTERN_DATA_DIR": throwaway_dir("pattern-bench-scale-http-"),
        "PATTERN_REDIS_URL": args.redis,
        "PATTERN_CELERY_BROKER_URL": args.redis,
        "PATTERN_CELERY_EAGER": "false",
        "PYTHONUNBUFFERED": "1",
    }
    from bench.database import migrated_agent

    first = migrated_agent(env, partner="bench", agent="agent 0")
    from memory.blocks.services import block_create
    from pattern_site.kernel.actors import Actor
    from pattern_site.kernel.agents.services import agent_token_issue
    from tests.factories import AgentFactory

    agents = [first] + [
        AgentFactory(constellation=first.constellation, name=f"agent {i}")
        for i in range(1, args.agents)
    ]
    for agent in agents:
        block_create(actor=Actor.system(), label="notes", owner=agent)
    tokens = [agent_token_issue(agent=a).raw for a in agents]
    child_env = {**os.environ}
    procs = [
        subprocess.Popen(
            celery_worker_command(*SOLO_WORKER_OPTIONS),
            cwd=ROOT,
            env=child_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    results: dict[tuple[str, int], dict] = {}
    try:
        ports: list[int] = []
        for processes in (1, 3):
            while len(ports) < processes:
                port, proc = daphne_start(cwd=ROOT, env=child_env)
                procs.append(proc)
                ports.append(port)
            # Every process loads the model and opens its pool first.
            warm = argparse.Namespace(requests=args.threads, threads=args.threads)
            for kind in kinds(0, "notes"):
                drive(ports, tokens, kind, warm)
            for kind in kinds(0, "notes"):
                results[kind, processes] = drive(ports, tokens, kind, args)
    finally:
        processes_stop(procs)
    print(
        f"HTTP on PostgreSQL + Redis, {args.requests} requests per kind,"
        f" {args.threads} client threads"
    )
    for kind in kinds(0, "notes"):
        for processes in (1, 3):
            r = results[kind, processes]
            print(
                f"  {kind:<16} {processes} Daphne: {r['rate']:7.1f} req/s"
                f"  p50 {r['p50']:7.1f} ms  p95 {r['p95']:7.1f} ms"
                f"  failures {len(r['failures'])}"
                + (f" (e.g. {r['failures'][0]})" if r["failures"] else "")
            )


if __name__ == "__main__":
    main()
