"""Day one hundred: a six-agent constellation used every day for 100 days,
in compressed time, with consolidation running on its schedule.

Rates per simulated day (``--scale`` multiplies them; at least one of each):
300 block edits (a line appended to an agent's notes block, the block cut
back to its last lines when it passes 4,000 characters, as an agent keeps
a block under its limit), 150 archival inserts of which 20% are planted
near-duplicates of a live entry of the same agent, 40 conversations of 20
messages (each with two working notes, archived at the end of the day),
30 tasks (created, started and completed by their agent) and 10 group
runs (round robin over the six agents, every delivery answered).  The day
runs in four quarters; after each, the new rows are dated to that moment
of the simulated day and consolidation (``archival_consolidate``, every
6 hours as ``PATTERN_ARCHIVAL_CONSOLIDATION_HOURS`` schedules it) runs over
each agent and the constellation with its clock moved there.

Reported at day 1, 10, 50 and 100 (those within ``--days``, and the last
day): database size, p95 of context build, search and block append (60
timed calls each, on that day, beside the day's work, each beside a call
of a fixed reference workload whose data never grows), entries by state.
Checked at the end: no write refused for size; last-day p95s within 1.5x
of day 10, once the reference's own ratio (the machine's) is divided
out; at least 90% of planted duplicates merged and no two distinct facts
merged; every superseded entry restorable (restored in a transaction
rolled back afterwards); database growth per day in the second half no
more than 1.1x that of days 10-50 (linear or better).

Planted duplicates are the original re-cased, re-spaced and
re-punctuated.  Consolidation compares vectors (cosine above 0.95) when
the embedding model is installed, and texts (the same words) always; the
output says whether vectors took part.

    .venv/bin/python bench/day100.py            # 100 days at full rates
    .venv/bin/python bench/day100.py --quick    # 12 days at 0.1x
    .venv/bin/python bench/day100.py --days 30 --scale 0.25
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.common import django_setup, line, percentile

# Consolidation decides by the rules: no LLM in a benchmark.
os.environ["LLM_BASE_URL"] = ""
DATA_DIR = django_setup("pattern-bench-day100-")

import numpy as np
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone
from loro import ExportMode, LoroDoc

from coordination.groups.services import (
    delivery_complete,
    delivery_take,
    group_create,
    group_member_add,
    group_message_route,
)
from coordination.work.services import task_create, task_status_set
from memory.blocks.selectors import block_value
from memory.blocks.services import block_append, block_create, block_rewrite
from memory.context import context_build
from memory.longterm.access import archival_access_flush, archival_access_record_later
from memory.longterm.consolidation import archival_consolidate
from memory.longterm.indexes import ARCHIVAL_INDEX
from memory.longterm.search import memory_search
from memory.longterm.services import (
    archival_entry_create,
    archival_entry_restore,
    conversation_set_status,
    conversation_start,
    messages_append,
)
from memory.models import ArchivalEntry, Conversation, Message
from memory.scratchpad.services import scratchpad_write
from memory.search.embedder import embedding_status
from memory.search.index import index_vectors
from memory.search.pipeline import embedding_flush
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.services import (
    agent_create,
    constellation_create,
    user_get_or_create,
)
from pattern_site.kernel.errors import ApplicationError, LimitExceeded

RATES = {
    "block_edits": 300,
    "archival_inserts": 150,
    "conversations": 40,
    "tasks": 30,
    "group_runs": 10,
}
MESSAGES_PER_CONVERSATION = 20
DUPLICATE_SHARE = 0.2
CHECKPOINTS = (1, 10, 50, 100)
TIMED_CALLS = 150
QUARTERS = 4
BLOCK_KEEP_CHARS = 4000

# Distinct facts differ in several slots, as two facts an agent learns do.
PEOPLE = [
    "Sam", "Maya", "Jonas", "Priya", "Lena", "Omar", "Chen", "Ines", "Tomas",
    "Aiko", "Ravi", "Noor", "Felix", "Greta", "Kofi", "Lucia",
]  # fmt: skip
TEMPLATES = [
    "{p} prefers {o} when {c}.",
    "{p} asked to be reminded about {o} {c}.",
    "The team agreed that {o} is handled by {p} {c}.",
    "{p} dislikes {o}, especially {c}.",
    "{p} keeps the notes on {o} in the shared folder, updated {c}.",
    "For {o}, {p} wants a short summary {c}.",
    "{p} is learning about {o} and practises {c}.",
    "{p} booked {o} for the office {c}.",
]
OBJECTS = [
    "green tea", "the quarterly budget", "the Berlin trip", "oat milk",
    "the dentist appointment", "the garden shed", "the new laptop",
    "Spanish lessons", "the board meeting", "the server migration",
    "the marathon training plan", "the tax return", "the wedding playlist",
    "the kitchen renovation", "the chess club", "the insurance renewal",
    "the book club novel", "the car service", "the hiring pipeline",
    "the piano recital", "the solar panels", "the vaccination records",
    "the product launch", "the birthday party", "the mortgage paperwork",
]  # fmt: skip
CONTEXTS = [
    "every Monday morning", "before long flights", "during the winter",
    "after lunch on Fridays", "at the end of each month", "on rainy weekends",
    "when the deadline is close", "in the evenings", "twice a year",
    "before any client call", "while travelling abroad", "on public holidays",
]  # fmt: skip
WORDS = [
    "plan", "report", "budget", "trip", "tea", "meeting", "garden", "laptop",
]  # fmt: skip


def fact_text(rng: random.Random) -> str:
    template = rng.choice(TEMPLATES)
    return template.format(
        p=rng.choice(PEOPLE), o=rng.choice(OBJECTS), c=rng.choice(CONTEXTS)
    )


def near_duplicate(text: str, rng: random.Random) -> str:
    """``text`` as an agent might note the same fact again: other case,
    spacing and punctuation."""
    words = text.split()
    words = [w.upper() if rng.random() < 0.15 else w for w in words]
    if rng.random() < 0.5:
        words[0] = words[0].lower()
    variant = "  ".join(words) if rng.random() < 0.5 else " ".join(words) + " "
    return variant.strip().rstrip(".") + rng.choice(["", "!", " .", "."])


class Reference:
    """The machine's speed at the moment of a measurement: a fixed piece of
    work of the same kinds as the measured calls (an FTS5 query over rows
    that never grow, a Loro edit exported as an update) timed beside every
    measured call.  On a shared machine a checkpoint's p95 moves with the
    load; the same-run reference moves with it and not with the data."""

    def __init__(self, rng: random.Random) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE facts USING fts5(body)")
        self.db.executemany(
            "INSERT INTO facts (body) VALUES (?)",
            [(fact_text(rng),) for _ in range(3000)],
        )
        self.doc = LoroDoc()
        self.text = self.doc.get_text("content")
        self.text.insert(0, "note: noted\n" * 300)
        self.doc.commit()
        self.queries = [f"{p} {o.split()[-1]}" for p in PEOPLE for o in OBJECTS]
        self.calls = 0

    def call(self) -> float:
        """One reference call; its time in ms."""
        self.calls += 1
        started = time.perf_counter()
        query = self.queries[self.calls % len(self.queries)]
        self.db.execute(
            "SELECT rowid, snippet(facts, 0, '', '', '...', 8) FROM facts"
            " WHERE facts MATCH ? ORDER BY bm25(facts) LIMIT 10",
            [" OR ".join(f'"{w}"' for w in query.split())],
        ).fetchall()
        before = self.doc.oplog_vv
        self.text.insert(self.text.len_unicode, "reference line\n")
        self.doc.commit()
        self.doc.export(ExportMode.Updates(before))
        self.text.delete(self.text.len_unicode - 15, 15)
        self.doc.commit()
        return (time.perf_counter() - started) * 1000


class Sim:
    def __init__(self, *, days: int, scale: float, seed: int) -> None:
        self.days, self.scale = days, scale
        self.rng = random.Random(seed)
        self.semantic = embedding_status().available
        self.start = timezone.now() - timedelta(days=days)
        self.refused_for_size: Counter[str] = Counter()
        self.refused_other: Counter[str] = Counter()
        self.planted: list[tuple[int, int]] = []  # (duplicate id, original id)
        self.fact_of: dict[int, int] = {}  # entry id -> fact number
        self.facts = 0
        self.fact_words: set[tuple[str, ...]] = set()
        self.report: dict[int, dict[str, Any]] = {}
        self.rows_dated = {"entries": 0, "messages": 0, "conversations": 0}
        self.reference = Reference(random.Random(seed + 1))

    # --- setup ---------------------------------------------------------
    def setup(self) -> None:
        call_command("migrate", verbosity=0)
        self.partner, _ = user_get_or_create(username="partner")
        self.human = Actor.for_user(self.partner)
        self.constellation = constellation_create(name="Day100", partner=self.partner)
        self.agents = [
            agent_create(constellation=self.constellation, name=name)[0]
            for name in ("Orchestrator", "Researcher", "Writer", "Critic", "Scribe",
                         "Planner")
        ]  # fmt: skip
        self.blocks = {
            a.pk: block_create(actor=Actor.system(), label="notes", owner=a, content="")
            for a in self.agents
        }
        self.group = group_create(
            constellation=self.constellation, name="Desk", pattern="round_robin"
        )
        for agent in self.agents:
            group_member_add(group=self.group, agent=agent)

    # --- one write, counted ---------------------------------------------
    def attempt(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except LimitExceeded as exc:
            self.refused_for_size[what] += 1
            if self.refused_for_size[what] == 1:
                print(f"  first {what} refused for size: {exc.message}")
        except ApplicationError as exc:
            self.refused_other[what] += 1
            if self.refused_other[what] == 1:
                print(f"  first {what} refused: {exc.message}")
        return None

    def count(self, rate: str, quarter: int) -> int:
        """This quarter's share of the day's ``rate``, scaled (at least one
        a day)."""
        per_day = max(1, round(RATES[rate] * self.scale))
        return per_day // QUARTERS + (1 if quarter < per_day % QUARTERS else 0)

    # --- the day's work ---------------------------------------------------
    def block_edit(self, agent: Any, timings: list[float] | None = None) -> None:
        block = self.blocks[agent.pk]
        actor = Actor.for_agent(agent)
        text = f"{self.rng.choice(WORDS)} {self.rng.choice(OBJECTS)}: noted"
        started = time.perf_counter()
        changed = self.attempt(
            "block append",
            lambda: block_append(actor=actor, block=block, content=text),
        )
        if timings is not None and changed is not None:
            timings.append((time.perf_counter() - started) * 1000)
        value = block_value(block=block)
        if isinstance(value, str) and len(value) > BLOCK_KEEP_CHARS:
            kept = value[-BLOCK_KEEP_CHARS // 2 :].split("\n", 1)[-1]
            self.attempt(
                "block rewrite",
                lambda: block_rewrite(actor=actor, block=block, content=kept),
            )

    def archival_insert(self, agent: Any) -> None:
        rng = self.rng
        # The agent notes again a fact it keeps (a recent one, live).
        live_originals = (
            list(
                ArchivalEntry.objects.filter(agent=agent, superseded_at__isnull=True)
                .order_by("-pk")
                .values_list("pk", "content")[:500]
            )
            if rng.random() < DUPLICATE_SHARE
            else []
        )
        if live_originals:
            original, content = rng.choice(live_originals)
            text = near_duplicate(content, rng)
            fact = self.fact_of[original]
        else:
            original, text, fact = None, self.new_fact_text(), self.facts
            self.facts += 1
        entry = self.attempt(
            "archival insert",
            lambda: archival_entry_create(
                agent=agent,
                content=text,
                importance=round(rng.uniform(0.3, 0.9), 2),
                metadata={"fact": fact},
            ),
        )
        if entry is None:
            return
        self.fact_of[entry.pk] = fact
        if original is not None:
            self.planted.append((entry.pk, original))

    def new_fact_text(self) -> str:
        """A fact no earlier fact states in the same words: two draws of
        the same slots are one fact, and merging them is right."""
        while True:
            text = fact_text(self.rng)
            words = tuple(re.findall(r"\w+", text.lower()))
            if words not in self.fact_words:
                self.fact_words.add(words)
                return text

    def conversation(self, agent: Any) -> None:
        conversation = conversation_start(agent=agent, title=fact_text(self.rng)[:60])
        messages = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": fact_text(self.rng),
            }
            for i in range(MESSAGES_PER_CONVERSATION)
        ]
        self.attempt(
            "messages",
            lambda: messages_append(conversation=conversation, messages=messages),
        )
        for key in ("findings", "next_step"):
            self.attempt(
                "scratchpad",
                lambda key=key: scratchpad_write(
                    conversation=conversation,
                    key=key,
                    value={"about": self.rng.choice(OBJECTS), "n": self.facts},
                ),
            )

    def task(self, agent: Any) -> None:
        actor = Actor.for_agent(agent)
        task = self.attempt(
            "task",
            lambda: task_create(
                actor=self.human,
                constellation=self.constellation,
                title=f"Look into {self.rng.choice(OBJECTS)}",
                assignee=agent,
            ),
        )
        for status in ("in_progress", "done"):
            if task is not None:
                task = self.attempt(
                    "task",
                    lambda s=status, t=task: task_status_set(
                        actor=actor, task=t, status=s
                    ),
                )

    def group_run(self) -> None:
        self.attempt(
            "group run",
            lambda: group_message_route(
                actor=self.human,
                group=self.group,
                message=f"Plan {self.rng.choice(OBJECTS)} {self.rng.choice(CONTEXTS)}",
            ),
        )
        for agent in self.agents:
            for delivery in delivery_take(agent=agent):
                self.attempt(
                    "group run",
                    lambda d=delivery: delivery_complete(delivery=d, text="Done."),
                )

    def searched(self, agent: Any, timings: list[float] | None = None) -> None:
        query = f"{self.rng.choice(PEOPLE)} {self.rng.choice(OBJECTS)}"
        started = time.perf_counter()
        result = memory_search(
            actor=Actor.for_agent(agent), query=query, domain="archival_memory"
        )
        if timings is not None:
            timings.append((time.perf_counter() - started) * 1000)
        # What an agent finds counts as a use (decay, promotion).
        archival_access_record_later(entry_ids=result.archival_ids[:3])

    # --- time -----------------------------------------------------------
    def date_new_rows(self, at: datetime, since_ids: dict[str, int]) -> None:
        """Rows written in this quarter were written at ``at`` (simulated)."""
        for name, model, column in (
            ("entries", ArchivalEntry, "created_at"),
            ("messages", Message, "created_at"),
            ("conversations", Conversation, "started_at"),
        ):
            self.rows_dated[name] += model.objects.filter(
                pk__gt=since_ids[name]
            ).update(**{column: at})
        # Uses recorded this quarter happened at ``at`` too.
        ArchivalEntry.objects.filter(accessed_at__gt=at).update(accessed_at=at)

    def last_ids(self) -> dict[str, int]:
        return {
            name: (model.objects.order_by("-pk").values_list("pk", flat=True).first()
                   or 0)
            for name, model in (
                ("entries", ArchivalEntry),
                ("messages", Message),
                ("conversations", Conversation),
            )
        }  # fmt: skip

    def consolidate(self, now: datetime) -> None:
        for agent in self.agents:
            archival_consolidate(agent=agent, now=now)
        archival_consolidate(constellation=self.constellation, now=now)

    def day(self, number: int) -> None:
        rng = self.rng
        measure = number in CHECKPOINTS or number == self.days
        timings: dict[str, list[float]] = {
            "context": [],
            "search": [],
            "append": [],
            "reference": [],
        }
        day_start = self.start + timedelta(days=number - 1)
        for quarter in range(QUARTERS):
            since = self.last_ids()
            for _ in range(self.count("block_edits", quarter)):
                self.block_edit(rng.choice(self.agents))
            for _ in range(self.count("archival_inserts", quarter)):
                self.archival_insert(rng.choice(self.agents))
            for _ in range(self.count("conversations", quarter)):
                self.conversation(rng.choice(self.agents))
            for _ in range(self.count("tasks", quarter)):
                self.task(rng.choice(self.agents))
            for _ in range(self.count("group_runs", quarter)):
                self.group_run()
            for _ in range(max(1, round(10 * self.scale))):
                self.searched(rng.choice(self.agents))
            if measure and quarter == QUARTERS - 1:
                for i in range(TIMED_CALLS):
                    agent = self.agents[i % len(self.agents)]
                    started = time.perf_counter()
                    context_build(agent=agent)
                    timings["context"].append((time.perf_counter() - started) * 1000)
                    self.searched(agent, timings["search"])
                    self.block_edit(agent, timings["append"])
                    timings["reference"].append(self.reference.call())
            embedding_flush()
            archival_access_flush()
            at = day_start + timedelta(hours=6 * (quarter + 1)) - timedelta(minutes=1)
            self.date_new_rows(at, since)
            self.consolidate(at + timedelta(seconds=30))
        for conversation in Conversation.objects.filter(
            constellation=self.constellation, status="active"
        ):
            conversation_set_status(conversation=conversation, status="archived")
        if measure:
            self.report[number] = {
                "db_bytes": db_bytes(),
                "tables": table_bytes(),
                "p95": {k: percentile(v, 0.95) for k, v in timings.items() if v},
                "states": entry_states(),
            }

    # --- checks ---------------------------------------------------------
    def duplicates_merged(self) -> tuple[int, int]:
        """(planted pairs merged, distinct facts merged): a pair is merged
        when both ends lead, through ``superseded_by``, to one live entry."""
        rows = {
            pk: (by, reason, meta.get("fact"))
            for pk, by, reason, meta in ArchivalEntry.objects.values_list(
                "pk", "superseded_by", "superseded_reason", "metadata"
            )
        }

        def root(pk: int) -> int:
            seen = set()
            while rows[pk][0] is not None and rows[pk][1] == "merged":
                if pk in seen:
                    break
                seen.add(pk)
                pk = rows[pk][0]
            return pk

        missed = [(d, o) for d, o in self.planted if root(d) != root(o)]
        for dup, original in missed[:5]:
            explain_pair("missed pair", dup, original)
        merged = len(self.planted) - len(missed)
        wrong = [
            (pk, by)
            for pk, (by, reason, fact) in rows.items()
            if reason == "merged" and by is not None and rows[by][2] != fact
        ]
        for pk, by in wrong[:5]:
            explain_pair("distinct facts merged", pk, by)
        return merged, len(wrong)

    def restorable(self) -> tuple[int, int]:
        """(superseded entries, those restored without error), in a
        transaction rolled back afterwards."""
        superseded = list(ArchivalEntry.objects.filter(superseded_at__isnull=False))
        restored = 0
        with transaction.atomic():
            for entry in superseded:
                try:
                    with transaction.atomic():
                        entry = archival_entry_restore(entry=entry)
                except ApplicationError as exc:
                    print(f"  entry {entry.pk} not restorable: {exc.message}")
                    continue
                restored += entry.superseded_at is None
            transaction.set_rollback(True)
        return len(superseded), restored


def explain_pair(what: str, dup: int, original: int) -> None:
    """Print a pair consolidation decided wrongly (a planted pair left
    apart, two facts merged): texts, states, cosine."""
    entries = ArchivalEntry.objects.in_bulk([dup, original])
    vectors = index_vectors(ARCHIVAL_INDEX, row_ids=[dup, original])
    cosine = "no vectors"
    if len(vectors) == 2:
        a, b = vectors[dup], vectors[original]
        cosine = f"{float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))):.3f}"
    print(f"  {what} (cosine {cosine}):")
    for pk in (original, dup):
        e = entries[pk]
        state = e.superseded_reason or e.lifetime
        print(f"    {pk} [{state}, {e.embedding_state}] {e.content!r}")


def db_bytes() -> int:
    """The site's database files (the search indexes live in it)."""
    with connection.cursor() as cur:
        cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(
        path.stat().st_size
        for path in Path(DATA_DIR).rglob("*")
        if path.is_file() and "models" not in path.parts
    )


