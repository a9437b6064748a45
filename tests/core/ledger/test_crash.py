"""Workers that die, stall or run long: leases decide what the sweeper may abandon.

Real processes (``support.ledger_workers``) killed with SIGKILL or frozen with SIGSTOP, on SQLite
and on a real PostgreSQL server; leases of about a second so the tests stay short.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import ledger_workers as workers
from support.hosts import ledger_host

from expediter.core.ledger import Ledger

LEASE = 1.0


@pytest.fixture
def reader(migrated_url: str, tmp_path: Path) -> Iterator[Ledger]:
    """The test's own ledger connection: it reads rows and sweeps, as `expediter ledger` does."""
    ledger = Ledger(migrated_url, home=tmp_path / "reader")
    yield ledger
    ledger.close()


def _freeze_outside_a_write(child: object, url: str) -> None:
    """SIGSTOP a worker, but not in the middle of an SQLite write: a process frozen while it
    holds SQLite's one write lock blocks every other writer (that is SQLite, not the ledger)."""
    import sqlite3

    for _ in range(200):
        child.signal(signal.SIGSTOP)  # type: ignore[attr-defined]
        if not url.startswith("sqlite"):
            return
        probe = sqlite3.connect(url.split("///", 1)[1], timeout=0.2, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            child.signal(signal.SIGCONT)  # type: ignore[attr-defined]
            time.sleep(0.01)
        finally:
            probe.close()
    raise AssertionError("could not freeze the worker outside an SQLite write")


def _sweep_until(reader: Ledger, keys: set[str], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    swept: set[str] = set()
    while not keys <= swept:
        assert time.monotonic() < deadline, f"{keys - swept} not swept within {timeout}s"
        swept.update(reader.sweep())
        time.sleep(0.02)


@pytest.mark.slow
def test_a_worker_killed_between_proposed_and_executed_is_abandoned_after_its_lease_not_before(
    migrated_url: str, tmp_path: Path, reader: Ledger
) -> None:
    key = "crash-run:call_1"
    with workers.pool(tmp_path / "workers") as pool:
        child = pool.start(
            "hold_call",
            url=migrated_url,
            home=str(tmp_path / "home"),
            lease=LEASE,
            seconds=600,
            user="ann",
            run_id="crash-run",
            call_id="call_1",
        )
        assert child.line() == "running"
        running = reader.get(key)
        assert running is not None
        assert (running.status, running.user_id, running.tool) == ("proposed", "ann", "hold")
        child.signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL

    lease_end = reader.get(key).lease_expires_at
    assert lease_end is not None
    early_sweeps = 0
    while True:
        before = time.time()
        swept = reader.sweep()
        after = time.time()
        if key in swept:
            assert after > lease_end, "abandoned before its lease expired"
            break
        # A sweep that started after the lease expired must have taken the row.
        assert before <= lease_end, "the lease expired but the sweeper left the row"
        if after < lease_end:
            # The lease still runs: however dead the worker is, its row is left alone.
            assert reader.get(key).status == "proposed"
            early_sweeps += 1
        time.sleep(0.05)
    assert early_sweeps >= 3, "the worker was killed too late to watch the lease run"

    row = reader.get(key)
    assert (row.status, row.user_id, row.late) == ("abandoned", "ann", False)
    assert row.worker_id == running.worker_id
    assert row.attempt_id == running.attempt_id
    assert row.finished_at is not None
    assert row.finished_at >= lease_end
    assert "lease" in (row.error or "")
    assert reader.sweep() == []


@pytest.mark.slow
def test_a_slow_tool_renews_its_lease_so_the_sweeper_never_takes_it_and_it_ends_executed(
    migrated_url: str, tmp_path: Path, reader: Ledger
) -> None:
    seconds = 4 * LEASE
    host = ledger_host(migrated_url, tmp_path / "home", workers.hold, lease_seconds=LEASE)
    events = []
    call = threading.Thread(
        target=lambda: events.append(
            host.call("hold", "hold", {"seconds": seconds}, user_id="ann", run_id="r", call_id="c")
        )
    )
    try:
        call.start()
        seen: list[tuple[float, str, float | None]] = []
        swept: list[str] = []
        while call.is_alive():
            swept += reader.sweep()
            row = reader.get("r:c")
            if row is not None:
                seen.append((time.time(), row.status, row.lease_expires_at))
            time.sleep(0.05)
        call.join()
    finally:
        host.close()

    assert swept == [], f"swept while running: (time, status, lease) seen: {seen}"
    (event,) = events
    assert (event.status, event.result) == ("completed", {"held": seconds})
    row = reader.get("r:c")
    # Seen running long after its first lease would have expired, with a lease moved on.
    leases = {lease for _, status, lease in seen if status == "proposed"}
    assert len(leases) >= 2, seen
    assert max(leases) > row.attempted_at + 2 * LEASE, seen
    assert (row.status, row.late, row.user_id) == ("executed", False, "ann")
    assert row.result == {"held": seconds}
    assert row.duration_ms >= seconds * 1000
    assert row.lease_expires_at is None


@pytest.mark.slow
def test_results_arriving_after_the_row_was_abandoned_are_recorded_late_not_dropped(
    migrated_url: str, tmp_path: Path, reader: Ledger
) -> None:
    # A stalled worker (SIGSTOP: a frozen VM, a long GC pause) cannot renew its lease; the
    # sweeper abandons its rows; when it wakes up its results still land, flagged late.
    with workers.pool(tmp_path / "workers") as pool:
        children = {
            fail: pool.start(
                "hold_call",
                url=migrated_url,
                home=str(tmp_path / "home"),
                lease=LEASE,
                seconds=2 * LEASE,
                fail=fail,
                user="bob",
                run_id="stall",
                call_id=f"fail={fail}",
            )
            for fail in (False, True)
        }
        for child in children.values():
            assert child.line() == "running"
            _freeze_outside_a_write(child, migrated_url)
        keys = {f"stall:fail={fail}" for fail in children}
        proposed = {key: reader.get(key) for key in keys}
        _sweep_until(reader, keys)
        assert {reader.get(key).status for key in keys} == {"abandoned"}
        for child in children.values():
            child.signal(signal.SIGCONT)
        events = {fail: json.loads(child.line()) for fail, child in children.items()}
        assert all(child.wait(30) == 0 for child in children.values())

    assert (events[False]["status"], events[False]["result"]) == ("completed", {"held": 2 * LEASE})
    assert (events[True]["status"], events[True]["error_type"]) == ("error", "RuntimeError")
    executed, failed = reader.get("stall:fail=False"), reader.get("stall:fail=True")
    assert (executed.status, executed.late, executed.result) == ("executed", True, {"held": 2.0})
    assert (failed.status, failed.late) == ("failed", True)
    assert "failed after holding" in failed.error
    for row in (executed, failed):
        assert row.user_id == "bob"
        assert row.attempt_id == proposed[row.key].attempt_id
        assert row.duration_ms >= 2 * LEASE * 1000
    assert reader.sweep() == []


@pytest.mark.slow
def test_finishing_a_duplicate_attempt_does_not_stop_the_creators_lease_renewals(
    make_ledger: Callable[..., Ledger], reader: Ledger
) -> None:
    ledger = make_ledger(lease_seconds=LEASE)
    creator = ledger.begin(key="dup:call_1", call_id="call_1", user_id="ann")
    duplicate = ledger.begin(key="dup:call_1", call_id="call_1", user_id="ann")
    assert (creator.created, duplicate.created) == (True, False)
    assert ledger.finish(duplicate, ok=True, result="not mine") is False
    deadline = time.monotonic() + 2.5 * LEASE
    swept: list[str] = []
    while time.monotonic() < deadline:  # the creator's tool is still running
        swept += reader.sweep()
        time.sleep(0.05)
    assert ledger.finish(creator, ok=True, result="mine") is True
    row = reader.get("dup:call_1")
    assert swept == []
    assert (row.status, row.result, row.late) == ("executed", "mine", False)
