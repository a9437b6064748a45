# The two set-up commands of the README: `make demo` and `make test`.
# Each creates .venv if it is missing and installs what it needs.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint type bench install clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "expediter needs Python >= 3.11: run make PYTHON=python3.11 ...")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/expediter demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

type: install
	$(BIN)/mypy

test: lint type
	$(BIN)/pytest

bench: install
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .tox .pytest_cache .mypy_cache .ruff_cache build dist
