"""Fixtures of the instance tests: a host on SQLite or PostgreSQL with a tool needing a secret."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import expediter
from expediter.core.host import Host
from expediter.core.instances.keys import generate_key
from expediter.core.ledger.database import Database
from expediter.core.ledger.schema import upgrade


class Weather(expediter.Toolbox):
    """Weather for a city, with the owner's API key."""

    name = "weather"
    config_fields = (
        expediter.ConfigField("api_key", required=True, secret=True, label="API key"),
        expediter.ConfigField("units", enum=("metric", "imperial")),
    )

    @expediter.action
    def forecast(self, city: str, context: expediter.CallContext) -> dict[str, Any]:
        """The forecast.

        Args:
            city: The city.
        """
        key = self.config["api_key"]
        return {
            "city": city,
            "key_tail": key[-4:],
            "same_by_context": context.secret("api_key") == key,
            "owner": context.owner_id,
            "invoker": context.user_id,
            "echo": f"called with {key}",
        }

    @expediter.action(require_approval=True)
    def alert(self, city: str) -> str:
        """Send an alert (asks first).

        Args:
            city: The city.
        """
        return f"alerted {city} with {self.config['api_key'][-4:]}"


class Scheduler(expediter.Toolbox):
    """Schedules runs (never in headless runs)."""

    name = "scheduler"
    headless_excluded = True

    @expediter.action
    def schedule(self, what: str) -> str:
        """Schedule something.

        Args:
            what: What.
        """
        return what


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database at head, on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'instances.db'}"
    else:
        url = request.getfixturevalue("fresh_pg_url")()
    upgrade(Database.parse(url))
    return url


@pytest.fixture
def secret_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A master key in EXPEDITER_SECRET_KEYS."""
    key = generate_key()
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", key)
    return key


@pytest.fixture
def make_host(database_url: str, tmp_path: Path, secret_key: str) -> Iterator[Callable[..., Host]]:
    """Hosts on the shared database with the Weather and Scheduler tools and the built-ins."""
    made: list[Host] = []

    def make(**options: Any) -> Host:
        options.setdefault("home", tmp_path / f"home{len(made)}")
        host = Host(
            database_url=database_url,
            autoload=False,
            plugins=[Weather, Scheduler],
            **options,
        )
        made.append(host)
        return host

    yield make
    for host in made:
        host.close()
