"""The repository against a pure-Python model of the transitions and their guards.

Hypothesis drives inserts, finishes, decisions, lease renewals, confirmations, sweeps and
expired approvals on a small set of keys, users and attempts, with a clock it controls; after
every step the database must hold exactly the model's rows, every status change must be one
``ALLOWED`` lists, and ``late`` may only appear on a row that was abandoned before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from expediter.core.ledger import STATUSES
from expediter.core.ledger.database import Database
from expediter.core.ledger.repository import ALLOWED, COLUMNS, Repository, Statements
from expediter.errors import LedgerError

START = 1_700_000_000.0
#: Keys as the host builds them: two messages share a provider call id, one headless run too.
MESSAGES = {"m1:call_1": "m1", "m1:call_2": "m1", "m2:call_1": "m2", "run-1:call_1": None}
USERS = (None, "ann", "bob")
ATTEMPTS = ("a1", "a2")
FINISHES = ("executed", "failed")
DECISIONS = ("awaiting_approval", "approved", "denied")
RUNNING = ("proposed", "approved")

keys = st.sampled_from(sorted(MESSAGES))
users = st.sampled_from(USERS)
attempts = st.sampled_from(ATTEMPTS)
#: What a caller believes the row is in: mostly plausible, sometimes anything.
expectations = st.one_of(
    st.sampled_from(("proposed", "approved", "abandoned")), st.sampled_from(STATUSES)
)
seconds = st.integers(min_value=0, max_value=30).map(float)


def own(data: st.DataObject) -> bool:
    """Draw whether a caller uses the row's own value (four times in five)."""
    return data.draw(st.integers(min_value=0, max_value=4)) > 0


@attrs.define
class Row:
    """The model of one row: the columns the guards and the sweeper look at."""

    status: str
    user_id: str | None
    attempt_id: str | None
    message_id: str | None
    lease: float | None
    updated_at: float
    late: bool = False

    def matches(self, status: str, user_id: str | None, attempt_id: str | None = None) -> bool:
        """Whether a guarded write (``WHERE status = ? AND user_id IS NOT DISTINCT FROM ?``
        and, for finishes and renewals, ``AND attempt_id = ?``) selects this row."""
        return (
            self.status == status
            and self.user_id == user_id
            and (attempt_id is None or self.attempt_id == attempt_id)
        )


