"""Soak test of the embedded default: a real ``manage.py serve`` (Daphne, a
supervised Celery worker and beat on the SQLite broker) on a throwaway data
directory, under mixed load for ``--seconds`` (default 10 minutes):

- searches (``POST /api/tools/search``), archival inserts
  (``POST /api/archival``, each enqueues an embedding task) and block
  appends (``POST /api/tools/context``), each at a steady rate;
- one co-editing room on ``/ws/sync/`` with the npm loro-websocket clients
  (bench/node/soak_room.mjs), each client editing every ``--edit-interval``.

Every 30 s a progress line; at the end throughput, p50/p95 and errors per
operation, worker restarts, and the archival entries still without an
embedding after waiting up to a minute (every one should have its vector).
Targets: 0 worker crashes, 0 lost tasks, every entry embedded within a
minute of the end.

``--kill-web-at S`` kills the web process (SIGKILL, as a crash or the OOM
killer would) S seconds into the load; serve restarts it.  Entries it had
committed but not yet handed to the broker have lost their embedding task.
The worker stays up throughout, so the report gives the time from the kill
to the last entry committed before it having its vector (target: 60 s).

    .venv/bin/python bench/soak.py --seconds 60
    .venv/bin/python bench/soak.py --seconds 60 --kill-web-at 30
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.database import migrated_agent
from pattern_site.processes import free_port, throwaway_dir, wait_for_port

WORDS = [
    "river",
    "garden",
    "lantern",
    "copper",
    "meadow",
    "violin",
    "harbor",
    "pepper",
    "glacier",
    "orchard",
    "thunder",
    "velvet",
    "compass",
    "saffron",
    "quarry",
    "falcon",
    "marble",
    "tundra",
    "ember",
    "willow",
]


def setup_database(env: dict[str, str]) -> tuple[str, int]:
    """Migrate a fresh database: an agent, its token, a block to append to,
    a co-editing block (its id) and some archival entries to search."""
    agent = migrated_agent(env, partner="soak", agent="soaker")
    from memory.blocks.services import block_create
    from memory.longterm.services import archival_entry_create
    from pattern_site.kernel.actors import Actor
    from pattern_site.kernel.agents.services import agent_token_issue

    blocks = {
        label: block_create(
            actor=Actor.system(),
            label=label,
            owner=agent,
            content="start;",
            char_limit=2_000_000,
        )
        for label in ("journal", "room")
    }
    for i in range(200):
        archival_entry_create(agent=agent, content=_sentence(i))
    return agent_token_issue(agent=agent).raw, blocks["room"].pk


def _sentence(i: int) -> str:
    words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(8)]
    return f"note {i}: " + " ".join(words)


class Load:
    """Steady-rate HTTP operations, each kind on threads of its own."""

    def __init__(self, port: int, token: str, stop_at: float) -> None:
        self.port = port
        self.token = token
        self.stop_at = stop_at
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, list[str]] = defaultdict(list)
        self.lock = threading.Lock()
        self.counter = 0

    def _body(self, kind: str) -> tuple[str, dict]:
        with self.lock:
            self.counter += 1
            n = self.counter
        if kind == "search":
            query = " ".join(WORDS[(n + k) % len(WORDS)] for k in range(2))
            return "/api/tools/search", {"query": query, "limit": 10}
        if kind == "archival":
            return "/api/archival", {"content": f"soak {n}: " + _sentence(n)}
        return "/api/tools/context", {
            "operation": "append",
            "label": "journal",
            "content": f"line {n}",
        }

    def run(self, kind: str, rate: float, threads: int) -> list[threading.Thread]:
        interval = threads / rate

        def loop(offset: float) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            next_at = time.monotonic() + offset
            while next_at < self.stop_at:
                pause = next_at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                # Behind schedule (the server is slower than the rate asked):
                # no burst to catch up, the achieved rate is what is reported.
                next_at = max(next_at + interval, time.monotonic())
                path, body = self._body(kind)
                started = time.perf_counter()
                try:
                    conn.request(
                        "POST",
                        path,
                        json.dumps(body),
                        {
                            "Authorization": f"Bearer {self.token}",
                            "Content-Type": "application/json",
                        },
                    )
                    response = conn.getresponse()
                    response.read()
                    status = response.status
                except (OSError, http.client.HTTPException) as exc:
                    conn.close()
                    conn = http.client.HTTPConnection(
                        "127.0.0.1", self.port, timeout=60
                    )
                    status, detail = 0, f"{type(exc).__name__}: {exc}"
                else:
                    detail = f"HTTP {status}"
                elapsed = (time.perf_counter() - started) * 1000
                with self.lock:
                    if 200 <= status < 300:
                        self.latencies[kind].append(elapsed)
                    else:
                        self.errors[kind].append(detail)
            conn.close()

        started = [
            threading.Thread(target=loop, args=(i * interval / threads,), daemon=True)
            for i in range(threads)
        ]
        for thread in started:
            thread.start()
        return started


def p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def health(port: int) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/api/health")
        return json.loads(conn.getresponse().read())
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return {"status": f"no answer ({type(exc).__name__})"}
    finally:
        conn.close()


def count_in_log(log: Path, text: str) -> int:
    return log.read_text(errors="replace").count(text)


def unembedded() -> int:
    from memory.models import ArchivalEntry, EmbeddingState

    return ArchivalEntry.objects.exclude(embedding_state=EmbeddingState.READY).count()


def web_pid(log: Path) -> int:
    """The pid of serve's current web process, from its log."""
    started = re.findall(r"serve: web started \(pid (\d+)\)", log.read_text())
    if not started:
        raise RuntimeError("serve's log names no web process")
    return int(started[-1])


