"""Every transition the ledger allows, every one it refuses, and calls whose ids collide.

The repository tests pass explicit times (``NOW`` and offsets from it) so that leases and
sweeps are deterministic; the ``Ledger`` tests use the real clock.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import expediter
from expediter.core.host import Host
from expediter.core.ledger import STATUSES, Ledger
from expediter.core.ledger.database import Database
from expediter.core.ledger.repository import ALLOWED, COLUMNS, Repository, Statements
from expediter.errors import LedgerError
from expediter.hookspecs.tool import CallContext

NOW = 1_700_000_000.0
ALLOWED_PAIRS = [(source, target) for source in STATUSES for target in sorted(ALLOWED[source])]
REFUSED_PAIRS = [
    (source, target)
    for source, target in itertools.product(STATUSES, STATUSES)
    if target not in ALLOWED[source]
]
#: The targets reached through ``finish`` and ``decide``; the others have their own statements.
FINISHES = ("executed", "failed")
DECISIONS = ("awaiting_approval", "approved", "denied")


@pytest.fixture
def repository(migrated_url: str) -> Iterator[Repository]:
    """The repository on its own autocommit connection to the test database."""
    database = Database.parse(migrated_url)
    connection = database.connect()
    yield Repository(connection, Statements(database.dialect))
    connection.close()


def new_row(
    key: str,
    *,
    status: str = "proposed",
    user_id: str | None = "ann",
    attempt_id: str | None = "a1",
    message_id: str | None = None,
    at: float = NOW,
    lease: float | None = NOW + 60,
    **columns: Any,
) -> dict[str, Any]:
    """A complete row for ``Repository.insert`` (every column named)."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        key=key,
        call_id=key.rpartition(":")[2],
        message_id=message_id,
        run_id=None if message_id else key.rpartition(":")[0],
        user_id=user_id,
        tool="t",
        action="a",
        status=status,
        attempted_at=at,
        updated_at=at,
        lease_expires_at=lease,
        worker_id="w1",
        attempt_id=attempt_id,
    )
    row.update(columns)
    return row


def finish(
    repository: Repository,
    key: str,
    *,
    user_id: str | None = "ann",
    attempt_id: str = "a1",
    expected: str = "proposed",
    status: str = "executed",
    late: bool = False,
) -> bool:
    """Finish a call at ``NOW + 5`` with a small JSON result."""
    return repository.finish(
        key,
        user_id,
        attempt_id,
        expected=expected,
        status=status,
        result='{"ok": true}',
        error=None if status == "executed" else "it failed",
        finished_at=NOW + 5,
        duration_ms=5.0,
        late=late,
    )


def decide(
    repository: Repository,
    key: str,
    *,
    user_id: str | None = "ann",
    expected: str = "proposed",
    status: str = "awaiting_approval",
) -> bool:
    """Record a decision at ``NOW + 5`` (an approval claims the call as attempt ``a1``)."""
    approved = status == "approved"
    return repository.decide(
        key,
        user_id,
        expected=expected,
        status=status,
        decision={"approved": "approved", "denied": "denied"}.get(status),
        decided_by="root",
        now=NOW + 5,
        error="denied by root" if status == "denied" else None,
        lease_expires_at=NOW + 65 if approved else None,
        worker_id="w2" if approved else None,
        attempt_id="a1" if approved else None,
    )


def apply(repository: Repository, key: str, source: str, target: str) -> bool:
    """Move ``key`` from ``source`` to ``target`` with the statement made for it."""
    if target in FINISHES:
        late = source in ("abandoned", "failed")
        return finish(repository, key, expected=source, status=target, late=late)
    if target in DECISIONS:
        return decide(repository, key, expected=source, status=target)
    if target == "confirmed":
        return repository.confirm(key.partition(":")[0], NOW + 5) == 1
    assert target == "abandoned"
    if source == "awaiting_approval":
        return repository.expire_approvals(NOW + 1, NOW + 5) == [key]
    return repository.sweep(NOW + 5) == [key]


