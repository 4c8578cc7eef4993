"""Embeddings/s through the Celery path vs fastembed directly, same run.

Celery path: 2,000 archival entries are written in one transaction; on
commit their embedding tasks are enqueued (batches of
``EMBEDDING_BATCH_SIZE``) and a real ``celery worker`` process (solo pool,
model loaded and warmed up by 64 texts first) embeds them and stores the
vectors.  The clock runs from the commit to the moment every vector is
stored.  Direct: the same texts through ``memory.search.embedder.embed_texts``
in this process, measured before and after each Celery round (the
machine is shared and its load drifts); the ratio of a round is Celery
over the mean of the two.  Three rounds by default, each printed, and
their median ratio.  Also fastembed's own ``TextEmbedding.embed`` once.  A
throwaway database and broker directory are used (never var/).

    .venv/bin/python bench/embed.py [--texts 2000] [--rounds 3]
        [--broker redis://...]
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pattern_site.processes import (
    SOLO_WORKER_OPTIONS,
    celery_worker_command,
    throwaway_dir,
)

_tmp = throwaway_dir("pattern-bench-embed-")
os.environ["PATTERN_DATA_DIR"] = _tmp
os.environ["DATABASE_URL"] = f"sqlite:///{_tmp}/bench.sqlite3"
os.environ["DJANGO_SETTINGS_MODULE"] = "pattern_site.settings.dev"
os.environ["PATTERN_DEBUG"] = "false"
os.environ["PATTERN_CELERY_EAGER"] = "false"


_WORDS_TEXT = """
partner meeting coffee train budget garden sister doctor invoice flight recipe
server deploy ticket concert marathon rent tax plants dog walk morning evening
project deadline holiday birthday book music paint
"""
WORDS = _WORDS_TEXT.split()


def texts(n: int) -> list[str]:
    rng = random.Random(5)
    return [
        f"Note {i}: the {' '.join(rng.choices(WORDS, k=rng.randint(5, 12)))}."
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--broker", default="")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker-loglevel", default="WARNING")
    args = parser.parse_args()
    if args.broker:
        os.environ["PATTERN_CELERY_BROKER_URL"] = args.broker

    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction

    from coordination.models import Agent, Constellation
    from memory.longterm.services import archival_entry_create
    from memory.models import ArchivalEntry, EmbeddingState
    from memory.search.embedder import embed_texts, embedding_model, embedding_status

    status = embedding_status()
    if not status.available:
        sys.exit(f"no embedding model: {status.reason}")
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create(username="bench")
    constellation = Constellation.objects.create(name="bench", partner=user)
    agent = Agent.objects.create(constellation=constellation, name="bench")
    corpus = texts(args.texts)
    print(f"throwaway database in {_tmp}; broker {settings.CELERY_BROKER_URL}")

    # Direct, in this process (the model loads and warms up on 64 texts
    # before any clock starts).  Measured before and after each Celery
    # round and averaged: the machine's load drifts.
    embedding_model()
    embed_texts(corpus[:64])

    def direct_rate() -> float:
        t0 = time.perf_counter()
        vectors = embed_texts(corpus)
        return len(vectors) / (time.perf_counter() - t0)

    t0 = time.perf_counter()
    raw = list(embedding_model().embed(corpus))
    fastembed_default = len(raw) / (time.perf_counter() - t0)

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    worker = subprocess.Popen(
        celery_worker_command(*SOLO_WORKER_OPTIONS, "--loglevel", args.worker_loglevel),
        cwd=ROOT,
        env=env,
        stdout=open(Path(_tmp) / "worker.log", "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )

    def wait_ready(count: int, timeout: float) -> None:
        """Until no entry is pending (one index probe per 20 ms), then
        check that ``count`` vectors are stored."""
        pending = ArchivalEntry.objects.filter(embedding_state=EmbeddingState.PENDING)
        deadline = time.monotonic() + timeout
        while pending.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{pending.count()} of {count} entries still pending after"
                    f" {timeout} s; see {_tmp}/worker.log"
                )
            time.sleep(0.02)
        ready = ArchivalEntry.objects.filter(
            embedding_state=EmbeddingState.READY
        ).count()
        if ready != count:
            raise RuntimeError(f"{ready} of {count} vectors; see {_tmp}/worker.log")

    def write(texts: list[str]) -> float:
        """Entries written in one transaction; the clock starts at commit."""
        with transaction.atomic():
            for text in texts:
                archival_entry_create(agent=agent, content=text)
            t0 = time.perf_counter()
        return t0

    rounds: list[tuple[float, float, float]] = []
    try:
        # The worker loads the model and warms up on 64 texts, like the
        # direct path, before any clock starts.
        write(corpus[:64])
        wait_ready(64, 120)
        stored = 64
        direct_before = direct_rate()
        for _round in range(args.rounds):
            t0 = write(corpus)
            stored += len(corpus)
            wait_ready(stored, 600)
            through_celery = len(corpus) / (time.perf_counter() - t0)
            direct_after = direct_rate()
            rounds.append((direct_before, through_celery, direct_after))
            direct_before = direct_after
    finally:
        worker.terminate()
        worker.wait(timeout=30)

    print(f"texts: {len(corpus)}, batch size {settings.EMBEDDING_BATCH_SIZE}")
    label = "fastembed direct (TextEmbedding.embed default)"
    print(f"{label:44} {fastembed_default:8.1f} embeddings/s")
    print(
        f"{'round':6} {'direct before':>14} {'Celery':>14} {'direct after':>14}"
        f" {'Celery / direct':>16}"
    )
    ratios = []
    for i, (before, celery, after) in enumerate(rounds, start=1):
        ratio = celery / ((before + after) / 2)
        ratios.append(ratio)
        print(f"{i:<6} {before:14.1f} {celery:14.1f} {after:14.1f} {ratio:15.2f}x")
    print(
        "Celery (commit -> all vectors stored) / direct (embed_texts, mean of"
        f" before and after), median of {len(ratios)} rounds:"
        f" {statistics.median(ratios):.2f}x (target >= 0.9x)"
    )


if __name__ == "__main__":
    main()
