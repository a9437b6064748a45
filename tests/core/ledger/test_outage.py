"""The database goes away mid-run: calls keep running, the spool keeps their records, and the
records land exactly once when it returns.

PostgreSQL outages stop a real server (a cluster of this module's own: the session cluster keeps
serving the other tests); the SQLite outage is another process holding the write lock.
"""

from __future__ import annotations

import collections
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ledger_workers as workers
from support.hosts import ledger_host
from support.responses import openai_response

import expediter
from expediter.core.host import Host
from expediter.core.ledger import Ledger, LedgerRow
from expediter.core.records.calls import CallEvent
from expediter.errors import LedgerError
from expediter.testing.postgres import PostgresCluster


@pytest.fixture
def make_host(tmp_path: Path) -> Iterator[Callable[..., Host]]:
    """Hosts offering the ``probe`` tool, recording into the given database."""
    hosts: list[Host] = []

    def make(url: str, *tools: Any, **options: Any) -> Host:
        host = ledger_host(url, tmp_path / "home", workers.probe, *tools, **options)
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.close()


class Caller:
    """Calls ``probe`` through a host, numbering the calls; each run is logged to ``log``."""

    def __init__(self, host: Host, log: Path, run_id: str = "outage") -> None:
        self.host, self.log, self.run_id = host, log, run_id
        self.events: list[CallEvent] = []

    def call(self, *, fail: bool | None = None) -> CallEvent:
        """One call; every seventh fails unless ``fail`` says otherwise."""
        n = len(self.events)
        fail = n % 7 == 3 if fail is None else fail
        arguments = {"n": n, "worker": "w", "log": str(self.log), "fail": fail}
        event = self.host.call(
            "probe", "probe", arguments, user_id="ann", run_id=self.run_id, call_id=f"call_{n}"
        )
        self.events.append(event)
        return event

    def ran(self) -> collections.Counter[int]:
        """How many times the tool ran for each call number."""
        lines = self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []
        return collections.Counter(int(line.split()[1]) for line in lines)

    def check_recorded_once(self, rows: dict[str, LedgerRow]) -> None:
        """Every call ran once, completed or failed as the tool decided, and has exactly one
        final row saying the same, owned by its invoker, never flagged late."""
        assert all(event.error_type in (None, "RuntimeError") for event in self.events)
        assert self.ran() == collections.Counter(range(len(self.events)))
        assert set(rows) == {event.key for event in self.events}
        for event in self.events:
            row = rows[event.key]
            assert row.status == ("executed" if event.ok else "failed"), event.key
            assert (row.user_id, row.late) == ("ann", False)
            if event.ok:
                assert row.result == event.result


def _rows(ledger: Ledger) -> dict[str, LedgerRow]:
    return {row.key: row for row in ledger.rows(limit=0)}


def _spooled(ledger: Ledger) -> list[dict[str, Any]]:
    if not ledger.spool.path.exists():
        return []
    return [json.loads(line) for line in ledger.spool.path.read_text().splitlines() if line]


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout}s"
        time.sleep(0.01)


