"""How the site's processes are started: one definition for ``manage.py
serve``, the tests that run real servers and workers, and the benchmarks."""

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ASGI_APPLICATION = "pattern_site.asgi:application"


def throwaway_dir(prefix: str) -> str:
    """A new temporary directory, removed when this process exits (the
    benchmarks' databases, which can be large)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def daphne_command(*, host: str = "127.0.0.1", port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "daphne",
        "-b",
        host,
        "-p",
        str(port),
        ASGI_APPLICATION,
    ]


def celery_worker_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "pattern_site", "worker", *options]


def celery_beat_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "pattern_site", "beat", *options]


def worker_embedding_threads(*, concurrency: int, configured: int) -> int:
    """ONNX Runtime threads for each of ``concurrency`` worker processes:
    ``configured`` if set, else this machine's cores shared out (at least
    one), so processes embedding at once do not oversubscribe the cores."""
    if configured > 0:
        return configured
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    return max(1, (cores or os.cpu_count() or 1) // max(1, concurrency))


# A single worker process for tests and benchmarks: no pool, no cluster chatter.
SOLO_WORKER_OPTIONS = (
    "--pool",
    "solo",
    "--concurrency",
    "1",
    "--without-heartbeat",
    "--without-gossip",
    "--without-mingle",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(
    port: int, timeout: float = 180.0, proc: subprocess.Popen | None = None
) -> None:
    """Return once something listens on ``port``; fail if ``proc`` dies
    first, or after ``timeout`` seconds (a ceiling, not an expected time: a
    loaded machine starts a process many times slower than a quiet one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(
                f"process exited with {proc.returncode} before listening"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listened on port {port} within {timeout} s")


def daphne_start(
    *, cwd: str | os.PathLike, env: dict[str, str], timeout: float = 180.0
) -> tuple[int, subprocess.Popen]:
    """A quiet Daphne process on a free port, once it listens: (port, process)."""
    port = free_port()
    proc = subprocess.Popen(
        daphne_command(port=port),
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, timeout=timeout, proc=proc)
    except (RuntimeError, TimeoutError):
        processes_stop([proc])
        raise
    return port, proc


def processes_stop(procs: list[subprocess.Popen], timeout: float = 20.0) -> None:
    """Terminate ``procs`` all at once, then wait for each (kill if stuck)."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