class LedgerMachine(RuleBasedStateMachine):
    """Drives one repository; subclasses set ``repository``."""

    repository: ClassVar[Repository]

    def __init__(self) -> None:
        super().__init__()
        self.repository.connection.execute("DELETE FROM tool_call_attempts")
        self.now = START
        self.model: dict[str, Row] = {}
        #: The statuses last read from the database, and the keys ever seen abandoned.
        self.seen: dict[str, str] = {}
        self.abandoned: set[str] = set()

    # -- rules --------------------------------------------------------------------------------

    @rule(advance=seconds)
    def tick(self, advance: float) -> None:
        self.now += advance

    @initialize(data=st.data())
    def start_with_calls(self, data: st.DataObject) -> None:
        for key in MESSAGES:
            if own(data):
                self.insert(key, data.draw(users), data.draw(attempts), data.draw(seconds))

    @rule(key=keys, user=users, attempt=attempts, lease=seconds)
    def insert(self, key: str, user: str | None, attempt: str, lease: float) -> None:
        row: dict[str, Any] = dict.fromkeys(COLUMNS)
        row.update(
            key=key,
            call_id=key.rpartition(":")[2],
            message_id=MESSAGES[key],
            user_id=user,
            status="proposed",
            attempted_at=self.now,
            updated_at=self.now,
            lease_expires_at=self.now + lease,
            attempt_id=attempt,
        )
        created = self.repository.insert(row)
        assert created is (key not in self.model)
        if created:
            self.model[key] = Row(
                "proposed", user, attempt, MESSAGES[key], self.now + lease, self.now
            )

    def _caller(self, data: st.DataObject) -> tuple[str, str | None, str, str]:
        """A key, and a caller's user, attempt and expected status: mostly the row's own (so
        writes apply), sometimes any (so the guards refuse them)."""
        existing = sorted(self.model)
        key = data.draw(st.sampled_from(existing) if existing and own(data) else keys)
        row = self.model.get(key)
        if row is None:
            return key, data.draw(users), data.draw(attempts), data.draw(expectations)
        user = row.user_id if own(data) else data.draw(users)
        attempt = (row.attempt_id or "a1") if own(data) else data.draw(attempts)
        expected = row.status if own(data) else data.draw(expectations)
        return key, user, attempt, expected

    def _target(self, data: st.DataObject, expected: str, targets: tuple[str, ...]) -> str:
        """Mostly a status the table allows after ``expected``, sometimes any of ``targets``."""
        allowed = sorted(ALLOWED[expected] & set(targets))
        return data.draw(st.sampled_from(allowed if allowed and own(data) else targets))

    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        key, user, attempt, expected = self._caller(data)
        status = self._target(data, expected, FINISHES)
        late = expected == "abandoned"  # as the Ledger does: only a swept row's finish is late
        arguments = {
            "expected": expected,
            "status": status,
            "result": '"done"',
            "error": None if status == "executed" else "failed",
            "finished_at": self.now,
            "duration_ms": 1.0,
            "late": late,
        }
        if status not in ALLOWED[expected]:
            with pytest.raises(LedgerError):
                self.repository.finish(key, user, attempt, **arguments)
            return
        applied = self.repository.finish(key, user, attempt, **arguments)
        row = self.model.get(key)
        assert applied is (row is not None and row.matches(expected, user, attempt))
        if applied:
            assert row is not None
            row.status, row.lease, row.updated_at, row.late = status, None, self.now, late

    @rule(data=st.data(), lease=seconds)
    def decide(self, data: st.DataObject, lease: float) -> None:
        key, user, attempt, expected = self._caller(data)
        status = self._target(data, expected, DECISIONS)
        approved = status == "approved"
        arguments = {
            "expected": expected,
            "status": status,
            "decision": status,
            "decided_by": "root",
            "now": self.now,
            "lease_expires_at": self.now + lease if approved else None,
            "worker_id": "w" if approved else None,
            "attempt_id": attempt if approved else None,
        }
        if status not in ALLOWED[expected]:
            with pytest.raises(LedgerError):
                self.repository.decide(key, user, **arguments)
            return
        applied = self.repository.decide(key, user, **arguments)
        row = self.model.get(key)
        assert applied is (row is not None and row.matches(expected, user))
        if applied:
            assert row is not None
            row.status, row.updated_at = status, self.now
            row.lease = arguments["lease_expires_at"]
            row.attempt_id = arguments["attempt_id"]

    @rule(data=st.data(), lease=seconds)
    def renew(self, data: st.DataObject, lease: float) -> None:
        key, user, attempt, expected = self._caller(data)
        applied = self.repository.renew(key, user, attempt, expected, self.now + lease)
        row = self.model.get(key)
        assert applied is (row is not None and row.matches(expected, user, attempt))
        if applied:
            assert row is not None
            row.lease = self.now + lease

    @rule(message=st.sampled_from(("m1", "m2")))
    def confirm(self, message: str) -> None:
        moved = [
            row
            for row in self.model.values()
            if row.message_id == message and row.status == "executed"
        ]
        assert self.repository.confirm(message, self.now) == len(moved)
        for row in moved:
            row.status, row.updated_at = "confirmed", self.now

    @rule(advance=seconds)
    def sweep(self, advance: float) -> None:
        self.now += advance
        expired = {
            key
            for key, row in self.model.items()
            if row.status in RUNNING and row.lease is not None and row.lease < self.now
        }
        assert set(self.repository.sweep(self.now)) == expired
        for key in expired:
            row = self.model[key]
            row.status, row.updated_at = "abandoned", self.now

    @rule(advance=seconds, age=seconds)
    def expire_approvals(self, advance: float, age: float) -> None:
        self.now += advance
        before = self.now - age
        expired = {
            key
            for key, row in self.model.items()
            if row.status == "awaiting_approval" and row.updated_at < before
        }
        assert set(self.repository.expire_approvals(before, self.now)) == expired
        for key in expired:
            row = self.model[key]
            row.status, row.updated_at = "abandoned", self.now

    # -- invariants ---------------------------------------------------------------------------

    def _database(self) -> dict[str, dict[str, Any]]:
        found = {key: self.repository.get(key) for key in MESSAGES}
        return {key: row for key, row in found.items() if row is not None}

    @invariant()
    def the_database_holds_the_models_rows(self) -> None:
        rows = self._database()
        assert set(rows) == set(self.model)
        for key, row in rows.items():
            actual = Row(
                row["status"],
                row["user_id"],
                row["attempt_id"],
                row["message_id"],
                row["lease_expires_at"],
                row["updated_at"],
                bool(row["late"]),
            )
            assert actual == self.model[key], key

    @invariant()
    def statuses_only_move_along_the_table_and_late_follows_abandonment(self) -> None:
        for key, row in self._database().items():
            status = row["status"]
            before = self.seen.get(key)
            if before is None:
                assert status == "proposed", (key, status)
            else:
                assert status == before or status in ALLOWED[before], (key, before, status)
            self.seen[key] = status
            if status == "abandoned":
                self.abandoned.add(key)
            if row["late"]:
                assert key in self.abandoned, key


@pytest.fixture
def repository(migrated_url: str) -> Iterator[Repository]:
    """The repository on its own autocommit connection to the test database."""
    database = Database.parse(migrated_url)
    connection = database.connect()
    yield Repository(connection, Statements(database.dialect))
    connection.close()


def test_the_repository_follows_the_model_of_allowed_transitions(
    repository: Repository, database_url: str
) -> None:
    machine = type("Machine", (LedgerMachine,), {"repository": repository})
    sqlite = database_url.startswith("sqlite")
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=80 if sqlite else 25,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
