"""Retrieval quality on a public conversational-memory eval, per search mode.

Loads ``../shared/eval/conversational/eval.json`` (conversations of turns
with ids and dates; questions with the ids of the turns that answer them),
stores each conversation as one agent's memory - archival entries by default,
or the messages of one conversation with ``--domain conversations`` - waits
for every embedding, asks every question in each mode and prints hit@5,
hit@10, recall@5, recall@10 and search p50/p95 per mode, then the same per
question category.  Conversations are split in two halves (even and odd
positions in the file): settings are to be chosen on ``dev`` and reported on
``test`` too, so nothing is tuned to single questions.

In-process by default (the services and ``memory_search``, as the API calls
them, embeddings computed in this process); ``--http`` stores and asks
through a live Daphne and a Celery worker started on the throwaway database,
with an agent token per conversation, timing whole HTTP requests.  A
throwaway data directory is used (never var/).

With ``--variant NAME:key=value,...`` (repeatable) the default mode is
also asked under other retrieval settings of the constellation (the fields
of ``RetrievalConfig``: fusion, keyword_weight, context_weight,
candidate_depth, rerank_enabled, time_weight, when_weight, late_weight),
each shown as a row ``auto:NAME``; the
plain modes run with the model's defaults.

With ``--reranker DIR|URL|llm`` the default mode is also asked with the
re-rank stage on (a cross-encoder ONNX directory, a ``/v1/rerank``
endpoint, or the configured LLM; over the top ``--rerank-depth`` fused
candidates), as a row ``auto:rerank-BACKEND``; its p50/p95 beside the
``auto`` row's is what the stage adds, and the searches where it failed
(and so answered in fusion order) are counted.  The quick form, to check a
backend works: ``--convs 1 --modes auto --reranker ...``.

Every search is asked at the time of its conversation's last turn
(``now``), so the dates a question names ("last week") are read as the
conversation's own (the time stage, ``time_weight``).  ``--two-queries``
adds a row ``auto:2q``: the question and its keyword-only form (stop
words left out) passed as two phrasings, fused into one ranking.  The
passages' vectors are kept in ``--embed-cache`` (a file keyed by each
text's hash; the model's vectors for the same text do not change), so a
second run embeds nothing.  ``--dump PATH`` writes each answer (row,
half, category, question, hit@10) as JSON lines, to compare runs question
by question.

    .venv/bin/python bench/retrieval_eval.py [--domain archival|conversations]
        [--modes fts vector hybrid auto] [--http] [--convs N] [--eval PATH]
        [--variant rrf:fusion=rrf --variant kw7:keyword_weight=0.7] [--ceiling]
        [--reranker DIR|URL|llm [--rerank-depth 50]] [--two-queries]
        [--embed-cache PATH] [--dump PATH]
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pattern_site.processes import (
    SOLO_WORKER_OPTIONS,
    celery_worker_command,
    daphne_command,
    free_port,
    throwaway_dir,
    wait_for_port,
)

_tmp = throwaway_dir("pattern-bench-retrieval-")
os.environ["PATTERN_DATA_DIR"] = _tmp
os.environ["DATABASE_URL"] = f"sqlite:///{_tmp}/bench.sqlite3"
os.environ["DJANGO_SETTINGS_MODULE"] = "pattern_site.settings.dev"
os.environ["PATTERN_DEBUG"] = "false"
os.environ.setdefault("PATTERN_CELERY_EAGER", "false")

DEFAULT_EVAL = ROOT.parent / "shared" / "eval" / "conversational" / "eval.json"
DEFAULT_EMBED_CACHE = Path(os.environ.get("TMPDIR", "/tmp")) / (
    "pattern-retrieval-eval-vectors.npz"
)
DUMP: list[dict[str, Any]] = []
KS = (5, 10)
# Searches whose re-rank stage failed, by reason (the search then answered
# in fusion order, so the row would silently measure fusion).
RERANK_FAILURES: Counter[str] = Counter()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Scores:
    """hit@k and recall@k over questions, and search latencies."""

    def __init__(self) -> None:
        self.hits: dict[int, list[float]] = {k: [] for k in KS}
        self.recalls: dict[int, list[float]] = {k: [] for k in KS}
        self.ms: list[float] = []

    def add(self, ranked: list[str], evidence: set[str], ms: float) -> None:
        for k in KS:
            top = set(ranked[:k])
            self.hits[k].append(1.0 if top & evidence else 0.0)
            self.recalls[k].append(len(top & evidence) / len(evidence))
        self.ms.append(ms)

    def row(self) -> str:
        def mean(xs: list[float]) -> float:
            return statistics.fmean(xs) if xs else 0.0

        return (
            f"{mean(self.hits[5]):6.3f} {mean(self.hits[10]):6.3f} "
            f"{mean(self.recalls[5]):6.3f} {mean(self.recalls[10]):6.3f} "
            f"{percentile(self.ms, 0.5):7.1f} {percentile(self.ms, 0.95):7.1f}"
            f"  (n={len(self.ms)})"
        )


HEADER = "hit@5  hit@10   rec@5  rec@10   p50ms   p95ms"


def load(path: Path, convs: int | None) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    found = data["convs"]
    return found[:convs] if convs else found


def store_in_process(conversations: list[dict], domain: str) -> list[dict]:
    """Each conversation as one agent's memory; returns, per conversation,
    the agent and a map from stored row id to turn id."""
    from memory.longterm.services import (
        archival_entry_create,
        conversation_start,
        messages_append,
    )
    from pattern_site.kernel.agents.services import (
        agent_create,
        constellation_create,
        user_get_or_create,
    )

    partner, _new = user_get_or_create(username="eval-partner")
    constellation = constellation_create(name="Eval", partner=partner)
    stored = []
    for i, conv in enumerate(conversations):
        agent, _token = agent_create(constellation=constellation, name=f"conv{i}")
        ids: dict[int, str] = {}
        if domain == "archival":
            for turn in conv["turns"]:
                entry = archival_entry_create(
                    agent=agent,
                    content=turn["text"],
                    metadata={"dia_id": turn["dia_id"], "date": turn["date"]},
                )
                ids[entry.pk] = turn["dia_id"]
        else:
            conversation = conversation_start(agent=agent, title=conv["id"])
            for start in range(0, len(conv["turns"]), 200):
                chunk = conv["turns"][start : start + 200]
                messages = messages_append(
                    conversation=conversation,
                    messages=[{"role": "user", "content": t["text"]} for t in chunk],
                )
                for message, turn in zip(messages, chunk, strict=True):
                    ids[message.pk] = turn["dia_id"]
        stored.append(
            {
                "agent": agent,
                "token": None,
                "ids": ids,
                "conv": conv,
                "now": conversation_now(conv),
            }
        )
    return stored


def embedding_cache(path: Path) -> None:
    """The pipeline's ``embed_texts`` answered from ``path`` where it has
    the text's vector, the rest embedded and added to it."""
    import numpy as np

    from memory.search import pipeline

    known: dict[str, Any] = {}
    if path.is_file():
        with np.load(path) as stored:
            known = {key: stored[key] for key in stored.files}
    embed = pipeline.embed_texts

    def cached(texts: list[str]):
        keys = [hashlib.sha256(t.encode()).hexdigest()[:32] for t in texts]
        missing = [i for i, key in enumerate(keys) if key not in known]
        if missing:
            vectors = embed([texts[i] for i in missing])
            if vectors is None:
                return None
            for i, vector in zip(missing, vectors, strict=True):
                known[keys[i]] = vector
        return [known[key] for key in keys]

    def save() -> None:
        np.savez(path, **known)

    pipeline.embed_texts = cached
    embedding_cache.save = save  # type: ignore[attr-defined]


