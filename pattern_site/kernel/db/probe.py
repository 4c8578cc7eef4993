"""What the database says about itself, for the health report: that it
answers, and the versions of its engine and of the vector extension the
search index needs (sqlite-vec on SQLite, pgvector on PostgreSQL)."""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction


def database_probe() -> dict[str, Any]:
    """``{"ok": True, "vendor": ...}`` with the versions (and on SQLite the
    journal mode); a database that does not answer raises."""
    connection = connections[DEFAULT_DB_ALIAS]
    info: dict[str, Any] = {"vendor": connection.vendor}
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
        if connection.vendor == "sqlite":
            cursor.execute("SELECT sqlite_version(), vec_version()")
            info["sqlite_version"], info["sqlite_vec_version"] = cursor.fetchone()
            cursor.execute("PRAGMA journal_mode")
            info["journal_mode"] = cursor.fetchone()[0]
        elif connection.vendor == "postgresql":
            cursor.execute(
                "SELECT current_setting('server_version'), (SELECT extversion"
                " FROM pg_extension WHERE extname = 'vector')"
            )
            info["server_version"], info["pgvector_version"] = cursor.fetchone()
    return {"ok": True, **info}


def database_write_probe(*, wait_seconds: float) -> dict[str, Any]:
    """Whether a write would go through now, waiting ``wait_seconds`` at
    most for the write lock; raises when it would not.

    SQLite: a connection of its own takes the write lock and commits a
    rewrite of the header's ``user_version`` (unchanged), so a lock held by
    a long transaction, a full disk or a read-only file all fail here, as
    they fail every write of the site.  PostgreSQL: a transaction that
    takes a transaction id, under a statement timeout."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor == "sqlite":
        probe = connection.Database.connect(
            connection.settings_dict["NAME"],
            timeout=wait_seconds,
            isolation_level=None,
        )
        try:
            probe.execute("BEGIN IMMEDIATE")
            (version,) = probe.execute("PRAGMA user_version").fetchone()
            probe.execute(f"PRAGMA user_version = {int(version)}")
            probe.execute("COMMIT")
        finally:
            probe.close()
    else:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL statement_timeout = {int(wait_seconds * 1000)}")
            cursor.execute("SELECT txid_current()")
    return {"ok": True}
