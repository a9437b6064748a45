"""Ledger cost per call on SQLite and PostgreSQL, beside the raw drivers and pgbench.

One ledger call is ``Ledger.begin`` (the ``proposed`` row: ``INSERT ... ON CONFLICT DO NOTHING``)
plus ``Ledger.finish`` (the guarded ``UPDATE`` to ``executed``). Two kinds of floor:

- the *physical* floor (benchmarks/README.md): raw ``sqlite3`` on one held connection, WAL,
  synchronous NORMAL, one 16-column row into a table that has only its primary key, then the
  guarded ``UPDATE``: the cost of a durable two-step record and nothing else;
- the ledger's own two statements, same 25 columns, same table and indexes, through the raw
  driver on one held autocommit connection (how much the ledger's code adds to its SQL).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import attrs
from measure import Figure, Report, parse_args, time_statements

import expediter
from expediter.core.host import Host
from expediter.core.ledger import Ledger, Proposal
from expediter.core.ledger.database import Database
from expediter.core.ledger.repository import COLUMNS, Repository, Statements
from expediter.core.ledger.schema import upgrade
from expediter.testing.postgres import PostgresCluster, PostgresUnavailable

ARGUMENTS: dict[str, Any] = {"a": 1, "b": 2}
ARGUMENTS_JSON = json.dumps(ARGUMENTS)
RESULT = 3
RESULT_JSON = json.dumps(RESULT)
USER = "alice"
LEASE = 60.0
ATTEMPT = "0123456789abcdef"
WORKER = "bench-floor"
#: ``Ledger.begin`` calls each worker makes before the clock starts (connection, lease thread).
WARMUP = 20
#: Worker processes (and pgbench clients) in the throughput comparison.
WORKERS = 4
#: 4 workers must reach this share of pgbench's calls per second (benchmarks/README.md).
THROUGHPUT_GOAL = 0.8
#: ``Host.call`` with the SQLite ledger, at most this many times the physical floor.
PHYSICAL_GOAL = 2.0
#: Calls per ``Ledger.begin_many`` in the batched figure (a turn with several calls).
BATCH = 5

Case = tuple[str, Mapping[str, Any]]
Runs = dict[str, tuple[float, ...]]

# -- the floor: the ledger's two statements, written by hand for the raw drivers ---------------

#: The columns the ledger's INSERT writes (all but ``late``, which keeps its default).
#: Columns a call's proposal never writes (a late result, a duplicate found on replay).
_UNWRITTEN = frozenset({"late", "duplicate_of"})
FLOOR_COLUMNS = (
    "key",
    "call_id",
    "name",
    "message_id",
    "run_id",
    "user_id",
    "owner_id",
    "instance_id",
    "tool",
    "action",
    "arguments",
    "decision",
    "decided_by",
    "status",
    "result",
    "error",
    "attempted_at",
    "updated_at",
    "finished_at",
    "duration_ms",
    "lease_expires_at",
    "worker_id",
    "attempt_id",
    "request",
    "decision_reason",
)
_JSONB = {"arguments", "result", "request"}


def _insert_sql(marker: str, jsonb: bool) -> str:
    names = ", ".join(f'"{name}"' for name in FLOOR_COLUMNS)
    cast = {name: "::jsonb" if jsonb and name in _JSONB else "" for name in FLOOR_COLUMNS}
    values = ", ".join(marker + cast[name] for name in FLOOR_COLUMNS)
    return (
        f'INSERT INTO tool_call_attempts ({names}) VALUES ({values}) ON CONFLICT ("key") DO NOTHING'
    )


def _update_sql(marker: str, jsonb: bool, distinct: str) -> str:
    result = marker + ("::jsonb" if jsonb else "")
    return (
        f"UPDATE tool_call_attempts SET status = {marker}, result = {result}, error = {marker}, "
        f"updated_at = {marker}, finished_at = {marker}, duration_ms = {marker}, "
        f"lease_expires_at = NULL, late = {marker} "
        f'WHERE "key" = {marker} AND status = {marker} AND user_id {distinct} {marker} '
        f"AND attempt_id = {marker}"
    )


SQLITE_INSERT = _insert_sql("?", jsonb=False)
SQLITE_UPDATE = _update_sql("?", jsonb=False, distinct="IS")
PG_INSERT = _insert_sql("%s", jsonb=True)
PG_UPDATE = _update_sql("%s", jsonb=True, distinct="IS NOT DISTINCT FROM")

#: The physical floor's table: the 16 columns a durable record of a call carries (docs/ledger.md:
#: key, invoker, owner, instance, tool, action, arguments, decision, status,
#: result, error, timestamps, duration, lease), and no index but the primary key.
PHYSICAL_TABLE = """CREATE TABLE calls (
    key TEXT PRIMARY KEY, call_id TEXT NOT NULL, user_id TEXT, owner_id TEXT,
    instance_id TEXT, tool TEXT, action TEXT, arguments TEXT, decision TEXT,
    status TEXT NOT NULL, result TEXT, error TEXT, attempted_at REAL NOT NULL,
    finished_at REAL, duration_ms REAL, lease_expires_at REAL)"""
PHYSICAL_INSERT = (
    "INSERT INTO calls (key, call_id, user_id, owner_id, instance_id, tool, action, arguments, "
    "decision, status, result, error, attempted_at, finished_at, duration_ms, lease_expires_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING"
)
PHYSICAL_UPDATE = (
    "UPDATE calls SET status = ?, result = ?, error = ?, finished_at = ?, duration_ms = ?, "
    "lease_expires_at = NULL WHERE key = ? AND status = ? AND user_id IS ?"
)

#: The pgbench script: the same two statements, one pgbench transaction = one ledger call.
#: Every value the ledger binds as a parameter is a pgbench variable, which ``-M prepared``
#: binds as a parameter too (``PGBENCH_VALUES``), so the server parses the same values per
#: call (the JSON arguments, the numbers) on both sides; the ledger's NULLs stay NULL.
PGBENCH_SCRIPT = """\
\\set k random(1, 1000000000000000)
\\set now random(1700000000, 1800000000)
\\set lease :now + 60
INSERT INTO tool_call_attempts (key, call_id, name, message_id, run_id, user_id, owner_id, \
instance_id, tool, action, arguments, decision, decided_by, status, result, error, \
attempted_at, updated_at, finished_at, duration_ms, lease_expires_at, worker_id, attempt_id, \
request, decision_reason) VALUES (:k, :k, :tool, NULL, :run, :user, NULL, :tool, :tool, :tool, \
:arguments, NULL, NULL, :proposed, NULL, NULL, :now, :now, NULL, NULL, :lease, :worker, \
:attempt, NULL, NULL) ON CONFLICT (key) DO NOTHING;
UPDATE tool_call_attempts SET status = :executed, result = :result, error = NULL, \
updated_at = :now, finished_at = :now, duration_ms = :duration, lease_expires_at = NULL, \
late = :late WHERE key = :k AND status = :proposed AND user_id IS NOT DISTINCT FROM :user \
AND attempt_id = :attempt;
"""
#: The constant values of the script (``pgbench -D name=value``), as the ledger binds them.
PGBENCH_VALUES = {
    "tool": "add",
    "run": "bench",
    "user": USER,
    "arguments": ARGUMENTS_JSON,
    "proposed": "proposed",
    "executed": "executed",
    "worker": WORKER,
    "attempt": ATTEMPT,
    "result": RESULT_JSON,
    "duration": "0.01",
    "late": "false",
}


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Calls:
    """A zero-argument callable for ``timeit`` that counts how often it ran."""

    def __init__(self, body: Callable[[int], Any]) -> None:
        self.body = body
        self.count = 0

    def __call__(self) -> Any:
        self.count += 1
        return self.body(self.count)

    def case(self) -> Case:
        """The ``timeit`` statement and namespace."""
        return "call()", {"call": self}


def floor_calls(cursor: Any, insert: str, update: str, prefix: str) -> Calls:
    """The two statements on a held cursor: SQL strings prepared once, positional values."""
    execute, clock = cursor.execute, time.time

    def call(n: int) -> None:
        key = f"{prefix}:{n}"
        now = clock()
        row = (
            key,
            f"call_{n}",
            "add",
            None,
            "bench",
            USER,
            None,
            "add",
            "add",
            "add",
            ARGUMENTS_JSON,
            None,
            None,
            "proposed",
            None,
            None,
            now,
            now,
            None,
            None,
            now + LEASE,
            WORKER,
            ATTEMPT,
            None,
            None,
        )
        if execute(insert, row).rowcount != 1:
            raise RuntimeError(f"the floor's INSERT of {key} created no row")
        done = clock()
        values = ("executed", RESULT_JSON, None, done, done, 0.01, False, key, "proposed")
        if execute(update, (*values, USER, ATTEMPT)).rowcount != 1:
            raise RuntimeError(f"the floor's UPDATE of {key} changed no row")

    return Calls(call)


def physical_calls(cursor: Any, prefix: str) -> Calls:
    """The physical floor: one 16-column row, then the guarded UPDATE (nothing else)."""
    execute, clock = cursor.execute, time.time

    def call(n: int) -> None:
        key = f"{prefix}:{n}"
        now = clock()
        row = (key, f"call_{n}", USER, None, "add", "add", "add", ARGUMENTS_JSON, None,
               "proposed", None, None, now, None, None, now + LEASE)  # fmt: skip
        if execute(PHYSICAL_INSERT, row).rowcount != 1:
            raise RuntimeError(f"the physical floor's INSERT of {key} created no row")
        done = clock()
        values = ("executed", RESULT_JSON, None, done, 0.01, key, "proposed", USER)
        if execute(PHYSICAL_UPDATE, values).rowcount != 1:
            raise RuntimeError(f"the physical floor's UPDATE of {key} changed no row")

    return Calls(call)


def pq_calls(pgconn: Any, prefix: str) -> Calls:
    """The two statements prepared once and run with libpq's ``PQexecPrepared`` (psycopg's
    ``pq`` layer, text format): what ``pgbench -M prepared`` does, and what the ledger does."""
    from psycopg import pq

    for name, sql in ((b"floor_insert", PG_INSERT), (b"floor_update", PG_UPDATE)):
        numbered = sql
        for index in range(1, sql.count("%s") + 1):
            numbered = numbered.replace("%s", f"${index}", 1)
        result = pgconn.prepare(name, numbered.encode())
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise RuntimeError(f"cannot prepare the libpq floor: {result.error_message!r}")
    execute, clock, ok = pgconn.exec_prepared, time.time, pq.ExecStatus.COMMAND_OK
    user, attempt, worker = USER.encode(), ATTEMPT.encode(), WORKER.encode()
    arguments, result_json = ARGUMENTS_JSON.encode(), RESULT_JSON.encode()

    def call(n: int) -> None:
        key = f"{prefix}:{n}".encode()
        now = clock()
        stamp = repr(now).encode()
        row = [key, b"call_%d" % n, b"add", None, b"bench", user, None, b"add", b"add", b"add",
               arguments, None, None, b"proposed", None, None, stamp, stamp, None, None,
               repr(now + LEASE).encode(), worker, attempt, None, None]  # fmt: skip
        done = execute(b"floor_insert", row)
        if done.status != ok or done.command_tuples != 1:
            raise RuntimeError(f"the libpq floor's INSERT of {key!r} created no row")
        stamp = repr(clock()).encode()
        values = [b"executed", result_json, None, stamp, stamp, b"0.01", b"f", key, b"proposed"]
        done = execute(b"floor_update", [*values, user, attempt])
        if done.status != ok or done.command_tuples != 1:
            raise RuntimeError(f"the libpq floor's UPDATE of {key!r} changed no row")

    return Calls(call)


def repository_calls(repository: Repository, prefix: str) -> Calls:
    """The ledger's own statements through ``Repository`` (no JSON, lock or lease)."""
    insert, finish, clock = repository.insert, repository.finish, time.time
    empty = dict.fromkeys(COLUMNS)

    def call(n: int) -> None:
        key = f"{prefix}:{n}"
        now = clock()
        row = empty | {
            "key": key,
            "call_id": f"call_{n}",
            "name": "add",
            "run_id": "bench",
            "user_id": USER,
            "instance_id": "add",
            "tool": "add",
            "action": "add",
            "arguments": ARGUMENTS_JSON,
            "status": "proposed",
            "attempted_at": now,
            "updated_at": now,
            "lease_expires_at": now + LEASE,
            "worker_id": WORKER,
            "attempt_id": ATTEMPT,
        }
        if not insert(row):
            raise RuntimeError(f"Repository.insert of {key} created no row")
        done = clock()
        if not finish(
            key,
            USER,
            ATTEMPT,
            expected="proposed",
            status="executed",
            result=RESULT_JSON,
            error=None,
            finished_at=done,
            duration_ms=0.01,
        ):
            raise RuntimeError(f"Repository.finish of {key} changed no row")

    return Calls(call)