@pytest.mark.slow
def test_calls_keep_running_while_postgres_is_down_and_their_records_land_once_when_it_returns(
    own_cluster: PostgresCluster, outage_url: str, make_host: Callable[..., Host], tmp_path: Path
) -> None:
    host = make_host(outage_url)
    caller = Caller(host, tmp_path / "ran.log")
    running = threading.Event()
    running.set()
    problems: list[BaseException] = []

    def keep_calling() -> None:
        try:
            while running.is_set():
                caller.call()
                time.sleep(0.005)
        except BaseException as exc:  # pragma: no cover - reported below
            problems.append(exc)

    thread = threading.Thread(target=keep_calling)
    thread.start()
    try:
        _wait(lambda: len(caller.events) >= 20, 30, "20 calls before the outage")
        own_cluster.pg_ctl("stop")  # mid-run: a call may be between its two writes
        stopped_at = len(caller.events)
        _wait(lambda: len(caller.events) >= stopped_at + 40, 30, "40 calls during the outage")
        spooled = _spooled(host.ledger)
        assert len(spooled) >= 2 * 39
        assert {entry["op"] for entry in spooled} == {"insert", "finish"}
        own_cluster.pg_ctl("start")
        restarted_at = len(caller.events)
        # The next write after the backoff replays the spool, in order, before its own.
        _wait(lambda: not host.ledger.spool.pending(), 40, "replaying the spool")
        _wait(lambda: len(caller.events) >= restarted_at + 10, 30, "10 calls after the outage")
    finally:
        running.clear()
        thread.join(30)
    assert problems == []

    assert all(event.status in ("completed", "error") for event in caller.events)
    caller.check_recorded_once(_rows(host.ledger))


@pytest.mark.slow
def test_replaying_the_spool_twice_applies_nothing_the_second_time(
    own_cluster: PostgresCluster, outage_url: str, make_host: Callable[..., Host], tmp_path: Path
) -> None:
    host = make_host(outage_url)
    caller = Caller(host, tmp_path / "ran.log")
    for _ in range(5):
        caller.call()
    own_cluster.pg_ctl("stop")
    for _ in range(12):
        assert caller.call().status in ("completed", "error")
    # A host started while the database is down runs calls too, into the same spool.
    late_starter = Caller(make_host(outage_url), tmp_path / "ran-2.log", run_id="late-starter")
    for _ in range(3):
        late_starter.call()
    spool = host.ledger.spool.path
    saved = spool.read_text(encoding="utf-8")
    assert len(saved.splitlines()) == 2 * (12 + 3)
    own_cluster.pg_ctl("start")

    assert host.ledger.replay() == 2 * (12 + 3)
    assert not host.ledger.spool.pending()
    recorded = _rows(host.ledger)
    assert len(recorded) == 5 + 12 + 3
    caller.check_recorded_once({k: v for k, v in recorded.items() if k.startswith("outage:")})
    late_starter.check_recorded_once(
        {k: v for k, v in recorded.items() if k.startswith("late-starter:")}
    )

    # The same writes again (a crash after replaying, before truncating the spool): no change.
    spool.write_text(saved, encoding="utf-8")
    assert host.ledger.replay() == 2 * (12 + 3)
    assert _rows(host.ledger) == recorded
    assert not host.ledger.spool.pending()


def test_after_an_explicit_replay_the_next_call_is_recorded_in_the_database_at_once(
    own_cluster: PostgresCluster, outage_url: str, make_host: Callable[..., Host], tmp_path: Path
) -> None:
    host = make_host(outage_url)
    caller = Caller(host, tmp_path / "ran.log")
    caller.call()
    own_cluster.pg_ctl("stop")
    # Calls for 3.7s: writes fail at 0, 0.5, 1.5 and 3.5s, so the next attempt waits 8s.
    down = time.monotonic()
    while time.monotonic() - down < 3.7:
        caller.call()
        time.sleep(0.1)
    own_cluster.pg_ctl("start")
    assert host.ledger.replay() > 0
    event = caller.call()
    assert not host.ledger.spool.pending()
    assert host.ledger.get(event.key) is not None


@pytest.mark.slow
def test_a_fail_closed_host_refuses_to_run_calls_while_postgres_is_down(
    own_cluster: PostgresCluster, outage_url: str, make_host: Callable[..., Host], tmp_path: Path
) -> None:
    host = make_host(outage_url, fail_closed=True)
    caller = Caller(host, tmp_path / "ran.log")
    assert caller.call(fail=False).ok
    own_cluster.pg_ctl("stop")
    for _ in range(3):
        refused = caller.call(fail=False)
        assert (refused.status, refused.error_type) == ("error", "LedgerError")
        assert "fail_closed" in (refused.error or "")
    assert caller.ran() == collections.Counter([0]), "the tool ran although the ledger was down"
    own_cluster.pg_ctl("start")

    _wait(lambda: caller.call(fail=False).ok, 40, "a call running again")
    ran = caller.events[-1]
    assert caller.ran() == collections.Counter([0, ran.arguments["n"]])
    assert host.ledger.get(ran.key).status == "executed"


