"""No silent duplicate execution: while the database is down a key already in this host's spool
is refused, and a duplicate execution that still happened (another host, or a key recorded
before the outage) is recorded on replay as its own row, ``KEY#dup-N``, to which that
attempt's later writes go."""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from support.hosts import ledger_host

import expediter
from expediter.core.host import Host
from expediter.core.ledger import Ledger, Proposal
from expediter.core.ledger.spool import AlreadySpooled, Spool
from expediter.errors import LedgerError
from expediter.testing.postgres import PostgresCluster

#: The ``outage`` fixture (tests/core/ledger/conftest.py): ``with outage:`` the database is down.
Outage = AbstractContextManager[None]


@pytest.fixture
def homes(migrated_url: str, tmp_path: Path) -> Iterator[Callable[[str], Ledger]]:
    """Ledgers on the test database, each with the home (and so the spool) it is named by;
    none connected yet, so an outage can start before its first write."""
    opened: list[Ledger] = []

    def make(name: str) -> Ledger:
        ledger = Ledger(migrated_url, home=tmp_path / name)
        opened.append(ledger)
        return ledger

    yield make
    for ledger in opened:
        ledger.close()


def test_a_key_already_in_this_hosts_spool_is_refused_during_an_outage(
    homes: Callable[[str], Ledger], outage: Outage
) -> None:
    first = homes("one")
    with outage:
        attempt = first.begin(key="m:c", call_id="c", user_id="ann")
        assert attempt.created is None
        with pytest.raises(LedgerError, match="already recorded in this host's spool"):
            first.begin(key="m:c", call_id="c", user_id="ann")
        # So does a ledger opened later on the same home (it reads the spool's keys).
        with pytest.raises(LedgerError, match="already recorded in this host's spool"):
            homes("one").begin(key="m:c", call_id="c", user_id="ann")
        # A batch leaves the spooled key (and a key repeated in it) out.
        batch = first.begin_many(
            [Proposal(key=key, call_id="c", user_id="ann") for key in ("m:c", "m:d", "m:d")]
        )
        assert [attempt.created for attempt in batch] == [False, None, False]
        first.finish(attempt, ok=True, result="first")
    assert first.replay() == 3
    assert sorted(row.key for row in first.rows(limit=0)) == ["m:c", "m:d"]
    assert first.duplicates("m:c") == []


def test_a_duplicate_from_another_host_gets_its_own_row_on_replay(
    homes: Callable[[str], Ledger], outage: Outage
) -> None:
    one, two = homes("one"), homes("two")
    with outage:
        for ledger, result in ((one, "from one"), (two, "from two")):
            attempt = ledger.begin(key="m:c", call_id="c", user_id="ann", tool="t")
            assert attempt.created is None
            ledger.finish(attempt, ok=True, result=result)
    saved = two.spool.path.read_text(encoding="utf-8")
    assert one.replay() == 2
    assert two.replay() == 2

    original, duplicate = one.get("m:c"), one.get("m:c#dup-1")
    assert (original.status, original.result, original.duplicate_of) == (
        "executed",
        "from one",
        None,
    )
    assert (duplicate.status, duplicate.result, duplicate.duplicate_of) == (
        "executed",
        "from two",
        "m:c",
    )
    assert (duplicate.call_id, duplicate.user_id, duplicate.tool) == ("c", "ann", "t")
    assert one.duplicates("m:c") == ["m:c#dup-1"]
    assert duplicate.to_dict()["duplicate_of"] == "m:c"

    # The same spool replayed again (a crash before it was emptied) changes nothing.
    rows = {row.key: row for row in one.rows(limit=0)}
    two.spool.path.write_text(saved, encoding="utf-8")
    assert two.replay() == 2
    assert {row.key: row for row in one.rows(limit=0)} == rows


def test_each_further_duplicate_takes_the_next_free_number(
    homes: Callable[[str], Ledger], outage: Outage
) -> None:
    ledgers = [homes(name) for name in ("one", "two", "three")]
    with outage:
        for ledger in ledgers:
            ledger.finish(ledger.begin(key="m:c", call_id="c", user_id=None), ok=True)
    for ledger in ledgers:
        ledger.replay()
    assert ledgers[0].duplicates("m:c") == ["m:c#dup-1", "m:c#dup-2"]
    assert [row.status for row in ledgers[0].rows(limit=0)] == ["executed"] * 3


def test_a_call_still_running_when_its_duplicate_row_is_made_finishes_there(
    homes: Callable[[str], Ledger], outage: Outage
) -> None:
    ledger = homes("one")
    ledger.finish(ledger.begin(key="m:c", call_id="c", user_id="ann"), ok=True, result="first")
    ledger.close()  # the held connection dies with the outage
    with outage:
        # The same turn run again while the database is down: nothing can tell it ran before.
        again = ledger.begin(key="m:c", call_id="c", user_id="ann")
        assert again.created is None
    assert ledger.replay() == 1
    assert again.key == "m:c#dup-1"
    assert ledger.finish(again, ok=True, result="second") is True
    assert ledger.get("m:c").result == "first"
    assert (ledger.get("m:c#dup-1").status, ledger.get("m:c#dup-1").result) == (
        "executed",
        "second",
    )


