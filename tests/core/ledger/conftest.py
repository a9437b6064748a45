"""Ledger fixtures: every ledger test runs on SQLite and on a real PostgreSQL server.

A throwaway cluster (initdb + pg_ctl on a free 127.0.0.1 port) is started once per test
session when the server binaries exist; each test gets its own database. Without the binaries
the PostgreSQL half is skipped loudly, and fails when EXPEDITER_REQUIRE_POSTGRES=1 (CI).
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from expediter.core.ledger import Ledger
from expediter.core.ledger.database import Database
from expediter.core.ledger.schema import upgrade
from expediter.testing.postgres import PostgresCluster, PostgresUnavailable

_databases = itertools.count()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL server for the whole session (skipped, loudly, when not installed)."""
    try:
        cluster = PostgresCluster.create()
    except PostgresUnavailable as exc:
        if os.environ.get("EXPEDITER_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"EXPEDITER_REQUIRE_POSTGRES=1 but {exc}")
        warnings.warn(f"PostgreSQL ledger tests skipped: {exc}", stacklevel=1)
        pytest.skip(f"PostgreSQL is not installed: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def fresh_pg_url(pg_cluster: PostgresCluster) -> Callable[[], str]:
    """Make a new, empty PostgreSQL database; returns its URL."""

    def make() -> str:
        name = f"ledger_{os.getpid()}_{next(_databases)}"
        pg_cluster.createdb(name)
        return pg_cluster.url(name)

    return make


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty ledger database URL: an SQLite file, or a new database on the test cluster."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return request.getfixturevalue("fresh_pg_url")()


@pytest.fixture
def migrated_url(database_url: str) -> str:
    """A ledger database URL whose schema is at head."""
    upgrade(Database.parse(database_url))
    return database_url


@pytest.fixture
def make_ledger(migrated_url: str, tmp_path: Path) -> Iterator[Callable[..., Ledger]]:
    """Open ledgers on the test database (closed at the end)."""
    opened: list[Ledger] = []

    def make(**options: object) -> Ledger:
        options.setdefault("home", tmp_path / "home")
        ledger = Ledger(migrated_url, **options)  # type: ignore[arg-type]
        ledger.open()
        opened.append(ledger)
        return ledger

    yield make
    for ledger in opened:
        ledger.close()


@pytest.fixture
def ledger(make_ledger: Callable[..., Ledger]) -> Ledger:
    """A ledger on the test database."""
    return make_ledger()
