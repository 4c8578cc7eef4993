"""SQLite database engine with sqlite-vec and FTS5 on every connection.

The stdlib ``sqlite3`` module of many Python builds cannot load extensions,
so this package swaps in ``sqlean`` (same DB-API, extensions enabled) under
the name ``sqlite3`` before Django's SQLite backend is imported.
Use it as ``ENGINE = "pattern_site.kernel.db.sqlite_vec"``.
"""

import sys

import sqlean
from django.core.exceptions import ImproperlyConfigured

_backend = sys.modules.get("django.db.backends.sqlite3.base")
if _backend is not None and _backend.Database.__name__ != "sqlean.dbapi2":
    raise ImproperlyConfigured(
        "django.db.backends.sqlite3 was imported before "
        "pattern_site.kernel.db.sqlite_vec; it would use the stdlib sqlite3, "
        "which cannot load sqlite-vec."
    )
sys.modules["sqlite3"] = sqlean
sys.modules["sqlite3.dbapi2"] = sqlean.dbapi2
