"""The same code runs on PostgreSQL (DATABASE_URL): migrations, seed, API.

The full run uses the bundled PostgreSQL with pgvector (``pgvector_server``);
the machine's own PostgreSQL (``PATTERN_TEST_POSTGRES_URL``), which has no
pgvector, shows the error a migration gives without it.
"""

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.conftest import REPO, missing

pytestmark = pytest.mark.slow

PG_ADMIN_URL = os.environ.get(
    "PATTERN_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new database on the server at ``admin_url``, dropped afterwards."""
    import psycopg

    name = f"pattern_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=3)
    except Exception as exc:
        missing(f"PostgreSQL is not reachable at {admin_url}: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield admin_url.rsplit("/", 1)[0] + f"/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_database_url(pgvector_server: Any) -> Iterator[str]:
    with fresh_database(pgvector_server.url()) as url:
        yield url


def test_migrate_without_pgvector_stops_and_names_the_fix(tmp_path: Any):
    with fresh_database(PG_ADMIN_URL) as url:
        import psycopg

        with psycopg.connect(url) as conn:
            available = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
        if available:
            pytest.skip(f"the PostgreSQL at {PG_ADMIN_URL} has pgvector")
        result = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=REPO,
            env={
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "pattern_site.settings.dev",
                "DATABASE_URL": url,
                "PATTERN_DATA_DIR": str(tmp_path),
            },
            capture_output=True,
            text=True,
        )
    assert result.returncode != 0
    assert "no 'vector' extension available" in result.stderr
    assert "pgvector/pgvector:pg16" in result.stderr


def test_migrations_seed_and_api_run_on_postgresql(postgres_database_url, tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "pattern_site.settings.dev",
        "DATABASE_URL": postgres_database_url,
        "PATTERN_DATA_DIR": str(tmp_path),
        "PATTERN_CELERY_EAGER": "true",
        # Fold the log into the snapshot every other edit.
        "PATTERN_MEMORY_COMPACT_UPDATES": "2",
    }

    def manage(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    manage("migrate", "--noinput")
    token = manage("create_agent", "Home", "Flux", "--partner", "sam").split()[-1]
    script = (
        "from django.test import Client;"
        f"c = Client(HTTP_AUTHORIZATION='Bearer {token}');"
        "r = c.get('/api/whoami', HTTP_HOST='127.0.0.1');"
        "print(r.status_code, r.json()['name']);"
        "h = c.get('/api/health', HTTP_HOST='127.0.0.1');"
        "print(h.json()['database']['vendor']);"
        "from pattern_site.kernel.actors import Actor;"
        "from coordination.models import Agent;"
        "from memory.blocks.services import block_create;"
        "from memory.blocks.selectors import block_value;"
        "b = block_create(actor=Actor.system(), owner=Agent.objects.get(),"
        " label='notes');"
        "codes = [c.post('/api/tools/context', {'operation': 'append',"
        " 'label': 'notes', 'content': w}, content_type='application/json',"
        " HTTP_HOST='127.0.0.1').status_code for w in ('one', 'two', 'three')];"
        "print(*codes, block_value(block=b).replace(chr(10), '|'))"
    )
    out = manage("shell", "--verbosity", "0", "-c", script).split()
    assert out == ["200", "Flux", "postgresql", "200", "200", "200", "one|two|three"]
