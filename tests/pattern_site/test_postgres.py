"""The same code runs on PostgreSQL (DATABASE_URL), outside the search backend."""

import os
import subprocess
import sys
import uuid

import pytest

from tests.conftest import REPO, missing

pytestmark = pytest.mark.slow

PG_ADMIN_URL = os.environ.get(
    "PATTERN_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture
def postgres_database_url():
    import psycopg

    name = f"pattern_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:
        missing(f"PostgreSQL is not reachable at {PG_ADMIN_URL}: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
        "from coordination.actors import Actor;"
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