def embed_in_process(domain: str) -> None:
    from memory.models import ArchivalEntry, EmbeddingState, Message
    from memory.search.pipeline import embeddings_refresh

    kind, model = (
        ("archival", ArchivalEntry) if domain == "archival" else ("message", Message)
    )
    ids = list(
        model.objects.filter(embedding_state=EmbeddingState.PENDING).values_list(
            "pk", flat=True
        )
    )
    for start in range(0, len(ids), 256):
        embeddings_refresh(kind=kind, row_ids=ids[start : start + 256])


def keyword_form(question: str) -> str:
    """The question's words less the stop words (the question itself when
    nothing else is left)."""
    from memory.search.query import STOP_WORDS, TERM

    words = [w for w in TERM.findall(question) if w.casefold() not in STOP_WORDS]
    return " ".join(words) or question


def conversation_now(conv: dict) -> datetime:
    """The time of the conversation's last turn, when its questions are asked."""
    return max(datetime.fromisoformat(t["date"]) for t in conv["turns"]).replace(
        tzinfo=UTC
    )


def ask_in_process(
    stored: dict,
    query: str,
    mode: str,
    domain: str,
    limit: int = 10,
    queries: tuple[str, ...] = (),
) -> list[str]:
    from memory.longterm.search import memory_search
    from pattern_site.kernel.actors import Actor

    result = memory_search(
        actor=Actor.for_agent(stored["agent"]),
        query=query,
        domain="archival_memory" if domain == "archival" else "conversations",
        mode=mode,
        limit=limit,
        queries=queries,
        now=stored["now"],
    )
    if result.rerank_failed:
        RERANK_FAILURES[result.rerank_failed] += 1
    return [stored["ids"].get(hit.row.pk, "") for _kind, hit in result.hits]


