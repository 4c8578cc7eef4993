"""Embeddings/s through the Celery path vs fastembed directly, same run.

Celery path: 2,000 archival entries are written in one transaction; on
commit their embedding tasks are enqueued (batches of
``EMBEDDING_BATCH_SIZE``) and a real ``celery worker`` process (solo pool,
model already loaded by a warm-up task) embeds them and stores the
vectors.  The clock runs from the commit to the moment every vector is
stored.  Direct: the same texts through ``memory.embeddings.embed_texts``
and through fastembed's own ``TextEmbedding.embed`` in this process.  A
throwaway database and broker directory are used (never var/).

    .venv/bin/python bench/embed.py [--texts 2000] [--broker redis://...]
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
_tmp = tempfile.mkdtemp(prefix="pattern-bench-embed-")
os.environ["PATTERN_DATA_DIR"] = _tmp
os.environ["DATABASE_URL"] = f"sqlite:///{_tmp}/bench.sqlite3"
os.environ["DJANGO_SETTINGS_MODULE"] = "pattern_site.settings.dev"
os.environ["PATTERN_DEBUG"] = "false"
os.environ["PATTERN_CELERY_EAGER"] = "false"

from pattern_site.processes import (  # noqa: E402
    SOLO_WORKER_OPTIONS,
    celery_worker_command,
)

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
    from memory.embeddings import embed_texts, embedding_model, embedding_status
    from memory.models import ArchivalEntry, EmbeddingState
    from memory.services import archival_entry_create

    status = embedding_status()
    if not status.available:
        sys.exit(f"no embedding model: {status.reason}")
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create(username="bench")
    constellation = Constellation.objects.create(name="bench", partner=user)
    agent = Agent.objects.create(constellation=constellation, name="bench")
    corpus = texts(args.texts)
    print(f"throwaway database in {_tmp}; broker {settings.CELERY_BROKER_URL}")

    # Direct, in this process (the model loads before the clock starts).
    # Measured before and after the Celery run: the machine's load drifts.
    embedding_model()
    embed_texts(corpus[:64])

    def direct_rate() -> float:
        t0 = time.perf_counter()
        vectors = embed_texts(corpus)
        return len(vectors) / (time.perf_counter() - t0)

    direct_before = direct_rate()
    t0 = time.perf_counter()
    raw = list(embedding_model().embed(corpus))
    fastembed_default = len(raw) / (time.perf_counter() - t0)

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    worker = subprocess.Popen(
        celery_worker_command(*SOLO_WORKER_OPTIONS, "--loglevel", "WARNING"),
        cwd=ROOT,
        env=env,
        stdout=open(Path(_tmp) / "worker.log", "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )
    try:

        def wait_ready(count: int, timeout: float) -> None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                ready = ArchivalEntry.objects.filter(
                    embedding_state=EmbeddingState.READY
                ).count()
                if ready >= count:
                    return
                time.sleep(0.1)
            raise TimeoutError(
                f"only {ready} of {count} vectors after {timeout} s;"
                f" see {_tmp}/worker.log"
            )

        archival_entry_create(agent=agent, content="warm-up: load the model")
        wait_ready(1, 120)
        with transaction.atomic():
            for text in corpus:
                archival_entry_create(agent=agent, content=text)
            t0 = time.perf_counter()
        wait_ready(len(corpus) + 1, 600)
        through_celery = len(corpus) / (time.perf_counter() - t0)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    direct_after = direct_rate()
    direct = (direct_before + direct_after) / 2

    print(f"texts: {len(corpus)}, batch size {settings.EMBEDDING_BATCH_SIZE}")
    print(f"{'path':44} {'embeddings/s':>12}")
    print(f"{'fastembed direct (embed_texts), before':44} {direct_before:12.1f}")
    print(f"{'fastembed direct (embed_texts), after':44} {direct_after:12.1f}")
    label = "fastembed direct (TextEmbedding.embed default)"
    print(f"{label:44} {fastembed_default:12.1f}")
    print(f"{'Celery: commit -> all vectors stored':44} {through_celery:12.1f}")
    print(f"Celery / direct: {through_celery / direct:.2f}x (target >= 0.9x)")


if __name__ == "__main__":
    main()
