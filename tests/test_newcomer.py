"""The README's run command works on a fresh copy of the repository."""

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import READY_SECONDS, REPO, free_port

# `make run` serves the embedded default (SQLite) in a copy of its own,
# whatever database this run's tests use.
pytestmark = [pytest.mark.slow, pytest.mark.any_database("sqlite")]


def _readme_run_command() -> str:
    lines = (REPO / "README.md").read_text().splitlines()
    commands = [
        line.split("#")[0].strip() for line in lines if line.startswith("    make ")
    ]
    return commands[0]


def test_readme_run_command_serves_health_on_a_fresh_copy(tmp_path: Path):
    command = _readme_run_command()
    assert command == "make run"
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    copy = tmp_path / "site"
    for name in filter(None, files):
        source = REPO / name.decode()
        if source.is_file():
            target = copy / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode)
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PATTERN_", "DJANGO_", "DATABASE_URL", "VIRTUAL_ENV"))
    }
    env.update(PATTERN_PORT=str(port), PATTERN_EMBEDDING_MODEL_DIR="")
    log = (tmp_path / "run.log").open("w")
    proc = subprocess.Popen(
        command.split(),
        cwd=copy,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + max(600, READY_SECONDS)
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/health", timeout=2
                ) as response:
                    status = response.status
                    break
            except OSError:
                time.sleep(1)
        output = (tmp_path / "run.log").read_text()
        assert status == 200, f"health never answered 200; output:\n{output[-4000:]}"
        # The banner follows the web process's start: wait for it, not a time.
        while "Pattern site is ready" not in output and time.monotonic() < deadline:
            time.sleep(0.2)
            output = (tmp_path / "run.log").read_text()
        assert f"Pattern site is ready: http://127.0.0.1:{port}/" in output
        assert "Log in as: partner / " in output
        password = output.split("Log in as: partner / ")[1].split()[0]
        assert f"Log in as partner / {password}" in output
        assert "Archive" in output
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