class LiveServer:
    """Daphne and a solo Celery worker on the throwaway database."""

    def __init__(self) -> None:
        env = {**os.environ, "PATTERN_ALLOWED_HOSTS": "127.0.0.1,localhost"}
        self.port = free_port()
        self.procs = [
            subprocess.Popen(daphne_command(port=self.port), cwd=ROOT, env=env),
            subprocess.Popen(
                celery_worker_command(*SOLO_WORKER_OPTIONS, "--loglevel", "WARNING"),
                cwd=ROOT,
                env=env,
            ),
        ]
        wait_for_port(self.port, proc=self.procs[0])
        self.base = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def store_over_http(server: LiveServer, conversations: list[dict], domain: str):
    import httpx

    from pattern_site.kernel.agents.services import (
        agent_create,
        constellation_create,
        user_get_or_create,
    )

    partner, _new = user_get_or_create(username="eval-partner")
    constellation = constellation_create(name="Eval", partner=partner)
    stored = []
    with httpx.Client(base_url=server.base, timeout=60) as client:
        for i, conv in enumerate(conversations):
            agent, token = agent_create(constellation=constellation, name=f"conv{i}")
            headers = {"Authorization": f"Bearer {token.raw}"}
            ids: dict[int, str] = {}
            if domain == "archival":
                for turn in conv["turns"]:
                    response = client.post(
                        "/api/archival",
                        headers=headers,
                        json={
                            "content": turn["text"],
                            "metadata": {
                                "dia_id": turn["dia_id"],
                                "date": turn["date"],
                            },
                        },
                    )
                    response.raise_for_status()
                    ids[response.json()["id"]] = turn["dia_id"]
            else:
                response = client.post(
                    "/api/conversations", headers=headers, json={"title": conv["id"]}
                )
                response.raise_for_status()
                conversation_id = response.json()["id"]
                for start in range(0, len(conv["turns"]), 200):
                    chunk = conv["turns"][start : start + 200]
                    response = client.post(
                        f"/api/conversations/{conversation_id}/messages",
                        headers=headers,
                        json={
                            "messages": [
                                {"role": "user", "content": t["text"]} for t in chunk
                            ]
                        },
                    )
                    response.raise_for_status()
                    for message, turn in zip(response.json(), chunk, strict=True):
                        ids[message["id"]] = turn["dia_id"]
            stored.append(
                {
                    "agent": agent,
                    "token": token.raw,
                    "ids": ids,
                    "conv": conv,
                    "now": conversation_now(conv),
                }
            )
    return stored


