"""Shared fixtures: each test gets its own EXPEDITER_HOME and a clean EXPEDITER_* environment,
and tests that need PostgreSQL share one throwaway cluster (initdb + pg_ctl on a free
127.0.0.1 port) per session, a new database each. Without the server binaries the PostgreSQL
tests are skipped loudly, and fail when EXPEDITER_REQUIRE_POSTGRES=1 (CI)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.clusters import cluster_or_skip

from expediter.testing.postgres import PostgresCluster

_databases = itertools.count()

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _isolated_home(expediter_home: Path) -> Path:
    """No test reads or writes the real user data directory."""
    return expediter_home


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL server for the whole session (skipped, loudly, when not installed)."""
    cluster = cluster_or_skip()
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
