"""Ledger fixtures: every ledger test runs on SQLite and on a real PostgreSQL server
(``pg_cluster`` and ``fresh_pg_url`` come from tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from expediter.core.ledger import Ledger
from expediter.core.ledger.database import Database
from expediter.core.ledger.schema import upgrade


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
