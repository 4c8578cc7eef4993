"""What the benchmark scripts share: a Django set up on a throwaway data
directory, a Daphne serving it, and the printing of figures beside their
targets."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def django_setup(prefix: str, *, eager: bool = True) -> str:
    """Configure Django (dev settings, no debug; tasks inline unless not
    ``eager``, for a bench that starts a worker) on a new temporary data
    directory named ``prefix...``; returns its path."""
    from pattern_site.processes import throwaway_dir

    data_dir = throwaway_dir(prefix)
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "pattern_site.settings.dev",
            "PATTERN_DATA_DIR": data_dir,
            "PATTERN_DEBUG": "false",
            # Without a worker, agent activity is recorded inline (once a minute).
            "PATTERN_CELERY_EAGER": "true" if eager else "false",
            "PATTERN_LOG_LEVEL": "WARNING",
        }
    )
    import django

    django.setup()
    return data_dir


def line(
    name: str,
    value: str,
    target: str,
    ok: bool | None = None,
    *,
    widths: tuple[int, int] = (58, 16),
) -> None:
    mark = "" if ok is None else ("  ok" if ok else "  MISSED")
    print(f"{name:<{widths[0]}} {value:>{widths[1]}}   target {target}{mark}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextmanager
def daphne_running(application: str | None = None) -> Iterator[int]:
    """A Daphne serving this project (and this process's environment, so its
    throwaway database) on a free port, for the ``with`` block; yields the
    port.  ``application``: another ASGI app (``module:name``) to serve."""
    from pattern_site.processes import daphne_command, free_port, wait_for_port

    port = free_port()
    command = daphne_command(port=port)
    if application is not None:
        command[-1] = application
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc=proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
