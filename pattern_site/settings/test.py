"""Tests: a throwaway data directory and fast password hashing.

The test database is a file (not ``:memory:``) so that Celery workers and
Daphne processes started by integration tests can open the same database.
"""

import os
import tempfile
from pathlib import Path

_data = Path(tempfile.mkdtemp(prefix="pattern-test-"))
os.environ.setdefault("PATTERN_DATA_DIR", str(_data))
os.environ.setdefault("PATTERN_CELERY_EAGER", "true")
# Each activity event stored as its transaction commits, so tests read it
# back at once.
os.environ.setdefault("PATTERN_ACTIVITY_BATCH_SIZE", "1")

from pattern_site.settings.base import *  # noqa: E402, F403
from pattern_site.settings.base import DATA_DIR, DATABASES  # noqa: E402

if DATABASES["default"]["ENGINE"].endswith("sqlite_vec"):
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