def ledger_call(ledger: Ledger, prefix: str, n: int) -> bool:
    """One recorded call: ``begin`` then ``finish``; whether both applied."""
    attempt = ledger.begin(
        key=f"{prefix}:{n}",
        call_id=f"call_{n}",
        user_id=USER,
        name="add",
        run_id="bench",
        instance_id="add",
        tool="add",
        action="add",
        arguments=ARGUMENTS,
    )
    finished = ledger.finish(attempt, ok=True, result=RESULT, duration_ms=0.01)
    return attempt.created is True and finished is True


def ledger_calls(ledger: Ledger, prefix: str) -> Calls:
    """``Ledger.begin`` + ``Ledger.finish`` per call."""

    def call(n: int) -> None:
        if not ledger_call(ledger, prefix, n):
            raise RuntimeError(f"the ledger did not record {prefix}:{n}")

    return Calls(call)


def batched_calls(ledger: Ledger, prefix: str) -> Calls:
    """A turn of ``BATCH`` calls: ``Ledger.begin_many`` (one commit), then a ``finish`` each;
    timed per batch, reported per call."""

    def call(n: int) -> None:
        attempts = ledger.begin_many(
            [
                Proposal(
                    key=f"{prefix}:{n}:{index}",
                    call_id=f"call_{index}",
                    user_id=USER,
                    name="add",
                    message_id=f"{prefix}:{n}",
                    instance_id="add",
                    tool="add",
                    action="add",
                    arguments=ARGUMENTS,
                )
                for index in range(BATCH)
            ]
        )
        for attempt in attempts:
            if not (attempt.created and ledger.finish(attempt, ok=True, result=RESULT)):
                raise RuntimeError(f"the ledger did not record {attempt.key}")

    return Calls(call)