def wait_embedded(domain: str, timeout: float = 1800.0) -> None:
    from memory.models import ArchivalEntry, EmbeddingState, Message

    model = ArchivalEntry if domain == "archival" else Message
    deadline = time.monotonic() + timeout
    while model.objects.filter(embedding_state=EmbeddingState.PENDING).exists():
        if time.monotonic() > deadline:
            raise SystemExit("embeddings did not finish in time")
        time.sleep(1)


def ask_over_http(
    client: Any,
    stored: dict,
    query: str,
    mode: str,
    domain: str,
    queries: tuple[str, ...] = (),
):
    # The HTTP tool reads dates relative to the server's present: questions
    # naming relative dates score as the in-process run only there.
    response = client.post(
        "/api/tools/search",
        headers={"Authorization": f"Bearer {stored['token']}"},
        json={
            "query": query,
            "queries": list(queries),
            "mode": mode,
            "limit": 10,
            "domain": "archival_memory" if domain == "archival" else "conversations",
        },
    )
    response.raise_for_status()
    answer = response.json()
    if "re-rank" in answer.get("degraded", ""):
        RERANK_FAILURES[answer["degraded"]] += 1
    return [stored["ids"].get(hit["id"], "") for hit in answer["results"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--domain", choices=("archival", "conversations"))
    parser.add_argument(
        "--modes", nargs="+", default=["fts", "vector", "hybrid", "auto"]
    )
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--convs", type=int, default=None, help="first N only")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        type=parse_variant,
        help="NAME:key=value,... retrieval settings to try the auto mode under",
    )
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="also print what a perfect re-ranker of the default mode's"
        " top 50 would score (in-process only)",
    )
    parser.add_argument(
        "--reranker",
        type=reranker_backend,
        help="also ask the default mode re-ranked by this cross-encoder"
        " directory, /v1/rerank endpoint URL, or 'llm'",
    )
    parser.add_argument("--rerank-depth", type=int, default=50)
    parser.add_argument(
        "--two-queries",
        action="store_true",
        help="also ask the default mode with the question and its keyword-only"
        " form as two phrasings",
    )
    parser.add_argument("--embed-cache", type=Path, default=DEFAULT_EMBED_CACHE)
    parser.add_argument("--dump", type=Path, help="each answer as JSON lines")
    args = parser.parse_args()
    domain = args.domain or "archival"
    if not args.eval.is_file():
        raise SystemExit(f"no eval set at {args.eval} (see ../shared/eval/)")

    import django

    django.setup()
    from django.core.management import call_command

    from memory.search.embedder import embedding_status

    call_command("migrate", verbosity=0)
    if not args.http:
        embedding_cache(args.embed_cache)
    status = embedding_status()
    print(f"embedding model: {'yes' if status.available else status.reason}")
    conversations = load(args.eval, args.convs)
    questions = sum(len(c["queries"]) for c in conversations)
    turns = sum(len(c["turns"]) for c in conversations)
    print(
        f"{len(conversations)} conversations, {turns} turns, {questions} questions;"
        f" domain {domain}; {'HTTP' if args.http else 'in-process'}"
    )

    t0 = time.perf_counter()
    server = LiveServer() if args.http else None
    try:
        if server is not None:
            stored = store_over_http(server, conversations, domain)
            wait_embedded(domain)
        else:
            stored = store_in_process(conversations, domain)
            embed_in_process(domain)
            embedding_cache.save()  # type: ignore[attr-defined]
        print(f"stored and embedded in {time.perf_counter() - t0:.0f} s")
        results = run_questions(stored, args.modes, domain, server)
        rows = list(args.modes)
        if args.ceiling and server is None:
            results.update(run_ceiling(stored, domain))
            rows.append(CEILING_ROW)
        if args.two_queries:
            label = "auto:2q"
            results.update(
                run_questions(stored, ["auto"], domain, server, label, two=True)
            )
            rows.append(label)
        for name, settings in args.variant:
            configure(stored, settings)
            label = f"auto:{name}"
            results.update(run_questions(stored, ["auto"], domain, server, label))
            rows.append(label)
        if args.reranker:
            configure(
                stored, {"reranker": args.reranker, "reranker_depth": args.rerank_depth}
            )
            label = f"auto:rerank-{args.reranker}"
            results.update(run_questions(stored, ["auto"], domain, server, label))
            rows.append(label)
    finally:
        if server is not None:
            server.stop()
    report(results, rows)
    temporal_reach(conversations)
    if args.dump:
        args.dump.write_text("".join(json.dumps(d) + "\n" for d in DUMP))
    if args.reranker:
        failed = sum(RERANK_FAILURES.values())
        print(f"\nre-rank ({args.reranker}) failed in {failed} searches")
        for reason, count in RERANK_FAILURES.most_common(5):
            print(f"  {count:>5}  {reason}")


