"""Many worker processes on one ledger: colliding keys, sweepers running, nothing lost or mixed up.

Real processes (``support.ledger_workers``) on a real PostgreSQL server (and a smaller SQLite run):
each worker holds its own connection and lease thread, exactly as deployed workers do.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import ledger_workers as workers

from expediter.core.ledger import Ledger, LedgerRow
from expediter.core.ledger.database import Database
from expediter.core.ledger.schema import upgrade

FINAL = {"executed", "failed"}


def _all_rows(url: str, home: Path) -> dict[str, LedgerRow]:
    reader = Ledger(url, home=home)
    try:
        return {row.key: row for row in reader.rows(limit=0)}
    finally:
        reader.close()


def _check_every_call(
    rows: dict[str, LedgerRow], reports: dict[int, dict[str, Any]], users: dict[int, str]
) -> collections.Counter[int]:
    """Each key has one row, created by exactly one worker, owned and finished by that worker
    alone; returns how many of the shared keys each worker created."""
    attempts: dict[str, list[tuple[int, dict[str, Any]]]] = collections.defaultdict(list)
    for worker, report in reports.items():
        for record in report["records"]:
            attempts[record["key"]].append((worker, record))
    assert set(rows) == set(attempts), "rows lost or invented"
    won: collections.Counter[int] = collections.Counter()
    for key, tries in attempts.items():
        row = rows[key]
        created = collections.Counter(record["created"] for _, record in tries)
        assert created == collections.Counter({True: 1, False: len(tries) - 1}), (key, created)
        ((worker, record),) = [(w, record) for w, record in tries if record["created"]]
        if len(tries) > 1:
            won[worker] += 1
        assert record["applied"] is True, f"{key}: the creator's result was not recorded"
        assert (row.user_id, row.attempt_id) == (users[worker], record["attempt_id"])
        assert row.worker_id == reports[worker]["worker_id"]
        assert row.status == ("executed" if record["ok"] else "failed"), key
        if record["ok"]:
            assert row.result == {"worker": worker, "n": int(key.rsplit(":", 1)[1])}
        else:
            assert row.error == f"failed in worker {worker}"
        assert row.arguments["token"] == "***"
        for loser, other in tries:
            if other is not record:
                assert other["applied"] is False, f"{key}: worker {loser} finished a row it lost"
    return won


@pytest.mark.slow
def test_four_workers_with_colliding_keys_and_two_sweepers_lose_and_mix_up_nothing(
    fresh_pg_url: Callable[[], str], tmp_path: Path
) -> None:
    url = fresh_pg_url()
    upgrade(Database.parse(url))
    calls, shared_every = 2000, 4
    # ann runs in two workers (replicas serving one user); carol's worker holds a lease far
    # shorter than its renewal interval, and lets a slow subset of its calls be swept.
    users = {0: "ann", 1: "bob", 2: "ann", 3: "carol"}
    leases = {0: 60.0, 1: 60.0, 2: 60.0, 3: 0.02}
    with workers.pool(tmp_path / "workers") as pool:
        callers = {
            worker: pool.start(
                "calls",
                name=f"worker-{worker}",
                url=url,
                home=str(tmp_path / "home"),
                lease=leases[worker],
                worker=worker,
                user=users[worker],
                calls=calls,
                shared_every=shared_every,
                slow_every=50 if worker == 3 else 0,
            )
            for worker in users
        }
        stop = tmp_path / "stop-sweeping"
        sweepers = [
            pool.start(
                "sweeper",
                url=url,
                home=str(tmp_path / "home"),
                lease=60.0,
                stop=str(stop),
                pause=0.005,
            )
            for _ in range(2)
        ]
        pool.go()
        reports = {worker: caller.report(timeout=90) for worker, caller in callers.items()}
        stop.touch()
        swept_by = [sweeper.report(timeout=30)["swept"] for sweeper in sweepers]

    rows = _all_rows(url, tmp_path / "reader")
    shared = len(range(0, calls, shared_every))
    assert len(rows) == len(users) * (calls - shared) + shared
    assert {row.status for row in rows.values()} <= FINAL
    won = _check_every_call(rows, reports, users)
    assert set(won) == set(users), f"some worker never won a shared key: {won}"
    # One provider call id, four invokers' runs: four rows, each its own invoker's.
    same_call_id = sorted(
        (row.run_id, row.user_id) for row in rows.values() if row.call_id == "call_1"
    )
    assert same_call_id == [
        ("run-0", "ann"),
        ("run-1", "bob"),
        ("run-2", "ann"),
        ("run-3", "carol"),
    ]

    # Swept while running: each row abandoned by one sweeper only (SKIP LOCKED), and every
    # swept row still got its result, marked late; only carol's short leases ever expired.
    swept = [key for keys in swept_by for key in keys]
    assert len(swept) == len(set(swept)), "a row was swept twice"
    late = {key for key, row in rows.items() if row.late}
    assert set(swept) == late
    assert {rows[key].user_id for key in late} == {"carol"}
    slow = {r["key"] for r in reports[3]["records"] if r["slow"]}
    assert len(slow) >= 20
    assert slow <= late


@pytest.mark.slow
def test_host_calls_from_four_processes_run_each_key_once_and_record_it_for_its_invoker(
    fresh_pg_url: Callable[[], str], tmp_path: Path
) -> None:
    url = fresh_pg_url()
    upgrade(Database.parse(url))
    calls, shared_every = 150, 3
    users = {0: "ann", 1: "bob", 2: "carol", 3: "ann"}
    log = tmp_path / "ran.log"
    with workers.pool(tmp_path / "workers") as pool:
        callers = {
            worker: pool.start(
                "host_calls",
                url=url,
                home=str(tmp_path / "home"),
                lease=60.0,
                worker=worker,
                user=user,
                calls=calls,
                shared_every=shared_every,
                log=str(log),
            )
            for worker, user in users.items()
        }
        pool.go()
        events = {worker: caller.report()["events"] for worker, caller in callers.items()}

    rows = _all_rows(url, tmp_path / "reader")
    ran = collections.Counter(tuple(line.split()) for line in log.read_text().splitlines())
    shared = len(range(0, calls, shared_every))
    assert len(rows) == len(users) * (calls - shared) + shared == sum(ran.values())
    tries: dict[str, list[tuple[int, int, dict[str, Any]]]] = collections.defaultdict(list)
    for worker, worker_events in events.items():
        for event in worker_events:
            tries[event["key"]].append((worker, event["n"], event))
    assert set(tries) == set(rows)
    for key, attempts in tries.items():
        runners = [(worker, event) for worker, n, event in attempts if (str(worker), str(n)) in ran]
        assert len(runners) == 1, f"{key} ran in {runners}"
        (worker, event), row = runners[0], rows[key]
        assert row.user_id == users[worker]
        assert row.status == ("executed" if event["status"] == "completed" else "failed")
        if row.status == "executed":
            assert row.result["worker"] == str(worker)
        assert row.late is False
        for other, _, refused in attempts:
            if refused is not event:
                # Another process had the key: refused without running, its row untouched.
                assert key.startswith("host-shared:"), (key, other)
                assert (refused["status"], refused["error_type"]) == ("error", "LedgerError")
    assert ran.most_common(1)[0][1] == 1, "a call ran twice"


def test_two_sqlite_processes_with_colliding_keys_and_a_sweeper_lose_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(Database.parse(url))
    calls, shared_every = 300, 3
    users = {0: "ann", 3: "bob"}
    with workers.pool(tmp_path / "workers") as pool:
        callers = {
            worker: pool.start(
                "calls",
                url=url,
                home=str(tmp_path / "home"),
                lease=0.02 if worker == 3 else 60.0,
                worker=worker,
                user=user,
                calls=calls,
                shared_every=shared_every,
                slow_every=50 if worker == 3 else 0,
            )
            for worker, user in users.items()
        }
        stop = tmp_path / "stop-sweeping"
        sweeper = pool.start(
            "sweeper", url=url, home=str(tmp_path / "home"), lease=60.0, stop=str(stop), pause=0.01
        )
        pool.go()
        reports = {worker: caller.report() for worker, caller in callers.items()}
        stop.touch()
        swept = sweeper.report()["swept"]

    rows = _all_rows(url, tmp_path / "reader")
    shared = len(range(0, calls, shared_every))
    assert len(rows) == len(users) * (calls - shared) + shared
    assert {row.status for row in rows.values()} <= FINAL
    _check_every_call(rows, reports, users)
    late = {key for key, row in rows.items() if row.late}
    assert len(swept) == len(set(swept))
    assert set(swept) == late
    assert {rows[key].user_id for key in late} == {"bob"}
    assert {r["key"] for r in reports[3]["records"] if r["slow"]} <= late