def host_calls(host: Host) -> Calls:
    """``Host.call`` of the trivial tool."""

    def call(n: int) -> Any:
        return host.call("add", "add", ARGUMENTS)

    return Calls(call)


def langchain_calls() -> Calls | str:
    """LangChain's ``StructuredTool.invoke`` of the same function (no ledger); or why not."""
    try:
        from langchain_core.tools import StructuredTool
    except ImportError as exc:
        return f"langchain-core is not importable ({exc}); install the bench extra"
    invoke = StructuredTool.from_function(add).invoke

    def call(n: int) -> Any:
        return invoke(ARGUMENTS)

    return Calls(call)


# -- counting rows ------------------------------------------------------------------------------


def recorded(report: Report, what: str, calls: int, counts: Mapping[str, int]) -> None:
    """Check that every call has exactly one row and every row is ``executed``."""
    rows = sum(counts.values())
    ok = calls > 0 and rows == calls == counts.get("executed", 0)
    detail = f"{calls} calls, {rows} rows, by status {dict(sorted(counts.items()))}"
    report.check(f"{what}: every begun call was finished and recorded", ok, detail)


def table_counts(connection: Any) -> dict[str, int]:
    """Rows of ``tool_call_attempts`` per status (every case has a database of its own)."""
    found = connection.execute(
        "SELECT status, count(*) FROM tool_call_attempts GROUP BY status"
    ).fetchall()
    return {str(status): int(count) for status, count in found}