def reranker_backend(text: str) -> str:
    """The backend ``--reranker`` names, its location put where the
    settings read it (the environment: a live server's processes inherit
    it)."""
    if text == "llm":
        return "llm"
    if text.startswith(("http://", "https://")):
        os.environ["PATTERN_RERANKER_URL"] = text
        return "http"
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a directory, URL or llm")
    os.environ["PATTERN_RERANKER_MODEL_DIR"] = str(Path(text).resolve())
    return "onnx"


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    name, _sep, pairs = text.partition(":")
    settings: dict[str, Any] = {}
    for pair in filter(None, pairs.split(",")):
        key, _eq, value = pair.partition("=")
        settings[key] = json.loads(value) if value[:1] in "0123456789-tf" else value
    if not name or not settings:
        raise argparse.ArgumentTypeError("give NAME:key=value[,key=value...]")
    return name, settings


def configure(stored: list[dict], settings: dict[str, Any]) -> None:
    """The eval constellation's retrieval settings: the defaults, then these
    (every search reads them, in this process or the server's)."""
    from memory.longterm.models import RetrievalConfig
    from memory.longterm.services import retrieval_config_update

    constellation = stored[0]["agent"].constellation
    RetrievalConfig.objects.filter(constellation=constellation).delete()
    retrieval_config_update(constellation=constellation, **settings)


def tally(scores: dict, row: str, half: str, question: dict, ranked, evidence, ms):
    """Adds one answer to its half and to all questions, each as a whole
    and in its category."""
    for key in (half, "all"):
        scores[(key, "all", row)].add(ranked, evidence, ms)
        scores[(key, question["category"], row)].add(ranked, evidence, ms)
    DUMP.append(
        {
            "row": row,
            "half": half,
            "category": question["category"],
            "q": question["q"],
            "hit10": bool(set(ranked[:10]) & evidence),
        }
    )


def each_question(stored: list[dict]):
    """(stored conversation, its half, question, evidence ids) of every
    question that has evidence."""
    for i, entry in enumerate(stored):
        half = "dev" if i % 2 == 0 else "test"
        for question in entry["conv"]["queries"]:
            evidence = set(question["evidence"])
            if evidence:
                yield entry, half, question, evidence


