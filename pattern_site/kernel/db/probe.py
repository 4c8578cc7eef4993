"""What the database says about itself, for the health report: that it
answers, and the versions of its engine and of the vector extension the
search index needs (sqlite-vec on SQLite, pgvector on PostgreSQL)."""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections


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
