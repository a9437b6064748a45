"""``Ledger.wait``: returns when every key is final, or at the timeout with what is final by
then; LISTEN/NOTIFY on PostgreSQL (announced only by decisions on paused calls and approved
calls finishing), polling on SQLite."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from expediter.core.ledger import Ledger, LedgerRow
from expediter.core.ledger.database import Database
from expediter.core.ledger.statements import CHANNEL

#: Generous: a waiter that wakes promptly returns long before it.
TIMEOUT = 30.0
#: What "promptly" means here: LISTEN and polling wake within milliseconds; this leaves room
#: for a loaded 2-core machine, and is under ``LISTEN_RECHECK`` (a waiter on PostgreSQL that
#: missed the notice would take longer).
PROMPT = 1.5


def pause(ledger: Ledger, key: str, user: str | None = "ann") -> None:
    """A call waiting for a human's decision."""
    ledger.begin(key=key, call_id=key.rsplit(":", 1)[-1], user_id=user, tool="t", lease=False)
    assert ledger.decide(key, user, expected="proposed", status="awaiting_approval", decision="a")


def approve_and_run(ledger: Ledger, key: str, user: str | None = "ann") -> None:
    attempt = ledger.decide(
        key, user, expected="awaiting_approval", status="approved", decision="allow"
    )
    assert attempt is not None
    assert ledger.finish(attempt, ok=True, result="ran", duration_ms=1.0) is True


def deny(ledger: Ledger, key: str, user: str | None = "ann") -> None:
    assert ledger.decide(
        key, user, expected="awaiting_approval", status="denied", decision="deny", reason="no"
    )


class Waiter(threading.Thread):
    """``ledger.wait`` in a thread of its own; ``result`` and ``elapsed`` when it returns."""

    def __init__(self, ledger: Ledger, keys: list[str], timeout: float) -> None:
        super().__init__(daemon=True)
        self.ledger, self.keys, self.timeout = ledger, keys, timeout
        self.result: dict[str, LedgerRow] | None = None
        self.elapsed = -1.0

    def run(self) -> None:
        started = time.monotonic()
        self.result = self.ledger.wait(self.keys, self.timeout)
        self.elapsed = time.monotonic() - started


def test_a_waiter_wakes_promptly_when_another_ledger_denies_the_call(
    make_ledger: Callable[..., Ledger],
) -> None:
    waiting, deciding = make_ledger(), make_ledger()
    pause(deciding, "w1:a")
    waiter = Waiter(waiting, ["w1:a"], TIMEOUT)
    waiter.start()
    time.sleep(0.3)  # the waiter is asleep now
    assert waiter.is_alive()
    decided = time.monotonic()
    deny(deciding, "w1:a")
    waiter.join(TIMEOUT + 5)
    assert waiter.result is not None
    assert time.monotonic() - decided < PROMPT
    assert waiter.elapsed < PROMPT
    assert waiter.result["w1:a"].status == "denied"


def test_an_approved_call_is_final_only_once_it_has_run(
    make_ledger: Callable[..., Ledger],
) -> None:
    waiting, deciding = make_ledger(), make_ledger()
    pause(deciding, "w2:a")
    waiter = Waiter(waiting, ["w2:a"], TIMEOUT)
    waiter.start()
    time.sleep(0.2)
    attempt = deciding.decide(
        "w2:a", "ann", expected="awaiting_approval", status="approved", decision="allow"
    )
    assert attempt is not None
    time.sleep(0.5)
    assert waiter.is_alive()  # approved is not final
    deciding.finish(attempt, ok=True, result={"n": 1}, duration_ms=2.0)
    waiter.join(TIMEOUT + 5)
    assert waiter.result is not None
    assert waiter.elapsed < PROMPT + 1.0
    row = waiter.result["w2:a"]
    assert (row.status, row.result) == ("executed", {"n": 1})


def test_a_decision_in_another_process_wakes_the_waiter(
    ledger: Ledger, migrated_url: str, tmp_path: Path
) -> None:
    pause(ledger, "w3:a")
    pause(ledger, "w3:b")
    waiter = Waiter(ledger, ["w3:a", "w3:b"], TIMEOUT)
    waiter.start()
    time.sleep(0.3)
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from expediter.core.ledger import Ledger\n"
        "ledger = Ledger(sys.argv[1], home=Path(sys.argv[2]))\n"
        "for key in ('w3:a', 'w3:b'):\n"
        "    assert ledger.decide(key, 'ann', expected='awaiting_approval', status='denied',\n"
        "                         decision='deny', reason='from afar')\n"
        "ledger.close()\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, migrated_url, str(tmp_path / "other")],
        check=True,
        timeout=120,
    )
    decided = time.monotonic()
    waiter.join(TIMEOUT + 5)
    assert waiter.result is not None
    assert time.monotonic() - decided < PROMPT
    assert {key: row.status for key, row in waiter.result.items()} == {
        "w3:a": "denied",
        "w3:b": "denied",
    }


def test_promptly_means_sooner_than_a_listener_rereads_anyway() -> None:
    from expediter.core.ledger import waiting

    assert waiting.POLL_CAP < PROMPT < waiting.LISTEN_RECHECK


def test_nothing_final_returns_empty_at_the_timeout_without_raising(ledger: Ledger) -> None:
    pause(ledger, "w4:a")
    started = time.monotonic()
    found = ledger.wait(["w4:a", "w4:unknown"], timeout=0.6)
    elapsed = time.monotonic() - started
    assert found == {}
    assert 0.55 <= elapsed < 0.6 + PROMPT


