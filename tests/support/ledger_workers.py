"""Real worker processes for the heavy ledger tests (concurrency, crash, outage).

``Pool`` runs this module as a script, ``python -m support.ledger_workers COMMAND CONFIG_JSON``, so
every worker is a separate process with its own ledger connection and lease thread. The tests
import it for ``Pool``, which starts workers and talks to them, and for the tools the host calls
in-process.

A worker prints ``ready`` once connected, waits for the pool's go file (so all of them start
together and their keys really collide), and writes what it did as JSON to its ``out`` file.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import expediter
from support.hosts import ledger_host
from support.scripts import script_command, script_environment

MODULE = "support.ledger_workers"


# -- tools the host calls ------------------------------------------------------------------------


@expediter.tool
def probe(n: int, worker: str = "", log: str = "", fail: bool = False) -> dict[str, Any]:
    """Append ``worker n`` to ``log`` (proof that it ran), then succeed or fail."""
    if log:
        with open(log, "a", encoding="utf-8") as handle:  # O_APPEND: one short line, atomic
            handle.write(f"{worker} {n}\n")
    if fail:
        raise RuntimeError(f"probe {n} failed on purpose")
    return {"n": n, "worker": worker}


@expediter.tool
def hold(seconds: float, fail: bool = False) -> dict[str, Any]:
    """Print ``running`` on stdout, sleep ``seconds``, then succeed or fail."""
    print("running", flush=True)
    time.sleep(seconds)
    if fail:
        raise RuntimeError(f"failed after holding {seconds}s")
    return {"held": seconds}


# -- the worker side -----------------------------------------------------------------------------


def _ready(config: dict[str, Any]) -> None:
    print("ready", flush=True)
    go = Path(config["go"])
    deadline = time.monotonic() + 60
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go signal within 60s")
        time.sleep(0.001)


def _done(config: dict[str, Any], report: dict[str, Any]) -> None:
    Path(config["out"]).write_text(json.dumps(report), encoding="utf-8")


def _ledger(config: dict[str, Any]) -> Any:
    from expediter.core.ledger import Ledger

    ledger = Ledger(config["url"], home=Path(config["home"]), lease_seconds=config["lease"])
    ledger.open()
    return ledger


def _host(config: dict[str, Any], tool: object) -> Any:
    host = ledger_host(config["url"], config["home"], tool, lease_seconds=config["lease"])
    host.ledger  # noqa: B018 - connect before the clock starts
    return host


def _until_abandoned(ledger: Any, key: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        row = ledger.get(key)
        if row is not None and row.status == "abandoned":
            return
        time.sleep(0.005)
    raise SystemExit(f"{key} was never swept")


def _shuffled(count: int, seed: int) -> list[int]:
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return order


def calls(config: dict[str, Any]) -> None:
    """Begin and finish ``calls`` attempts on the ledger directly.

    Call ``i`` is keyed ``run-W:i`` (this worker's own headless run), except every
    ``shared_every``-th, keyed ``shared:i`` in a run id all workers use, so those keys collide.
    Every worker uses the same provider call ids ``call_0...``, each in its own shuffled order
    (so every worker wins some shared keys). Every ``slow_every``-th call this worker created
    waits until a sweeper abandoned its row before finishing.
    """
    ledger = _ledger(config)
    worker, user = config["worker"], config["user"]
    shared_every, slow_every = config["shared_every"], config["slow_every"]
    records = []
    _ready(config)
    for i in _shuffled(config["calls"], worker):
        run_id = "shared" if i % shared_every == 0 else f"run-{worker}"
        key = f"{run_id}:{i}"
        ok = (i + worker) % 5 != 0
        attempt = ledger.begin(
            key=key,
            call_id=f"call_{i}",
            user_id=user,
            run_id=run_id,
            tool="probe",
            action="probe",
            arguments={"n": i, "token": "not-for-the-ledger"},
        )
        slow = bool(attempt.created and slow_every and i % slow_every == 1)
        if slow:
            _until_abandoned(ledger, key)
        applied = ledger.finish(
            attempt,
            ok=ok,
            result={"worker": worker, "n": i} if ok else None,
            error=None if ok else f"failed in worker {worker}",
            duration_ms=0.5,
        )
        records.append(
            {
                "key": key,
                "created": attempt.created,
                "attempt_id": attempt.attempt_id,
                "applied": applied,
                "ok": ok,
                "slow": slow,
            }
        )
    _done(config, {"worker_id": ledger.worker_id, "records": records})
    ledger.close()


def sweeper(config: dict[str, Any]) -> None:
    """Call ``Ledger.sweep()`` in a loop until the stop file appears; report every key swept."""
    ledger = _ledger(config)
    stop = Path(config["stop"])
    swept: list[str] = []
    rounds = 0
    _ready(config)
    while not stop.exists():
        swept += ledger.sweep()
        rounds += 1
        time.sleep(config["pause"])
    _done(config, {"swept": swept, "rounds": rounds})
    ledger.close()


def host_calls(config: dict[str, Any]) -> None:
    """Run ``calls`` calls of ``probe`` through ``Host.call``; every ``shared_every``-th one in
    the run id all workers share."""
    host = _host(config, probe)
    worker, user = config["worker"], config["user"]
    events = []
    _ready(config)
    for i in _shuffled(config["calls"], worker):
        run_id = "host-shared" if i % config["shared_every"] == 0 else f"host-{worker}"
        arguments = {"n": i, "worker": str(worker), "log": config["log"], "fail": i % 9 == 4}
        event = host.call(
            "probe", "probe", arguments, user_id=user, run_id=run_id, call_id=f"call_{i}"
        )
        events.append(
            {"n": i, "key": event.key, "status": event.status, "error_type": event.error_type}
        )
    _done(config, {"events": events})
    host.close()


def hold_call(config: dict[str, Any]) -> None:
    """One ``Host.call`` of ``hold`` (which prints ``running``); then print the event's JSON."""
    host = _host(config, hold)
    event = host.call(
        "hold",
        "hold",
        {"seconds": config["seconds"], "fail": config.get("fail", False)},
        user_id=config["user"],
        run_id=config["run_id"],
        call_id=config["call_id"],
    )
    print(json.dumps(event.to_dict()), flush=True)
    host.close()


def lock_sqlite(config: dict[str, Any]) -> None:
    """Hold an SQLite database's write lock (``BEGIN EXCLUSIVE``) until the stop file appears."""
    import sqlite3

    connection = sqlite3.connect(config["path"], isolation_level=None)
    connection.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    stop = Path(config["stop"])
    while not stop.exists():
        time.sleep(0.01)
    connection.rollback()
    connection.close()


COMMANDS: dict[str, Callable[[dict[str, Any]], None]] = {
    "calls": calls,
    "sweeper": sweeper,
    "host_calls": host_calls,
    "hold_call": hold_call,
    "lock_sqlite": lock_sqlite,
}


# -- the test side -------------------------------------------------------------------------------


class Worker:
    """One worker process: its stdout lines, its exit, its JSON report."""

    def __init__(self, directory: Path, name: str, command: str, config: dict[str, Any]) -> None:
        self.name = name
        self.out = directory / f"{name}.json"
        self.stderr = directory / f"{name}.stderr"
        config = {**config, "out": str(self.out)}
        with open(self.stderr, "w", encoding="utf-8") as stderr:
            self.process = subprocess.Popen(
                script_command(MODULE, command, json.dumps(config)),
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=script_environment(),
            )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def line(self, timeout: float = 60) -> str:
        """The next line the worker printed (fails when it exits or stays silent)."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{self.name} printed nothing for {timeout}s") from None
        if line is None:
            self.process.wait(5)
            raise AssertionError(f"{self.name} exited ({self.process.returncode}):{self.errors()}")
        return line

    def errors(self) -> str:
        """The tail of the worker's stderr."""
        return "\n" + self.stderr.read_text(encoding="utf-8", errors="replace")[-3000:]

    def wait(self, timeout: float = 120) -> int:
        """Wait for the worker to exit; its exit code."""
        return self.process.wait(timeout)

    def report(self, timeout: float = 120) -> Any:
        """Wait for a clean exit and return the worker's JSON report."""
        code = self.wait(timeout)
        assert code == 0, f"{self.name} exited with {code}:{self.errors()}"
        return json.loads(self.out.read_text(encoding="utf-8"))

    def signal(self, number: signal.Signals) -> None:
        """Send a signal to the worker."""
        os.kill(self.process.pid, number)


class Pool:
    """Workers of one test, released together by ``go()``, killed if the test fails."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.go_file = directory / "go"
        self.workers: list[Worker] = []

    def start(self, command: str, name: str | None = None, **config: Any) -> Worker:
        """Start a worker running ``command`` with ``config``."""
        name = name or f"{command}-{len(self.workers)}"
        worker = Worker(self.directory, name, command, {**config, "go": str(self.go_file)})
        self.workers.append(worker)
        return worker

    def go(self) -> None:
        """Wait until every worker is ready, then release them all at once."""
        for worker in self.workers:
            assert worker.line() == "ready"
        self.go_file.touch()

    def kill(self) -> None:
        """Kill the workers still running."""
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()


@contextlib.contextmanager
def pool(directory: Path) -> Iterator[Pool]:
    """A ``Pool`` whose leftover workers are killed on the way out."""
    workers = Pool(directory)
    try:
        yield workers
    finally:
        workers.kill()


if __name__ == "__main__":
    COMMANDS[sys.argv[1]](json.loads(sys.argv[2]))
