"""Django's SQLite backend on sqlean, loading sqlite-vec per connection.

Write transactions of one process queue on a lock of their own before
``BEGIN IMMEDIATE``.  SQLite makes a writer that finds the database locked
sleep and retry (1, 2, 5, 10 ms and longer), so a transaction held for
0.2 ms by another thread costs the waiter a millisecond or more; a Python
lock hands over as soon as the holder commits.  SQLite's own lock still
decides who writes (and still queues other processes through its busy
timeout): this lock only spares threads of one process that sleep.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import sqlite_vec
from django.db.backends.sqlite3 import base as sqlite_base
from django.db.utils import OperationalError

import pattern_site.kernel.db.sqlite_vec  # noqa: F401  (swaps sqlite3 for sqlean first)

# One lock per database file, for every connection of this process to it.
_write_locks: dict[str, threading.Lock] = {}
_write_locks_guard = threading.Lock()


def _write_locks_forget() -> None:
    """In a forked child: new locks.  A lock another thread of the parent
    held at the fork is held for ever in the child, where that thread does
    not exist to release it."""
    global _write_locks_guard
    _write_locks.clear()
    _write_locks_guard = threading.Lock()


os.register_at_fork(after_in_child=_write_locks_forget)


def _write_lock(name: str) -> threading.Lock:
    lock = _write_locks.get(name)
    if lock is None:
        with _write_locks_guard:
            lock = _write_locks.setdefault(name, threading.Lock())
    return lock


# Statements as Django wrote them (``%s``) -> as SQLite takes them (``?``).
# Django converts each with a regular expression over the whole text on
# every run; the hot paths run the same few statements (built once, see
# pattern_site.kernel.db) thousands of times.  Bounded in entries and in
# the length of what it keeps, so that statements with inlined values
# cannot grow it.
_CONVERTED: dict[str, str] = {}
_CONVERTED_MAX = 1024
_CONVERTED_LONGEST = 8192


class CursorWrapper(sqlite_base.SQLiteCursorWrapper):
    def execute(self, query: str, params: Any = None) -> Any:
        # A list or tuple of parameters is positional: Django's own
        # ``execute`` asks whether it is a mapping (an ABC check) first.
        if type(params) is list or type(params) is tuple:
            driver = super(sqlite_base.SQLiteCursorWrapper, self)
            return driver.execute(self.convert_query(query), params)
        return super().execute(query, params)

    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        if param_names is not None:  # named parameters: Django's own way
            return super().convert_query(query, param_names=param_names)  # type: ignore[no-any-return]
        converted = _CONVERTED.get(query)
        if converted is None:
            converted = super().convert_query(query)
            if len(query) <= _CONVERTED_LONGEST:
                if len(_CONVERTED) >= _CONVERTED_MAX:
                    _CONVERTED.clear()
                _CONVERTED[query] = converted
        return converted  # type: ignore[no-any-return]


class DatabaseWrapper(sqlite_base.DatabaseWrapper):
    # The write lock this connection holds until its transaction ends (a
    # plain Lock, not an RLock: a connection shared between threads, as
    # Django's live-server tests share an in-memory one, may end its
    # transaction on another thread than the one that began it).
    _held_write_lock: threading.Lock | None = None

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        connection.enable_load_extension(True)
        try:
            sqlite_vec.load(connection)
        finally:
            connection.enable_load_extension(False)
        return connection

    def create_cursor(self, name: str | None = None) -> Any:
        return self.connection.cursor(factory=CursorWrapper)

    def _start_transaction_under_autocommit(self) -> None:
        if (
            self.transaction_mode not in ("IMMEDIATE", "EXCLUSIVE")
            or self._held_write_lock is not None
        ):
            # Deferred transactions read side by side: nothing to queue.
            # (A connection never begins twice; should it, waiting on its
            # own lock would only stall it.)
            super()._start_transaction_under_autocommit()
            return
        lock = _write_lock(str(self.settings_dict["NAME"]))
        # The busy timeout bounds this wait as it bounds SQLite's (which
        # follows, for a writer in another process).
        if not lock.acquire(
            timeout=float(self.settings_dict["OPTIONS"].get("timeout", 5))
        ):
            # What SQLite itself says when its busy timeout runs out.
            raise OperationalError("database is locked")
        self._held_write_lock = lock
        try:
            self._begin()
        except BaseException:
            self._write_lock_release()
            raise

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE`` (or ``EXCLUSIVE``) on the database connection
        itself, as Django commits: through a cursor wrapper only when its
        wrappers would do more than translate errors (queries logged,
        execute wrappers), which on the path of every write costs more
        Python than the statement."""
        if self.queries_logged or self.execute_wrappers:
            super()._start_transaction_under_autocommit()
            return
        with self.wrap_database_errors:
            self.connection.execute(f"BEGIN {self.transaction_mode}")

    def _write_lock_release(self) -> None:
        lock, self._held_write_lock = self._held_write_lock, None
        if lock is not None:
            lock.release()

    def _commit(self) -> None:
        try:
            if self.connection is not None and not self.queries_logged:
                # Django's own ``_commit`` without its logging of the
                # statement (a generator context manager per commit), which
                # only does anything when queries are logged.
                with self.wrap_database_errors:
                    self.connection.commit()
            else:
                super()._commit()
        finally:
            self._write_lock_release()

    def _rollback(self) -> None:
        try:
            super()._rollback()
        finally:
            self._write_lock_release()

    def _close(self) -> None:
        # Closing a connection in a transaction rolls it back (SQLite).
        try:
            super()._close()
        finally:
            self._write_lock_release()