def table_bytes() -> dict[str, int]:
    """Bytes per table and index (SQLite's dbstat; empty elsewhere)."""
    if connection.vendor != "sqlite":
        return {}
    with connection.cursor() as cur:
        cur.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
        return dict(cur.fetchall())


def growth_by_table(report: dict[int, dict[str, Any]], a: int, b: int, c: int) -> None:
    """The tables that grew most per day in the last span, beside the span
    before: where a growth faster than linear comes from."""
    t = {d: report[d]["tables"] for d in (a, b, c)}

    def rate(name: str, x: int, y: int) -> float:
        return (t[y].get(name, 0) - t[x].get(name, 0)) / (y - x)

    names = sorted(t[c], key=lambda n: -rate(n, b, c))[:8]
    for name in names:
        early, late = rate(name, a, b), rate(name, b, c)
        ratio = f"{late / early:.2f}x" if early > 0 else "new"
        print(
            f"    {name[:44]:<44} {early / 1e3:>7.1f} -> {late / 1e3:>7.1f} KB/day"
            f"  {ratio}"
        )


def chunk_bytes(row: dict[str, Any]) -> int:
    return sum(v for k, v in row["tables"].items() if "_vector_chunks" in k)


def entry_states() -> dict[str, int]:
    states: Counter[str] = Counter()
    for lifetime, reason in ArchivalEntry.objects.values_list(
        "lifetime", "superseded_reason"
    ):
        states[f"superseded:{reason}" if reason else lifetime] += 1
    return dict(sorted(states.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="12 days at 0.1x")
    args = parser.parse_args()
    if args.quick:
        args.days, args.scale = 12, 0.1
    sim = Sim(days=args.days, scale=args.scale, seed=args.seed)
    per_day = {k: max(1, round(v * args.scale)) for k, v in RATES.items()}
    if args.days < 1 or args.scale <= 0:
        sys.exit("--days is at least 1 and --scale above 0")
    print(
        f"{args.days} days, scale {args.scale:g}; per day: {per_day['block_edits']}"
        f" block edits, {per_day['archival_inserts']} archival inserts"
        f" ({DUPLICATE_SHARE:.0%} planted near-duplicates),"
        f" {per_day['conversations']} conversations of {MESSAGES_PER_CONVERSATION}"
        f" messages, {per_day['tasks']} tasks, {per_day['group_runs']} group runs;"
        " consolidation every 6 h"
    )
    print(
        "duplicates decided by: "
        + (
            "embeddings (the installed model; cosine > 0.95) and the same words"
            if sim.semantic
            else "the exact-text fallback (the same words; no embedding model)"
        )
    )
    sim.setup()
    began = time.perf_counter()
    for number in range(1, args.days + 1):
        sim.day(number)
        if number in sim.report:
            print(f"  day {number} done ({time.perf_counter() - began:.0f} s)")
    elapsed = time.perf_counter() - began

    print()
    print(f"{'day':>4} {'db MB':>8} {'context p95':>12} {'search p95':>11}"
          f" {'append p95':>11} {'reference p95':>14}   entries by state")  # fmt: skip
    for number, row in sorted(sim.report.items()):
        p95 = row["p95"]
        states = ", ".join(f"{k} {v}" for k, v in row["states"].items())
        print(
            f"{number:>4} {row['db_bytes'] / 1e6:>8.1f} {p95['context']:>9.1f} ms"
            f" {p95['search']:>8.1f} ms {p95['append']:>8.1f} ms"
            f" {p95['reference']:>11.2f} ms   {states}"
        )
    print()
    refused = sum(sim.refused_for_size.values())
    line(
        "writes refused for size",
        str(refused) + (f" {dict(sim.refused_for_size)}" if refused else ""),
        "0",
        refused == 0,
    )
    if sim.refused_other:
        line("writes refused otherwise", str(dict(sim.refused_other)), "(info)")
    last = max(sim.report)
    base = 10 if 10 in sim.report and last != 10 else min(sim.report)
    # The machine's own slowdown between the two days (the reference's
    # p95 ratio) is divided out: what is left is what the data's growth
    # costs.  Both ratios are printed.
    p95 = {day: sim.report[day]["p95"] for day in (base, last)}
    machine = p95[last]["reference"] / p95[base]["reference"]
    line(f"machine (reference p95), day {last} / day {base}", f"{machine:.2f}x",
         "reference")  # fmt: skip
    for name in ("context", "search", "append"):
        ratio = p95[last][name] / p95[base][name]
        line(f"{name} p95, day {last} / day {base}, over the machine's",
             f"{ratio:.2f}x / {machine:.2f} = {ratio / machine:.2f}x", "<= 1.5x",
             ratio / machine <= 1.5)  # fmt: skip
    merged, wrong = sim.duplicates_merged()
    planted = len(sim.planted)
    share = merged / planted if planted else 1.0
    line("planted near-duplicates merged", f"{merged}/{planted} {share:.0%}",
         ">= 90%", share >= 0.9)  # fmt: skip
    line("distinct facts merged", str(wrong), "0", wrong == 0)
    total, restored = sim.restorable()
    line("superseded entries restorable", f"{restored}/{total}", "all",
         restored == total)  # fmt: skip
    days = sorted(sim.report)
    if len(days) >= 3:
        a, b, c = days[-3], days[-2], days[-1]
        # sqlite-vec allocates a vector table's space 1,024 vectors at a
        # time: a chunk allocated late in a small run reads as growth faster
        # than linear.  Its bytes are shown apart, the rest is checked.
        size = {d: sim.report[d]["db_bytes"] - chunk_bytes(sim.report[d]) for d in days}
        early = (size[b] - size[a]) / (b - a)
        late = (size[c] - size[b]) / (c - b)
        ratio = late / early if early > 0 else 0.0
        line(
            f"db growth/day, days {b}-{c} / days {a}-{b}",
            f"{ratio:.2f}x",
            "<= 1.1x (linear or better)",
            ratio <= 1.1,
        )
        chunks = {d: chunk_bytes(sim.report[d]) / 1e6 for d in (a, b, c)}
        print(
            "    besides: vec0 vector chunks (allocated 1,024 vectors at a time)"
            f" {chunks[a]:.1f} / {chunks[b]:.1f} / {chunks[c]:.1f} MB"
            f" at days {a} / {b} / {c}"
        )
        growth_by_table(sim.report, a, b, c)
    print(f"\nsimulated {args.days} days in {elapsed:.0f} s; load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