@pytest.mark.slow
def test_a_fail_closed_host_runs_calls_again_as_soon_as_postgres_answers(
    own_cluster: PostgresCluster, outage_url: str, make_host: Callable[..., Host], tmp_path: Path
) -> None:
    host = make_host(outage_url, fail_closed=True)
    caller = Caller(host, tmp_path / "ran.log")
    caller.call(fail=False)
    own_cluster.pg_ctl("stop")
    # Refused calls for 3.7s: writes fail at 0, 0.5, 1.5 and 3.5s, so the next attempt waits 8s.
    down = time.monotonic()
    while time.monotonic() - down < 3.7:
        assert caller.call(fail=False).error_type == "LedgerError"
        time.sleep(0.1)
    own_cluster.pg_ctl("start")
    event = caller.call(fail=False)
    assert (event.status, event.error) == ("completed", None)


def test_a_call_refused_by_a_fail_closed_host_leaves_no_row_behind(
    own_cluster: PostgresCluster, outage_url: str, make_host: Callable[..., Host], tmp_path: Path
) -> None:
    host = make_host(outage_url, fail_closed=True)
    caller = Caller(host, tmp_path / "ran.log")
    caller.call(fail=False)
    own_cluster.pg_ctl("stop")
    refused = caller.call(fail=False)
    assert refused.error_type == "LedgerError"
    own_cluster.pg_ctl("start")
    _wait(lambda: caller.call(fail=False).ok, 40, "a call running again")
    assert host.ledger.get(refused.key) is None


