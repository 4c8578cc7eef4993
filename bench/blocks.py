"""Benchmark memory blocks: service appends vs a plain UPDATE, loading and
history listing of a 10,000-edit block, and HTTP tool-API appends under a
real Daphne at concurrency 1 and 8.

Run: ``.venv/bin/python bench/blocks.py`` (``--edits``, ``--appends``,
``--requests`` to change the sizes).  Uses a throwaway database in a
temporary data directory; prints each figure next to its target.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.common import daphne_running, django_setup, line, percentile

DATA_DIR = django_setup("pattern-bench-")

from django.core.management import call_command
from django.db import connection, transaction

from memory.blocks.selectors import block_document_load, block_history
from memory.blocks.services import block_create, block_operate
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    constellation_create,
    user_get_or_create,
)


def seed_block(agent: object, label: str, edits: int) -> object:
    """A block with ``edits`` prior changes by an agent, kept under its char
    limit the way a real one is: notes appended, older ones trimmed by a
    rewrite whenever the block passes 4,000 characters."""
    block = block_create(
        actor=Actor.system(), owner=agent, label=label, char_limit=20_000
    )
    actor = Actor.for_agent(agent)
    for n in range(edits):
        if block.size > 4000:
            op = {"op": "set_text", "text": block.rendered[-1500:]}
        else:
            op = {"op": "append_text", "text": f"note {n}: partner focused well\n"}
        block_operate(actor=actor, block=block, operations=[op])
    return block


def bench_appends(agent: object, block: object, appends: int) -> dict[str, float]:
    """Service appends, the plain UPDATE and the bare versioned append
    (:func:`floor_django`) in alternating rounds of 100, so that a slow
    spell of this shared machine weighs on all three alike; appends/s of
    each."""
    actor = Actor.for_agent(agent)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS bench_plain (id INTEGER PRIMARY KEY, body TEXT)"
        )
        cursor.execute(
            "INSERT INTO bench_plain (id, body) VALUES (1, ?)", [block.rendered]
        )

    def plain(n: int) -> None:
        # The same append through the same Django connection in a
        # transaction (BEGIN IMMEDIATE; UPDATE body = body || ?; COMMIT),
        # without versioning, rendering or rights checks.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "UPDATE bench_plain SET body = body || ? WHERE id = 1", [f"a{n} "]
            )

    def service(n: int) -> None:
        block_operate(
            actor=actor,
            block=block,
            operations=[{"op": "append_text", "text": f"a{n} "}],
        )

    into = block_create(
        actor=Actor.system(), owner=agent, label="floor", char_limit=1_000_000
    )
    floor = floor_django(block, into)
    spent = {plain: 0.0, service: 0.0, floor: 0.0}
    rounds = max(1, appends // 100)
    for start in range(0, rounds * 100, 100):
        for fn in spent:
            t0 = time.perf_counter()
            for n in range(start, start + 100):
                fn(n)
            spent[fn] += time.perf_counter() - t0
    done = rounds * 100
    rates = {
        "plain": done / spent[plain],
        "service": done / spent[service],
        "floor": done / spent[floor],
    }
    cost, floor_cost = (
        rates["plain"] / rates["service"],
        rates["plain"] / rates["floor"],
    )
    target = APPEND_TARGET_OVER_FLOOR * floor_cost
    line(
        "plain UPDATE of a text column (appends/s)",
        f"{rates['plain']:,.0f}",
        "reference",
    )
    line(
        "service appends on the seeded block (appends/s)",
        f"{rates['service']:,.0f}",
        "-",
    )
    line(
        "floor through Django: plain UPDATE / bare versioned append",
        f"{floor_cost:.2f}x",
        "reference",
    )
    line(
        "versioning cost (plain/service)",
        f"{cost:.2f}x",
        f"<= {APPEND_TARGET_OVER_FLOOR:g}x floor = {target:.2f}x",
        cost <= target,
    )
    return rates


# A service append may cost at most this many times the bare versioned
# append through Django (:func:`floor_django`), both against the plain UPDATE.
APPEND_TARGET_OVER_FLOOR = 1.5
HTTP_TARGET_PER_S = 500


def bench_floor(block: object, appends: int) -> None:
    """Where the 2x target's floor is: the service's statements (lock read,
    update-log INSERT, block UPDATE) and Loro work (edit, commit, export the
    update) with the stdlib ``sqlite3`` driver and no Django, against the
    plain UPDATE through the same driver, on a copy of the block's document
    and a file with the same pragmas.  Not a target; a reference."""
    import sqlite3

    from loro import ExportMode

    path = Path(DATA_DIR) / "floor.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(
        """
        CREATE TABLE plain (id INTEGER PRIMARY KEY, body TEXT);
        CREATE TABLE block (id TEXT PRIMARY KEY, rendered TEXT, size INT,
            version INT, log_count INT, log_bytes INT, updated_at TEXT);
        CREATE TABLE log (id INTEGER PRIMARY KEY, block_id TEXT, data BLOB,
            frontiers BLOB, actor_kind TEXT, actor_id TEXT, actor_name TEXT,
            summary TEXT, size INT, created_at TEXT);
        CREATE INDEX log_seq ON log (block_id, id);
        """
    )
    rendered = block.rendered
    db.execute("INSERT INTO plain VALUES (1, ?)", [rendered])
    db.execute("INSERT INTO block VALUES ('b', ?, 0, 0, 0, 0, '')", [rendered])
    start = time.perf_counter()
    for n in range(appends):
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE plain SET body = body || ? WHERE id = 1", [f"a{n} "])
        db.execute("COMMIT")
    plain = appends / (time.perf_counter() - start)
    doc = block_document_load(block=block)
    text = doc.get_text("content")
    start = time.perf_counter()
    for n in range(appends):
        before = doc.oplog_vv
        doc.set_next_commit_message("agent:1 append_text")
        text.insert(text.len_unicode, f"a{n} ")
        doc.commit()
        data = doc.export(ExportMode.Updates(before))
        db.execute("BEGIN IMMEDIATE")
        db.execute("SELECT version, log_count, size FROM block WHERE id = 'b'")
        db.execute(
            "INSERT INTO log (block_id, data, frontiers, actor_kind, actor_id,"
            " actor_name, summary, size, created_at)"
            " VALUES ('b', ?, ?, 'agent', '1', 'Bench', 'append_text', ?, ?)",
            [data, doc.oplog_frontiers.encode(), len(rendered), "2026-01-01"],
        )
        db.execute(
            "UPDATE block SET rendered = rendered || ?, size = size + 3,"
            " version = version + 1, log_count = log_count + 1,"
            " log_bytes = log_bytes + ?, updated_at = ? WHERE id = 'b'",
            [f"a{n} ", len(data), "2026-01-01"],
        )
        db.execute("COMMIT")
    versioned = appends / (time.perf_counter() - start)
    db.close()
    line(
        "floor, no Django: plain UPDATE / versioned append",
        f"{plain / versioned:.2f}x",
        f"reference ({plain:,.0f} vs {versioned:,.0f}/s)",
    )


def floor_django(block: object, into: object) -> Callable[[int], None]:
    """The least a versioned append can do through Django's connection on
    the real tables: read the row (version, counters), edit and export the
    document, INSERT the update row, UPDATE the block row, in one
    transaction.  No rights, schema, compaction, model instances or hooks:
    a reference, not a target.  On a copy of ``block``'s document, its rows
    written to block ``into``, so that they never mix with the service's."""
    from loro import ExportMode

    from memory.models import BlockUpdate, MemoryBlock

    blocks, updates = MemoryBlock._meta.db_table, BlockUpdate._meta.db_table
    block_id = MemoryBlock._meta.pk.get_db_prep_value(into.pk, connection)
    doc = block_document_load(block=block)
    text = doc.get_text("content")
    now = "2026-01-01 00:00:00"

    def versioned(n: int) -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"SELECT version, log_count, log_bytes FROM {blocks} WHERE id = %s",
                [block_id],
            )
            version, log_count, log_bytes = cursor.fetchone()
            before = doc.oplog_vv
            doc.set_next_commit_message("agent:1 append_text")
            text.insert(text.len_unicode, f"f{n} ")
            doc.commit()
            data = doc.export(ExportMode.Updates(before))
            rendered = text.to_string()
            cursor.execute(
                f"INSERT INTO {updates} (data, frontiers, actor_kind, actor_id,"
                " actor_name, summary, size, created_at, block_id)"
                " VALUES (%s, %s, 'agent', '1', 'Bench', 'append_text', %s, %s, %s)",
                [data, doc.oplog_frontiers.encode(), len(rendered), now, block_id],
            )
            cursor.execute(
                f"UPDATE {blocks} SET rendered = %s, size = %s, updated_at = %s,"
                " version = %s, log_count = %s, log_bytes = %s WHERE id = %s",
                [
                    rendered,
                    len(rendered),
                    now,
                    version + 1,
                    log_count + 1,
                    log_bytes + len(data),
                    block_id,
                ],
            )

    return versioned