# -- the transition table ---------------------------------------------------------------------


def test_the_table_covers_every_status_and_final_statuses_have_no_way_out() -> None:
    assert set(ALLOWED) == set(STATUSES)
    assert all(targets <= set(STATUSES) for targets in ALLOWED.values())
    assert {status for status, targets in ALLOWED.items() if not targets} == {
        "denied",
        "confirmed",
    }
    # A call reported failed whose tool still finished: its result is recorded late.
    assert ALLOWED["failed"] == {"executed"}
    assert "proposed" not in set().union(*ALLOWED.values())


def test_every_allowed_transition_applies(repository: Repository) -> None:
    for index, (source, target) in enumerate(ALLOWED_PAIRS):
        pair = f"{source} -> {target}"
        key = f"m{index}:call_1"
        repository.insert(new_row(key, status=source, message_id=f"m{index}", lease=NOW + 1))
        assert apply(repository, key, source, target) is True, pair
        row = repository.get(key)
        assert (row["status"], row["user_id"]) == (target, "ann"), pair
        if target in FINISHES:
            assert row["result"] in ('{"ok": true}', {"ok": True}), pair
            assert (row["finished_at"], row["duration_ms"], row["lease_expires_at"]) == (
                NOW + 5,
                5.0,
                None,
            ), pair
            assert bool(row["late"]) is (source in ("abandoned", "failed")), pair
        elif target == "approved":
            assert (row["decided_by"], row["attempt_id"], row["lease_expires_at"]) == (
                "root",
                "a1",
                NOW + 65,
            ), pair
        elif target == "denied":
            assert (row["decision"], row["finished_at"]) == ("denied", NOW + 5), pair
        elif target == "abandoned":
            assert row["error"].startswith("abandoned: "), pair
            assert row["finished_at"] == NOW + 5, pair
        # The same write a second time finds the row moved on and changes nothing.
        if target in (*FINISHES, *DECISIONS):
            assert apply(repository, key, source, target) is False, pair
            assert repository.get(key) == row, pair


def test_every_pair_outside_the_table_is_refused_before_touching_the_database(
    repository: Repository,
) -> None:
    for index, (source, target) in enumerate(REFUSED_PAIRS):
        key = f"run:{index}"
        repository.insert(new_row(key, status=source))
        before = repository.get(key)
        with pytest.raises(
            LedgerError,
            match=rf"does not allow {source} -> {target}|cannot move a call to '{target}'",
        ):
            finish(repository, key, expected=source, status=target)
        with pytest.raises(
            LedgerError,
            match=rf"does not allow {source} -> {target}|cannot move a call to '{target}'",
        ):
            decide(repository, key, expected=source, status=target)
        assert repository.get(key) == before


def test_a_guarded_write_reports_false_when_the_row_is_in_another_status(
    repository: Repository,
) -> None:
    guarded = [pair for pair in ALLOWED_PAIRS if pair[1] in (*FINISHES, *DECISIONS)]
    keys = itertools.count()
    for (source, target), actual in itertools.product(guarded, STATUSES):
        if actual == source:
            continue
        key = f"run:{next(keys)}"
        repository.insert(new_row(key, status=actual))
        before = repository.get(key)
        assert apply(repository, key, source, target) is False, (source, target, actual)
        assert repository.get(key) == before


