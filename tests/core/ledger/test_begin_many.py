"""``Ledger.begin_many``: one turn's calls proposed in one commit, with ``begin``'s guarantees
(``ON CONFLICT DO NOTHING`` per row, ``created`` per row, leases, the spool, fail-closed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from expediter.core.ledger import Ledger, Proposal
from expediter.core.ledger.database import Database
from expediter.errors import LedgerError


def proposals(*keys: str, user: str | None = "ann", **fields: Any) -> list[Proposal]:
    return [
        Proposal(key=key, call_id=key.rsplit(":", 1)[-1], user_id=user, tool="t", **fields)
        for key in keys
    ]


def test_each_proposal_gets_its_row_and_an_attempt_in_order(ledger: Ledger) -> None:
    attempts = ledger.begin_many(
        proposals("m1:a", "m1:b", "m1:c", message_id="m1", arguments={"x": 1, "api_key": "s"})
    )
    assert [a.key for a in attempts] == ["m1:a", "m1:b", "m1:c"]
    assert [a.created for a in attempts] == [True, True, True]
    assert len({a.attempt_id for a in attempts}) == 3
    for attempt in attempts:
        row = ledger.get(attempt.key)
        assert row is not None
        assert (row.status, row.user_id, row.message_id) == ("proposed", "ann", "m1")
        assert row.attempt_id == attempt.attempt_id
        assert row.arguments == {"x": 1, "api_key": "***"}
        assert row.lease_expires_at is not None
    for attempt in attempts:
        assert ledger.finish(attempt, ok=True, result=attempt.key, duration_ms=1.0) is True
    assert {row.status for row in ledger.rows()} == {"executed"}


def test_an_existing_key_is_not_created_and_is_never_finished_by_the_batch(
    ledger: Ledger,
) -> None:
    first = ledger.begin(key="m2:a", call_id="a", user_id="ann")
    attempts = ledger.begin_many(proposals("m2:a", "m2:b"))
    assert [a.created for a in attempts] == [False, True]
    assert ledger.finish(attempts[0], ok=True, result="not mine") is False
    row = ledger.get("m2:a")
    assert row is not None
    assert (row.status, row.attempt_id) == ("proposed", first.attempt_id)


def test_a_key_twice_in_one_batch_is_created_once(ledger: Ledger) -> None:
    attempts = ledger.begin_many(proposals("m3:a", "m3:a", "m3:b"))
    assert [a.created for a in attempts] == [True, False, True]
    row = ledger.get("m3:a")
    assert row is not None
    assert row.attempt_id == attempts[0].attempt_id


def test_two_ledgers_racing_for_the_same_turn_create_each_row_once(
    make_ledger: Callable[..., Ledger],
) -> None:
    one, two = make_ledger(), make_ledger()
    keys = [f"m4:{n}" for n in range(5)]
    mine = one.begin_many(proposals(*keys))
    theirs = two.begin_many(proposals(*reversed(keys)))
    assert all(a.created for a in mine)
    assert not any(a.created for a in theirs)


def test_a_paused_proposal_has_no_lease_and_keeps_its_decision_and_request(
    ledger: Ledger,
) -> None:
    request = {"call_id": "a", "name": "t", "arguments": {"x": 1}}
    [paused, running] = ledger.begin_many(
        [
            Proposal(
                key="m5:a",
                call_id="a",
                user_id=None,
                lease=False,
                request=request,
                decision="ask",
                reason="needs a look",
            ),
            Proposal(key="m5:b", call_id="b", user_id=None),
        ]
    )
    row = ledger.get(paused.key)
    assert row is not None
    assert row.lease_expires_at is None
    assert (row.request, row.decision, row.decision_reason) == (request, "ask", "needs a look")
    other = ledger.get(running.key)
    assert other is not None
    assert other.lease_expires_at is not None


def test_an_empty_batch_writes_nothing(ledger: Ledger) -> None:
    assert ledger.begin_many([]) == []
    assert ledger.rows() == []


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_on_postgresql_the_batch_is_one_transaction(ledger: Ledger, migrated_url: str) -> None:
    database = Database.parse(migrated_url)
    ledger.begin(key="m6:before", call_id="0", user_id=None)
    ledger.begin_many(proposals("m6:a", "m6:b", "m6:c"))
    connection = database.connect()
    try:
        found = connection.execute("SELECT key, xmin::text FROM tool_call_attempts").fetchall()
    finally:
        connection.close()
    transactions = dict(found)
    assert len({transactions[k] for k in ("m6:a", "m6:b", "m6:c")}) == 1
    assert transactions["m6:before"] != transactions["m6:a"]


def test_on_sqlite_the_batch_runs_between_one_begin_and_one_commit(
    tmp_path: Any,
) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'trace.db'}", home=tmp_path / "home")
    try:
        ledger.check()
        seen: list[str] = []
        repository = ledger._connect()
        repository.connection.set_trace_callback(seen.append)
        ledger.begin_many(proposals("m7:a", "m7:b"))
        repository.connection.set_trace_callback(None)
    finally:
        ledger.close()
    kinds = [statement.split()[0].upper() for statement in seen]
    assert kinds == ["BEGIN", "INSERT", "INSERT", "COMMIT"]


def _unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Database, timeout: float = 5.0) -> Any:
        raise ConnectionRefusedError("the database is down (test)")

    monkeypatch.setattr(Database, "connect", refuse)


def test_while_the_database_is_down_the_batch_is_spooled_and_lands_on_replay(
    migrated_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(migrated_url, home=tmp_path / "home")
    try:
        with monkeypatch.context() as patch:
            _unreachable(patch)
            attempts = ledger.begin_many(proposals("m8:a", "m8:b"))
            assert [a.created for a in attempts] == [None, None]
            assert all(a.recorded for a in attempts)
            assert ledger.spool.pending()
            assert ledger.finish(attempts[0], ok=True, result=1) is None
        # The batch is spooled in one append, a write per row (each replayed, or set aside,
        # on its own), then the finish.
        assert ledger.replay() == 3
        first, second = ledger.get("m8:a"), ledger.get("m8:b")
        assert first is not None
        assert second is not None
        assert (first.status, second.status) == ("executed", "proposed")
        assert first.attempt_id == attempts[0].attempt_id
    finally:
        ledger.close()


def test_a_fail_closed_ledger_refuses_the_batch_while_the_database_is_down(
    migrated_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(migrated_url, home=tmp_path / "home", fail_closed=True)
    try:
        with monkeypatch.context() as patch:
            _unreachable(patch)
            with pytest.raises(LedgerError, match="fail_closed"):
                ledger.begin_many(proposals("m9:a"))
        assert not ledger.spool.pending()
        assert ledger.get("m9:a") is None
    finally:
        ledger.close()


def test_a_retried_batch_recognises_the_rows_it_already_wrote(ledger: Ledger) -> None:
    [attempt] = ledger.begin_many(proposals("m10:a"))
    row = ledger.get("m10:a")
    assert row is not None
    # What a replay of the same spooled batch sees: the row exists with this attempt's id.
    again = ledger._write(
        "insert_many", {"rows": [{**_row_dict(row), "attempt_id": attempt.attempt_id}]}
    )
    assert again == [True]


def _row_dict(row: Any) -> dict[str, Any]:
    from expediter.core.ledger.repository import COLUMNS

    values = {name: getattr(row, name) for name in COLUMNS if name != "late"}
    values["arguments"] = values["result"] = values["request"] = None
    return values


def test_a_proposal_records_exactly_what_begin_records(make_ledger: Callable[..., Ledger]) -> None:
    fields: dict[str, Any] = {
        "call_id": "c",
        "user_id": "ann",
        "name": "the_name",
        "run_id": "run",
        "message_id": "msg",
        "owner_id": "owner",
        "instance_id": "inst",
        "tool": "tool",
        "action": "action",
        "arguments": {"x": [1, 2]},
        "request": {"resume": True},
        "lease": False,
        "decision": "ask",
        "reason": "why",
    }
    ledger = make_ledger()
    ledger.begin(key="one:c", **fields)
    ledger.begin_many([Proposal(key="many:c", **fields)])
    single, batched = ledger.get("one:c"), ledger.get("many:c")
    assert single is not None
    assert batched is not None
    different = {"key", "attempt_id", "attempted_at", "updated_at"}
    assert {k: v for k, v in single.to_dict().items() if k not in different} == {
        k: v for k, v in batched.to_dict().items() if k not in different
    }
    assert (single.request, batched.request) == ({"resume": True}, {"resume": True})