def test_at_the_timeout_the_rows_final_by_then_are_returned(
    make_ledger: Callable[..., Ledger],
) -> None:
    waiting, deciding = make_ledger(), make_ledger()
    done = deciding.begin(key="w5:done", call_id="done", user_id=None)
    deciding.finish(done, ok=False, error="failed early")
    for key in ("w5:denied", "w5:approved", "w5:still"):
        pause(deciding, key)
    waiter = Waiter(waiting, ["w5:done", "w5:denied", "w5:approved", "w5:still", "w5:nope"], 2.0)
    waiter.start()
    time.sleep(0.3)
    deny(deciding, "w5:denied")
    approve_and_run(deciding, "w5:approved")
    waiter.join(TIMEOUT)
    assert waiter.result is not None
    assert 1.9 <= waiter.elapsed < 2.0 + PROMPT
    assert {key: row.status for key, row in waiter.result.items()} == {
        "w5:done": "failed",
        "w5:denied": "denied",
        "w5:approved": "executed",
    }
    assert list(waiter.result) == ["w5:done", "w5:denied", "w5:approved"]  # the keys' order


def test_keys_already_final_return_at_once(ledger: Ledger) -> None:
    attempt = ledger.begin(key="w6:a", call_id="a", user_id=None)
    ledger.finish(attempt, ok=True, result=1)
    ledger.confirm("none")
    started = time.monotonic()
    found = ledger.wait(["w6:a", "w6:a"], timeout=TIMEOUT)
    assert time.monotonic() - started < PROMPT
    assert list(found) == ["w6:a"]
    assert ledger.wait([], timeout=TIMEOUT) == {}


def test_an_expired_approval_counts_as_final(make_ledger: Callable[..., Ledger]) -> None:
    waiting = make_ledger()
    sweeping = make_ledger(approval_seconds=0.0)
    pause(sweeping, "w7:a")
    waiter = Waiter(waiting, ["w7:a"], TIMEOUT)
    waiter.start()
    time.sleep(0.3)
    assert sweeping.sweep() == ["w7:a"]
    waiter.join(TIMEOUT + 5)
    assert waiter.result is not None
    assert waiter.elapsed < PROMPT
    assert waiter.result["w7:a"].status == "abandoned"


# -- PostgreSQL: who announces ------------------------------------------------------------------


def notices(url: str) -> tuple[Any, Callable[[], list[str]]]:
    """A connection listening on the ledger's channel, and a function draining its notices."""
    connection = Database.parse(url).connect()
    connection.execute(f"LISTEN {CHANNEL}")

    def drain() -> list[str]:
        return [n.payload for n in connection.notifies(timeout=0.3)]

    return connection, drain


postgresql_only = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


@pytest.fixture
def pg_url(migrated_url: str) -> str:
    assert migrated_url.startswith("postgresql")
    return migrated_url


@postgresql_only
def test_ordinary_calls_announce_nothing(pg_url: str, ledger: Ledger) -> None:
    connection, drain = notices(pg_url)
    try:
        for n in range(3):
            attempt = ledger.begin(key=f"n1:{n}", call_id=str(n), user_id=None, message_id="m")
            ledger.finish(attempt, ok=n != 1, result=n)
        ledger.begin(key="n1:denied", call_id="d", user_id=None, lease=False)
        ledger.decide("n1:denied", None, expected="proposed", status="denied", decision="deny")
        ledger.begin(key="n1:paused", call_id="p", user_id=None, lease=False)
        ledger.decide(
            "n1:paused", None, expected="proposed", status="awaiting_approval", decision="a"
        )
        ledger.confirm("m")
        assert drain() == []
    finally:
        connection.close()


@postgresql_only
def test_decisions_on_paused_calls_and_approved_calls_finishing_announce_their_key(
    pg_url: str, ledger: Ledger
) -> None:
    pause(ledger, "n2:a")
    pause(ledger, "n2:b")
    connection, drain = notices(pg_url)
    try:
        deny(ledger, "n2:a")
        assert drain() == ["n2:a"]
        attempt = ledger.decide(
            "n2:b", "ann", expected="awaiting_approval", status="approved", decision="allow"
        )
        assert attempt is not None
        assert drain() == ["n2:b"]
        ledger.finish(attempt, ok=True, result=1)
        assert drain() == ["n2:b"]
        # A decision that does not apply (someone decided first) announces nothing.
        assert (
            ledger.decide(
                "n2:a", "ann", expected="awaiting_approval", status="denied", decision="deny"
            )
            is None
        )
        assert drain() == []
    finally:
        connection.close()


@postgresql_only
def test_a_waiter_whose_listening_fails_falls_back_to_polling(
    pg_url: str, make_ledger: Callable[..., Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    from expediter.core.ledger import waiting

    def broken(self: Any, **options: Any) -> Any:
        raise OSError("the listening connection broke (test)")

    monkeypatch.setattr("psycopg.Connection.notifies", broken)
    monkeypatch.setattr(waiting, "POLL_CAP", 0.05)
    waiting_ledger, deciding = make_ledger(), make_ledger()
    pause(deciding, "n3:a")
    waiter = Waiter(waiting_ledger, ["n3:a"], TIMEOUT)
    waiter.start()
    time.sleep(0.3)
    deny(deciding, "n3:a")
    waiter.join(TIMEOUT + 5)
    assert waiter.result is not None
    assert waiter.elapsed < PROMPT
    assert waiter.result["n3:a"].status == "denied"
