# BooCode — the README's two commands: `make run` and `make test`.
VENV    := .venv
PY      := $(VENV)/bin/python
HOST    ?= 127.0.0.1
PORT    ?= 8000

.PHONY: run test install test-deps lint bench conformance clean

$(VENV)/.installed: requirements.txt
	@test -x $(PY) || "$$(scripts/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $@

install: $(VENV)/.installed

## Create the virtualenv, install, migrate, sync data/ files, then serve on $(HOST):$(PORT).
run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py boocode_sync
	$(PY) manage.py ensure_admin
	@echo "BooCode: http://$(HOST):$(PORT)/ (Ctrl-C stops)"
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" exec $(VENV)/bin/daphne -b $(HOST) -p $(PORT) boocode.asgi:application

# What the tests need beyond Python packages: the third-party MCP server (npm) and Chromium.
tests/node/node_modules/.installed: tests/node/package.json
	cd tests/node && npm install --no-audit --no-fund --loglevel=error
	@touch $@

test-deps: install tests/node/node_modules/.installed
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

## Install what the tests need, then run the whole suite (SQLite, then the database tests on
## PostgreSQL), then the official MCP conformance suite's client scenarios.
test: test-deps tests/conformance/node_modules/.installed
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" BOOCODE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/boocode $(PY) -m pytest -m postgres
	$(PY) tests/conformance/run.py

lint: install
	$(VENV)/bin/ruff check .

bench: test-deps
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) bench/tool_calls.py

# The official MCP conformance suite (client scenarios), pinned with a local Node 22 in
# tests/conformance/package-lock.json; `make test` runs it last (docs/conformance.md).
tests/conformance/node_modules/.installed: tests/conformance/package.json tests/conformance/package-lock.json
	cd tests/conformance && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

## Run every client scenario of both suite versions, one at a time; results in tests/conformance/results/.
conformance: install tests/conformance/node_modules/.installed
	$(PY) tests/conformance/run.py

clean:
	rm -rf $(VENV) tests/node/node_modules
