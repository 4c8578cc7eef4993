"""Django's SQLite backend on sqlean, loading sqlite-vec per connection."""

from typing import Any

import sqlite_vec
from django.db.backends.sqlite3 import base as sqlite_base

import pattern_site.kernel.db.sqlite_vec  # noqa: F401  (swaps sqlite3 for sqlean first)


class DatabaseWrapper(sqlite_base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        connection.enable_load_extension(True)
        try:
            sqlite_vec.load(connection)
        finally:
            connection.enable_load_extension(False)
        return connection