def bench_load(block: object, loads: int) -> None:
    times = []
    for _ in range(loads):
        start = time.perf_counter()
        doc = block_document_load(block=block)
        doc.get_text("content").to_string()
        times.append((time.perf_counter() - start) * 1000)
    p50, p95 = statistics.median(times), percentile(times, 0.95)
    line("load 10,000-edit block p50 (ms)", f"{p50:.2f}", "-")
    line("load 10,000-edit block p95 (ms)", f"{p95:.2f}", "< 5 ms", p95 < 5)


def bench_history(block: object) -> None:
    times_page, times_all = [], []
    for _ in range(20):
        start = time.perf_counter()
        page = block_history(block=block, limit=50)
        times_page.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        everything = block_history(block=block, limit=1_000_000)
        times_all.append((time.perf_counter() - start) * 1000)
    assert len(page) == 50
    line(
        "history, newest page of 50 (ms, median)",
        f"{statistics.median(times_page):.2f}",
        "< 50 ms",
        statistics.median(times_page) < 50,
    )
    line(
        f"history, all {len(everything):,} versions (ms, median)",
        f"{statistics.median(times_all):.2f}",
        "< 50 ms",
        statistics.median(times_all) < 50,
    )


def _append_body(label: str, n: int) -> str:
    return json.dumps({"operation": "append", "label": label, "content": f"h{n}"})