def test_a_guarded_write_reports_false_for_another_user(repository: Repository) -> None:
    # other user; a user where the row has none; no user where the row has one
    for index, (owner, caller) in enumerate([("ann", "bob"), ("ann", None), (None, "ann")]):
        running, waiting = f"run:{index}", f"run:w{index}"
        repository.insert(new_row(running, user_id=owner))
        repository.insert(new_row(waiting, user_id=owner, status="awaiting_approval"))
        before = [repository.get(running), repository.get(waiting)]
        assert finish(repository, running, user_id=caller) is False
        assert finish(repository, running, user_id=caller, status="failed") is False
        assert decide(repository, running, user_id=caller) is False
        assert not decide(
            repository, waiting, user_id=caller, expected="awaiting_approval", status="denied"
        )
        assert repository.renew(running, caller, "a1", "proposed", NOW + 600) is False
        assert [repository.get(running), repository.get(waiting)] == before
        # The row's own invoker (None included: NULL is not distinct from NULL) gets through.
        assert finish(repository, running, user_id=owner) is True
        assert decide(
            repository, waiting, user_id=owner, expected="awaiting_approval", status="approved"
        )


def test_a_call_without_a_user_is_finished_by_a_caller_without_a_user(
    repository: Repository,
) -> None:
    repository.insert(new_row("run:1", user_id=None))
    assert repository.renew("run:1", None, "a1", "proposed", NOW + 600) is True
    assert finish(repository, "run:1", user_id=None) is True
    assert repository.get("run:1")["status"] == "executed"


def test_finish_and_renew_report_false_for_another_attempt(repository: Repository) -> None:
    repository.insert(new_row("run:1", attempt_id="a1"))
    before = repository.get("run:1")
    assert finish(repository, "run:1", attempt_id="a2") is False
    assert repository.renew("run:1", "ann", "a2", "proposed", NOW + 600) is False
    assert repository.get("run:1") == before


def test_writes_to_a_missing_key_report_false(repository: Repository) -> None:
    assert finish(repository, "run:nothing") is False
    assert decide(repository, "run:nothing") is False
    assert repository.renew("run:nothing", "ann", "a1", "proposed", NOW) is False
    assert repository.confirm("nothing", NOW) == 0
    assert repository.get("run:nothing") is None


def test_insert_reports_false_for_an_existing_key_and_changes_nothing(
    repository: Repository,
) -> None:
    assert repository.insert(new_row("m1:call_1", message_id="m1")) is True
    before = repository.get("m1:call_1")
    intruder = new_row(
        "m1:call_1", message_id="m1", user_id="bob", attempt_id="a2", tool="other", lease=NOW
    )
    assert repository.insert(intruder) is False
    assert repository.get("m1:call_1") == before


# -- upsert_executed --------------------------------------------------------------------------


def executed_row(key: str, **columns: Any) -> dict[str, Any]:
    """The whole finished row ``upsert_executed`` writes when ``proposed`` was lost."""
    columns.setdefault("status", "executed")
    return new_row(
        key,
        result='{"v": 1}',
        finished_at=NOW + 5,
        updated_at=NOW + 5,
        duration_ms=5.0,
        lease=None,
        **columns,
    )


def test_upsert_executed_inserts_a_missing_row(repository: Repository) -> None:
    assert repository.upsert_executed(executed_row("run:1")) is True
    row = repository.get("run:1")
    assert (row["status"], row["user_id"], row["attempt_id"]) == ("executed", "ann", "a1")
    assert row["result"] in ('{"v": 1}', {"v": 1})


def test_upsert_executed_finishes_the_row_of_the_same_attempt(repository: Repository) -> None:
    for status in ("proposed", "approved"):
        key = f"run:{status}"
        repository.insert(new_row(key, status=status))
        assert repository.upsert_executed(executed_row(key, status="failed")) is True, status
        row = repository.get(key)
        assert (row["status"], row["finished_at"], row["lease_expires_at"]) == (
            "failed",
            NOW + 5,
            None,
        )


def test_upsert_executed_never_touches_another_attempts_row(repository: Repository) -> None:
    for status in STATUSES:
        key = f"run:{status}"
        repository.insert(new_row(key, status=status, attempt_id="a1"))
        before = repository.get(key)
        assert repository.upsert_executed(executed_row(key, attempt_id="a2")) is False, status
        assert repository.get(key) == before


