"""Ledger fixtures: every ledger test runs on SQLite and on a real PostgreSQL server
(``pg_cluster`` and ``fresh_pg_url`` come from tests/conftest.py); outage tests stop and start
a cluster of their module's own (``own_cluster``, ``outage_url``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.clusters import cluster_or_skip

from expediter.core.ledger import Ledger
from expediter.core.ledger.database import Database
from expediter.core.ledger.schema import upgrade
from expediter.testing.postgres import PostgresCluster

_databases = itertools.count()


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


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL server the module's tests may stop and start (the session cluster keeps
    serving the other tests)."""
    cluster = cluster_or_skip()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def outage_url(own_cluster: PostgresCluster) -> Iterator[str]:
    """A migrated database on the module's cluster; the server is running again afterwards."""
    name = f"outage_{os.getpid()}_{next(_databases)}"
    own_cluster.createdb(name)
    url = own_cluster.url(name)
    upgrade(Database.parse(url))
    yield url
    try:
        own_cluster.pg_ctl("status")
    except Exception:
        own_cluster.pg_ctl("start")


class Outage:
    """While entered, every new connection to the database fails, as when it is down."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.connect = Database.connect

    def __enter__(self) -> None:
        def refuse(database: Database, timeout: float = 5.0) -> Any:
            raise ConnectionRefusedError("the database is down (test)")

        self.monkeypatch.setattr(Database, "connect", refuse)

    def __exit__(self, *exc: object) -> None:
        self.monkeypatch.setattr(Database, "connect", self.connect)


@pytest.fixture
def outage(monkeypatch: pytest.MonkeyPatch) -> Outage:
    """A database outage to enter (``with outage:``); held connections keep working."""
    return Outage(monkeypatch)
