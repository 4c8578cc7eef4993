"""The embedded Celery broker: kombu's SQLAlchemy transport on a SQLite file
of its own, in WAL mode, with messages leased until acknowledged.

Every publish and every fetch is one SQLite transaction (a fetch takes the
write lock with ``BEGIN IMMEDIATE``), so any number of producer processes
and a worker can share the file without a reader ever seeing half a message.
Connections are not pooled: a SQLite connection must not cross the fork of a
worker's pool processes, and opening one costs far less than a task.  The
worker polls the file once a second (kombu's default for this transport).

kombu's own transport marks a fetched message invisible and never looks at
it again: what a worker had fetched (running or prefetched) when it died
was lost.  This one (``Transport``, URL scheme ``pattern+sqlite``) leases a
fetched message to the fetching process instead - ``lease_owner`` names
the machine, boot, PID namespace, pid and start time of that process - and:

- an acknowledgement (or a rejection without requeue) marks the row done,
  in the transaction of the consumer's next fetch (it polls every second
  when idle) or when its channel closes - no write transaction of its own;
  ``broker_prune`` deletes done rows, on the beat schedule, and nothing
  else;
- a requeue, or the worker closing its channel with messages unacknowledged
  (a warm shutdown), makes the rows visible again;
- a lease whose process is gone (the pid is free, a zombie or a different
  process, or the machine rebooted), or older than the visibility timeout
  (``visibility_timeout`` transport option, as Redis's), makes its row
  visible again: when a worker starts (its first fetch), every
  ``ORPHAN_CHECK_SECONDS`` after that, and in ``broker_prune``.

So, with ``task_acks_late``, a task runs at least once, as with Redis.  A
process on another host or PID namespace cannot be checked from here; only
the visibility timeout frees its leases.
"""

from __future__ import annotations

import fcntl
import functools
import os
import socket
import sqlite3
import time
from collections import deque
from functools import partial
from json import loads
from pathlib import Path
from queue import Empty
from typing import Any

from kombu import Connection
from kombu.transport import TRANSPORT_ALIASES, virtual
from kombu.transport import sqlalchemy as kombu_sqlalchemy
from kombu.utils.encoding import bytes_to_str
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

# kombu resolves a URL's transport through its aliases; every process of the
# site imports this module with its settings, before it connects.
TRANSPORT_NAME = "pattern"
TRANSPORT_ALIASES[TRANSPORT_NAME] = "pattern_site.broker:Transport"
SQLITE_BROKER_PREFIX = f"{TRANSPORT_NAME}+sqlite:///"
# kombu's own transport on the same file: accepted in settings and moved to
# this one.
KOMBU_SQLITE_PREFIX = "sqla+sqlite:///"
# Seconds a publisher or the worker waits for SQLite's write lock.
BUSY_TIMEOUT = 30.0
# Seconds a lease lasts when the transport options do not say (Redis's
# default visibility timeout).
VISIBILITY_TIMEOUT = 3600.0
# How often a consuming process looks for leases of dead processes.
ORPHAN_CHECK_SECONDS = 30.0
MESSAGE_TABLE = "kombu_message"
LEASE_COLUMNS = (("lease_owner", "TEXT"), ("lease_at", "REAL"))
# The key a fetched message's row id travels under in its delivery_info.
ROW_KEY = "broker_row"
_NEXT = text(
    f"SELECT id, payload FROM {MESSAGE_TABLE} "
    "WHERE queue_id = :queue AND visible = 1 ORDER BY id LIMIT 1"
)
_LEASE = text(
    f"UPDATE {MESSAGE_TABLE} SET visible = 0, lease_owner = :owner, "
    "lease_at = :at WHERE id = :id"
)
_DONE = text(
    f"UPDATE {MESSAGE_TABLE} SET visible = 0, lease_owner = NULL, "
    "lease_at = NULL WHERE id = :id"
)


def sqlite_broker_url(path: Path) -> str:
    return f"{SQLITE_BROKER_PREFIX}{path}"


