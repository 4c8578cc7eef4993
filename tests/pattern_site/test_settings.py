import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.db import connection, connections

from pattern_site import health

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.sqlite
def test_embedded_default_loads_sqlite_vec_and_fts5_on_every_connection(db):
    with connection.cursor() as cursor:
        cursor.execute("CREATE VIRTUAL TABLE t_vec USING vec0(embedding float[3])")
        cursor.execute(
            "INSERT INTO t_vec(rowid, embedding) VALUES (1, '[1,0,0]'), (2, '[0,1,0]')"
        )
        cursor.execute(
            "SELECT rowid FROM t_vec WHERE embedding MATCH '[0.9,0.1,0]'"
            " ORDER BY distance LIMIT 1"
        )
        assert cursor.fetchone()[0] == 1
        cursor.execute(
            "CREATE VIRTUAL TABLE t_fts USING fts5(body, tokenize='porter unicode61')"
        )
        cursor.execute("INSERT INTO t_fts(body) VALUES ('agents remembering things')")
        cursor.execute("SELECT count(*) FROM t_fts WHERE t_fts MATCH 'remember'")
        assert cursor.fetchone()[0] == 1
    # A brand-new connection gets the extension too.
    fresh = connections.create_connection("default")
    try:
        with fresh.cursor() as cursor:
            cursor.execute("SELECT vec_version()")
            assert cursor.fetchone()[0].startswith("v")
    finally:
        fresh.close()


@pytest.mark.sqlite
def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(db):
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"
        cursor.execute("PRAGMA busy_timeout")
        assert cursor.fetchone()[0] >= 1000


