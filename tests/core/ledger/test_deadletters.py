"""The spool never wedges the host: a spooled write the database refuses for good is set aside
as a dead letter (listed, retried, dropped) and the writes after it go through; when neither
the database nor the spool can take a call's first record the call does not run; and the
spool's files are its owner's only."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from support.hosts import ledger_host

import expediter
from expediter.core.ledger import Ledger, Proposal
from expediter.core.ledger.database import Database
from expediter.errors import LedgerError

_REAL_CONNECT = Database.connect
#: The ``outage`` fixture (tests/core/ledger/conftest.py): ``with outage:`` the database is down.
Outage = AbstractContextManager[None]
_SQLITE_TRIGGER = (
    "CREATE TRIGGER refuse_forbidden BEFORE INSERT ON tool_call_attempts "
    "WHEN NEW.tool = 'forbidden' BEGIN SELECT RAISE(ABORT, 'the forbidden tool is refused'); END"
)
_PG_TRIGGER = (
    "CREATE FUNCTION refuse_forbidden() RETURNS trigger AS $$ BEGIN "
    "IF NEW.tool = 'forbidden' THEN RAISE EXCEPTION 'the forbidden tool is refused'; END IF; "
    "RETURN NEW; END $$ LANGUAGE plpgsql",
    "CREATE TRIGGER refuse_forbidden BEFORE INSERT ON tool_call_attempts "
    "FOR EACH ROW EXECUTE FUNCTION refuse_forbidden()",
)


def execute(url: str, *statements: str) -> None:
    connection = _REAL_CONNECT(Database.parse(url))
    try:
        for sql in statements:
            connection.execute(sql)
    finally:
        connection.close()


def refuse_forbidden_tool(url: str) -> None:
    """Make the database refuse, for good, any row whose tool is ``forbidden``."""
    if url.startswith("sqlite"):
        execute(url, _SQLITE_TRIGGER)
    else:
        execute(url, *_PG_TRIGGER)


def allow_forbidden_tool(url: str) -> None:
    sql = "DROP TRIGGER refuse_forbidden"
    execute(url, sql if url.startswith("sqlite") else sql + " ON tool_call_attempts")


@pytest.fixture
def fresh(migrated_url: str, tmp_path: Path) -> Iterator[Ledger]:
    """A ledger that has not connected yet (so an outage starts before its first write)."""
    ledger = Ledger(migrated_url, home=tmp_path / "home")
    yield ledger
    ledger.close()


def record(ledger: Ledger, key: str, tool: str = "ok") -> None:
    attempt = ledger.begin(key=key, call_id=key, user_id="ann", tool=tool)
    ledger.finish(attempt, ok=True, result=key)


def propose(ledger: Ledger, key: str, tool: str = "ok") -> None:
    ledger.begin(key=key, call_id=key, user_id="ann", tool=tool, lease=False)


def until_recorded(ledger: Ledger, key: str) -> None:
    """Call until a call's row goes straight to the database (the outage backoff is over)."""
    deadline = time.monotonic() + 10
    for n in range(1000):
        attempt = ledger.begin(key=f"{key}{n}", call_id="c", user_id="ann")
        ledger.finish(attempt, ok=True)
        if attempt.created is True:
            return
        assert time.monotonic() < deadline, "the ledger kept spooling"
        time.sleep(0.05)


# -- dead letters -------------------------------------------------------------------------------


def test_a_spooled_write_the_database_refuses_is_set_aside_and_later_writes_go_through(
    fresh: Ledger, migrated_url: str, outage: Outage
) -> None:
    refuse_forbidden_tool(migrated_url)
    with outage:
        record(fresh, "m:bad", tool="forbidden")
        record(fresh, "m:good")
    until_recorded(fresh, "m:after")  # replays the spool first, then writes its own

    assert not fresh.spool.pending()
    assert fresh.get("m:bad") is None
    assert fresh.get("m:good").status == "executed"
    assert fresh.get("m:after0").status == "executed"
    letter, finish = fresh.deadletters()
    assert (letter.operation, letter.key) == ("insert", "m:bad")
    assert (finish.operation, finish.key) == ("finish", "m:bad")
    assert "the forbidden tool is refused" in letter.error
    assert letter.params["tool"] == "forbidden"
    assert abs(letter.set_aside_at - time.time()) < 60
    assert set(letter.to_dict()) >= {"id", "operation", "key", "error", "set_aside_at"}


