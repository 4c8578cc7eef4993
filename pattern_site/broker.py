"""The embedded Celery broker: kombu's SQLAlchemy transport on a SQLite file
of its own, in WAL mode.

Every publish and every fetch is one SQLite transaction (a fetch takes the
write lock with ``BEGIN IMMEDIATE``), so any number of producer processes
and a worker can share the file without a reader ever seeing half a message.
Connections are not pooled: a SQLite connection must not cross the fork of a
worker's pool processes, and opening one costs far less than a task.  The
worker polls the file once a second (kombu's default for this transport,
which passes every other option on to SQLAlchemy).

kombu keeps a fetched message as a row marked invisible; ``broker_prune``
deletes those, on the beat schedule, so the file does not grow for ever.
"""

import fcntl
import sqlite3
from functools import partial
from pathlib import Path

from kombu import Connection
from sqlalchemy.pool import NullPool

SQLITE_BROKER_PREFIX = "sqla+sqlite:///"
# Seconds a publisher or the worker waits for SQLite's write lock.
BUSY_TIMEOUT = 30.0


def sqlite_broker_url(path: Path) -> str:
    return f"{SQLITE_BROKER_PREFIX}{path}"


def sqlite_broker_path(url: str) -> Path | None:
    """The SQLite file of an embedded-broker URL; None for any other broker."""
    if not url.startswith(SQLITE_BROKER_PREFIX):
        return None
    return Path(url.removeprefix(SQLITE_BROKER_PREFIX))


def sqlite_broker_options(path: Path) -> dict[str, object]:
    """kombu transport options (passed on to SQLAlchemy's create_engine)."""
    return {"poolclass": NullPool, "creator": partial(_connect, str(path))}


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False)
    # In WAL mode a commit then survives the process dying (not the machine
    # losing power) without an fsync per message.
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def sqlite_broker_prepare(path: Path, queues: tuple[str, ...]) -> None:
    """Create the broker's file in WAL mode (a property of the file, kept by
    every later connection), its tables and ``queues``, once.

    kombu creates tables and queue rows on first use without a lock, so two
    processes starting together (web, worker and beat do) would race: one
    gets "table already exists" or a unique-constraint error on its first
    publish.  Here the first process does it under an exclusive file lock.
    """
    if _prepared(path, queues):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
        finally:
            conn.close()
        url = sqlite_broker_url(path)
        with Connection(url, transport_options=sqlite_broker_options(path)) as broker:
            channel = broker.default_channel
            for queue in queues:
                channel._new_queue(queue)


def _prepared(path: Path, queues: tuple[str, ...]) -> bool:
    """Whether an earlier start prepared ``path`` (it set WAL first): every
    process of the site checks, and opening kombu's engine costs more."""
    if not path.exists():
        return False
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT)
    try:
        names = {row[0] for row in conn.execute("SELECT name FROM kombu_queue")}
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()
    return set(queues) <= names


def broker_prune() -> int:
    """Delete the messages the embedded broker has already delivered; the
    number deleted (0 on any other broker)."""
    from pattern_site.celery import app

    if sqlite_broker_path(app.conf.broker_url or "") is None:
        return 0
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        message = channel.message_cls
        deleted = (
            channel.session.query(message)
            .filter(message.visible.is_(False))
            .delete(synchronize_session=False)
        )
        channel.session.commit()
    return deleted