def _settings_in_subprocess(**env: str) -> dict:
    code = (
        "import django, json; django.setup();"
        "from django.conf import settings as s;"
        "print(json.dumps({'engine': s.DATABASES['default']['ENGINE'],"
        "'layer': s.CHANNEL_LAYERS['default'],"
        "'broker': s.CELERY_BROKER_URL,"
        "'db_options': s.DATABASES['default'].get('OPTIONS', {}),"
        "'conn_max_age': s.DATABASES['default']['CONN_MAX_AGE']}))"
    )
    full_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "pattern_site.settings.dev",
        **env,
    }
    if "DATABASE_URL" not in env:
        full_env.pop("DATABASE_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_default_settings_need_no_server(tmp_path):
    cfg = _settings_in_subprocess(PATTERN_DATA_DIR=str(tmp_path), PATTERN_REDIS_URL="")
    assert cfg["engine"] == "pattern_site.kernel.db.sqlite_vec"
    assert cfg["layer"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"
    assert cfg["layer"]["CONFIG"]["capacity"] >= 1500  # overflow drops silently
    assert cfg["broker"] == f"pattern+sqlite:///{tmp_path}/celery-broker.sqlite3"


def test_an_empty_broker_override_means_the_default_broker(tmp_path):
    cfg = _settings_in_subprocess(
        PATTERN_DATA_DIR=str(tmp_path),
        PATTERN_REDIS_URL="",
        PATTERN_CELERY_BROKER_URL="",
    )
    assert cfg["broker"] == f"pattern+sqlite:///{tmp_path}/celery-broker.sqlite3"


# kombu's own transport on the file (sqla) would lose the tasks of a worker
# that dies: such a URL gets the embedded broker's.
@pytest.mark.parametrize("scheme", ["pattern", "sqla"])
def test_broker_override_wins_over_redis(tmp_path, scheme):
    cfg = _settings_in_subprocess(
        PATTERN_DATA_DIR=str(tmp_path),
        PATTERN_REDIS_URL="redis://127.0.0.1:6379/3",
        PATTERN_CELERY_BROKER_URL=f"{scheme}+sqlite:///{tmp_path}/other.sqlite3",
    )
    assert cfg["broker"] == f"pattern+sqlite:///{tmp_path}/other.sqlite3"
    assert (tmp_path / "other.sqlite3").exists()


def test_redis_url_moves_channel_layer_and_broker_to_redis(tmp_path):
    cfg = _settings_in_subprocess(
        PATTERN_DATA_DIR=str(tmp_path), PATTERN_REDIS_URL="redis://127.0.0.1:6379/3"
    )
    assert cfg["layer"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    host = cfg["layer"]["CONFIG"]["hosts"][0]
    assert host["socket_timeout"] is None
    assert cfg["layer"]["CONFIG"]["capacity"] >= 1500
    assert cfg["broker"] == "redis://127.0.0.1:6379/3"


def test_database_url_selects_postgresql(tmp_path):
    cfg = _settings_in_subprocess(
        PATTERN_DATA_DIR=str(tmp_path),
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/test",
        PATTERN_PG_POOL_MAX_SIZE="12",
    )
    assert cfg["engine"] == "django.db.backends.postgresql"
    assert cfg["db_options"]["pool"] == {"min_size": 2, "max_size": 12, "timeout": 10.0}
    assert cfg["conn_max_age"] == 0  # Django's pool refuses persistent connections


def test_postgresql_pooling_can_be_turned_off(tmp_path):
    cfg = _settings_in_subprocess(
        PATTERN_DATA_DIR=str(tmp_path),
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/test",
        PATTERN_PG_POOL="false",
    )
    assert "pool" not in cfg["db_options"] and cfg["conn_max_age"] == 600


def test_health_reports_every_subsystem(client, transactional_db):
    # A transactional test: the plain db fixture's open transaction would
    # hold the write lock the health report probes.
    response = client.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    database = body["database"]
    if database["vendor"] == "sqlite":
        assert database["sqlite_vec_version"].startswith("v")
    else:
        assert database["vendor"] == "postgresql"
        major_minor = tuple(int(p) for p in database["pgvector_version"].split(".")[:2])
        assert major_minor >= (0, 8)
    assert body["channel_layer"]["ok"] is True
    assert body["broker"]["ok"] is True
    assert set(body["embeddings"]) >= {"ok", "model", "dim", "detail"}


def test_openapi_docs_are_served(client, db):
    assert client.get("/api/docs").status_code == 200
    schema = client.get("/api/openapi.json").json()
    assert "/api/health" in schema["paths"]


def test_docker_compose_describes_web_worker_beat_redis_and_postgres():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"web", "worker", "beat", "redis", "postgres", "migrate"} <= set(services)
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    assert services["web"]["deploy"]["replicas"] >= 2
    assert "migrate" in services["migrate"]["command"]
    # Replicas never race each other to migrate: they wait for the one run.
    assert services["web"]["depends_on"]["migrate"] == {
        "condition": "service_completed_successfully"
    }
    assert "daphne" in " ".join(services["web"]["command"])
    assert "worker" in " ".join(services["worker"]["command"])
    assert "beat" in " ".join(services["beat"]["command"])
    for name in ("web", "worker", "beat"):
        assert services[name]["build"]["dockerfile"] == "Dockerfile"
        environment = services[name]["environment"]
        assert environment["PATTERN_REDIS_URL"].startswith("redis://")
        assert environment["DATABASE_URL"].startswith("postgres://")
    assert (REPO / "Dockerfile").exists()


def _variables(text: str, pattern: str) -> set[str]:
    import re

    return set(re.findall(pattern, text, flags=re.MULTILINE))


def test_env_example_and_the_configuration_page_list_every_variable():
    """Every variable the settings read is in .env.example, and the
    configuration page's table names exactly the file's variables."""
    settings_source = "".join(
        path.read_text() for path in (REPO / "pattern_site/settings").glob("*.py")
    )
    read = _variables(settings_source, r'"((?:PATTERN|DATABASE)_[A-Z0-9_]+)"')
    listed = _variables((REPO / ".env.example").read_text(), r"^#? ?([A-Z][A-Z0-9_]+)=")
    documented = _variables(
        (REPO / "docs/configuration.md").read_text(), r"^\| `([A-Z][A-Z0-9_]+)` \|"
    )
    assert read - listed == set()
    assert listed == documented


def test_django_stays_on_the_series_whose_internals_pattern_site_db_uses():
    """pattern_site.kernel.db reads Django 5.2 internals (compiler.klass_info,
    get_related_populators): the pin and the installed version must agree."""
    import tomllib

    import django

    assert django.VERSION[:2] == (5, 2)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "Django~=5.2.0" in project["dependencies"]
    constraints = (REPO / "constraints.txt").read_text().splitlines()
    assert any(line.startswith("Django==5.2.") for line in constraints)


def test_health_is_degraded_not_down_when_only_redis_parts_fail(
    client, transactional_db, monkeypatch
):
    def down() -> None:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379")

    monkeypatch.setattr(health, "_broker", down)
    monkeypatch.setattr(health, "_channel_layer", down)
    response = client.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["broker"] == {
        "ok": False,
        "error": "ConnectionError: Error 111 connecting to 127.0.0.1:6379",
    }
    assert set(body["degraded"]) == {"broker", "channel_layer"}
    assert "backfill" in body["degraded"]["broker"]


def test_health_is_unavailable_when_the_database_fails(client, db, monkeypatch):
    def down() -> None:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(health, "database_probe", down)
    response = client.get("/api/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
