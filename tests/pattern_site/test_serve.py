"""``manage.py serve`` keeps the site's processes running and stops them all."""

import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordination.models import Agent
from pattern_site.supervisor import Child, Supervisor, restart_delay
from tests.conftest import REPO, free_port, subprocess_env, wait_for_port, wait_until

WORKER_STARTED = re.compile(r"worker started \(pid (\d+)\)")


def test_restart_delay_doubles_up_to_thirty_seconds():
    assert [restart_delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_a_child_that_exits_is_restarted_with_a_log_line():
    lines: list[str] = []
    child = Child("job", [sys.executable, "-c", "import sys; sys.exit(3)"])
    supervisor = Supervisor([child], log=lines.append)
    supervisor.start()
    first = child.proc
    try:
        wait_until(lambda: (supervisor.check(), child.proc is not first)[1])
    finally:
        supervisor.stop()
    assert any(re.search(r"job \(pid \d+\) exited with 3 .* in 1 s", x) for x in lines)
    assert child.restarts == 1


def _descendants(root: int) -> dict[int, str]:
    """pid -> command line of every process below ``root``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                try:
                    cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes()
                except OSError:
                    continue
                found[pid] = cmd.replace(b"\0", b" ").decode()
                frontier.append(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return state.rsplit(")", 1)[1].split()[0] != "Z"


def _health(port: int) -> int:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{port}/api/health", timeout=10
    ) as response:
        return response.status


@pytest.fixture
def serve(transactional_db: None, tmp_path: Path) -> Iterator[dict[str, Any]]:
    port = free_port()
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=REPO,
        env=subprocess_env(PATTERN_WORKER_CONCURRENCY="1"),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_port(port, proc=proc)
        wait_until(lambda: " ready." in log.read_text())
        yield {"proc": proc, "port": port, "log": log}
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_killed_worker_is_restarted_and_sigterm_stops_every_child(
    serve: dict[str, Any], agent: Any, agent_token: Any
):
    # One served site for both: starting it (a web process, a worker and
    # beat) is most of what the two cost.
    log: Path = serve["log"]
    proc: subprocess.Popen = serve["proc"]
    worker = int(WORKER_STARTED.search(log.read_text()).group(1))
    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: f"worker (pid {worker}) exited with -9" in log.read_text())
    assert _health(serve["port"]) == 200
    wait_until(lambda: len(WORKER_STARTED.findall(log.read_text())) == 2)
    assert not _alive(worker)

    request = urllib.request.Request(
        f"http://127.0.0.1:{serve['port']}/api/whoami",
        headers={"Authorization": f"Bearer {agent_token.raw}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    wait_until(lambda: Agent.objects.get(pk=agent.pk).last_active_at is not None)
    assert proc.poll() is None

    children = _descendants(proc.pid)
    commands = " | ".join(children.values())
    assert "daphne" in commands
    assert " worker " in commands
    assert " beat " in commands
    # The worker's pool process is a grandchild of serve.
    assert sum(" worker " in cmd for cmd in children.values()) >= 2
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=40) == 0
    left = {pid: cmd for pid, cmd in children.items() if _alive(pid)}
    assert left == {}