def test_upsert_executed_does_not_rewrite_a_finished_row_of_the_same_attempt(
    repository: Repository,
) -> None:
    for status in ("executed", "failed", "confirmed", "denied"):
        key = f"run:{status}"
        repository.insert(new_row(key, status=status))
        before = repository.get(key)
        assert repository.upsert_executed(executed_row(key)) is False, status
        assert repository.get(key) == before


def test_upsert_executed_on_an_abandoned_row_marks_the_result_late(
    repository: Repository,
) -> None:
    repository.insert(new_row("run:1", lease=NOW + 1))
    assert repository.sweep(NOW + 2) == ["run:1"]
    assert repository.upsert_executed(executed_row("run:1")) is True
    row = repository.get("run:1")
    assert row["status"] == "executed"
    assert bool(row["late"]) is True


# -- confirm, sweep, renew, expire_approvals --------------------------------------------------


def test_confirm_moves_only_that_messages_executed_rows(repository: Repository) -> None:
    statuses = {
        "m1:c1": ("m1", "executed"),
        "m1:c2": ("m1", "executed"),
        "m1:c3": ("m1", "failed"),
        "m1:c4": ("m1", "proposed"),
        "m2:c1": ("m2", "executed"),
        "run:c1": (None, "executed"),
    }
    for key, (message, status) in statuses.items():
        repository.insert(new_row(key, message_id=message, status=status))
    assert repository.confirm("m1", NOW + 5) == 2
    found = {key: repository.get(key)["status"] for key in statuses}
    assert found == {
        "m1:c1": "confirmed",
        "m1:c2": "confirmed",
        "m1:c3": "failed",
        "m1:c4": "proposed",
        "m2:c1": "executed",
        "run:c1": "executed",
    }
    assert repository.get("m1:c1")["updated_at"] == NOW + 5
    assert repository.confirm("m1", NOW + 6) == 0


def test_sweep_abandons_only_running_rows_whose_lease_expired(repository: Repository) -> None:
    rows = {
        "run:proposed-expired": ("proposed", NOW - 1),
        "run:approved-expired": ("approved", NOW - 1),
        "run:proposed-live": ("proposed", NOW + 100),
        "run:proposed-at-the-edge": ("proposed", NOW),
        "run:proposed-without-lease": ("proposed", None),
        "run:awaiting": ("awaiting_approval", NOW - 1),
        "run:executed": ("executed", NOW - 1),
        "run:failed": ("failed", NOW - 1),
        "run:abandoned": ("abandoned", NOW - 1),
    }
    for key, (status, lease) in rows.items():
        repository.insert(new_row(key, status=status, lease=lease))
    swept = repository.sweep(NOW)
    assert sorted(swept) == ["run:approved-expired", "run:proposed-expired"]
    for key, (status, _) in rows.items():
        row = repository.get(key)
        if key in swept:
            assert (row["status"], row["finished_at"], row["updated_at"]) == (
                "abandoned",
                NOW,
                NOW,
            )
            assert "lease" in row["error"]
            assert row["attempt_id"] == "a1"  # so the late result can still be recorded
        else:
            assert row["status"] == status
    assert repository.sweep(NOW) == []


def test_a_renewed_lease_keeps_a_running_row_from_the_sweeper(repository: Repository) -> None:
    repository.insert(new_row("run:slow", lease=NOW + 10))
    assert repository.renew("run:slow", "ann", "a1", "proposed", NOW + 100) is True
    assert repository.sweep(NOW + 50) == []
    assert repository.get("run:slow")["lease_expires_at"] == NOW + 100
    assert repository.sweep(NOW + 101) == ["run:slow"]
    # An abandoned (or finished) row's lease is not renewed.
    assert repository.renew("run:slow", "ann", "a1", "proposed", NOW + 500) is False


