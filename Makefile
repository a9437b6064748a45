# The two set-up commands of the README: `make demo` and `make test`.
# Each creates .venv if it is missing and installs only what it runs: `make demo` installs
# expediter and its dependencies (the demo uses nothing else); `make test` adds the `dev` extra
# (pytest, ruff, mypy, PostgreSQL's driver, the provider SDKs the tests check schemas against).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# One stamp per install; the dev install includes the base one, so it touches both.
BASE_STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
PIP := PIP_DISABLE_PIP_VERSION_CHECK=1 $(BIN)/python -m pip
# The contrib packs' tox envs: each installs its pack from its directory next to the core, as a
# third party's pack would be installed, and runs the pack's own tests.
CONTRIB_ENVS := http

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
	$(BIN)/expediter demo

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

type: install-dev
	$(BIN)/mypy

test: lint type
	$(BIN)/pytest
	$(BIN)/tox run -q -e $(CONTRIB_ENVS)

bench: install-dev
	$(PIP) install --quiet -e '.[dev,bench]'
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .tox .pytest_cache .mypy_cache .ruff_cache build dist