def sqlite_broker_path(url: str) -> Path | None:
    """The SQLite file of an embedded-broker URL (or of kombu's SQLAlchemy
    transport on SQLite); None for any other broker."""
    for prefix in (SQLITE_BROKER_PREFIX, KOMBU_SQLITE_PREFIX):
        if url.startswith(prefix):
            return Path(url.removeprefix(prefix))
    return None


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False)
    # In WAL mode a commit then survives the process dying (not the machine
    # losing power) without an fsync per message.
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def sqlite_broker_prepare(path: Path, queues: tuple[str, ...]) -> None:
    """Create the broker's file in WAL mode (a property of the file, kept by
    every later connection), its tables with the lease columns, and
    ``queues``, once.

    kombu creates tables and queue rows on first use without a lock, so two
    processes starting together (web, worker and beat do) would race: one
    gets "table already exists" or a unique-constraint error on its first
    publish.  Here the first process does it under an exclusive file lock.
    A file kombu's own transport made gets the lease columns.
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
        with Connection(sqlite_broker_url(path)) as broker:
            channel = broker.default_channel
            for queue in queues:
                channel._new_queue(queue)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT)
        try:
            with conn:
                _lease_columns_add(conn)
        finally:
            conn.close()


def _lease_columns_add(conn: sqlite3.Connection) -> None:
    have = {row[1] for row in conn.execute(f"PRAGMA table_info({MESSAGE_TABLE})")}
    for name, kind in LEASE_COLUMNS:
        if name not in have:
            conn.execute(f"ALTER TABLE {MESSAGE_TABLE} ADD COLUMN {name} {kind}")
    # Leases are few (what workers hold now) among the done rows kept until
    # the next prune: the orphan check reads only them.
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS ix_{MESSAGE_TABLE}_lease "
        f"ON {MESSAGE_TABLE} (lease_owner) WHERE lease_owner IS NOT NULL"
    )


def _prepared(path: Path, queues: tuple[str, ...]) -> bool:
    """Whether an earlier start prepared ``path`` (it set WAL first): every
    process of the site checks, and opening kombu's engine costs more."""
    if not path.exists():
        return False
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT)
    try:
        names = {row[0] for row in conn.execute("SELECT name FROM kombu_queue")}
        columns = {
            row[1] for row in conn.execute(f"PRAGMA table_info({MESSAGE_TABLE})")
        }
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()
    return set(queues) <= names and {name for name, _ in LEASE_COLUMNS} <= columns


# --- whose lease ------------------------------------------------------------