def sqlite_counts(path: Path) -> dict[str, int]:
    """``table_counts`` of an SQLite file, on a connection of its own."""
    connection = sqlite3.connect(path)
    try:
        return table_counts(connection)
    finally:
        connection.close()


def postgres_counts(cluster: Any, database: str) -> dict[str, int]:
    """``table_counts`` of a database in the cluster."""
    import psycopg

    with psycopg.connect(cluster.dsn(database), autocommit=True) as connection:
        return table_counts(connection)


# -- SQLite -------------------------------------------------------------------------------------


def sqlite_floor_connection(path: Path, synchronous: str) -> sqlite3.Connection:
    """A raw ``sqlite3`` connection in autocommit mode with the ledger's pragmas."""
    connection = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={synchronous.upper()}")
    connection.execute("PRAGMA busy_timeout=5000")
    return connection


def sqlite_pragmas(connection: sqlite3.Connection) -> tuple[str, int]:
    """``journal_mode`` and ``synchronous`` (1 NORMAL, 2 FULL) of a connection."""
    mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
    return str(mode), int(connection.execute("PRAGMA synchronous").fetchone()[0])


def open_ledger(stack: ExitStack, url: str, home: Path) -> Ledger:
    """An opened ledger (embedded SQLite gets its tables), closed when the stack unwinds."""
    ledger = Ledger(url, home=home, lease_seconds=LEASE)
    ledger.open()
    stack.callback(ledger.close)
    return ledger


def sqlite_schema(path: Path, home: Path) -> None:
    """Give an SQLite file the ledger's tables and indexes (what the ledger does on open)."""
    ledger = Ledger(f"sqlite:///{path}", home=home)
    ledger.check()
    ledger.close()