def test_expire_approvals_abandons_only_old_requests(repository: Repository) -> None:
    repository.insert(new_row("run:old", status="awaiting_approval", at=NOW - 100))
    repository.insert(new_row("run:new", status="awaiting_approval", at=NOW))
    repository.insert(new_row("run:running", status="proposed", at=NOW - 100))
    assert repository.expire_approvals(NOW - 10, NOW) == ["run:old"]
    old = repository.get("run:old")
    assert (old["status"], old["finished_at"]) == ("abandoned", NOW)
    assert "approval expired" in old["error"]
    assert repository.get("run:new")["status"] == "awaiting_approval"
    assert repository.get("run:running")["status"] == "proposed"
    assert repository.expire_approvals(NOW - 10, NOW) == []


def test_a_late_finish_of_an_abandoned_row_records_the_result_as_late(
    repository: Repository,
) -> None:
    repository.insert(new_row("run:1", lease=NOW + 1))
    repository.insert(new_row("run:2", lease=NOW + 1))
    assert sorted(repository.sweep(NOW + 2)) == ["run:1", "run:2"]
    assert finish(repository, "run:1") is False  # no longer proposed
    assert finish(repository, "run:1", expected="abandoned", late=True) is True
    assert finish(repository, "run:2", expected="abandoned", status="failed", late=True)
    one, two = repository.get("run:1"), repository.get("run:2")
    assert (one["status"], bool(one["late"]), one["error"]) == ("executed", True, None)
    assert (two["status"], bool(two["late"]), two["error"]) == ("failed", True, "it failed")


# -- the Ledger facade ------------------------------------------------------------------------


def test_the_ledger_records_a_result_that_arrives_after_the_sweep_as_late(
    ledger: Ledger, repository: Repository
) -> None:
    swept = ledger.begin(key="run:slow", call_id="slow", user_id="ann")
    kept = ledger.begin(key="run:quick", call_id="quick", user_id="ann")
    assert ledger.finish(kept, ok=True, result=1) is True
    assert repository.sweep(time.time() + 3600) == ["run:slow"]
    assert ledger.get("run:slow").status == "abandoned"
    assert ledger.finish(swept, ok=True, result={"v": 2}, duration_ms=9.0) is True
    row = ledger.get("run:slow")
    assert (row.status, row.late, row.result, row.duration_ms) == ("executed", True, {"v": 2}, 9.0)
    assert ledger.get("run:quick").late is False


def test_ledger_sweep_abandons_expired_rows_and_returns_their_keys(
    make_ledger: Callable[..., Ledger], repository: Repository
) -> None:
    now = time.time()
    repository.insert(new_row("run:dead", lease=now - 5))
    repository.insert(new_row("run:alive", lease=now + 600))
    assert make_ledger().sweep() == ["run:dead"]
    assert repository.get("run:alive")["status"] == "proposed"


def test_ledger_sweep_abandons_every_expired_row_even_beyond_one_batch(
    request: pytest.FixtureRequest,
    make_ledger: Callable[..., Ledger],
    repository: Repository,
    database_url: str,
) -> None:
    now = time.time()
    for index in range(1005):
        repository.insert(new_row(f"run:{index}", lease=now - 5))
    assert len(make_ledger().sweep()) == 1005


def test_ledger_confirm_moves_a_messages_executed_calls(ledger: Ledger) -> None:
    one = ledger.begin(key="m1:c1", call_id="c1", message_id="m1", user_id="ann")
    two = ledger.begin(key="m1:c2", call_id="c2", message_id="m1", user_id="ann")
    other = ledger.begin(key="m2:c1", call_id="c1", message_id="m2", user_id="ann")
    for attempt in (one, other):
        ledger.finish(attempt, ok=True, result="ok")
    ledger.finish(two, ok=False, error="boom")
    assert ledger.confirm("m1") == 1
    statuses = [ledger.get(key).status for key in ("m1:c1", "m1:c2", "m2:c1")]
    assert statuses == ["confirmed", "failed", "executed"]


# -- collisions -------------------------------------------------------------------------------