def bench_test_client(token: str, label: str, requests: int) -> float:
    """The same requests through Django's test client in this process (the
    middleware, auth, view and service without Daphne or a socket): the
    request path's reference; requests/s."""
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="127.0.0.1")

    def post(n: int) -> None:
        response = client.post(
            "/api/tools/context",
            _append_body(label, n),
            content_type="application/json",
        )
        assert response.status_code == 200, response.content[:200]

    for n in range(20):  # warm up
        post(n)
    start = time.perf_counter()
    for n in range(requests):
        post(n)
    rate = requests / (time.perf_counter() - start)
    line("test client context append, in process (req/s)", f"{rate:,.0f}", "reference")
    return rate


def _post_appends(
    port: int, token: str, labels: list[str], requests: int, concurrency: int
) -> tuple[float, list[str]]:
    """``requests`` context appends to ``port`` over ``concurrency``
    connections (one label each); requests/s and the failures."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def worker(label: str, count: int, failures: list[str]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for n in range(count):
            conn.request("POST", "/api/tools/context", _append_body(label, n), headers)
            response = conn.getresponse()
            data = response.read()
            if response.status != 200:
                failures.append(f"{response.status} {data[:200]!r}")
        conn.close()

    failures: list[str] = []
    per = requests // concurrency
    threads = [
        threading.Thread(target=worker, args=(labels[n], per, failures))
        for n in range(concurrency)
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return per * concurrency / (time.perf_counter() - start), failures


def bench_http(
    token: str, labels: list[str], requests: int
) -> tuple[dict[int, float], dict[int, float]]:
    """``/api/tools/context`` appends through a real Daphne at concurrency 1
    and 8, and in the same run the floor (``bench/http_floor.py``: the same
    Daphne, token check and one durable SQLite write, nothing else), the
    two taking turns; requests/s of each by concurrency."""
    rates: dict[int, float] = {}
    floors: dict[int, float] = {}
    with (
        daphne_running() as port,
        daphne_running("bench.http_floor:application") as bare,
    ):
        for server in (port, bare):  # warm up
            _post_appends(server, token, labels, 20, 1)
        for concurrency in (1, 8):
            rate, failures = _post_appends(port, token, labels, requests, concurrency)
            floor, floor_failures = _post_appends(
                bare, token, labels, requests, concurrency
            )
            rates[concurrency] = rate if not failures else 0.0
            floors[concurrency] = floor if not floor_failures else 0.0
            line(
                f"HTTP context append, concurrency {concurrency} (req/s)",
                f"{rate:,.0f}",
                f">= {HTTP_TARGET_PER_S}/s",
                rate >= HTTP_TARGET_PER_S and not failures,
            )
            line(
                f"  floor: Daphne + token + one write, c{concurrency} (req/s)",
                f"{floor:,.0f}",
                "reference",
            )
            for what, failed in (("ours", failures), ("floor", floor_failures)):
                if failed:
                    print(f"   {what}: {len(failed)} failed, e.g. {failed[0]}")
    return rates, floors


def summary(
    rates: dict[str, float],
    reference: float,
    http: dict[int, float],
    http_floor: dict[int, float],
) -> None:
    """The figures ``make bench-quick`` gathers: each as a ratio to its
    same-run reference, with its target beside it."""
    cost = rates["plain"] / rates["service"]
    floor = rates["plain"] / rates["floor"]
    target = APPEND_TARGET_OVER_FLOOR * floor
    print(
        f"\nappends: {rates['service']:,.0f}/s = {cost:.1f}x plain UPDATE"
        f" = {cost / floor:.2f}x the floor (floor {floor:.1f}x;"
        f" target <= {APPEND_TARGET_OVER_FLOOR:g}x floor = {target:.1f}x)"
        f" {'met' if cost <= target else 'MISSED'}"
    )
    for concurrency, rate in http.items():
        print(
            f"HTTP context appends c{concurrency}: {rate:,.0f} req/s"
            f" = {rate / reference:.2f}x the test client in process"
            f" ({reference:,.0f}/s; target >= {HTTP_TARGET_PER_S} req/s)"
            f" {'met' if rate >= HTTP_TARGET_PER_S else 'MISSED'}"
            f"; {rate / http_floor[concurrency]:.2f}x the floor"
            f" ({http_floor[concurrency]:,.0f}/s: Daphne + token + one write)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--edits", type=int, default=10_000)
    parser.add_argument("--appends", type=int, default=1_000)
    parser.add_argument("--loads", type=int, default=200)
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="make bench-quick: appends and HTTP only, on a 2,000-edit block",
    )
    args = parser.parse_args()
    if args.quick:
        args.edits, args.appends, args.requests = 2_000, 600, 400

    call_command("migrate", verbosity=0)
    partner, _ = user_get_or_create(username="bench")
    constellation = constellation_create(name="Bench", partner=partner)
    agent, issued = agent_create(constellation=constellation, name="Bench")
    print(f"database: {connection.settings_dict['NAME']}")
    start = time.perf_counter()
    block = seed_block(agent, "big", args.edits)
    print(f"seeded {args.edits:,} edits in {time.perf_counter() - start:.1f} s\n")

    if not args.quick:
        bench_load(block, args.loads)
        bench_history(block)
    rates = bench_appends(agent, block, args.appends)
    if not args.quick:
        bench_floor(block, args.appends)
    labels = [f"http{n}" for n in range(8)]
    for label in labels:
        block_create(actor=Actor.system(), owner=agent, label=label, char_limit=50_000)
    reference = bench_test_client(issued.raw, labels[0], args.requests)
    connection.close()
    http, http_floor = bench_http(issued.raw, labels, args.requests)
    summary(rates, reference, http, http_floor)


if __name__ == "__main__":
    main()
