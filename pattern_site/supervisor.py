"""Keeps the site's processes running for ``manage.py serve``.

Each child runs in a process group of its own.  A child that exits while
serve runs is restarted after a backoff (1 s, doubling up to 30 s; back to
1 s once it had run for a minute), with one log line each time, and what is
left of its group (a worker's pool processes) is killed first.  ``stop``
sends SIGTERM to every child, waits, then kills each group, so no child or
grandchild outlives serve.  On Linux each child also gets SIGTERM if serve
itself dies without stopping them.
"""

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

FIRST_DELAY = 1.0
MAX_DELAY = 30.0
STABLE_AFTER = 60.0
PR_SET_PDEATHSIG = 1


def restart_delay(failures: int) -> float:
    """Seconds to wait before restarting after ``failures`` quick exits."""
    return min(MAX_DELAY, FIRST_DELAY * 2 ** max(0, failures - 1))


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


@dataclass
class Child:
    name: str
    command: list[str]
    env: dict[str, str] | None = None
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float | None = None
    restarts: int = 0


class Supervisor:
    def __init__(self, children: list[Child], *, log: Callable[[str], None]):
        self.children = children
        self.log = log
        self.stopping = False

    def _start(self, child: Child) -> None:
        child.proc = subprocess.Popen(
            child.command,
            env=child.env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        child.started_at = time.monotonic()
        child.restart_at = None
        self.log(f"{child.name} started (pid {child.proc.pid})")

    def start(self) -> None:
        for child in self.children:
            self._start(child)

    def check(self) -> None:
        """Restart the children that exited and whose backoff is over."""
        now = time.monotonic()
        for child in self.children:
            proc = child.proc
            if proc is None or self.stopping:
                continue
            if child.restart_at is None:
                code = proc.poll()
                if code is None:
                    continue
                _kill_group(proc.pid, signal.SIGKILL)
                ran = now - child.started_at
                child.failures = 1 if ran >= STABLE_AFTER else child.failures + 1
                delay = restart_delay(child.failures)
                child.restart_at = now + delay
                self.log(
                    f"{child.name} (pid {proc.pid}) exited with {code} after "
                    f"{ran:.0f} s; restart {child.restarts + 1} in {delay:.0f} s"
                )
            if now >= child.restart_at:
                child.restarts += 1
                self._start(child)

    def stop(self, timeout: float = 15.0) -> None:
        self.stopping = True
        running = [c.proc for c in self.children if c.proc is not None]
        for proc in running:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()

    def run(self, interval: float = 0.5) -> None:
        """Start every child and keep them running until SIGTERM or SIGINT."""

        def request_stop(*_: object) -> None:
            self.stopping = True

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        self.start()
        try:
            while not self.stopping:
                self.check()
                time.sleep(interval)
        finally:
            self.stop()
