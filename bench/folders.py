"""Folders: indexing throughput, grep latency and passage search latency.

Three measures, each beside a reference taken in the same run, on a
throwaway database and broker (never var/):

1. Indexing: ``--mb`` MB of mixed text (Markdown, Python, CSV, prose) is
   uploaded through the API (multipart, ``--per-request`` files a request)
   and indexed by a real ``celery worker`` process (solo pool: chunking
   and keyword index, then memory's embedding tasks).  The clock runs from
   the first upload to the moment every passage has its vector.  Reference:
   fastembed alone (``memory.search.embedder.embed_texts``) on the same passage
   texts in this process.  Both the worker's model and this process's are
   loaded and warmed before any clock starts.
2. grep: ``--grep-files`` files of ``--grep-mb`` MB in all, stored in a
   folder and written to a directory; a literal and a regex, each run
   ``--runs`` times through ``folders.tools.grep.folder_grep`` and through
   ``grep -rn`` (``-E`` for the regex) on the directory; p50/p95 of each.
3. Search: ``--passages`` passages with random unit vectors (latency does
   not depend on meaning) and keyword text; ``folder_search`` in vector and
   hybrid modes with the query vector computed beforehand (the model's
   per-query cost is printed apart), against raw sqlite-vec KNN (L2, no
   filters) over the same vectors.

    .venv/bin/python bench/folders.py [--mb 20] [--grep-files 10000]
        [--grep-mb 100] [--passages 100000] [--runs 20] [--skip ...]
"""

import argparse
import os
import random
import shutil
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

_tmp = throwaway_dir("pattern-bench-folders-")
os.environ["PATTERN_DATA_DIR"] = _tmp
os.environ["DATABASE_URL"] = f"sqlite:///{_tmp}/bench.sqlite3"
os.environ["DJANGO_SETTINGS_MODULE"] = "pattern_site.settings.dev"
os.environ["PATTERN_DEBUG"] = "false"
os.environ["PATTERN_CELERY_EAGER"] = "false"
os.environ.setdefault("PATTERN_FOLDER_MAX_BYTES", str(2**30))

_WORDS_TEXT = """
partner meeting coffee train budget garden sister doctor invoice flight recipe
server deploy ticket concert marathon rent tax plants dog walk morning evening
project deadline holiday birthday book music paint database window schedule
report quarterly review kitchen bicycle
"""
WORDS = _WORDS_TEXT.split()
# Passages of the search measure: a vocabulary as wide as real text's (with
# the 40 words above, every passage would match every keyword query).
VOCAB = [f"w{i:04d}" for i in range(5000)]
DIM = 384


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(6, 14))).capitalize() + "."


def document(rng: random.Random, n: int, size: int) -> tuple[str, str]:
    """A file of about ``size`` bytes of one of four kinds."""
    kind = n % 4
    lines: list[str] = []
    total = 0
    while total < size:
        if kind == 0:
            line = f"## {sentence(rng)}" if rng.random() < 0.1 else sentence(rng)
        elif kind == 1:
            line = f"def {rng.choice(WORDS)}_{n}(x):  # {sentence(rng)}"
        elif kind == 2:
            line = ",".join([str(rng.randint(0, 9999)), *rng.choices(WORDS, k=4)])
        else:
            line = " ".join(sentence(rng) for _ in range(3))
        lines.append(line)
        total += len(line) + 1
    # Multipart uploads store files by their name (Django drops directories
    # from upload names): names are unique without them.
    name = ("notes/n{}.md", "src/m{}.py", "data/t{}.csv", "prose/p{}.txt")[kind]
    return name.format(n), "\n".join(lines) + "\n"


