"""Fixtures of the built-in tools' tests: a real records store on SQLite and on PostgreSQL, and
the call context a host gives a user-scoped tool instance."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from expediter.core.host import Host
from expediter.core.instances.storage import ToolStorage
from expediter.core.instances.store import InstanceRow, InstanceStore
from expediter.core.ledger.database import Database
from expediter.core.ledger.schema import upgrade
from expediter.hookspecs.tool import CallContext
from expediter.testing import ToolContract

#: ``scoped(tool, user=..., instance=...)``: the context of one call of one instance.
Scoped = Callable[..., CallContext]


@pytest.fixture(params=["sqlite", "postgresql"])
def records_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A host database with its schema at head, on each database the host supports."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'records.db'}"
    else:
        url = request.getfixturevalue("fresh_pg_url")()
    upgrade(Database.parse(url))
    return url


@pytest.fixture
def instance_store(records_url: str) -> Iterator[InstanceStore]:
    """The store tools' records are kept in."""
    store = InstanceStore(Database.parse(records_url))
    yield store
    store.close()


@pytest.fixture
def scoped(instance_store: InstanceStore) -> Scoped:
    """Build the context a host gives a call of instance ``instance`` of ``tool`` by ``user``,
    whose storage makes the instance's row on first use (as for a default tool)."""

    def make(tool: str, *, user: str | None = "alice", instance: str | None = None) -> CallContext:
        instance_id = instance or f"default:{tool}"

        def anchor() -> None:
            now = time.time()
            instance_store.insert(
                InstanceRow(
                    id=instance_id,
                    owner_id=None,
                    tool=tool,
                    name=tool,
                    kind="default",
                    created_at=now,
                    updated_at=now,
                )
            )

        storage = ToolStorage(
            instance_store, instance_id=instance_id, user_id=user, tool=tool, anchor=anchor
        )
        return CallContext(user_id=user, instance_id=instance_id, tool=tool, storage=storage)

    return make


class RecordingToolContract(ToolContract):
    """The tool contract on a host that records calls, so a stateful tool has its storage."""

    @pytest.fixture
    def contract_host(self, make_host: Callable[..., Host]) -> Host:
        return make_host(self.tool, record_calls=True)
