# The two set-up commands of the README: `make demo` and `make test`.
# Each creates .venv if it is missing and installs only what it runs: `make demo` installs
# expediter and its dependencies (the demo uses nothing else); `make test` adds the `dev` extra
# (pytest, ruff, mypy, PostgreSQL's driver, the provider SDKs the tests check schemas against).
# `make demo` runs in a data directory of its own (DEMO_HOME), so that its calls stay out of the
# default ledger (and out of any EXPEDITER_DATABASE_URL); `make clean` removes it.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# One stamp per install; the dev install includes the base one, so it touches both.
BASE_STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
PIP := PIP_DISABLE_PIP_VERSION_CHECK=1 $(BIN)/python -m pip
# The demo's EXPEDITER_HOME: its ledger, its manifest cache and the model reply it leaves (demo/).
DEMO_HOME := .cache/demo-home
# The contrib packs' tox envs: each installs its pack from its directory next to the core, as a
# third party's pack would be installed, and runs the pack's own tests.
CONTRIB_ENVS := http,mcp
# A real MCP server the mcp pack's tests start over stdio (pinned; from the npm registry).
MCP_SERVERS := .cache/mcp-servers
EVERYTHING := @modelcontextprotocol/server-everything@2026.8.31
EVERYTHING_STAMP := $(MCP_SERVERS)/.installed-2026.8.31

.PHONY: demo test lint type bench install install-dev clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "expediter needs Python >= 3.11: run make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)

$(BASE_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) install --quiet -e .
	touch $(BASE_STAMP)

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[dev]'
	touch $(DEV_STAMP) $(BASE_STAMP)

install: $(BASE_STAMP)

install-dev: $(DEV_STAMP)

demo: install
	EXPEDITER_HOME=$(CURDIR)/$(DEMO_HOME) EXPEDITER_DATABASE_URL= $(BIN)/expediter demo

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

type: install-dev
	$(BIN)/mypy

# Without npm the tests that need it are skipped (CI installs Node.js and requires them).
$(EVERYTHING_STAMP):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --prefix $(MCP_SERVERS) --no-audit --no-fund --loglevel=error $(EVERYTHING) \
		&& touch $(EVERYTHING_STAMP); \
	else echo "npm not found: the mcp pack's tests with $(EVERYTHING) will be skipped"; fi

test: lint type $(EVERYTHING_STAMP)
	$(BIN)/pytest
	$(BIN)/tox run -q -e $(CONTRIB_ENVS)

bench: install-dev
	$(PIP) install --quiet -e '.[dev,bench]'
	$(BIN)/tox run -q -e mcp --notest
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .tox .cache .pytest_cache .mypy_cache .ruff_cache build dist
