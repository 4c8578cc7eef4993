"""Candidate Celery brokers under concurrent producers and one consumer.

Each candidate gets ``--producers`` processes publishing ``--messages`` each
as fast as they can while one consumer (kombu's, as a Celery worker's main
process uses it) drains the queue, acknowledging each message; printed per
broker: publish rate, end-to-end rate, messages lost or duplicated, and the
first error, if any.

    .venv/bin/python bench/broker.py --producers 4 --messages 2000

Redis (the scale-out broker, ``PATTERN_TEST_REDIS_URL``) is the reference
measured in the same run; it is skipped when unreachable.
"""

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from queue import Empty

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kombu import Connection, Exchange, Queue

# Registers the embedded broker's transport (in the producer and consumer
# processes too).
from pattern_site.broker import sqlite_broker_prepare, sqlite_broker_url
from pattern_site.processes import throwaway_dir

QUEUE = "bench"


def candidates(data_dir: Path, redis_url: str) -> dict[str, tuple[str, dict]]:
    folder = data_dir / "fs"
    for sub in ("queue", "processed"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    filesystem = {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        "store_processed": False,
        "polling_interval": 0.05,
    }
    sqlite_path = data_dir / "broker.sqlite3"
    sqlite_broker_prepare(sqlite_path, (QUEUE,))
    return {
        "filesystem": ("filesystem://", filesystem),
        "embedded sqlite (WAL)": (sqlite_broker_url(sqlite_path), {}),
        "redis (reference)": (redis_url, {}),
    }


def produce(url: str, options: dict, start: int, count: int, errors) -> None:
    try:
        with Connection(url, transport_options=options) as conn:
            producer = conn.Producer(serializer="json")
            queue = Queue(QUEUE, Exchange(QUEUE), routing_key=QUEUE)
            for i in range(start, start + count):
                producer.publish(
                    {"n": i, "pad": "x" * 400},
                    exchange=queue.exchange,
                    routing_key=QUEUE,
                    declare=[queue],
                )
    except Exception as exc:
        errors.put(f"producer: {type(exc).__name__}: {exc}")


def consume(url: str, options: dict, total: int, results, errors) -> None:
    seen: list[int] = []
    try:
        with Connection(url, transport_options=options) as conn:
            queue = Queue(QUEUE, Exchange(QUEUE), routing_key=QUEUE)
            simple = conn.SimpleQueue(queue)
            deadline = time.monotonic() + 120
            while len(seen) < total and time.monotonic() < deadline:
                try:
                    message = simple.get(timeout=5)
                except Empty:
                    continue
                seen.append(message.payload["n"])
                message.ack()
            simple.close()
    except Exception as exc:
        errors.put(f"consumer: {type(exc).__name__}: {exc}")
    results.put(seen)


def run(name: str, url: str, options: dict, producers: int, messages: int) -> None:
    total = producers * messages
    results: mp.Queue = mp.Queue()
    errors: mp.Queue = mp.Queue()
    consumer = mp.Process(target=consume, args=(url, options, total, results, errors))
    consumer.start()
    started = time.perf_counter()
    procs = [
        mp.Process(target=produce, args=(url, options, i * messages, messages, errors))
        for i in range(producers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    published = time.perf_counter() - started
    try:
        seen = results.get(timeout=180)
    except Empty:
        seen = []
    consumer.join(timeout=10)
    if consumer.is_alive():
        consumer.kill()
    drained = time.perf_counter() - started
    first_error = None if errors.empty() else errors.get()
    lost = total - len(set(seen))
    dupes = len(seen) - len(set(seen))
    print(
        f"{name:26} publish {total / published:7.0f}/s  end-to-end "
        f"{len(seen) / drained:7.0f}/s  received {len(seen)}/{total}  "
        f"lost {lost}  duplicated {dupes}  consumer exit {consumer.exitcode}"
        + (f"\n{'':26} first error: {first_error}" if first_error else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    redis_url = os.environ.get("PATTERN_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    data_dir = Path(throwaway_dir("pattern-bench-broker-"))
    print(
        f"{args.producers} producer processes x {args.messages} messages, "
        f"one consumer, {os.cpu_count()} cores"
    )
    for name, (url, options) in candidates(data_dir, redis_url).items():
        if url.startswith("redis"):
            import redis

            try:
                redis.Redis.from_url(url, socket_connect_timeout=1).ping()
                redis.Redis.from_url(url).delete(QUEUE)
            except Exception as exc:
                print(f"{name:26} skipped: {exc}")
                continue
        run(name, url, options, args.producers, args.messages)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pattern_site.settings.dev")
    main()