def bench_indexing(args: argparse.Namespace) -> None:
    from django.test import Client

    from folders.files import services
    from folders.models import FilePassage, FolderFile, IndexState
    from memory.models import EmbeddingState
    from memory.search.embedder import embed_texts, embedding_model

    human, constellation = _owner()
    folder = services.folder_create(
        actor=human, constellation_id=constellation.pk, name="indexing"
    )
    rng = random.Random(7)
    file_size = 100_000
    count = max(1, args.mb * 1_000_000 // file_size)
    docs = [document(rng, n, file_size) for n in range(count)]
    total_bytes = sum(len(t) for _n, t in docs)
    client = Client(HTTP_HOST="localhost")
    client.force_login(human.user)

    # The worker loads its model and warms up on a small file first.
    worker = subprocess.Popen(
        celery_worker_command(*SOLO_WORKER_OPTIONS, "--loglevel", "WARNING"),
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=open(Path(_tmp) / "worker.log", "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
    )
    pending = FilePassage.objects.filter(embedding_state=EmbeddingState.PENDING)

    def upload(batch: list[tuple[str, str]]) -> None:
        files = [_named(name.rsplit("/", 1)[-1], text) for name, text in batch]
        response = client.post(f"/api/folders/{folder.pk}/files", {"files": files})
        if response.status_code != 201:
            raise RuntimeError(response.content[:500])

    def wait_indexed(files: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (
            pending.exists()
            or FolderFile.objects.filter(folder=folder)
            .exclude(index_state=IndexState.READY)
            .exists()
            or FolderFile.objects.filter(folder=folder).count() < files
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"indexing not done; see {_tmp}/worker.log")
            time.sleep(0.05)

    try:
        warm = document(random.Random(1), 0, 5_000)
        upload([("warm.md", warm[1])])
        wait_indexed(1, 180)
        warm_passages = FilePassage.objects.count()
        t0 = time.perf_counter()
        for start in range(0, len(docs), args.per_request):
            upload(docs[start : start + args.per_request])
        wait_indexed(len(docs) + 1, 3600)
        elapsed = time.perf_counter() - t0
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    passages = list(
        FilePassage.objects.exclude(file__path="warm.md")
        .order_by("pk")
        .values_list("content", flat=True)
    )
    assert len(passages) == FilePassage.objects.count() - warm_passages
    end_to_end = len(passages) / elapsed

    embedding_model()
    embed_texts(passages[:64])
    t0 = time.perf_counter()
    embed_texts(passages)
    direct = len(passages) / (time.perf_counter() - t0)
    print(
        f"indexing: {len(docs)} files, {total_bytes / 1e6:.1f} MB,"
        f" {len(passages)} passages"
    )
    print(
        f"  API + worker (upload -> every vector stored) {end_to_end:9.1f} passages/s"
    )
    print(f"  fastembed alone on the same passages        {direct:9.1f} passages/s")
    print(f"  ratio {end_to_end / direct:.2f}x (target >= 0.9x)")


def _named(name: str, text: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, text.encode())


def _owner():
    from django.contrib.auth import get_user_model

    from pattern_site.kernel.actors import Actor
    from pattern_site.kernel.agents.models import Constellation

    user, _ = get_user_model().objects.get_or_create(username="bench")
    constellation, _ = Constellation.objects.get_or_create(
        name="bench", defaults={"partner": user}
    )
    return Actor.for_user(user), constellation


def bench_grep(args: argparse.Namespace) -> None:
    from folders.files import services
    from folders.models import FolderFile
    from folders.tools.grep import folder_grep

    human, constellation = _owner()
    folder = services.folder_create(
        actor=human, constellation_id=constellation.pk, name="grep"
    )
    rng = random.Random(11)
    size = args.grep_mb * 1_000_000 // args.grep_files
    tree = Path(_tmp) / "grep-tree"
    rows = []
    for n in range(args.grep_files):
        name, text = document(rng, n, size)
        if n % 200 == 0:  # a rare literal and a rare pattern in 0.5% of files
            text += f"needle-marker here\nINV-{rng.randint(1000, 9999)}-ABC due\n"
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        rows.append(
            FolderFile(
                folder=folder,
                path=name,
                content_type="text/plain",
                size=len(text),
                sha256=f"{n:064d}",
                text=text,
                line_count=text.count("\n"),
                index_state="ready",
            )
        )
        if len(rows) == 1000:
            FolderFile.objects.bulk_create(rows)
            rows = []
    FolderFile.objects.bulk_create(rows)
    total = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
    print(f"grep: {args.grep_files} files, {total / 1e6:.1f} MB")
    cases = [
        ("literal", "needle-marker", {"literal": True}, ["grep", "-rnF"]),
        ("regex", r"INV-[0-9]{4}-[A-Z]{3}", {}, ["grep", "-rnE"]),
    ]
    for label, pattern, options, command in cases:
        ours: list[float] = []
        theirs: list[float] = []
        found = 0
        for _ in range(args.runs):
            t0 = time.perf_counter()
            result = folder_grep(folder=folder, pattern=pattern, limit=1000, **options)
            ours.append((time.perf_counter() - t0) * 1000)
            found = len(result.matches)
            t0 = time.perf_counter()
            out = subprocess.run(
                [*command, pattern, str(tree)], capture_output=True, check=False
            )
            theirs.append((time.perf_counter() - t0) * 1000)
        grep_found = out.stdout.count(b"\n")
        print(
            f"  {label:8} folder_grep p50 {pct(ours, 0.5):7.1f} ms"
            f" p95 {pct(ours, 0.95):7.1f} ms ({found} lines) | grep -r p50"
            f" {pct(theirs, 0.5):7.1f} ms p95 {pct(theirs, 0.95):7.1f} ms"
            f" ({grep_found} lines) (target p95 <= 300 ms)"
        )
    shutil.rmtree(tree)


def bench_search(args: argparse.Namespace) -> None:
    import numpy as np
    from django.db import connection, transaction

    from folders.files import services
    from folders.files.index import FILE_PASSAGE_INDEX
    from folders.models import FilePassage, FolderFile
    from folders.tools import search as search_module
    from memory.search.embedder import embed_query, embedding_model
    from memory.search.index import index_put_texts, index_put_vectors

    human, constellation = _owner()
    folder = services.folder_create(
        actor=human, constellation_id=constellation.pk, name="search"
    )
    rng = np.random.default_rng(3)
    prng = random.Random(3)
    files = FolderFile.objects.bulk_create(
        FolderFile(
            folder=folder,
            path=f"f{n}.txt",
            content_type="text/plain",
            size=0,
            sha256=f"{n:064d}",
            index_state="ready",
        )
        for n in range(max(1, args.passages // 100))
    )
    with connection.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS raw_vec_l2")
        cur.execute(
            f"CREATE VIRTUAL TABLE raw_vec_l2 USING vec0(embedding float[{DIM}])"
        )
    batch = 2000
    c, f = constellation.pk, folder.pk
    for start in range(0, args.passages, batch):
        n = min(batch, args.passages - start)
        vectors = rng.standard_normal((n, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        with transaction.atomic():
            rows = FilePassage.objects.bulk_create(
                FilePassage(
                    file=files[(start + i) // 100],
                    folder=folder,
                    constellation=constellation,
                    position=(start + i) % 100,
                    start_line=1,
                    end_line=3,
                    content=" ".join(prng.choices(VOCAB, k=40)),
                    content_hash=f"h{start + i}",
                    embedded_hash=f"h{start + i}",
                    embedding_state="ready",
                )
                for i in range(n)
            )
            index_put_texts(
                FILE_PASSAGE_INDEX, rows=[(p.pk, c, f, p.content) for p in rows]
            )
            index_put_vectors(
                FILE_PASSAGE_INDEX,
                rows=[(p.pk, c, f, v) for p, v in zip(rows, vectors, strict=True)],
            )
            with connection.cursor() as cur:
                cur.executemany(
                    "INSERT INTO raw_vec_l2(rowid, embedding) VALUES (%s, %s)",
                    [(p.pk, v.tobytes()) for p, v in zip(rows, vectors, strict=True)],
                )
    queries = [" ".join(prng.choices(VOCAB, k=3)) for _ in range(args.runs * 3)]
    qvecs = rng.standard_normal((len(queries), DIM)).astype(np.float32)
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    current: dict[str, np.ndarray] = {}
    # The model's cost per query is measured apart, below.
    search_module.embed_query = lambda text: current["v"]
    timings: dict[str, list[float]] = {"vector": [], "hybrid": [], "raw": []}
    for _warm in range(2):
        for q, v in zip(queries, qvecs, strict=True):
            current["v"] = v
            for mode in ("vector", "hybrid"):
                t0 = time.perf_counter()
                search_module.folder_search(folders=[folder], query=q, mode=mode)
                timings[mode].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            with connection.cursor() as cur:
                cur.execute(
                    "SELECT rowid FROM raw_vec_l2 WHERE embedding MATCH %s AND k = 10",
                    [v.tobytes()],
                )
                cur.fetchall()
            timings["raw"].append((time.perf_counter() - t0) * 1000)
        if _warm == 0:
            timings = {k: [] for k in timings}
    search_module.embed_query = embed_query
    embedding_model()
    embed_query("warm up")
    embeds = []
    for q in queries[:20]:
        t0 = time.perf_counter()
        embed_query(q)
        embeds.append((time.perf_counter() - t0) * 1000)
    print(f"search: {args.passages} passages, {len(queries)} queries")
    for label, values in timings.items():
        name = {"raw": "raw sqlite-vec KNN (L2, k=10)"}.get(
            label, f"folder_search {label}"
        )
        p50, p95 = pct(values, 0.5), pct(values, 0.95)
        print(f"  {name:32} p50 {p50:7.2f} ms p95 {p95:7.2f} ms")
    print(
        f"  query embedding (model, apart)   p50 {statistics.median(embeds):7.2f} ms"
        " (target: search p95 <= 20 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--per-request", type=int, default=20)
    parser.add_argument("--grep-files", type=int, default=10_000)
    parser.add_argument("--grep-mb", type=int, default=100)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--skip", nargs="*", default=[], choices=["indexing", "grep", "search"]
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from memory.search.embedder import embedding_status

    if not embedding_status().available:
        sys.exit(f"no embedding model: {embedding_status().reason}")
    call_command("migrate", verbosity=0)
    print(f"throwaway database in {_tmp}")
    if "indexing" not in args.skip:
        bench_indexing(args)
    if "grep" not in args.skip:
        bench_grep(args)
    if "search" not in args.skip:
        bench_search(args)


if __name__ == "__main__":
    main()