@functools.cache
def _boot_id() -> str:
    """This boot of this machine (Linux); empty elsewhere."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@functools.cache
def _pid_namespace() -> str:
    """This process's PID namespace (Linux: containers have their own); pids
    of another namespace mean nothing here."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), "" without
    procfs; None if no such process lives (a zombie, killed but not yet
    reaped by its parent, is gone too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        try:  # no procfs (macOS): only whether the pid is taken
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    except OSError:
        return None
    # The command name, in parentheses, may hold spaces: fields follow it.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


@functools.cache
def _owner(pid: int) -> str:
    return " ".join(
        (
            socket.gethostname(),
            _boot_id(),
            _pid_namespace(),
            str(pid),
            _process_start(pid) or "",
        )
    )


def lease_owner() -> str:
    """This process as the owner of the messages it fetches (a forked
    child is an owner of its own)."""
    return _owner(os.getpid())


def lease_owner_gone(owner: str) -> bool:
    """Whether the process ``owner`` names is certainly gone: it ran on this
    machine before its last boot, or in this PID namespace under a pid that
    is now free or another process's.  False when it cannot be known (another
    host or namespace)."""
    parts = owner.split(" ")
    if len(parts) != 5 or not parts[3].isdigit():
        return False
    host, boot, namespace, pid, start = parts
    if host != socket.gethostname():
        return False
    if boot != _boot_id():
        return True
    if namespace != _pid_namespace():
        return False
    return _process_start(int(pid)) != start


# --- the transport -------------------------------------------------------------


class QoS(virtual.QoS):
    """kombu's in-memory bookkeeping of unacknowledged messages, which also
    settles each message's row in the broker."""

    def ack(self, delivery_tag: str) -> None:
        self._settle(delivery_tag)
        super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        # A requeue goes through the channel's _restore (the row is made
        # visible again); a plain rejection is final, as an ack.
        if not requeue:
            self._settle(delivery_tag)
        super().reject(delivery_tag, requeue=requeue)

    def _settle(self, delivery_tag: str) -> None:
        message = self._delivered.get(delivery_tag)
        if message is not None:
            self.channel.message_settle(message)


class Channel(kombu_sqlalchemy.Channel):
    QoS = QoS
    # Monotonic time of this process's next orphan check (0: at the first
    # fetch, i.e. when a worker starts).
    _orphans_due = 0.0

    def __init__(self, connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        options = connection.client.transport_options
        self.visibility_timeout = float(
            options.get("visibility_timeout", VISIBILITY_TIMEOUT)
        )
        # Rows of handled messages, to be marked done by the next fetch
        # (appended from any thread: a task is acknowledged by the thread
        # that ran it).
        self._done: deque[int] = deque()
        self._queue_ids: dict[str, int] = {}

    def _engine_from_config(self) -> Any:
        url = self.connection.client.hostname
        path = url.removeprefix("sqlite:///")
        return create_engine(url, poolclass=NullPool, creator=partial(_connect, path))

    def _run(self, sql: Any, params: Any = None) -> Any:
        """One statement (for each of ``params`` if a list) in a transaction
        of its own, on a connection of its own: its rows, or how many rows
        it changed.  Safe from any thread (the channel's session belongs to
        the consuming thread)."""
        engine, _ = self._open()
        statement = text(sql) if isinstance(sql, str) else sql
        with engine.begin() as conn:
            result = conn.execute(statement, params)
            return result.all() if result.returns_rows else result.rowcount

    def _done_take(self) -> list[dict[str, int]]:
        taken = []
        while True:
            try:
                taken.append({"id": self._done.popleft()})
            except IndexError:
                return taken

    def _get(self, queue: str) -> dict[str, Any]:
        if time.monotonic() >= Channel._orphans_due:
            Channel._orphans_due = time.monotonic() + ORPHAN_CHECK_SECONDS
            self.restore_orphans()
        if queue not in self._queue_ids:  # queue rows are never deleted
            self._queue_ids[queue] = self._get_or_create(queue).id
        done = self._done_take()
        session = self.session
        try:
            session.execute(text("BEGIN IMMEDIATE TRANSACTION"))
            if done:
                session.execute(_DONE, done)
            row = session.execute(_NEXT, {"queue": self._queue_ids[queue]}).first()
            if row is not None:
                at = time.time()
                session.execute(
                    _LEASE, {"id": row.id, "owner": lease_owner(), "at": at}
                )
            session.commit()
        except Exception:
            session.rollback()
            self._done.extend(item["id"] for item in done)
            raise
        if row is None:
            raise Empty()
        payload: dict[str, Any] = loads(bytes_to_str(row.payload))
        payload["properties"]["delivery_info"][ROW_KEY] = row.id
        return payload

    def message_settle(self, message: Any) -> None:
        """The message was handled (acknowledged, or rejected for good): its
        row is done, whoever holds its lease now.  Recorded by the next
        fetch or on close: a process killed before that leaves the lease to
        be released, and the task runs again (at least once)."""
        row = message.delivery_info.get(ROW_KEY)
        if row is not None:
            self._done.append(row)

    def close(self) -> None:
        done = self._done_take()
        if done:
            self._run(_DONE, done)
        super().close()

    def _restore(self, message: Any) -> None:
        """Make a message this process leased visible again (kombu re-sends
        a copy instead)."""
        row = message.delivery_info.get(ROW_KEY)
        if row is None:
            super()._restore(message)
            return
        self._run(
            f"UPDATE {MESSAGE_TABLE} SET visible = 1, lease_owner = NULL, "
            "lease_at = NULL WHERE id = :id AND lease_owner = :owner",
            {"id": row, "owner": lease_owner()},
        )

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        message = super().basic_get(queue, no_ack=no_ack, **kwargs)
        if message is not None and no_ack:
            self.message_settle(message)
        return message

    def basic_consume(
        self, queue: str, no_ack: bool, callback: Any, consumer_tag: str, **kwargs: Any
    ) -> Any:
        if no_ack:
            # Nothing will acknowledge these: done as they are delivered.
            callback = partial(self._settled_then, callback)
        return super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)

    def _settled_then(self, callback: Any, message: Any) -> Any:
        self.message_settle(message)
        return callback(message)

    def restore_orphans(self) -> int:
        """Make visible again the leased messages whose process is gone or
        whose lease is past the visibility timeout; how many."""
        leases = self._run(
            f"SELECT lease_owner, MIN(lease_at) FROM {MESSAGE_TABLE} "
            "WHERE lease_owner IS NOT NULL GROUP BY lease_owner"
        )
        cutoff = time.time() - self.visibility_timeout
        gone = [owner for owner, _ in leases if lease_owner_gone(owner)]
        if not gone and not any(oldest < cutoff for _, oldest in leases):
            return 0
        marks = ", ".join(f":gone{i}" for i in range(len(gone))) or "NULL"
        restored = self._run(
            f"UPDATE {MESSAGE_TABLE} SET visible = 1, lease_owner = NULL, "
            "lease_at = NULL WHERE lease_owner IS NOT NULL "
            f"AND (lease_at < :cutoff OR lease_owner IN ({marks}))",
            {"cutoff": cutoff, **{f"gone{i}": owner for i, owner in enumerate(gone)}},
        )
        return int(restored)

    def prune(self) -> int:
        """Delete the rows of handled messages; how many."""
        return int(
            self._run(
                f"DELETE FROM {MESSAGE_TABLE} WHERE visible = 0 AND lease_owner IS NULL"
            )
        )


class Transport(kombu_sqlalchemy.Transport):
    Channel = Channel


def broker_prune() -> int:
    """Upkeep of the embedded broker (0 on any other broker): make the
    messages of dead workers and expired leases visible again, and delete
    the handled ones; the number deleted."""
    from pattern_site.celery import app

    if sqlite_broker_path(app.conf.broker_url or "") is None:
        return 0
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        channel.restore_orphans()
        return int(channel.prune())
