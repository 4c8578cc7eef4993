"""Settings shared by every role, driven by environment variables.

Every variable read here is listed with its default in ``.env.example``.
With no variable set, the site runs embedded: one SQLite file (WAL, with
sqlite-vec and FTS5), an in-memory channel layer and a Celery broker on a
SQLite file of its own (``pattern_site.broker``), so nothing but Python is
needed.  ``PATTERN_REDIS_URL``
moves the channel layer and the broker to Redis; ``DATABASE_URL`` moves the
database (e.g. to PostgreSQL).
"""

import os
import secrets
import time
from pathlib import Path

import environ

from pattern_site.broker import (
    sqlite_broker_path,
    sqlite_broker_prepare,
    sqlite_broker_url,
)
from pattern_site.heartbeat import HEARTBEAT_SECONDS

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
if (BASE_DIR / ".env").is_file():
    env.read_env(BASE_DIR / ".env")

DATA_DIR = Path(env.str("PATTERN_DATA_DIR", default=str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _persisted_secret_key(path: Path) -> str:
    """The key in ``path``, made there (readable by its owner only) on first
    use: sessions survive restarts, and processes sharing the data directory
    (web, worker) agree on it.  Exclusive creation: of two processes starting
    together one writes, the other reads."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # the other process may be writing it right now
            key = path.read_text().strip()
            if key:
                return key
            time.sleep(0.02)
        raise RuntimeError(f"{path} is empty: delete it to make a new key") from None
    key = secrets.token_urlsafe(50)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


# Unset: a random key generated once into the data directory (never in the
# repository).
SECRET_KEY = env.str("PATTERN_SECRET_KEY", default="") or _persisted_secret_key(
    DATA_DIR / "secret_key"
)
DEBUG = env.bool("PATTERN_DEBUG", default=False)
ALLOWED_HOSTS = env.list("PATTERN_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("PATTERN_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    # Serves /api/docs (Swagger UI) from its own static files, not a CDN.
    "ninja",
    "pattern_site",
    "coordination",
    "activity",
    "memory",
    "folders",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "pattern_site.middleware.ApiJsonErrorMiddleware",
    # These four leave out an agent's tool-API call (a bearer token):
    # pattern_site.middleware.agent_api_request.
    "pattern_site.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "pattern_site.middleware.CsrfViewMiddleware",
    "pattern_site.middleware.AuthenticationMiddleware",
    "pattern_site.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "pattern_site.middleware.ApplicationErrorMiddleware",
]

ROOT_URLCONF = "pattern_site.urls"
ASGI_APPLICATION = "pattern_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "pattern_site.dashboard.dashboard_frame",
            ],
            "builtins": ["pattern_site.templatetags.humanized"],
        },
    },
]

# --- Database -------------------------------------------------------------
# The embedded default is SQLite through pattern_site.kernel.db.sqlite_vec, which
# swaps in sqlean (stdlib sqlite3 cannot load extensions here) and loads
# sqlite-vec on every connection.  Persistent connections keep a durable
# write well under a millisecond.
SQLITE_ENGINE = "pattern_site.kernel.db.sqlite_vec"
DATABASES = {
    "default": env.db_url(
        "DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'pattern.sqlite3'}"
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["ENGINE"] = SQLITE_ENGINE
    DATABASES["default"]["OPTIONS"] = {
        "timeout": env.int("PATTERN_SQLITE_BUSY_TIMEOUT", default=20),
        "transaction_mode": "IMMEDIATE",
        # mmap: reads come straight from the mapped file, not a pread per
        # 4 KB page, which dominates exact vector search.  0 turns it off.
        "init_command": (
            "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA foreign_keys=ON;"
            f"PRAGMA mmap_size={env.int('PATTERN_SQLITE_MMAP_SIZE', default=2**30)};"
        ),
    }
# Threads serving HTTP requests under Daphne (pattern_site/asgi.py); each
# keeps its own database connection.
HTTP_THREADS = env.int("PATTERN_HTTP_THREADS", default=4)
# How long (ms) the event loop waits in place for a request on those threads
# before it goes on serving other sockets beside it (pattern_site/asgi.py,
# SyncChainASGIHandler._hop); 0: it never waits in place.
HTTP_LOOP_WAIT_MS = env.float("PATTERN_HTTP_LOOP_WAIT_MS", default=10.0)
DATABASES["default"]["CONN_MAX_AGE"] = env.int("PATTERN_CONN_MAX_AGE", default=600)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# PostgreSQL: each process keeps a psycopg connection pool (Django's
# OPTIONS["pool"]) of PATTERN_PG_POOL_MIN_SIZE..MAX_SIZE connections, shared
# by its HTTP threads and Channels' sync threads; a request waits up to
# PATTERN_PG_POOL_TIMEOUT seconds for one.  A pooled connection goes back
# to the pool after each request, so persistent connections are off.
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env.bool(
    "PATTERN_PG_POOL", default=True
):
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("PATTERN_PG_POOL_MIN_SIZE", default=2),
        "max_size": env.int("PATTERN_PG_POOL_MAX_SIZE", default=HTTP_THREADS + 4),
        "timeout": env.float("PATTERN_PG_POOL_TIMEOUT", default=10.0),
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, channel layer, Celery -----------------------------------------
REDIS_URL = env.str("PATTERN_REDIS_URL", default="")

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 otherwise times out idle websockets after ~5 s
                "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
                "capacity": 1500,
                "expiry": 30,
            },
        }
    }
else:
    # The same capacity as Redis's above: Channels drops what overflows a
    # channel silently (presence relays go through one channel per socket).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 1500},
        }
    }

CELERY_BROKER_FILE = DATA_DIR / "celery-broker.sqlite3"
# Empty (as .env.example has it) counts as unset: Celery would otherwise
# fall back to AMQP on localhost.
CELERY_BROKER_URL = (
    env.str("PATTERN_CELERY_BROKER_URL", default="")
    or REDIS_URL
    or sqlite_broker_url(CELERY_BROKER_FILE)
)
CELERY_TASK_DEFAULT_QUEUE = "celery"
if _broker_file := sqlite_broker_path(CELERY_BROKER_URL):
    sqlite_broker_prepare(_broker_file, (CELERY_TASK_DEFAULT_QUEUE,))
    # kombu's own transport on the file loses what a dead worker held.
    CELERY_BROKER_URL = sqlite_broker_url(_broker_file)
# Seconds a fetched task waits for its acknowledgement before the broker
# (Redis or the embedded one) hands it out again; the embedded broker also
# does so as soon as the worker that fetched it is gone.
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": env.int("PATTERN_BROKER_VISIBILITY_TIMEOUT", default=3600)
}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env.bool("PATTERN_CELERY_EAGER", default=False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 4
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
# On SQLite, a worker copies the write-ahead log into the database after a
# task that changed at least this many rows since the last copy, between
# tasks rather than inside the commit that fills the log (0: SQLite alone).
WORKER_CHECKPOINT_CHANGES = env.int("PATTERN_WORKER_CHECKPOINT_CHANGES", default=100)
CELERY_IMPORTS = ["pattern_site.tasks"]
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "worker-heartbeat": {
        "task": "pattern_site.worker_heartbeat",
        "schedule": HEARTBEAT_SECONDS,
        # A heartbeat queued behind a backlog is stale by the time it runs.
        "options": {"expires": HEARTBEAT_SECONDS},
    },
    "broker-prune": {"task": "pattern_site.broker_prune", "schedule": 300.0},
}

# --- Embeddings -------------------------------------------------------------
EMBEDDING_MODEL = env.str(
    "PATTERN_EMBEDDING_MODEL", default="sentence-transformers/all-MiniLM-L6-v2"
)
EMBEDDING_DIM = env.int("PATTERN_EMBEDDING_DIM", default=384)
# Where ``manage.py embedding_model_install`` writes the model by default.
EMBEDDING_MODEL_INSTALL_DIR = DATA_DIR / "models" / "all-MiniLM-L6-v2-onnx"
# The shared model directory first, else one built by embedding_model_install.
_default_model_dir = next(
    (
        path
        for path in (
            BASE_DIR.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx",
            EMBEDDING_MODEL_INSTALL_DIR,
        )
        if path.is_dir()
    ),
    None,
)
EMBEDDING_MODEL_DIR = env.str(
    "PATTERN_EMBEDDING_MODEL_DIR", default=str(_default_model_dir or "")
)
# ONNX Runtime threads per process embedding texts (0: one per core).  Two
# worker processes with a thread per core each run slower together than one
# (oversubscribed cores); ``manage.py serve`` gives each worker process its
# share of the cores when this is 0.
EMBEDDING_THREADS = env.int("PATTERN_EMBEDDING_THREADS", default=0)

# The re-rank stage's backends (which one a constellation uses is its
# retrieval config's ``reranker``): a cross-encoder ONNX export in a local
# directory, run in this process in batches of RERANKER_BATCH pairs with
# RERANKER_THREADS ONNX Runtime threads (0: automatic); an HTTP endpoint of
# the ``POST /v1/rerank`` shape with its key and the model name it expects;
# and the seconds a re-rank may take before the search gives up on it and
# answers in fusion order.
RERANKER_MODEL_DIR = env.str("PATTERN_RERANKER_MODEL_DIR", default="")
RERANKER_BATCH = env.int("PATTERN_RERANKER_BATCH", default=25)
RERANKER_THREADS = env.int("PATTERN_RERANKER_THREADS", default=0)
RERANKER_URL = env.str("PATTERN_RERANKER_URL", default="")
RERANKER_API_KEY = env.str("PATTERN_RERANKER_API_KEY", default="")
RERANKER_MODEL = env.str("PATTERN_RERANKER_MODEL", default="")
RERANKER_TIMEOUT = env.float("PATTERN_RERANKER_TIMEOUT", default=2.0)

# --- Memory blocks ----------------------------------------------------------
# A block's update log is folded into its Loro snapshot once it holds this
# many updates or bytes (whichever comes first).  Writes and most reads use
# the per-process document cache (memory.blocks.doc_cache), so the log is read only
# on a cache miss (another process wrote, or a cold start).  A longer log
# makes a miss slower to load; a shorter one rewrites the snapshot more
# often (docs/memory.md, "Memory blocks", has the measurements).
MEMORY_COMPACT_UPDATES = env.int("PATTERN_MEMORY_COMPACT_UPDATES", default=16)
MEMORY_COMPACT_BYTES = env.int("PATTERN_MEMORY_COMPACT_BYTES", default=16 * 1024)
# Block documents kept per process (least recently used go first); 0: none.
MEMORY_DOCUMENT_CACHE_SIZE = env.int("PATTERN_MEMORY_DOCUMENT_CACHE", default=256)
# Live edits by one person within this many seconds of their previous one
# join that version of the block's history (a typed sentence is one version,
# not one per keystroke); 0 stores every live edit as a version of its own.
MEMORY_HISTORY_BURST_SECONDS = env.float(
    "PATTERN_MEMORY_HISTORY_BURST_SECONDS", default=5.0
)
# Tokens the context's <changes_since_last_look> section may take at most.
MEMORY_CHANGES_CONTEXT_TOKENS = env.int(
    "PATTERN_MEMORY_CHANGES_CONTEXT_TOKENS", default=400
)
MEMORY_DEFAULT_CHAR_LIMIT = env.int("PATTERN_MEMORY_CHAR_LIMIT", default=5000)
# Bytes a block's current document (its content as a shallow snapshot, no
# history) may reach: the fence behind the char limit, which counts only
# the rendered content.  History does not count: retention bounds it.
MEMORY_BLOCK_MAX_BYTES = env.int("PATTERN_MEMORY_BLOCK_MAX_BYTES", default=4 * 1024**2)


# History retention, per block type (``type=value`` pairs; a type left out
# keeps its whole history): a version's content is kept while it is younger
# than the type's days or among its newest versions; older ones are folded
# into a Loro shallow snapshot (their who/when/why stay listed).  A log
# written every minute keeps a day, at least 200 versions.
def _per_block_type(name: str, cast: type, default: dict[str, int]) -> dict:
    # Parsed as text: django-environ's typed dicts want ';' between pairs.
    return {
        kind: cast(value) for kind, value in env.dict(name, default=default).items()
    }


MEMORY_HISTORY_KEEP_DAYS = _per_block_type(
    "PATTERN_MEMORY_HISTORY_KEEP_DAYS",
    float,
    {"core": 90, "working": 30, "archival": 90, "log": 1},
)
MEMORY_HISTORY_KEEP_VERSIONS = _per_block_type(
    "PATTERN_MEMORY_HISTORY_KEEP_VERSIONS",
    int,
    {"core": 1000, "working": 500, "archival": 1000, "log": 200},
)
# A co-editing client that left less than this many hours ago (or is still
# connected) keeps the version it joined with: history is never folded past
# it.  One away longer starts again from a fresh snapshot.
MEMORY_HISTORY_PEER_HOURS = env.float("PATTERN_MEMORY_HISTORY_PEER_HOURS", default=72.0)
# How often a connected client is marked seen again (well under the peer
# hours), so that a client connected for longer keeps its version.
MEMORY_HISTORY_PEER_REFRESH_SECONDS = env.float(
    "PATTERN_MEMORY_HISTORY_PEER_REFRESH_SECONDS", default=3600.0
)
# Every block's history is folded to its window this often (writes also
# ask for a fold when a block's history grew well past it).
MEMORY_HISTORY_FOLD_MINUTES = env.float(
    "PATTERN_MEMORY_HISTORY_FOLD_MINUTES", default=60.0
)

# Dotted path of a callable returning the health report's "worker" section
# (ok, last_heartbeat_seconds_ago); the dashboard shows a banner on every
# page when it is not ok.  Empty: no banner.
DASHBOARD_WORKER_STATUS = env.str(
    "PATTERN_DASHBOARD_WORKER_STATUS", default="pattern_site.health.worker_status"
)

DEMO_PASSWORD = env.str("PATTERN_DEMO_PASSWORD", default="")

# --- Auth, i18n, static -----------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
# WhiteNoise serves static/ itself when nothing was collected, so a site run
# with DEBUG off (`make run`) has its styles and scripts without collectstatic.
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_MIMETYPES = {".wasm": "application/wasm"}

# Upper bound of one API request body (bad input gets a clear 413, not a hang).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int(
    "PATTERN_MAX_REQUEST_BYTES", default=2 * 1024 * 1024
)
# Files one multipart request may carry (more: a clear 413); the folder
# page sends a dropped directory in requests of at most this many files.
DATA_UPLOAD_MAX_NUMBER_FILES = env.int("PATTERN_MAX_REQUEST_FILES", default=100)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("PATTERN_LOG_LEVEL", "INFO")},
    # The MCP SDK logs every stateless request's end at INFO.
    "loggers": {"daphne": {"level": "WARNING"}, "mcp": {"level": "WARNING"}},
}

# --- Live co-editing (/ws/sync/, memory/consumers.py) ----------------------
# Largest single Loro update a client may send (in fragments) over the socket;
# bigger ones are refused with the protocol's payload_too_large.
PATTERN_SYNC_MAX_UPDATE_BYTES = env.int(
    "PATTERN_SYNC_MAX_UPDATE_BYTES", default=4 * 1024 * 1024
)
# Updates a second one socket may send (bursts of twice that); more are
# refused with rate_limited.  0 turns the limit off.
PATTERN_SYNC_RATE_LIMIT = env.float("PATTERN_SYNC_RATE_LIMIT", default=200.0)
# A socket that has joined no block this many seconds after connecting is
# closed (close code 4408).
PATTERN_SYNC_JOIN_TIMEOUT = env.float("PATTERN_SYNC_JOIN_TIMEOUT", default=10.0)
# Sync sockets one agent or person may hold open in one server process; one
# more is closed (close code 4429).
PATTERN_SYNC_SOCKETS_PER_ACTOR = env.int("PATTERN_SYNC_SOCKETS_PER_ACTOR", default=32)

# --- Long-term memory search and embedding jobs ----------------------------
# The quantised fast path: a binary vec0 table gives oversample * k coarse
# candidates, re-scored exactly (see docs/memory.md).
# The search page lists a result found by meaning alone (no keyword match)
# only as a "weaker match" when its cosine distance to the query is above
# this: the nearest rows are returned whether related or not.
SEARCH_WEAK_DISTANCE = env.float("PATTERN_SEARCH_WEAK_DISTANCE", default=0.65)
SEARCH_VECTOR_QUANTISED = env.bool("PATTERN_SEARCH_QUANTISED", default=False)
SEARCH_QUANTISED_OVERSAMPLE = env.int("PATTERN_SEARCH_QUANTISED_OVERSAMPLE", default=12)
# Hybrid (and auto) searches take the quantised path anyway once the
# constellation holds more than this many rows of the searched table: exact
# KNN grows with the rows, the quantised pass far slower (docs/memory.md, "Long-term
# memory"); 0 never switches.
SEARCH_QUANTISED_ABOVE = env.int("PATTERN_SEARCH_QUANTISED_ABOVE", default=20_000)
# Who computes exact KNN and the quantised path's Hamming pass: "numpy"
# (memory.search.chunks reads the vectors vec0 stores, chunk by chunk, and
# ranks them with one matrix product each; the Hamming pass scans the scope's
# bits held in memory) or "vec0" (sqlite-vec's own KNN, whose scalar distance
# loop and top-k selection are slower).
# numpy falls back to vec0 by itself on a sqlite-vec whose storage it does
# not know.
SEARCH_EXACT_KNN = env.str("PATTERN_SEARCH_EXACT_KNN", default="numpy")
# PostgreSQL's vector side (memory.search.postgres): the HNSW candidate list
# (hnsw.ef_search, at least the candidates asked for) and how many times k
# candidates are re-scored exactly.
SEARCH_PG_EF_SEARCH = env.int("PATTERN_SEARCH_PG_EF_SEARCH", default=100)
SEARCH_PG_OVERSAMPLE = env.int("PATTERN_SEARCH_PG_OVERSAMPLE", default=2)
EMBEDDING_BATCH_SIZE = env.int("PATTERN_EMBEDDING_BATCH_SIZE", default=128)
EMBEDDING_BACKFILL_BATCH = env.int("PATTERN_EMBEDDING_BACKFILL_BATCH", default=50)
EMBEDDING_BACKFILL_MINUTES = env.int("PATTERN_EMBEDDING_BACKFILL_MINUTES", default=30)
CELERY_BEAT_SCHEDULE["memory-embedding-backfill"] = {
    "task": "memory.embedding_backfill",
    "schedule": EMBEDDING_BACKFILL_MINUTES * 60.0,
}
# Archival consolidation (promote, merge, prune, cap) of each agent and each
# constellation, at most once per this many hours; a worker starting up
# catches up the scopes that missed their run.
ARCHIVAL_CONSOLIDATION_HOURS = env.float(
    "PATTERN_ARCHIVAL_CONSOLIDATION_HOURS", default=6.0
)
CELERY_BEAT_SCHEDULE["memory-history-fold"] = {
    "task": "memory.blocks_history_fold_due",
    "schedule": MEMORY_HISTORY_FOLD_MINUTES * 60.0,
}
CELERY_BEAT_SCHEDULE["memory-archival-consolidation"] = {
    "task": "memory.archival_consolidate_due",
    "schedule": ARCHIVAL_CONSOLIDATION_HOURS * 3600.0,
}

# --- Coordination work ------------------------------------------------------
# An agent counts as active (``/coord status``) when it made an authenticated
# request within this many minutes.
COORDINATION_ACTIVE_AGENT_MINUTES = env.int(
    "PATTERN_COORDINATION_ACTIVE_MINUTES", default=15
)

# --- Activity stream, summaries, catch-up ----------------------------------
# Off turns every activity_record call into a no-op.
ACTIVITY_RECORDING = env.bool("PATTERN_ACTIVITY_RECORDING", default=True)
# Events wait in memory and are stored in bulk by a background thread; 1
# stores each event in the committing thread.
ACTIVITY_BATCH_SIZE = env.int("PATTERN_ACTIVITY_BATCH_SIZE", default=64)
ACTIVITY_FLUSH_SECONDS = env.float("PATTERN_ACTIVITY_FLUSH_SECONDS", default=0.5)
ACTIVITY_RETENTION_DAYS = env.int("PATTERN_ACTIVITY_RETENTION_DAYS", default=90)
ACTIVITY_CONTEXT_EVENTS = env.int("PATTERN_ACTIVITY_CONTEXT_EVENTS", default=10)
ACTIVITY_CATCH_UP_AFTER_MINUTES = env.int(
    "PATTERN_ACTIVITY_CATCH_UP_AFTER_MINUTES", default=60
)
ACTIVITY_CATCH_UP_MIN_TOKENS = env.int(
    "PATTERN_ACTIVITY_CATCH_UP_MIN_TOKENS", default=300
)
ACTIVITY_CATCH_UP_MAX_TOKENS = env.int(
    "PATTERN_ACTIVITY_CATCH_UP_MAX_TOKENS", default=1500
)
ACTIVITY_SUMMARY_MIN_MESSAGES = env.int(
    "PATTERN_ACTIVITY_SUMMARY_MIN_MESSAGES", default=5
)
ACTIVITY_SUMMARY_MINUTES = env.int("PATTERN_ACTIVITY_SUMMARY_MINUTES", default=60)
ACTIVITY_CONSTELLATION_SUMMARY_HOURS = env.int(
    "PATTERN_ACTIVITY_CONSTELLATION_SUMMARY_HOURS", default=24
)
# Dotted path of ``callable(list[str]) -> vectors | None`` the extractive
# summarizer ranks sentences with (empty: word overlap only).
ACTIVITY_EMBEDDER = env.str(
    "PATTERN_ACTIVITY_EMBEDDER", default="memory.search.embedder.embed_texts"
)
CELERY_BEAT_SCHEDULE["activity-agent-summaries"] = {
    "task": "activity.agent_summaries_refresh",
    "schedule": ACTIVITY_SUMMARY_MINUTES * 60.0,
}
CELERY_BEAT_SCHEDULE["activity-constellation-summaries"] = {
    "task": "activity.constellation_summaries_generate",
    "schedule": 3600.0,
}
CELERY_BEAT_SCHEDULE["activity-retention-fold"] = {
    "task": "activity.activity_retention_fold",
    "schedule": 24 * 3600.0,
}

# --- LLM (OpenAI-compatible Chat Completions) -------------------------------
# Unset base URL or model: summaries are extractive and need no network.
LLM_BASE_URL = env.str("PATTERN_LLM_BASE_URL", default="")
LLM_API_KEY = env.str("PATTERN_LLM_API_KEY", default="")
LLM_MODEL = env.str("PATTERN_LLM_MODEL", default="")
LLM_TIMEOUT = env.float("PATTERN_LLM_TIMEOUT", default=30.0)
LLM_MAX_RETRIES = env.int("PATTERN_LLM_MAX_RETRIES", default=2)
LLM_MAX_TOKENS = env.int("PATTERN_LLM_MAX_TOKENS", default=600)
LLM_JSON_RETRIES = env.int("PATTERN_LLM_JSON_RETRIES", default=1)
LLM_DAILY_TOKEN_BUDGET = env.int("PATTERN_LLM_DAILY_TOKEN_BUDGET", default=200_000)
# Further OpenAI-compatible providers an agent's loop config may name:
# {"name": {"base_url": "...", "api_key": "..."}} (JSON).  Keys live here only.
LLM_PROVIDERS = env.json("PATTERN_LLM_PROVIDERS", default={})
# A turn left running is resumed by a re-run of its task only once its
# worker has shown no sign of life for this long (s); sooner, the task waits.
AGENT_TURN_RESUME_AFTER_SECONDS = env.int(
    "PATTERN_AGENT_TURN_RESUME_AFTER_SECONDS", default=90
)
# A tool result shown on a run's event stream is cut to this many characters.
AGENT_TURN_RESULT_PREVIEW_CHARS = env.int(
    "PATTERN_AGENT_TURN_RESULT_PREVIEW_CHARS", default=500
)

# --- Agent groups (coordination/groups) ------------------------------------
# Longest an agent's ``GET /api/inbox?wait=`` long-poll may wait for work.
GROUPS_INBOX_MAX_WAIT = env.float("PATTERN_GROUPS_INBOX_MAX_WAIT", default=25.0)
# How often a waiting event stream or inbox looks at the database when no
# wake-up arrived (wake-ups from other processes need the Redis layer).
GROUPS_POLL_SECONDS = env.float("PATTERN_GROUPS_POLL_SECONDS", default=1.0)
# Beat: how often overdue deliveries/votes are swept and sleeptime groups are
# checked (each group also waits its own check_interval).
GROUPS_SWEEP_SECONDS = env.float("PATTERN_GROUPS_SWEEP_SECONDS", default=15.0)
GROUPS_SLEEPTIME_SECONDS = env.float("PATTERN_GROUPS_SLEEPTIME_SECONDS", default=60.0)
# An agent answered by the LLM: its streamed answer becomes a TextChunk event
# at most this often (the first piece at once).
GROUPS_LLM_CHUNK_SECONDS = env.float("PATTERN_GROUPS_LLM_CHUNK_SECONDS", default=0.5)
CELERY_BEAT_SCHEDULE["groups-run-deadlines-sweep"] = {
    "task": "groups.run_deadlines_sweep",
    "schedule": GROUPS_SWEEP_SECONDS,
}
CELERY_BEAT_SCHEDULE["groups-sleeptime-sweep"] = {
    "task": "groups.group_sleeptime_sweep",
    "schedule": GROUPS_SLEEPTIME_SECONDS,
}

# --- Folders of files (folders/) ---------------------------------------------
# Directories local folders may live under (separated by ":"); a local folder
# anywhere else is refused.  Empty: no local folders.
FOLDER_ROOTS = [p for p in env.str("PATTERN_FOLDER_ROOTS", default="").split(":") if p]
FOLDER_MAX_FILE_BYTES = env.int("PATTERN_FOLDER_MAX_FILE_BYTES", default=10 * 2**20)
FOLDER_MAX_BYTES = env.int("PATTERN_FOLDER_MAX_BYTES", default=500 * 2**20)
# A zip upload: at most this many members, and no member inflating more
# than this ratio (zip bombs); its total counts against the folder limit.
FOLDER_ZIP_MAX_FILES = env.int("PATTERN_FOLDER_ZIP_MAX_FILES", default=5000)
FOLDER_ZIP_MAX_RATIO = env.int("PATTERN_FOLDER_ZIP_MAX_RATIO", default=100)
# Passages: whole lines up to this many tokens (the model reads 256), with
# this many lines repeated from the end of the previous passage.
FOLDER_PASSAGE_TOKENS = env.int("PATTERN_FOLDER_PASSAGE_TOKENS", default=200)
FOLDER_PASSAGE_OVERLAP_LINES = env.int("PATTERN_FOLDER_PASSAGE_OVERLAP", default=2)
# Files an agent may hold open at once (least recently used close first),
# and the lines of a window when the agent does not say.
FOLDER_MAX_OPEN_FILES = env.int("PATTERN_FOLDER_MAX_OPEN_FILES", default=5)
FOLDER_WINDOW_LINES = env.int("PATTERN_FOLDER_WINDOW_LINES", default=100)
# Wall-clock budgets of a grep (seconds): of the pattern's run over one file
# (a pathological pattern is stopped there, reported instead of holding a
# worker; the regex engine overshoots a budget by up to ~2x) and of the
# whole grep.
FOLDER_GREP_FILE_TIMEOUT = env.float("PATTERN_FOLDER_GREP_FILE_TIMEOUT", default=0.15)
FOLDER_GREP_TIMEOUT = env.float("PATTERN_FOLDER_GREP_TIMEOUT", default=3.0)
# Characters (millions) of file text each process keeps for grep; files
# are re-read only when their digest changes.
FOLDER_GREP_CACHE_MB = env.int("PATTERN_FOLDER_GREP_CACHE_MB", default=256)
FOLDER_RESCAN_MINUTES = env.int("PATTERN_FOLDER_RESCAN_MINUTES", default=10)
CELERY_BEAT_SCHEDULE["folders-rescan-local"] = {
    "task": "folders.folders_rescan_local",
    "schedule": FOLDER_RESCAN_MINUTES * 60.0,
}
