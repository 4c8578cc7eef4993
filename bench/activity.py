"""Benchmark the activity stream: the cost of recording on block appends,
the catch-up digest and keyword search over 100,000 events.

1. Block appends (``memory.blocks.services.block_append``) with recording on and
   off in the same run, rounds interleaved so a slow spell of the machine
   falls on both.  Until memory's block services call ``activity_record``
   themselves, the bench makes that call after each append, in the same
   transaction, with the details the hook will send; once they do (detected
   at start), the bench measures the append alone.  Recording is switched
   with ``activity_recording(enabled=...)``, the events batched as
   configured (``ACTIVITY_BATCH_SIZE``).
2. ``catch_up_build`` p50/p95 for an agent away 1 day and 7 days, with
   ``--events`` events (default 100,000) over 30 days in the constellation.
3. ``activity_search`` p50/p95 over the same events, for common and rare
   words, and ``recent_activity_render`` p95 for reference.

    .venv/bin/python bench/activity.py [--events 100000] [--appends 2000]
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pattern_site.processes import (
    SOLO_WORKER_OPTIONS,
    celery_worker_command,
    throwaway_dir,
)

DATA_DIR = throwaway_dir("pattern-bench-activity-")
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "pattern_site.settings.dev",
        "PATTERN_DATA_DIR": DATA_DIR,
        "PATTERN_DEBUG": "false",
        # Batches of events go to a real worker (started below), as in
        # production: its work competes for this machine's cores.
        "PATTERN_CELERY_EAGER": "false",
        "PATTERN_LOG_LEVEL": "WARNING",
    }
)
os.environ.pop("DATABASE_URL", None)

import django

django.setup()

from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from activity.stream.context import recent_activity_render
from activity.stream.models import ActivityEvent, EventType
from activity.stream.recorder import recorder
from activity.stream.selectors import activity_search
from activity.stream.services import (
    PendingEvent,
    activity_events_store,
    activity_flush,
    activity_record,
    activity_recording,
)
from activity.summaries.digest import catch_up_build
from memory.blocks.services import block_append, block_create
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    constellation_create,
    user_get_or_create,
)

WORDS = [
    "tax",
    "forms",
    "medication",
    "bluesky",
    "rust",
    "async",
    "thread",
    "partner",
    "schedule",
    "water",
    "reminder",
    "project",
    "archive",
    "summary",
    "energy",
    "focus",
    "habit",
    "dentist",
    "email",
    "employer",
    "statement",
    "morning",
    "evening",
    "review",
    "tone",
    "policy",
    "refactor",
    "memory",
]


def line(name: str, value: str, target: str, ok: bool | None = None) -> None:
    mark = "" if ok is None else ("  ok" if ok else "  MISSED")
    print(f"{name:<58} {value:>14}   target {target}{mark}")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def memory_records_appends(agent, block) -> bool:
    """Whether block_append already records its event (the lead's hook)."""
    activity_flush()
    with transaction.atomic():
        block_append(actor=Actor.for_agent(agent), block=block, content="probe")
    return recorder().pending() > 0


def stored_appends() -> int:
    # The block's own creation is an update event too; only appends count.
    return (
        ActivityEvent.objects.filter(event_type=EventType.MEMORY_BLOCK_UPDATED)
        .exclude(details__change_type="create")
        .count()
    )


def wait_stored(expected: int, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stored_appends() >= expected:
            return True
        time.sleep(0.2)
    return False


def start_worker() -> subprocess.Popen:
    return subprocess.Popen(
        celery_worker_command(*SOLO_WORKER_OPTIONS, "--loglevel", "WARNING"),
        cwd=ROOT,
        env=os.environ.copy(),
    )


def append_rounds(append, appends: int) -> tuple[list[float], list[float]]:
    """Appends with recording on and off, in interleaved rounds."""
    rounds, per_round = 10, max(1, appends // 10)
    on: list[float] = []
    off: list[float] = []
    n = 0
    for _ in range(rounds):
        for enabled, out in ((True, on), (False, off)):
            with activity_recording(enabled=enabled):
                for _ in range(per_round):
                    started = time.perf_counter()
                    append(n)
                    out.append(time.perf_counter() - started)
                    n += 1
    activity_flush()
    return on, off


def report(title: str, on: list[float], off: list[float], target: bool) -> None:
    mean_on, mean_off = statistics.fmean(on), statistics.fmean(off)
    med_on, med_off = statistics.median(on), statistics.median(off)
    line(
        f"{title}: off, mean/median (ms)",
        f"{mean_off * 1e3:.3f}/{med_off * 1e3:.3f}",
        "reference",
    )
    line(
        f"{title}: on, mean/median (ms)", f"{mean_on * 1e3:.3f}/{med_on * 1e3:.3f}", ""
    )
    slower = mean_on / mean_off - 1
    line(
        f"{title}: overhead of the mean",
        f"{slower * 100:+.1f}%",
        "<= 10%" if target else "reference",
        slower <= 0.10 if target else None,
    )
    line(
        f"{title}: overhead of the median",
        f"{(med_on / med_off - 1) * 100:+.1f}%",
        "reference",
    )


def bench_appends(agent, appends: int) -> None:
    """Phase 1: the web process alone (the worker is stopped, batches wait
    in the broker): what recording costs the writer.  Phase 2: the worker
    stores the batches while the appends run: the writer also waits for
    the database's single write lock whenever the worker holds it."""
    block = block_create(
        actor=Actor.system(), owner=agent, label="bench_notes", char_limit=10**7
    )
    actor = Actor.for_agent(agent)
    hooked = memory_records_appends(agent, block)
    activity_flush()
    how = "block_append records" if hooked else "hook applied by the bench"
    print(f"block appends ({how}), {appends} with recording on and off")

    def append(n: int) -> None:
        with transaction.atomic():
            block_append(actor=actor, block=block, content=f"note {n}")
            if not hooked:
                activity_record(
                    actor=actor,
                    event_type=EventType.MEMORY_BLOCK_UPDATED,
                    details={
                        "label": block.label,
                        "change_type": "append",
                        "summary": f"note {n}",
                    },
                )

    on, off = append_rounds(append, appends)
    report("web process alone", on, off, target=True)
    worker = start_worker()
    try:
        on2, off2 = append_rounds(append, appends)
        report("worker storing meanwhile", on2, off2, target=False)
        expected = len(on) + len(on2) + (1 if hooked else 0)
        wait_stored(expected)
    finally:
        worker.terminate()
        worker.wait(30)
    line(
        "events of the recorded appends stored by the worker",
        f"{stored_appends():,}/{expected:,}",
        "all",
        stored_appends() == expected,
    )


def seed_events(constellation, agents, partner, n: int) -> None:
    rng = random.Random(7)
    now = timezone.now()
    kinds = [
        (EventType.MESSAGE_SENT, 0.3),
        (EventType.MESSAGE_RECEIVED, 0.3),
        (EventType.TOOL_EXECUTED, 0.2),
        (EventType.MEMORY_BLOCK_UPDATED, 0.15),
        (EventType.NOTABLE, 0.05),
    ]
    types, weights = zip(*kinds, strict=True)
    started = time.perf_counter()
    batch: list[PendingEvent] = []
    for i in range(n):
        kind = rng.choices(types, weights)[0]
        agent = rng.choice(agents)
        human = rng.random() < 0.05
        words = " ".join(rng.sample(WORDS, 4)) + f" item{i}"
        details = {
            "target": "Partner",
            "source": "Partner",
            "summary": words,
            "tool": "recall",
            "label": "notes",
            "change_type": "append",
            "description": words,
        }
        batch.append(
            PendingEvent(
                constellation_id=constellation.pk,
                agent_id=agent.pk,
                actor_user_id=partner.pk if human else None,
                who="partner" if human else agent.name,
                subject=agent.name,
                event_type=kind,
                details=details,
                importance=rng.choice(["low", "low", "medium", "high"]),
                at=now - timedelta(seconds=rng.uniform(0, 30 * 86400)),
            )
        )
        if len(batch) == 5000:
            activity_events_store(batch)
            batch = []
    if batch:
        activity_events_store(batch)
    line(
        f"seeded {n:,} events (events/s, bulk store)",
        f"{n / (time.perf_counter() - started):,.0f}",
        "reference",
    )


def timed(fn, runs: int) -> list[float]:
    fn()  # warm caches and compiled statements
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def bench_reads(agents, constellation, events: int, runs: int) -> None:
    agent = agents[0]
    now = timezone.now()
    for days in (1, 7):
        times = timed(
            lambda d=days: catch_up_build(
                agent=agent, since=now - timedelta(days=d), now=now
            ),
            runs,
        )
        line(
            f"catch-up digest, {days} day(s) away, {events:,} events (ms p50/p95)",
            f"{pct(times, 0.5) * 1e3:.1f}/{pct(times, 0.95) * 1e3:.1f}",
            "p95 <= 20 ms",
            pct(times, 0.95) <= 0.020,
        )
    rng = random.Random(3)
    queries = [rng.choice(WORDS) for _ in range(runs // 2)] + [
        f"{rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(runs // 2)
    ]
    queries += [f"item{rng.randrange(events)}" for _ in range(runs // 2)]
    it = iter(queries * 2)
    # As an agent reads it: the visibility rule of each event is part of it.
    reader = Actor.for_agent(agent)
    times = timed(
        lambda: activity_search(
            actor=reader, constellation=constellation, query=next(it)
        ),
        len(queries),
    )
    line(
        f"activity search, {events:,} events (ms p50/p95)",
        f"{pct(times, 0.5) * 1e3:.1f}/{pct(times, 0.95) * 1e3:.1f}",
        "p95 <= 20 ms",
        pct(times, 0.95) <= 0.020,
    )
    times = timed(lambda: recent_activity_render(agent), runs)
    line(
        "<recent_activity> render (ms p50/p95)",
        f"{pct(times, 0.5) * 1e3:.1f}/{pct(times, 0.95) * 1e3:.1f}",
        "reference",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    partner, _ = user_get_or_create(username="bench-partner")
    constellation = constellation_create(name="Bench", partner=partner)
    agents = [
        agent_create(constellation=constellation, name=name)[0]
        for name in ("Pattern", "Entropy", "Flux", "Momentum", "Anchor", "Archive")
    ]
    activity_flush()
    print(f"data dir {DATA_DIR}")
    bench_appends(agents[1], args.appends)
    seed_events(constellation, agents, partner, args.events)
    bench_reads(agents, constellation, args.events, args.runs)


if __name__ == "__main__":
    main()
