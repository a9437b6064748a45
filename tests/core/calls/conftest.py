"""Fixtures of the call tests: a ledger database several hosts or processes share."""

from __future__ import annotations

from pathlib import Path

import pytest

from expediter.core.ledger.database import Database
from expediter.core.ledger.schema import upgrade


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A ledger database several processes share, with its schema at head."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'shared-ledger.db'}"
    else:
        url = request.getfixturevalue("fresh_pg_url")()
    upgrade(Database.parse(url))
    return url