def test_two_invokers_with_the_same_call_id_in_different_messages_keep_their_own_rows(
    make_ledger: Callable[..., Ledger],
) -> None:
    first, second = make_ledger(), make_ledger()
    ann = first.begin(key="m1:call_1", call_id="call_1", message_id="m1", user_id="ann")
    bob = second.begin(key="m2:call_1", call_id="call_1", message_id="m2", user_id="bob")
    assert (ann.created, bob.created) == (True, True)
    assert second.finish(bob, ok=False, error="bob's failure") is True
    assert first.get("m1:call_1").status == "proposed"
    assert first.finish(ann, ok=True, result="ann's result") is True
    rows = {row.key: row for row in first.rows()}
    assert {key: (row.user_id, row.status, row.call_id) for key, row in rows.items()} == {
        "m1:call_1": ("ann", "executed", "call_1"),
        "m2:call_1": ("bob", "failed", "call_1"),
    }
    assert rows["m1:call_1"].result == "ann's result"
    assert rows["m2:call_1"].error == "bob's failure"


def test_headless_runs_with_the_same_call_id_keep_their_own_rows(
    make_ledger: Callable[..., Ledger],
) -> None:
    first, second = make_ledger(), make_ledger()
    one = first.begin(key="run-1:call_1", call_id="call_1", run_id="run-1", user_id=None)
    two = second.begin(key="run-2:call_1", call_id="call_1", run_id="run-2", user_id=None)
    assert (one.created, two.created) == (True, True)
    assert first.finish(one, ok=True, result=1) is True
    assert second.finish(two, ok=True, result=2) is True
    assert sorted((row.key, row.run_id, row.user_id, row.result) for row in first.rows()) == [
        ("run-1:call_1", "run-1", None, 1),
        ("run-2:call_1", "run-2", None, 2),
    ]


def test_a_second_begin_on_an_existing_key_is_not_created_and_its_finish_changes_nothing(
    make_ledger: Callable[..., Ledger],
) -> None:
    first, second = make_ledger(), make_ledger()
    for second_user in ("ann", "bob", None):
        key = f"run-{second_user}:call_1"
        original = first.begin(key=key, call_id="call_1", user_id="ann", tool="t")
        duplicate = second.begin(key=key, call_id="call_1", user_id=second_user, tool="x")
        assert (original.created, duplicate.created) == (True, False)
        before = first.get(key)
        assert second.finish(duplicate, ok=False, error="must not land") is False
        assert first.get(key) == before
        assert first.finish(original, ok=True, result="mine") is True
        row = first.get(key)
        assert (row.user_id, row.tool, row.status, row.result) == ("ann", "t", "executed", "mine")


def test_a_duplicate_key_through_host_call_is_an_error_and_the_tool_does_not_run_again(
    make_host: Callable[..., Host], migrated_url: str
) -> None:
    runs: list[str | None] = []

    @expediter.tool
    def count(context: CallContext) -> int:
        """Count the calls."""
        runs.append(context.user_id)
        return len(runs)

    host = make_host(count, record_calls=True, database_url=migrated_url)
    first = host.call("count", "count", {}, user_id="ann", run_id="run-1", call_id="call_1")
    assert (first.status, first.key, first.result) == ("completed", "run-1:call_1", 1)
    for user in ("ann", "bob"):
        again = host.call("count", "count", {}, user_id=user, run_id="run-1", call_id="call_1")
        assert (again.status, again.error_type) == ("error", "LedgerError")
        assert "run-1:call_1" in again.error
    other_run = host.call("count", "count", {}, user_id="bob", run_id="run-2", call_id="call_1")
    assert other_run.ok
    assert runs == ["ann", "bob"]
    row = host.ledger.get("run-1:call_1")
    assert (row.user_id, row.status, row.result) == ("ann", "executed", 1)
    assert host.ledger.get("run-2:call_1").user_id == "bob"