def test_replay_sets_refused_writes_aside_and_applies_the_rest(
    fresh: Ledger, migrated_url: str, outage: Outage
) -> None:
    refuse_forbidden_tool(migrated_url)
    with outage:
        record(fresh, "m:1")
        record(fresh, "m:bad", tool="forbidden")
        record(fresh, "m:2")
    # The forbidden call's insert is refused, and so its finish (no row to finish); the other
    # four writes apply.
    assert fresh.replay() == 4
    assert [row.key for row in fresh.rows(limit=0, status="executed")] == ["m:2", "m:1"]
    letters = fresh.deadletters()
    assert [(letter.operation, letter.key) for letter in letters] == [
        ("insert", "m:bad"),
        ("finish", "m:bad"),
    ]
    assert "retry its insert's dead letter first" in letters[1].error
    assert fresh.replay() == 0
    # Once the database takes the insert, the finish follows: the call's record is whole.
    allow_forbidden_tool(migrated_url)
    for letter in letters:
        fresh.retry_deadletter(letter.id)
    assert (fresh.get("m:bad").status, fresh.get("m:bad").result) == ("executed", "m:bad")
    assert fresh.deadletters() == []


def test_a_spooled_write_that_asks_for_an_impossible_move_is_set_aside(fresh: Ledger) -> None:
    record(fresh, "m:1")
    attempt_id = fresh.get("m:1").attempt_id
    finish = {
        "key": "m:1",
        "user_id": "ann",
        "attempt_id": attempt_id,
        "expected": "confirmed",
        "status": "executed",
        "result": None,
        "error": None,
        "finished_at": time.time(),
        "duration_ms": 1.0,
    }
    fresh.spool.append("finish", finish)
    fresh.spool.append("teleport", {"key": "m:1"})
    assert fresh.replay() == 0
    letters = fresh.deadletters()
    assert [(letter.operation, letter.key) for letter in letters] == [
        ("finish", "m:1"),
        ("teleport", "m:1"),
    ]
    assert "confirmed -> executed" in letters[0].error
    assert "unknown ledger operation" in letters[1].error


def test_one_refused_row_of_a_spooled_batch_does_not_hold_back_the_others(
    fresh: Ledger, migrated_url: str, outage: Outage
) -> None:
    refuse_forbidden_tool(migrated_url)
    with outage:
        attempts = fresh.begin_many(
            [
                Proposal(key="m:a", call_id="a", user_id="ann", tool="ok"),
                Proposal(key="m:b", call_id="b", user_id="ann", tool="forbidden"),
                Proposal(key="m:c", call_id="c", user_id="ann", tool="ok"),
            ]
        )
        assert [attempt.created for attempt in attempts] == [None, None, None]
    fresh.replay()
    assert sorted(row.key for row in fresh.rows(limit=0)) == ["m:a", "m:c"]
    assert [letter.key for letter in fresh.deadletters()] == ["m:b"]


def test_a_dead_letter_is_retried_once_the_database_takes_it(
    fresh: Ledger, migrated_url: str, outage: Outage
) -> None:
    refuse_forbidden_tool(migrated_url)
    with outage:
        propose(fresh, "m:bad", tool="forbidden")
    fresh.replay()
    [letter] = fresh.deadletters()

    with pytest.raises(LedgerError, match=r"refused dead letter .* again: .*forbidden tool"):
        fresh.retry_deadletter(letter.id)
    assert [kept.id for kept in fresh.deadletters()] == [letter.id]

    allow_forbidden_tool(migrated_url)
    fresh.retry_deadletter(letter.id)
    assert fresh.deadletters() == []
    row = fresh.get("m:bad")
    assert (row.status, row.tool, row.attempt_id) == (
        "proposed",
        "forbidden",
        letter.params["attempt_id"],
    )


