"""Hybrid search at scale: PostgreSQL (pgvector HNSW) against SQLite, one run.

Each vendor runs in a child process of its own (Django has one default
database per process): a throwaway SQLite file, or the bundled PostgreSQL
with pgvector (``pattern_site.pgserver``).  Both load the same rows: ``size``
archival entries of one agent, 12 words each from a 5,000-word vocabulary,
with clustered unit vectors (centres plus noise, the way text embeddings
bunch), and answer the same hybrid queries (3 words, a vector near a
centre) through the engine with the default settings.  Each child prints
p50/p95 of the hybrid search; the PostgreSQL child also the recall@10 of
its HNSW path against an exact scan of the same rows, whether the plan
used the HNSW index and whether the keyword query used the GIN index (its
whole plan with ``--plans``).  The parent prints both side by side with
the ratio.

    .venv/bin/python bench/scale.py [--size 100000] [--queries 200] [--plans]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DIM = 384
VOCAB = [f"w{i:04d}" for i in range(5000)]
CENTRES = 200


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def child(size: int, n_queries: int, seed: int) -> dict:
    """Load and search on the database ``DATABASE_URL`` (or SQLite) names."""
    import django

    django.setup()
    import random

    import numpy as np
    from django.core.management import call_command
    from django.db import connection, transaction

    from coordination.models import Agent, Constellation
    from memory.longterm.indexes import ARCHIVAL_INDEX
    from memory.models import ArchivalEntry, EmbeddingState
    from memory.search.engine import search
    from memory.search.index import index_put_texts, index_put_vectors
    from tests.factories import UserFactory

    call_command("migrate", verbosity=0)
    rng = np.random.default_rng(seed)
    prng = random.Random(seed)
    centres = rng.standard_normal((CENTRES, DIM)).astype(np.float32)

    def clustered(n: int) -> np.ndarray:
        rows = centres[rng.integers(0, CENTRES, n)]
        rows = rows + 0.7 * rng.standard_normal((n, DIM)).astype(np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    constellation = Constellation.objects.create(
        name="bench", partner=UserFactory(username="bench")
    )
    agent = Agent.objects.create(constellation=constellation, name="bench")
    on_pg = connection.vendor == "postgresql"
    if on_pg:
        # Bulk load: the HNSW index is built once afterwards, far faster than
        # row by row (as any bulk import into pgvector would do).
        with connection.cursor() as cur:
            cur.execute("DROP INDEX memory_archivalentry_pgvector_hnsw")
    t0 = time.perf_counter()
    batch = 2000
    vectors = clustered(size)
    for start in range(0, size, batch):
        with transaction.atomic():
            entries = ArchivalEntry.objects.bulk_create(
                ArchivalEntry(
                    agent=agent,
                    constellation=constellation,
                    content=" ".join(prng.choices(VOCAB, k=12)),
                    content_hash=f"h{start + i}",
                    embedded_hash=f"h{start + i}",
                    embedding_state=EmbeddingState.READY,
                )
                for i in range(min(batch, size - start))
            )
            c, a = constellation.pk, agent.pk
            index_put_texts(
                ARCHIVAL_INDEX, rows=[(e.pk, c, a, e.content) for e in entries]
            )
            chunk = vectors[start : start + len(entries)]
            index_put_vectors(
                ARCHIVAL_INDEX,
                rows=[(e.pk, c, a, v) for e, v in zip(entries, chunk, strict=True)],
            )
    loaded = time.perf_counter() - t0
    if on_pg:
        t0 = time.perf_counter()
        with connection.cursor() as cur:
            cur.execute("SET maintenance_work_mem = '1GB'")
            cur.execute(
                "CREATE INDEX memory_archivalentry_pgvector_hnsw"
                " ON memory_archivalentry_pgvector"
                " USING hnsw (embedding vector_cosine_ops)"
            )
            # Statistics of the loaded tables, as autovacuum would gather
            # soon after a bulk load: without them the planner may answer
            # the engine's permission check (a few dozen ids) by scanning
            # every entry.
            cur.execute(
                "ANALYZE memory_archivalentry_pgsearch,"
                " memory_archivalentry_pgvector, memory_archivalentry"
            )
        loaded += time.perf_counter() - t0
    allowed = ArchivalEntry.objects.filter(agent=agent)
    queries = [
        (" ".join(prng.choices(VOCAB, k=3)), vector) for vector in clustered(n_queries)
    ]

    def hybrid(text: str, vector: np.ndarray) -> Any:
        return search(
            ARCHIVAL_INDEX,
            text=text,
            allowed=allowed,
            scope_id=constellation.pk,
            owner_ids=[agent.pk],
            mode="hybrid",
            query_vector=lambda _text: vector,
        )

    for text, vector in queries[:10]:  # warm caches and statements
        hybrid(text, vector)
    times = []
    stages: dict[str, list[float]] = {}
    for text, vector in queries:
        t0 = time.perf_counter()
        outcome = hybrid(text, vector)
        times.append((time.perf_counter() - t0) * 1000)
        assert outcome.hits, "a hybrid search found nothing"
        for stage, ms in outcome.timings_ms.items():
            stages.setdefault(stage, []).append(ms)
    result = {
        "vendor": connection.vendor,
        "load_s": round(loaded, 1),
        "hybrid_p50_ms": round(pct(times, 50), 2),
        "hybrid_p95_ms": round(pct(times, 95), 2),
        "stages_p50_ms": {k: round(pct(v, 50), 2) for k, v in stages.items()},
    }
    if on_pg:
        from django.test.utils import CaptureQueriesContext

        from memory.search.engine import fts_candidates
        from memory.search.postgres import pg_vector_candidates
        from memory.search.query import fts_query

        found = 0
        for _text, vector in queries:
            args = {
                "vector": vector,
                "scope_id": constellation.pk,
                "owner_ids": [agent.pk],
                "k": 10,
            }
            exact = pg_vector_candidates(ARCHIVAL_INDEX, exact=True, **args)
            approx = pg_vector_candidates(ARCHIVAL_INDEX, **args)
            found += len({r for r, _d, _v in exact} & {r for r, _d, _v in approx})
        result["hnsw_recall_at_10"] = round(found / (10 * len(queries)), 4)
        with connection.cursor() as cur:
            cur.execute(
                "EXPLAIN SELECT row_id FROM memory_archivalentry_pgvector"
                " WHERE scope_id = %s AND owner_id = %s"
                " ORDER BY embedding <=> %s::vector LIMIT 20",
                [constellation.pk, agent.pk, "[" + ",".join(["0.1"] * DIM) + "]"],
            )
            result["plan_uses_hnsw"] = any("_hnsw" in r[0] for r in cur.fetchall())
        # The keyword query as the engine sends it, explained with what it
        # read: the GIN index, and the buffers of the text table.
        with CaptureQueriesContext(connection) as captured:
            fts_candidates(
                ARCHIVAL_INDEX,
                query=fts_query(queries[0][0]),
                scope_id=constellation.pk,
                owner_ids=[agent.pk],
                k=40,
            )
        with connection.cursor() as cur:
            cur.execute(
                "EXPLAIN (ANALYZE, BUFFERS) " + captured.captured_queries[-1]["sql"]
            )
            plan = [r[0] for r in cur.fetchall()]
        result["keyword_plan_uses_gin"] = any("_tsv" in line for line in plan)
        result["keyword_plan"] = plan
    return result


def run_child(vendor: str, args: argparse.Namespace) -> dict:
    from pattern_site.processes import throwaway_dir

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "pattern_site.settings.dev",
        "PATTERN_DEBUG": "false",
        "PATTERN_DATA_DIR": throwaway_dir("pattern-bench-scale-"),
        "PATTERN_CELERY_EAGER": "true",
    }
    env.pop("DATABASE_URL", None)
    command = [sys.executable, __file__, "--child", *sys.argv[1:]]
    if vendor == "postgresql":
        command = [sys.executable, "-m", "pattern_site.pgserver", *command]
    out = subprocess.run(
        command, env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"{vendor} run failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument(
        "--plans", action="store_true", help="print the keyword query's plan"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.size, args.queries, args.seed)))
        return
    results = {v: run_child(v, args) for v in ("sqlite", "postgresql")}
    print(f"hybrid search, {args.size:,} entries, {args.queries} queries")
    for vendor, r in results.items():
        print(
            f"  {vendor:<10} p50 {r['hybrid_p50_ms']:8.2f} ms"
            f"  p95 {r['hybrid_p95_ms']:8.2f} ms  (loaded in {r['load_s']} s)"
        )
        stages = ", ".join(f"{k} {v}" for k, v in r["stages_p50_ms"].items())
        print(f"  {'':<10} p50 by stage (ms): {stages}")
    ratio = results["postgresql"]["hybrid_p95_ms"] / results["sqlite"]["hybrid_p95_ms"]
    pg = results["postgresql"]
    print(f"  p95 PostgreSQL / SQLite: {ratio:.2f} (target <= 2)")
    print(
        f"  HNSW recall@10 against exact: {pg['hnsw_recall_at_10']:.3f}"
        f" (target >= 0.95); plan uses HNSW: {pg['plan_uses_hnsw']}"
    )
    print(f"  keyword plan uses the GIN index: {pg['keyword_plan_uses_gin']}")
    if args.plans:
        print(
            "\n".join(
                ["  keyword query, EXPLAIN (ANALYZE, BUFFERS):"]
                + [f"    {line}" for line in pg["keyword_plan"]]
            )
        )


if __name__ == "__main__":
    main()