def measure_sqlite(
    report: Report, stack: ExitStack, directory: Path, *, quick: bool, rounds: int, batch: float
) -> tuple[Runs, dict[str, str]]:
    """SQLite WAL (NORMAL and FULL): ledger, Repository and raw floor; Host.call; LangChain."""
    cases: dict[str, Calls] = {}
    #: case -> the SQLite file its rows go to.
    files: dict[str, Path] = {}
    for synchronous in ("normal", "full"):
        query = "" if synchronous == "normal" else "?synchronous=full"
        files[f"sqlite_{synchronous}_ledger"] = path = directory / f"ledger-{synchronous}.db"
        ledger = open_ledger(stack, f"sqlite:///{path}{query}", directory / f"home-{synchronous}")
        files[f"sqlite_{synchronous}_raw"] = path = directory / f"floor-{synchronous}.db"
        sqlite_schema(path, directory / "home-schema")
        floor = sqlite_floor_connection(path, synchronous)
        stack.callback(floor.close)
        probe = ledger.database.connect()
        pragmas = {"ledger": sqlite_pragmas(probe), "floor": sqlite_pragmas(floor)}
        probe.close()
        expected = ("wal", 1 if synchronous == "normal" else 2)
        report.check(
            f"SQLite {synchronous.upper()}: ledger and floor use WAL, same synchronous",
            all(found == expected for found in pragmas.values()),
            ", ".join(
                f"{who} {mode}/synchronous={level}" for who, (mode, level) in pragmas.items()
            ),
        )
        cursor = floor.cursor()
        cases[f"sqlite_{synchronous}_raw"] = floor_calls(cursor, SQLITE_INSERT, SQLITE_UPDATE, "f")
        cases[f"sqlite_{synchronous}_ledger"] = ledger_calls(ledger, "ledger")

    files["sqlite_physical"] = path = directory / "physical.db"
    physical = sqlite_floor_connection(path, "normal")
    physical.execute(PHYSICAL_TABLE)
    stack.callback(physical.close)
    report.check(
        "the physical floor: WAL, synchronous NORMAL, 16 columns, no index but the key",
        sqlite_pragmas(physical) == ("wal", 1)
        and len(physical.execute("PRAGMA table_info(calls)").fetchall()) == 16
        and [row[1] for row in physical.execute("PRAGMA index_list(calls)")]
        == ["sqlite_autoindex_calls_1"],
        repr(sqlite_pragmas(physical)),
    )
    cases["sqlite_physical"] = physical_calls(physical.cursor(), "p")

    files["sqlite_normal_batch"] = path = directory / "batch-normal.db"
    cases["sqlite_normal_batch"] = batched_calls(
        open_ledger(stack, f"sqlite:///{path}", directory / "home-batch"), "batch"
    )

    files["sqlite_normal_repository"] = path = directory / "repository-normal.db"
    sqlite_schema(path, directory / "home-schema")
    repository = Repository(Database.parse(f"sqlite:///{path}").connect(), Statements("sqlite"))
    stack.callback(repository.connection.close)
    cases["sqlite_normal_repository"] = repository_calls(repository, "repository")

    tool = expediter.tool(name="add")(add)
    for name, record in (("host_call_ledger", True), ("host_call", False)):
        home = directory / f"home-{name}"
        files[name] = home / "host.db"
        host = Host(
            database_url=f"sqlite:///{files[name]}",
            autoload=False,
            builtins=False,
            plugins=[tool],
            home=home,
            record_calls=record,
        )
        stack.enter_context(host)
        cases[name] = host_calls(host)
    skipped = {}
    langchain = langchain_calls()
    if isinstance(langchain, str):
        skipped["langchain"] = langchain
        if not quick:
            report.check("langchain-core is installed (bench extra)", False, langchain)
    else:
        cases["langchain"] = langchain

    # One untimed call each: connects, starts the lease thread, and shows what a call returns.
    first = {name: calls() for name, calls in cases.items()}
    values = {
        name: str(getattr(value, "result", value))
        for name, value in first.items()
        if name in ("host_call", "host_call_ledger", "langchain")
    }
    report.check(
        "Host.call and LangChain compute add(1, 2)",
        all(value == str(RESULT) for value in values.values()),
        repr(values),
    )

    normal = {name: calls.case() for name, calls in cases.items() if "_full_" not in name}
    full = {name: calls.case() for name, calls in cases.items() if "_full_" in name}
    runs = time_statements(normal, rounds=rounds, batch_seconds=batch)
    # FULL syncs the WAL on every commit: longer batches, fewer rounds.
    runs |= time_statements(full, rounds=max(3, rounds // 2), batch_seconds=batch * 4)

    # A batch is BATCH calls: report it per call.
    runs["sqlite_normal_batch"] = tuple(run / BATCH for run in runs["sqlite_normal_batch"])
    for name, path in files.items():
        if name == "sqlite_physical":
            counts = dict(sqlite3.connect(path).execute(
                "SELECT status, count(*) FROM calls GROUP BY status"
            ).fetchall())  # fmt: skip
            recorded(report, name, cases[name].count, counts)
            continue
        if name == "sqlite_normal_batch":
            recorded(report, name, cases[name].count * BATCH, sqlite_counts(path))
            continue
        if name == "host_call":
            report.check(
                "host_call (record_calls=False) wrote no ledger",
                not path.exists(),
                f"{path.name} exists" if path.exists() else "",
            )
            continue
        recorded(report, name, cases[name].count, sqlite_counts(path))
    return runs, skipped


# -- PostgreSQL ---------------------------------------------------------------------------------


def postgres_schema(cluster: Any, name: str) -> str:
    """Create a database with the ledger's tables (``expediter db upgrade``); return its URL."""
    cluster.createdb(name)
    url = str(cluster.url(name))
    upgrade(Database.parse(url))
    return url


def measure_postgres_one(
    report: Report, stack: ExitStack, cluster: Any, directory: Path, *, rounds: int, batch: float
) -> Runs:
    """One process on PostgreSQL: ledger, Repository and raw psycopg floor."""
    import psycopg

    databases = {
        "pg_raw": "floor1",
        "pg_libpq": "libpq1",
        "pg_repository": "repository1",
        "pg_ledger": "ledger1",
    }
    urls = {name: postgres_schema(cluster, database) for name, database in databases.items()}
    ledger = open_ledger(stack, urls["pg_ledger"], directory / "home-pg1")
    floor = psycopg.connect(cluster.dsn("floor1"), autocommit=True, prepare_threshold=0)
    stack.callback(floor.close)
    libpq = psycopg.connect(cluster.dsn("libpq1"), autocommit=True)
    stack.callback(libpq.close)
    connection = Database.parse(urls["pg_repository"]).connect()
    stack.callback(connection.close)
    cases = {
        "pg_raw": floor_calls(floor.cursor(), PG_INSERT, PG_UPDATE, "floor"),
        "pg_libpq": pq_calls(libpq.pgconn, "libpq"),
        "pg_repository": repository_calls(Repository(connection, Statements("postgresql")), "r"),
        "pg_ledger": ledger_calls(ledger, "ledger"),
    }
    for calls in cases.values():
        calls()
    runs = time_statements(
        {name: calls.case() for name, calls in cases.items()}, rounds=rounds, batch_seconds=batch
    )
    for name, database in databases.items():
        recorded(report, name, cases[name].count, postgres_counts(cluster, database))
    return runs


def _worker(url: str, home: str, prefix: str, seconds: float, barrier: Any, results: Any) -> None:
    """One of the 4 worker processes: warm up, wait for the others, then call until time."""
    ledger = Ledger(url, home=Path(home), lease_seconds=LEASE)
    ledger.open()
    failures = calls = 0
    for _ in range(WARMUP):
        calls += 1
        failures += not ledger_call(ledger, prefix, calls)
    barrier.wait(timeout=120)
    before = os.times()
    started = time.perf_counter()
    deadline = started + seconds
    timed = 0
    while time.perf_counter() < deadline:
        calls += 1
        timed += 1
        failures += not ledger_call(ledger, prefix, calls)
    elapsed = time.perf_counter() - started
    after = os.times()
    ledger.close()
    results.put(
        {
            "calls": calls,
            "timed": timed,
            "elapsed": elapsed,
            "cpu": (after.user - before.user) + (after.system - before.system),
            "failures": failures,
        }
    )


def run_workers(
    url: str, directory: Path, round_index: int, seconds: float
) -> list[dict[str, Any]]:
    """4 worker processes doing begin + finish in a loop for ``seconds``; their reports."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WORKERS + 1)
    results = context.Queue()
    processes = [
        context.Process(
            target=_worker,
            args=(
                url,
                str(directory / f"home-worker{index}"),
                f"round{round_index}-worker{index}",
                seconds,
                barrier,
                results,
            ),
            daemon=True,
        )
        for index in range(WORKERS)
    ]
    for process in processes:
        process.start()
    try:
        barrier.wait(timeout=120)
        reports = [results.get(timeout=seconds + 120) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
                process.join()
    codes = [process.exitcode for process in processes]
    if any(code != 0 for code in codes):
        raise RuntimeError(f"a ledger worker process failed: exit codes {codes}")
    return reports


_PROCESSED = re.compile(r"number of transactions actually processed: (\d+)")
_FAILED = re.compile(r"number of failed transactions: (\d+)")
_TPS = re.compile(r"tps = ([\d.]+) \(without initial connection time\)")


def run_pgbench(cluster: Any, script: Path, database: str, seconds: float) -> dict[str, float]:
    """pgbench with 4 clients on the same two statements: transactions, tps and client CPU."""
    argv = [
        str(cluster.binaries / "pgbench"),
        *("-h", "127.0.0.1", "-p", str(cluster.port), "-U", cluster.user),
        *("-c", str(WORKERS), "-j", "2", "-T", str(int(seconds)), "-n", "-M", "prepared"),
        *(f"-D{name}={value}" for name, value in PGBENCH_VALUES.items()),
        *("-f", str(script), database),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=seconds + 120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"pgbench exited with {done.returncode}:\n{done.stdout}{done.stderr}")
    processed, tps = _PROCESSED.search(done.stdout), _TPS.search(done.stdout)
    if processed is None or tps is None:
        raise RuntimeError(f"cannot read pgbench's output:\n{done.stdout}")
    failed = _FAILED.search(done.stdout)
    return {
        "transactions": int(processed.group(1)),
        "failed": int(failed.group(1)) if failed else 0,
        "tps": float(tps.group(1)),
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    }


def measure_postgres_four(
    report: Report, cluster: Any, directory: Path, *, rounds: int, seconds: float
) -> Runs:
    """4 ledger worker processes against pgbench with 4 clients, alternating by round."""
    workers_url = postgres_schema(cluster, "workers")
    postgres_schema(cluster, "pgbench")
    script = directory / "ledger.pgbench"
    script.write_text(PGBENCH_SCRIPT, encoding="utf-8")
    runs: dict[str, list[float]] = {name: [] for name in PG4_FIGURES}
    workers: list[dict[str, Any]] = []
    benches: list[dict[str, float]] = []
    for index in range(rounds):
        for which in ("workers", "pgbench")[:: -1 if index % 2 else 1]:
            if which == "workers":
                found = run_workers(workers_url, directory, index, seconds)
                workers += found
                timed = sum(r["timed"] for r in found)
                runs["pg4_ledger"].append(1 / sum(r["timed"] / r["elapsed"] for r in found))
                runs["pg4_ledger_cpu"].append(sum(r["cpu"] for r in found) / timed)
            else:
                bench = run_pgbench(cluster, script, "pgbench", seconds)
                benches.append(bench)
                runs["pg4_pgbench"].append(1 / bench["tps"])
                runs["pg4_pgbench_cpu"].append(bench["cpu"] / bench["transactions"])

    calls = sum(r["calls"] for r in workers)
    failures = sum(r["failures"] for r in workers)
    recorded(report, "pg4_ledger (4 processes)", calls, postgres_counts(cluster, "workers"))
    report.check(
        "pg4_ledger: every begin created its row and every finish applied",
        failures == 0 and calls > 0,
        f"{failures} of {calls} calls not applied",
    )
    transactions = sum(int(bench["transactions"]) for bench in benches)
    failed = sum(int(bench["failed"]) for bench in benches)
    counts = postgres_counts(cluster, "pgbench")
    rows = sum(counts.values())
    report.check(
        "pg4_pgbench: row count equals transactions, none failed, all executed",
        0 < rows == transactions == counts.get("executed", 0) and failed == 0,
        f"{transactions} transactions ({failed} failed), {rows} rows, by status {counts}",
    )
    pairs = zip(runs["pg4_ledger"], runs["pg4_pgbench"], strict=True)
    report.settings["pg4"] = {
        "unit": PG4_UNIT,
        "ledger_calls_per_second": [round(1 / value, 1) for value in runs["pg4_ledger"]],
        "pgbench_transactions_per_second": [round(1 / value, 1) for value in runs["pg4_pgbench"]],
        "throughput_ratio": statistics.median(bench / ledger for ledger, bench in pairs),
        "throughput_goal": THROUGHPUT_GOAL,
    }
    return {name: tuple(values) for name, values in runs.items()}


# -- the report ---------------------------------------------------------------------------------

SQLITE_FIGURES = {
    "sqlite_physical": "physical floor: raw sqlite3, WAL, NORMAL, 16 columns, primary key only",
    "sqlite_normal_raw": "raw sqlite3, WAL, synchronous=NORMAL: INSERT ON CONFLICT + UPDATE",
    "sqlite_normal_repository": "Repository.insert + .finish, NORMAL (no Ledger layer)",
    "sqlite_normal_ledger": "Ledger.begin + Ledger.finish, WAL, synchronous=NORMAL",
    "sqlite_normal_batch": f"Ledger.begin_many of {BATCH} calls + a finish each, per call",
    "sqlite_full_raw": "raw sqlite3, WAL, synchronous=FULL: INSERT ON CONFLICT + UPDATE",
    "sqlite_full_ledger": "Ledger.begin + Ledger.finish, WAL, synchronous=FULL",
    "host_call_ledger": "Host.call, trivial tool, SQLite WAL ledger (NORMAL)",
    "host_call": "Host.call, trivial tool, no ledger (record_calls=False)",
    "langchain": "LangChain StructuredTool.invoke, same function, no ledger",
}
PG1_FIGURES = {
    "pg_raw": "raw psycopg, autocommit, prepared: INSERT ON CONFLICT + UPDATE",
    "pg_libpq": "the same two statements through libpq's PQexecPrepared (psycopg.pq)",
    "pg_repository": "Repository.insert + .finish on PostgreSQL (no Ledger layer)",
    "pg_ledger": "Ledger.begin + Ledger.finish on PostgreSQL, one held connection",
}
PG4_FIGURES = {
    "pg4_ledger": "4 processes doing begin + finish: 1 / (calls per second)",
    "pg4_pgbench": "pgbench -c 4 -j 2 -M prepared, same 2 statements: 1 / tps",
    "pg4_ledger_cpu": "client CPU (user + sys) of the 4 processes per call",
    "pg4_pgbench_cpu": "client CPU (user + sys) of pgbench per transaction",
}
PG4_UNIT = (
    "one pgbench transaction = one run of the script = the INSERT ... ON CONFLICT DO NOTHING "
    "and the guarded UPDATE, each autocommitted = one ledger call (Ledger.begin + Ledger.finish)"
)


def budgets(report: Report) -> None:
    """The ratios of benchmarks/README.md, and informational ones that show where time goes."""
    report.ratio(
        "ledger per call, SQLite WAL NORMAL", "sqlite_normal_ledger", "sqlite_normal_raw", 2.2
    )
    report.ratio("ledger per call, SQLite WAL FULL", "sqlite_full_ledger", "sqlite_full_raw")
    report.ratio(
        "host overhead per call, SQLite WAL ledger, vs the physical floor",
        "host_call_ledger",
        "sqlite_physical",
        PHYSICAL_GOAL,
    )
    report.ratio(
        "Ledger.begin + finish vs the physical floor", "sqlite_normal_ledger", "sqlite_physical"
    )
    report.ratio(
        "the ledger's two statements (raw) vs the physical floor",
        "sqlite_normal_raw",
        "sqlite_physical",
    )
    report.ratio(
        f"begin_many of {BATCH} + finishes vs begin + finish, per call",
        "sqlite_normal_batch",
        "sqlite_normal_ledger",
    )
    report.ratio(
        "Host.call with ledger vs LangChain invoke (orientation)", "host_call_ledger", "langchain"
    )
    report.ratio("Host.call with ledger vs raw floor", "host_call_ledger", "sqlite_normal_raw")
    report.ratio("Host.call with ledger vs without", "host_call_ledger", "host_call")
    report.ratio("SQLite Repository vs raw floor", "sqlite_normal_repository", "sqlite_normal_raw")
    report.ratio("SQLite Ledger vs Repository", "sqlite_normal_ledger", "sqlite_normal_repository")
    report.ratio("ledger per call, PostgreSQL, one worker", "pg_ledger", "pg_raw", 1.3)
    report.ratio("PostgreSQL Repository vs raw floor", "pg_repository", "pg_raw")
    report.ratio("PostgreSQL ledger vs the libpq floor", "pg_ledger", "pg_libpq")
    report.ratio("PostgreSQL Ledger vs Repository", "pg_ledger", "pg_repository")
    four = report.ratio(
        f"4 PostgreSQL workers, time per call vs pgbench (calls/s >= {THROUGHPUT_GOAL}x)",
        "pg4_ledger",
        "pg4_pgbench",
        1 / THROUGHPUT_GOAL,
    )
    if four.ratio is not None:
        note = (
            f"throughput {1 / four.ratio:.3f}x pgbench's (goal >= {THROUGHPUT_GOAL}x); {PG4_UNIT}"
        )
        report.budgets[-1] = attrs.evolve(four, note=note)
    report.ratio("client CPU per call, 4 workers vs pgbench", "pg4_ledger_cpu", "pg4_pgbench_cpu")


def main() -> int:
    """Measure and report."""
    args = parse_args(__doc__)
    if args.quick:
        rounds, batch, pg_rounds, pg_batch, pg4_rounds, seconds = 3, 0.005, 3, 0.01, 1, 1.0
    else:
        rounds, batch, pg_rounds, pg_batch, pg4_rounds, seconds = 21, 0.05, 21, 0.1, 5, 4.0
    report = Report("ledger", args.quick)
    report.settings.update(
        rounds=rounds,
        batch_seconds=batch,
        full_batch_seconds=batch * 4,
        postgres_rounds=pg_rounds,
        postgres_batch_seconds=pg_batch,
        workers=WORKERS,
        worker_rounds=pg4_rounds,
        worker_seconds=seconds,
        arguments=ARGUMENTS,
        tempdir=tempfile.gettempdir(),
    )
    report.check(
        "the floors write the same columns as the ledger",
        set(FLOOR_COLUMNS) == set(COLUMNS) - _UNWRITTEN,
        ", ".join(sorted(set(FLOOR_COLUMNS) ^ (set(COLUMNS) - _UNWRITTEN))),
    )
    skipped: dict[str, str] = {}
    runs: Runs = {}
    with tempfile.TemporaryDirectory(prefix="expediter-bench-ledger-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        found, why = measure_sqlite(
            report, stack, directory, quick=args.quick, rounds=rounds, batch=batch
        )
        runs |= found
        skipped |= why
        try:
            cluster = stack.enter_context(PostgresCluster.start())
        except PostgresUnavailable as exc:
            reason = f"no PostgreSQL server: {exc}"
            skipped |= dict.fromkeys([*PG1_FIGURES, *PG4_FIGURES], reason)
        else:
            report.settings["postgres"] = str(cluster.binaries)
            runs |= measure_postgres_one(
                report, stack, cluster, directory, rounds=pg_rounds, batch=pg_batch
            )
            if (cluster.binaries / "pgbench").is_file():
                runs |= measure_postgres_four(
                    report, cluster, directory, rounds=pg4_rounds, seconds=seconds
                )
            else:
                skipped |= dict.fromkeys(PG4_FIGURES, f"no pgbench in {cluster.binaries}")
    if not args.quick:
        pg = skipped.get("pg_raw") or skipped.get("pg4_pgbench")
        report.check("PostgreSQL server and pgbench are installed", pg is None, pg or "")
    for name, description in {**SQLITE_FIGURES, **PG1_FIGURES, **PG4_FIGURES}.items():
        report.add(Figure(name, description, runs.get(name, ()), skipped.get(name)))
    budgets(report)
    four = report.settings.get("pg4")
    if four:
        print(
            f"4 workers: {statistics.median(four['ledger_calls_per_second']):.0f} calls/s, "
            f"pgbench: {statistics.median(four['pgbench_transactions_per_second']):.0f} "
            f"transactions/s; throughput ratio {four['throughput_ratio']:.3f}x "
            f"(goal >= {THROUGHPUT_GOAL}x; {PG4_UNIT})\n"
        )
    return report.finish(args.results_dir)


if __name__ == "__main__":
    sys.exit(main())