def test_a_result_finds_the_duplicate_row_another_process_made_on_replay(
    homes: Callable[[str], Ledger], outage: Outage
) -> None:
    ledger = homes("one")
    ledger.finish(ledger.begin(key="m:c", call_id="c", user_id="ann"), ok=True, result="first")
    ledger.close()
    with outage:
        again = ledger.begin(key="m:c", call_id="c", user_id="ann")
    assert homes("one").replay() == 1  # another process on the same home
    assert again.key == "m:c"
    # Still in its outage backoff, this ledger spools the result; replayed, it finds the row.
    assert ledger.finish(again, ok=True, result="second") is None
    assert ledger.replay() == 1
    assert ledger.get("m:c").result == "first"
    assert ledger.get("m:c#dup-1").result == "second"


def test_a_spooled_decision_goes_to_its_own_attempts_row_not_to_the_original(
    homes: Callable[[str], Ledger], outage: Outage
) -> None:
    one, two = homes("one"), homes("two")
    running = one.begin(key="m:c", call_id="c", user_id="ann")
    assert running.created is True
    with outage:
        two.begin(key="m:c", call_id="c", user_id="ann", lease=False)
        two.decide("m:c", "ann", expected="proposed", status="denied", decision="deny", reason="no")
    two.replay()
    assert one.get("m:c").status == "proposed"  # the original call runs on, untouched
    duplicate = one.get("m:c#dup-1")
    assert (duplicate.status, duplicate.decision_reason) == ("denied", "no")
    assert one.finish(running, ok=True) is True


# -- a real outage ------------------------------------------------------------------------------

#: How many times ``once`` ran, by its ``n``.
RAN: collections.Counter[int] = collections.Counter()


@expediter.tool
def once(n: int) -> int:
    """Count a run."""
    RAN[n] += 1
    return n


@pytest.mark.slow
def test_during_a_postgres_outage_a_host_refuses_a_rerun_and_another_hosts_run_is_kept(
    own_cluster: PostgresCluster, outage_url: str, tmp_path: Path
) -> None:
    RAN.clear()
    hosts: list[Host] = []
    try:
        for name in ("one", "two"):
            hosts.append(ledger_host(outage_url, tmp_path / name, once))
        first, second = hosts

        def call(host: Host) -> expediter.CallEvent:
            return host.call("once", "once", {"n": 7}, user_id="ann", run_id="r", call_id="c")

        own_cluster.pg_ctl("stop")
        # The same turn twice on one host during the outage: the second is refused.
        ran = call(first)
        assert ran.ok
        refused = call(first)
        assert (refused.status, refused.error_type) == ("error", "LedgerError")
        assert "already recorded in this host's spool" in (refused.error or "")
        assert RAN == {7: 1}
        # Another host (another home, another spool) cannot know: it runs.
        assert call(second).ok
        assert RAN == {7: 2}
        own_cluster.pg_ctl("start")

        for host in hosts:
            host.ledger.replay()
        ledger = second.ledger
        assert ledger.duplicates(ran.key) == [f"{ran.key}#dup-1"]
        original, duplicate = ledger.get(ran.key), ledger.get(f"{ran.key}#dup-1")
        assert (original.status, original.worker_id) == ("executed", first.ledger.worker_id)
        assert (duplicate.status, duplicate.worker_id) == ("executed", second.ledger.worker_id)
        assert duplicate.duplicate_of == ran.key
        assert len(ledger.rows(limit=0)) == 2  # both executions, each once
    finally:
        for host in hosts:
            host.close()


# -- the spool's keys ---------------------------------------------------------------------------


def test_processes_sharing_a_spool_see_each_others_keys_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "spool" / "ledger.jsonl"
    mine, theirs = Spool(path), Spool(path)
    mine.append("insert", {"key": "m:1", "attempt_id": "a1"})
    with pytest.raises(AlreadySpooled, match="m:1"):
        theirs.extend([("insert", {"key": "m:2", "attempt_id": "b"}), ("insert", {"key": "m:1"})])
    assert set(theirs.keys) == {"m:1"}  # nothing of the refused batch was kept
    with pytest.raises(AlreadySpooled, match="m:3"):
        theirs.extend([("insert", {"key": "m:3"}), ("insert", {"key": "m:3"})])
    theirs.append("finish", {"key": "m:1", "attempt_id": "a1"})

    assert mine.replay(lambda operation, params: None) == 2  # rewrites the file (empty)
    theirs.append("insert", {"key": "m:1", "attempt_id": "b1"})
    assert theirs.keys == {"m:1": "b1"}
    with pytest.raises(AlreadySpooled):
        mine.append("insert", {"key": "m:1", "attempt_id": "a2"})
    fresh = Spool(path)
    fresh.load()
    assert fresh.keys == {"m:1": "b1"}