def test_retrying_while_the_database_is_down_keeps_the_letter(
    fresh: Ledger, migrated_url: str, outage: Outage
) -> None:
    refuse_forbidden_tool(migrated_url)
    with outage:
        propose(fresh, "m:bad", tool="forbidden")
    fresh.replay()
    [letter] = fresh.deadletters()
    fresh.close()
    with outage, pytest.raises(LedgerError, match="unreachable"):
        fresh.retry_deadletter(letter.id)
    assert [kept.id for kept in fresh.deadletters()] == [letter.id]


def test_a_dead_letter_can_be_dropped_and_unknown_ids_are_named(
    fresh: Ledger, migrated_url: str, outage: Outage
) -> None:
    refuse_forbidden_tool(migrated_url)
    with outage:
        propose(fresh, "m:bad1", tool="forbidden")
        propose(fresh, "m:bad2", tool="forbidden")
    fresh.replay()
    first, second = fresh.deadletters()
    fresh.drop_deadletter(first.id)
    assert [letter.id for letter in fresh.deadletters()] == [second.id]
    for action in (fresh.drop_deadletter, fresh.retry_deadletter):
        with pytest.raises(LedgerError, match="no dead letter 'nope'"):
            action("nope")


# -- neither the database nor the spool --------------------------------------------------------


@pytest.fixture
def no_spool(migrated_url: str, tmp_path: Path) -> Iterator[Ledger]:
    """A ledger whose spool cannot be written: its folder's path is a regular file (tests may
    run as root, whom permissions do not stop)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "spool").write_text("not a folder")
    ledger = Ledger(migrated_url, home=home)
    yield ledger
    ledger.close()


def test_begin_raises_when_neither_the_database_nor_the_spool_can_take_the_call(
    no_spool: Ledger, outage: Outage
) -> None:
    with outage:
        with pytest.raises(LedgerError, match=r"neither the ledger .* nor its spool"):
            no_spool.begin(key="m:1", call_id="1", user_id="ann")
        with pytest.raises(LedgerError, match="was not run"):
            no_spool.begin_many([Proposal(key="m:2", call_id="2", user_id="ann")])
    assert no_spool.rows(limit=0) == []


#: Calls ``counted`` ran.
RAN: list[int] = []


@expediter.tool
def counted(n: int) -> int:
    """Count a run."""
    RAN.append(n)
    return n


def test_a_host_does_not_run_a_call_neither_the_database_nor_the_spool_can_take(
    migrated_url: str, tmp_path: Path, outage: Outage
) -> None:
    RAN.clear()
    home = tmp_path / "home"
    home.mkdir()
    (home / "spool").write_text("not a folder")
    host = ledger_host(migrated_url, home, counted)
    try:
        with outage:
            event = host.call("counted", "counted", {"n": 1}, user_id="ann")
        assert (event.status, event.error_type) == ("error", "LedgerError")
        assert "was not run" in (event.error or "")
        assert RAN == []
    finally:
        host.close()


# -- file modes ------------------------------------------------------------------------------


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_the_spool_its_lock_and_its_side_files_are_private_whatever_the_umask(
    migrated_url: str, tmp_path: Path, outage: Outage, umask_022: None
) -> None:
    refuse_forbidden_tool(migrated_url)
    ledger = Ledger(migrated_url, home=tmp_path / "home")
    try:
        with outage:
            record(ledger, "m:bad", tool="forbidden")
            record(ledger, "m:good")
        with open(ledger.spool.path, "a", encoding="utf-8") as spool:
            spool.write("{torn\n")
        assert mode(ledger.spool.path) == 0o600
        ledger.replay()
        spool = ledger.spool
        assert mode(spool.path.parent) == 0o700
        assert mode(tmp_path / "home") == 0o700
        for path in (spool.path, spool.lock, spool.rejected_path, spool.deadletter_path):
            assert path.exists(), path
            assert mode(path) == 0o600, path
        assert json.loads(spool.deadletter_path.read_text().splitlines()[0])["key"] == "m:bad"
        # Rewritten files (a replay, a dropped letter) stay private too.
        ledger.drop_deadletter(ledger.deadletters()[0].id)
        assert mode(spool.deadletter_path) == 0o600
        assert mode(spool.path) == 0o600
    finally:
        ledger.close()