def run_questions(
    stored, modes, domain, server, label: str = "", two: bool = False
) -> dict:
    """scores[(half, category, mode)] over every question, each mode in turn
    per question (a slow spell of the machine falls on all modes alike)."""
    import httpx

    client = httpx.Client(base_url=server.base, timeout=60) if server else None
    scores: dict[tuple[str, str, str], Scores] = defaultdict(Scores)
    for entry, half, question, evidence in each_question(stored):
        queries = (keyword_form(question["q"]),) if two else ()
        for mode in modes:
            t = time.perf_counter()
            if client is not None:
                ranked = ask_over_http(
                    client, entry, question["q"], mode, domain, queries
                )
            else:
                ranked = ask_in_process(
                    entry, question["q"], mode, domain, queries=queries
                )
            ms = (time.perf_counter() - t) * 1000
            tally(scores, label or mode, half, question, ranked, evidence, ms)
    if client is not None:
        client.close()
    return scores


CEILING_DEPTH = 50
CEILING_ROW = f"oracle@{CEILING_DEPTH}"


def run_ceiling(stored: list[dict], domain: str) -> dict:
    """The default mode's top ``CEILING_DEPTH`` re-ordered with every
    evidence turn first: the most any re-ranking stage over that candidate
    pool (a cross-encoder, say) could reach, and so what is left to the
    candidate generation itself."""
    scores: dict[tuple[str, str, str], Scores] = defaultdict(Scores)
    for entry, half, question, evidence in each_question(stored):
        t = time.perf_counter()
        deep = ask_in_process(entry, question["q"], "auto", domain, CEILING_DEPTH)
        ms = (time.perf_counter() - t) * 1000
        ranked = [d for d in deep if d in evidence] + [
            d for d in deep if d not in evidence
        ]
        tally(scores, CEILING_ROW, half, question, ranked, evidence, ms)
    return scores


def temporal_reach(conversations: list[dict]) -> None:
    """What the time stage can read from the temporal questions: how many
    name a date (``question_spans`` at the conversation's ``now``), how many
    ask when or how long (``time_asked``) and of those how many have an
    evidence turn that tells that kind of time (``tells_time``); the rest
    it cannot help."""
    from memory.search.when import (
        HOW_LONG,
        WHEN,
        question_spans,
        tells_time,
        time_asked,
    )

    counts: Counter[str] = Counter()
    for conv in conversations:
        today = conversation_now(conv).date()
        texts = {t["dia_id"]: t["text"] for t in conv["turns"]}
        for question in conv["queries"]:
            if question["category"] != "temporal" or not question["evidence"]:
                continue
            counts["all"] += 1
            dated = bool(question_spans(question["q"], today=today))
            asked = time_asked(question["q"])
            counts["dated"] += dated
            counts[asked] += bool(asked)
            counts["neither"] += not (dated or asked)
            told = any(
                tells_time(asked, texts.get(e, "")) for e in question["evidence"]
            )
            counts[f"{asked}, told"] += bool(asked) and told
    if counts["all"]:
        print(
            f"\ntemporal questions: {counts['all']}; name a date {counts['dated']};"
            f" ask {WHEN} {counts[WHEN]} (an evidence turn tells a time:"
            f" {counts[WHEN + ', told']}); ask {HOW_LONG} {counts[HOW_LONG]}"
            f" (one tells a length of time: {counts[HOW_LONG + ', told']});"
            f" none of these {counts['neither']}"
        )


def report(scores: dict, modes: list[str]) -> None:
    for half in ("all", "dev", "test"):
        if (half, "all", modes[0]) not in scores:
            continue  # no question in this half (a --convs 1 run)
        print(f"\n{half} questions          {HEADER}")
        for mode in modes:
            print(f"  {mode:<20} {scores[(half, 'all', mode)].row()}")
    categories = sorted({c for (_h, c, _m) in scores if c != "all"})
    for half in ("all", "dev", "test"):
        for category in categories:
            if (half, category, modes[0]) not in scores:
                continue
            print(f"\n{half} {category:<16} {HEADER}")
            for mode in modes:
                print(f"  {mode:<20} {scores[(half, category, mode)].row()}")


if __name__ == "__main__":
    main()