def test_calls_keep_running_while_another_process_holds_the_sqlite_write_lock(
    make_host: Callable[..., Host], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    host = make_host(url)
    caller = Caller(host, tmp_path / "ran.log")
    caller.call()
    with workers.pool(tmp_path / "workers") as pool:
        stop = tmp_path / "unlock"
        locker = pool.start("lock_sqlite", path=str(tmp_path / "ledger.db"), stop=str(stop))
        assert locker.line() == "locked"
        for _ in range(6):
            assert caller.call().status in ("completed", "error")
        assert len(_spooled(host.ledger)) == 2 * 6
        stop.touch()
        assert locker.wait(10) == 0
    _wait(lambda: bool(caller.call()) and not host.ledger.spool.pending(), 40, "a replay")
    caller.check_recorded_once(_rows(host.ledger))


@pytest.mark.slow
def test_a_spool_left_by_a_worker_killed_during_the_outage_is_replayed_by_the_next_host(
    own_cluster: PostgresCluster, outage_url: str, make_host: Callable[..., Host], tmp_path: Path
) -> None:
    own_cluster.pg_ctl("stop")
    with workers.pool(tmp_path / "workers") as pool:
        child = pool.start(
            "hold_call",
            url=outage_url,
            home=str(tmp_path / "home"),
            lease=1.0,
            seconds=600,
            user="bob",
            run_id="killed",
            call_id="call_0",
        )
        assert child.line() == "running"
        child.signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    own_cluster.pg_ctl("start")

    host = make_host(outage_url)
    assert host.ledger.spool.pending()
    caller = Caller(host, tmp_path / "ran.log")
    assert caller.call(fail=False).ok  # replays the dead worker's proposed row first
    assert not host.ledger.spool.pending()
    _wait(lambda: "killed:call_0" in host.ledger.sweep(), 10, "sweeping the dead worker's row")
    row = host.ledger.get("killed:call_0")
    assert (row.status, row.user_id, row.tool, row.late) == ("abandoned", "bob", "hold", False)
    assert host.ledger.get(caller.events[0].key).status == "executed"


@pytest.mark.slow
def test_a_slow_tool_keeps_renewing_its_lease_across_a_database_restart(
    own_cluster: PostgresCluster, outage_url: str, tmp_path: Path
) -> None:
    host = ledger_host(outage_url, tmp_path / "home", workers.hold, lease_seconds=1.0)
    events: list[CallEvent] = []
    call = threading.Thread(
        target=lambda: events.append(
            host.call("hold", "hold", {"seconds": 3.5}, user_id="ann", run_id="r", call_id="c")
        )
    )
    call.start()
    try:
        time.sleep(0.3)
        own_cluster.pg_ctl("restart")
        sweeper = Ledger(outage_url, home=tmp_path / "sweeper")
        swept: list[str] = []
        while call.is_alive():
            swept += sweeper.sweep()
            time.sleep(0.05)
        call.join()
        host.ledger.replay()
        row = sweeper.get("r:c")
        sweeper.close()
    finally:
        call.join(30)
        host.close()
    assert events[0].ok
    assert swept == []
    assert (row.status, row.late) == ("executed", False)


def test_reads_and_sweeps_work_again_after_a_database_restart(
    own_cluster: PostgresCluster, outage_url: str, tmp_path: Path
) -> None:
    ledger = Ledger(outage_url, home=tmp_path / "home")
    try:
        attempt = ledger.begin(key="r:1", call_id="1", user_id="ann")
        ledger.finish(attempt, ok=True, result=1)
        own_cluster.pg_ctl("restart")
        assert ledger.sweep() == []
        assert ledger.get("r:1").status == "executed"
    finally:
        ledger.close()


def test_a_fail_closed_host_runs_the_first_call_after_a_database_restart(
    own_cluster: PostgresCluster, outage_url: str, make_host: Callable[..., Host], tmp_path: Path
) -> None:
    caller = Caller(make_host(outage_url, fail_closed=True), tmp_path / "ran.log")
    assert caller.call(fail=False).ok
    own_cluster.pg_ctl("restart")
    event = caller.call(fail=False)
    assert (event.status, event.error) == ("completed", None)


#: The calls ``guarded`` ran, by ``n``.
GUARDED: list[int] = []


@expediter.tool(require_approval=True)
def guarded(n: int) -> int:
    """Run only once a human approved."""
    GUARDED.append(n)
    return n


def test_a_decision_on_a_paused_call_needs_the_database_and_is_never_spooled(
    own_cluster: PostgresCluster, outage_url: str, make_host: Callable[..., Host], tmp_path: Path
) -> None:
    GUARDED.clear()
    host = make_host(outage_url, guarded)
    toolset = host.toolset(user_id="ann")
    calls = toolset.parse_calls(
        "openai", openai_response(*((call_id, "guarded", '{"n": 1}') for call_id in ("c1", "c2")))
    )
    events = [e for e in toolset.run(calls, message_id="m1") if e.status != "pending"]
    assert [e.status for e in events] == ["awaiting_approval", "awaiting_approval"]

    own_cluster.pg_ctl("stop")
    for key, approved in (("m1:c1", True), ("m1:c2", False)):
        with pytest.raises(LedgerError, match="unreachable"):
            host.resume(key, approved, approver="bob")
    assert GUARDED == []
    assert not host.ledger.spool.pending()
    own_cluster.pg_ctl("start")

    _wait(lambda: _resumed(host, "m1:c1"), 40, "an approval going through")
    assert GUARDED == [1]
    assert host.ledger.get("m1:c1").status == "executed"
    assert host.ledger.get("m1:c2").status == "awaiting_approval"


def _resumed(host: Host, key: str) -> bool:
    try:
        return host.resume(key, True, approver="bob").ok
    except LedgerError:
        return False