class WebKill:
    """Kill the web process at a given time; then time how long the entries
    committed before the kill take to all have their vector."""

    def __init__(self, log: Path, at: float) -> None:
        self.log = log
        self.at = at
        self.killed_at: float | None = None
        self.last_entry = 0
        self.pending_at_kill = 0
        self.embedded_after: float | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _waiting(self) -> int:
        from memory.models import ArchivalEntry, EmbeddingState

        return (
            ArchivalEntry.objects.filter(pk__lte=self.last_entry)
            .exclude(embedding_state=EmbeddingState.READY)
            .count()
        )

    def _run(self) -> None:
        from memory.models import ArchivalEntry

        time.sleep(max(0.0, self.at - time.monotonic()))
        os.kill(web_pid(self.log), signal.SIGKILL)
        self.killed_at = time.monotonic()
        # Whatever the dead process committed is in the database by now.
        self.last_entry = (
            ArchivalEntry.objects.order_by("-pk").values_list("pk", flat=True).first()
            or 0
        )
        self.pending_at_kill = self._waiting()
        print(
            f"  killed the web process; {self.pending_at_kill} entries committed"
            " before the kill still wait for their vector",
            flush=True,
        )
        while time.monotonic() - self.killed_at < 600:
            if not self._waiting():
                self.embedded_after = time.monotonic() - self.killed_at
                return
            time.sleep(0.5)

    def report(self) -> str:
        if self.killed_at is None:
            return "web kill: the load ended before the kill"
        self.thread.join(timeout=600)
        done = (
            f"all embedded {self.embedded_after:.1f} s after the kill"
            if self.embedded_after is not None
            else f"{self._waiting()} still without a vector after 600 s"
        )
        return (
            f"web kill: {self.pending_at_kill} entries (ids up to "
            f"{self.last_entry}) were pending at the kill, with the worker up "
            f"throughout; {done} (target: 60 s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--search-rate", type=float, default=30, help="per second")
    parser.add_argument("--archival-rate", type=float, default=5, help="per second")
    parser.add_argument("--append-rate", type=float, default=5, help="per second")
    parser.add_argument("--room-clients", type=int, default=4)
    parser.add_argument("--edit-interval", type=float, default=0.25, help="seconds")
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes")
    parser.add_argument("--log", default="", help="keep serve's log at this path")
    parser.add_argument(
        "--kill-web-at",
        type=float,
        default=None,
        help="SIGKILL the web process this many seconds into the load",
    )
    args = parser.parse_args()
    if not (REPO / "node_modules" / "loro-websocket").is_dir():
        raise SystemExit("run `make assets` first (npm ci)")

    data_dir = Path(throwaway_dir("pattern-soak-"))
    env = {
        "DJANGO_SETTINGS_MODULE": "pattern_site.settings.dev",
        "PATTERN_DATA_DIR": str(data_dir),
        "PATTERN_DEBUG": "false",
        "PATTERN_LOG_LEVEL": "WARNING",
        "PATTERN_REDIS_URL": "",
        "PATTERN_CELERY_BROKER_URL": "",
        "DATABASE_URL": f"sqlite:///{data_dir / 'soak.sqlite3'}",
    }
    token, room = setup_database(env)
    from django.conf import settings

    port = free_port()
    log = data_dir / "serve.log"
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=REPO,
        env={
            **os.environ,
            **env,
            "PATTERN_WORKER_CONCURRENCY": str(args.concurrency),
        },
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_port(port, timeout=60, proc=serve)
        print(
            f"soak: manage.py serve on {data_dir} (broker "
            f"{settings.CELERY_BROKER_URL}, worker concurrency "
            f"{args.concurrency}), {args.seconds:g} s: search {args.search_rate:g}/s,"
            f" archival {args.archival_rate:g}/s, append {args.append_rate:g}/s,"
            f" room {args.room_clients} clients x 1 edit/{args.edit_interval:g} s"
        )
        print(f"embeddings: {health(port).get('embeddings', {}).get('detail')}")
        started = time.monotonic()
        stop_at = started + args.seconds
        load = Load(port, token, stop_at)
        web_kill = None
        if args.kill_web_at is not None:
            web_kill = WebKill(log, started + args.kill_web_at)
            web_kill.thread.start()
        threads = [
            *load.run("search", args.search_rate, 4),
            *load.run("archival", args.archival_rate, 2),
            *load.run("append", args.append_rate, 2),
        ]
        room_proc = subprocess.Popen(
            [
                "node",
                str(REPO / "bench" / "node" / "soak_room.mjs"),
                "--url",
                f"ws://127.0.0.1:{port}/ws/sync/",
                "--room",
                str(room),
                "--token",
                token,
                "--clients",
                str(args.room_clients),
                "--interval-ms",
                str(int(args.edit_interval * 1000)),
                "--seconds",
                str(args.seconds),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        while time.monotonic() < stop_at:
            time.sleep(min(30, max(0.1, stop_at - time.monotonic())))
            with load.lock:
                done = {k: len(v) for k, v in load.latencies.items()}
                failed = sum(len(v) for v in load.errors.values())
            status = health(port)
            beat_age = status.get("worker", {}).get("last_heartbeat_seconds_ago")
            print(
                f"  {time.monotonic() - started:5.0f} s  done {done}  errors {failed}"
                f"  worker restarts {count_in_log(log, 'serve: worker (pid')}"
                f"  health {status.get('status')}"
                f" (heartbeat {beat_age} s ago)",
                flush=True,
            )
        for thread in threads:
            thread.join(timeout=90)
        room_out, _ = room_proc.communicate(timeout=120)
        elapsed = args.seconds
        room_figures = json.loads(room_out.strip().splitlines()[-1])

        print(
            f"\n{'operation':<10} {'done':>7} {'per s':>7} {'p50 ms':>8} "
            f"{'p95 ms':>8} {'errors':>7}"
        )
        for kind in ("search", "archival", "append"):
            values = load.latencies[kind]
            print(
                f"{kind:<10} {len(values):>7} {len(values) / elapsed:>7.1f} "
                f"{statistics.median(values) if values else float('nan'):>8.1f} "
                f"{p(values, 0.95):>8.1f} {len(load.errors[kind]):>7}"
                + (f"  first: {load.errors[kind][0]}" if load.errors[kind] else "")
            )
        print(
            f"{'room edit':<10} {room_figures['edits']:>7} "
            f"{room_figures['edits'] / elapsed:>7.1f} "
            f"{room_figures['p50'] or float('nan'):>8.1f} "
            f"{room_figures['p95'] or float('nan'):>8.1f} "
            f"{room_figures['refused'] + room_figures['failures']:>7}"
            + (
                f"  first: {room_figures['first_failure']}"
                if room_figures["first_failure"]
                else ""
            )
        )

        if web_kill is not None:
            print(web_kill.report())
        waited_from = time.monotonic()
        left = unembedded()
        while left and time.monotonic() - waited_from < 60:
            time.sleep(2)
            left = unembedded()
        from memory.models import ArchivalEntry

        total = ArchivalEntry.objects.count()
        restarts = count_in_log(log, "serve: worker (pid")
        print(
            f"\nworker restarts: {restarts}; beat restarts: "
            f"{count_in_log(log, 'serve: beat (pid')}; web restarts: "
            f"{count_in_log(log, 'serve: web (pid')}"
        )
        print(
            f"archival entries without embeddings after "
            f"{time.monotonic() - waited_from:.0f} s of waiting: {left} of {total}"
        )
        print(f"health at the end: {health(port).get('status')}")
        tracebacks = count_in_log(log, "Traceback")
        print(f"tracebacks in the serve log: {tracebacks}")
    finally:
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            try:
                code = serve.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(serve.pid, signal.SIGKILL)
                code = "killed after 60 s"
            print(f"serve stopped on SIGTERM: exit {code}")
        if args.log:
            Path(args.log).write_text(log.read_text(errors="replace"))
            print(f"serve log copied to {args.log}")


if __name__ == "__main__":
    main()
