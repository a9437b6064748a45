"""The ledger's Python API: reading rows back, statistics, redaction, capping, and the rows
``host.call`` leaves behind."""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.events import LEDGER_FIELDS

import expediter
from expediter.core.host import Host
from expediter.core.ledger import Ledger, LedgerRow, ToolStats, parse_duration, redact
from expediter.core.ledger.columns import RESULT_LIMIT
from expediter.core.ledger.database import Database
from expediter.core.ledger.repository import COLUMNS, Repository, Statements
from expediter.hookspecs.tool import CallContext

#: The fields of ``ledger ls --json`` / ``ledger show --json`` (docs/ledger.md), in order.
DOCUMENTED = list(LEDGER_FIELDS)
EXTRAS = {
    "duplicate_of",
    "delegated_from",
    "name",
    "arguments",
    "result",
    "decided_by",
    "decision_reason",
    "updated_at",
    "lease_expires_at",
    "worker_id",
    "late",
}


@pytest.fixture
def repository(migrated_url: str) -> Iterator[Repository]:
    """The repository on its own connection, to lay out rows with chosen times."""
    database = Database.parse(migrated_url)
    connection = database.connect()
    yield Repository(connection, Statements(database.dialect))
    connection.close()


def put(
    repository: Repository,
    key: str,
    *,
    ago: float,
    status: str = "executed",
    user_id: str | None = "ann",
    tool: str | None = "search",
    duration_ms: float | None = None,
) -> None:
    """Record a row attempted ``ago`` seconds before now."""
    at = time.time() - ago
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        key=key,
        call_id=key.rpartition(":")[2],
        run_id=key.rpartition(":")[0],
        user_id=user_id,
        tool=tool,
        action=tool,
        status=status,
        attempted_at=at,
        updated_at=at,
        duration_ms=duration_ms,
        attempt_id="a1",
    )
    assert repository.insert(row)


@pytest.fixture
def laid_out(repository: Repository) -> Repository:
    """Five calls over the last two hours, by different users and tools."""
    put(repository, "run:a", ago=7200)
    put(repository, "run:b", ago=1800, status="failed", user_id="bob")
    put(repository, "run:c", ago=600, status="proposed", tool="mail")
    put(repository, "run:d", ago=60, user_id=None, tool="mail")
    put(repository, "run:e", ago=10)
    return repository


def keys(rows: list[LedgerRow]) -> list[str]:
    return [row.key for row in rows]


# -- reading ----------------------------------------------------------------------------------


def test_rows_are_newest_first(ledger: Ledger, laid_out: Repository) -> None:
    assert keys(ledger.rows()) == ["run:e", "run:d", "run:c", "run:b", "run:a"]


#: ``rows()`` filters, and the keys they select from ``laid_out``, newest first.
FILTERS: list[tuple[dict[str, Any], list[str]]] = [
    ({"status": "executed"}, ["run:e", "run:d", "run:a"]),
    ({"status": "awaiting_approval"}, []),
    ({"user_id": "ann"}, ["run:e", "run:c", "run:a"]),
    ({"user_id": "bob"}, ["run:b"]),
    ({"tool": "mail"}, ["run:d", "run:c"]),
    ({"since": 900}, ["run:e", "run:d", "run:c"]),
    ({"since": parse_duration("1h")}, ["run:e", "run:d", "run:c", "run:b"]),
    ({"limit": 2}, ["run:e", "run:d"]),
    ({"limit": 0}, ["run:e", "run:d", "run:c", "run:b", "run:a"]),
    ({"status": "executed", "user_id": "ann", "tool": "search"}, ["run:e", "run:a"]),
    ({"user_id": "ann", "since": 3600, "limit": 1}, ["run:e"]),
]


def test_rows_filters_by_status_user_tool_since_and_limit_and_they_combine(
    ledger: Ledger, laid_out: Repository
) -> None:
    for filters, expected in FILTERS:
        assert keys(ledger.rows(**filters)) == expected, filters


def test_rows_returns_at_most_100_by_default_and_everything_with_limit_zero(
    ledger: Ledger, repository: Repository
) -> None:
    for index in range(120):
        put(repository, f"run:{index:03d}", ago=1000 - index)
    newest = ledger.rows()
    assert keys(newest) == [f"run:{index:03d}" for index in range(119, 19, -1)]
    assert len(ledger.rows(limit=0)) == 120


def test_rows_attempted_at_the_same_moment_are_ordered_by_key(
    ledger: Ledger, repository: Repository
) -> None:
    at = time.time() - 5
    for key in ("run:b", "run:a", "run:c"):
        row: dict[str, Any] = dict.fromkeys(COLUMNS)
        row.update(key=key, call_id="x", status="proposed", attempted_at=at, updated_at=at)
        repository.insert(row)
    assert keys(ledger.rows()) == ["run:a", "run:b", "run:c"]


def test_get_returns_the_row_or_none(ledger: Ledger) -> None:
    attempt = ledger.begin(
        key="m1:call_1",
        call_id="call_1",
        message_id="m1",
        user_id="ann",
        owner_id="owner",
        instance_id="inst-1",
        name="search_web",
        tool="search",
        action="web",
        arguments={"q": "cats"},
    )
    ledger.finish(attempt, ok=True, result={"hits": 3}, duration_ms=12.5)
    row = ledger.get("m1:call_1")
    assert isinstance(row, LedgerRow)
    assert (row.key, row.call_id, row.message_id, row.run_id) == ("m1:call_1", "call_1", "m1", None)
    assert (row.user_id, row.owner_id, row.instance_id) == ("ann", "owner", "inst-1")
    assert (row.name, row.tool, row.action, row.arguments) == (
        "search_web",
        "search",
        "web",
        {"q": "cats"},
    )
    assert (row.status, row.result, row.error, row.duration_ms) == (
        "executed",
        {"hits": 3},
        None,
        12.5,
    )
    assert row.attempted_at <= row.finished_at <= time.time()
    assert row.lease_expires_at is None
    assert (row.worker_id, row.late) == (ledger.worker_id, False)
    assert ledger.get("m1:call_2") is None


def test_a_failed_call_keeps_its_error_and_no_result(ledger: Ledger) -> None:
    attempt = ledger.begin(key="run:1", call_id="1", user_id=None)
    assert ledger.finish(attempt, ok=False, error="RuntimeError: boom", duration_ms=1.0)
    row = ledger.get("run:1")
    assert (row.status, row.error, row.result) == ("failed", "RuntimeError: boom", None)


# -- statistics -------------------------------------------------------------------------------


def test_stats_counts_calls_and_failures_with_p50_and_p95_per_tool(
    ledger: Ledger, repository: Repository
) -> None:
    durations = [float(value) for value in range(1, 21)]
    for index, duration in enumerate(durations):
        status = "failed" if index % 7 == 0 else "executed"
        put(repository, f"run:s{index}", ago=30, status=status, duration_ms=duration)
    put(repository, "run:m1", ago=30, tool="mail", duration_ms=4.0)
    put(repository, "run:m2", ago=30, tool="mail", status="proposed")
    put(repository, "run:x", ago=30, tool=None, status="abandoned")
    put(repository, "run:old", ago=7200, tool="mail", status="failed", duration_ms=1000.0)
    stats = {item.tool: item for item in ledger.stats()}
    assert list(stats) == ["-", "mail", "search"]
    cuts = statistics.quantiles(durations, n=20, method="inclusive")
    assert stats["search"] == ToolStats(
        "search", 20, 3, statistics.median(durations), pytest.approx(cuts[18])
    )
    assert stats["mail"] == ToolStats("mail", 3, 1, 502.0, pytest.approx(950.2))
    assert stats["-"] == ToolStats("-", 1, 0, None, None, abandoned=1)
    recent = {item.tool: item for item in ledger.stats(since=3600)}
    assert recent["mail"] == ToolStats("mail", 2, 0, 4.0, 4.0)
    assert stats["search"].to_dict() == {
        "tool": "search",
        "calls": 20,
        "failures": 3,
        "p50_ms": 10.5,
        "p95_ms": pytest.approx(19.05),
        "abandoned": 0,
    }


def test_stats_of_an_empty_ledger_is_empty(ledger: Ledger) -> None:
    assert ledger.stats() == []


# -- parse_duration, redact, capping ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("45s", 45),
        ("30m", 1800),
        ("1h", 3600),
        ("1.5h", 5400),
        ("2d", 172_800),
        ("1w", 604_800),
        (" 2H ", 7200),
        ("0", 0),
    ],
)
def test_parse_duration_reads_seconds_minutes_hours_days_and_weeks(
    text: str, seconds: float
) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "abc", "1y", "-1h", "1h30m", "1,5h"])
def test_parse_duration_rejects_what_it_cannot_read_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match=r"use e\.g\. 45s, 30m, 1h, 2d"):
        parse_duration(text)


def test_redact_hides_secret_looking_names_at_any_depth() -> None:
    arguments = {
        "query": "cats",
        "api_key": "sk-1",
        "X-Api-Key": "sk-2",
        "Authorization": "Bearer x",
        "access_token": "t",
        "db_password": "p",
        "client_secret": "s",
        "credentials": {"user": "u", "pass": "p"},
        "private_key": "-----BEGIN",
        "headers": {"authorisation": "x", "accept": "json"},
        "steps": [{"token": "t1", "n": 1}, ("kept", {"secret": 2})],
        7: "non-string key",
    }
    assert redact(arguments) == {
        "query": "cats",
        "api_key": "***",
        "X-Api-Key": "***",
        "Authorization": "***",
        "access_token": "***",
        "db_password": "***",
        "client_secret": "***",
        "credentials": "***",
        "private_key": "***",
        "headers": {"authorisation": "***", "accept": "json"},
        "steps": [{"token": "***", "n": 1}, ["kept", {"secret": "***"}]],
        7: "non-string key",
    }
    assert arguments["api_key"] == "sk-1"  # the caller's arguments are left alone


def test_redact_leaves_values_that_are_not_containers_alone() -> None:
    assert [redact(value) for value in (None, 1, "token", 2.5)] == [None, 1, "token", 2.5]


def test_redact_keeps_ordinary_names_that_merely_contain_a_secret_word() -> None:
    arguments = {"max_tokens": 256, "passage": "Call me Ishmael.", "compass": "north"}
    assert redact(arguments) == arguments


def test_the_ledger_records_arguments_redacted(ledger: Ledger) -> None:
    arguments = {"q": "cats", "options": {"api_key": "sk-1"}}
    attempt = ledger.begin(key="run:1", call_id="1", user_id="ann", arguments=arguments)
    ledger.finish(attempt, ok=True)
    assert ledger.get("run:1").arguments == {"q": "cats", "options": {"api_key": "***"}}


def stored_length(row: LedgerRow) -> int:
    """Characters of the result's JSON as the ledger keeps it."""
    return len(json.dumps(row.result, ensure_ascii=False))


def test_a_result_over_the_limit_is_cut_and_says_how_much_was_dropped(ledger: Ledger) -> None:
    attempt = ledger.begin(key="run:big", call_id="big", user_id="ann")
    assert ledger.finish(attempt, ok=True, result="x" * 500_000) is True
    row = ledger.get("run:big")
    assert isinstance(row.result, str)
    assert row.result.startswith("xxx")
    dropped = re.search(r" \.\.\. \[(\d+) more characters not recorded\]$", row.result)
    assert dropped is not None, row.result[-80:]
    kept = len(row.result) - len(dropped.group(0))
    assert kept + int(dropped.group(1)) == 500_000
    assert RESULT_LIMIT - 100 <= len(row.result) <= RESULT_LIMIT
    assert stored_length(row) <= RESULT_LIMIT + 10


def test_a_result_under_the_limit_is_kept_whole(ledger: Ledger) -> None:
    result = {"rows": [{"id": index, "text": "y" * 100} for index in range(3000)]}
    assert len(json.dumps(result)) < RESULT_LIMIT
    attempt = ledger.begin(key="run:whole", call_id="whole", user_id="ann")
    ledger.finish(attempt, ok=True, result=result)
    assert ledger.get("run:whole").result == result


def test_a_result_full_of_characters_json_escapes_is_still_capped(ledger: Ledger) -> None:
    attempt = ledger.begin(key="run:quotes", call_id="quotes", user_id="ann")
    ledger.finish(attempt, ok=True, result='"' * 500_000)
    row = ledger.get("run:quotes")
    assert stored_length(row) <= RESULT_LIMIT + 10
    assert isinstance(row.result, str)
    assert row.result.startswith('"' * 1000)
    assert len(row.result) > RESULT_LIMIT // 2 - 100


def test_a_plain_string_result_is_read_back_as_the_same_string(ledger: Ledger) -> None:
    attempt = ledger.begin(key="run:1", call_id="1", user_id="ann")
    ledger.finish(attempt, ok=True, result="plain text")
    assert ledger.get("run:1").result == "plain text"


def test_a_string_result_that_looks_like_json_is_read_back_as_the_same_string(
    request: pytest.FixtureRequest, ledger: Ledger, database_url: str
) -> None:
    results = ["42", "true", "null", '{"a": 1}', "[1, 2]"]
    for index, result in enumerate(results):
        attempt = ledger.begin(key=f"run:{index}", call_id=str(index), user_id="ann")
        ledger.finish(attempt, ok=True, result=result)
    assert [ledger.get(f"run:{index}").result for index in range(len(results))] == results


# -- the JSON form ----------------------------------------------------------------------------


def test_to_dict_has_the_documented_fields_first_and_known_extras(ledger: Ledger) -> None:
    attempt = ledger.begin(key="m1:c1", call_id="c1", message_id="m1", user_id="ann", tool="t")
    ledger.finish(attempt, ok=True, result=[1], duration_ms=3.0)
    data = ledger.get("m1:c1").to_dict()
    assert list(data)[: len(DOCUMENTED)] == DOCUMENTED
    assert set(data) == set(DOCUMENTED) | EXTRAS
    assert json.loads(json.dumps(data)) == data
    assert data["attempted_at"].endswith("+00:00")
    assert data["finished_at"] >= data["attempted_at"]
    assert (data["status"], data["duration_ms"], data["result"]) == ("executed", 3.0, [1])
    assert data["lease_expires_at"] is None


# -- calls made through the host --------------------------------------------------------------


@pytest.fixture
def seen() -> list[str | None]:
    """The status of its own ledger row that ``shout`` saw while it ran, per call."""
    return []


@pytest.fixture
def recording_host(
    make_host: Callable[..., Host], migrated_url: str, seen: list[str | None]
) -> Host:
    """A host offering ``shout`` and ``crash``, recording every call in the test database."""

    @expediter.tool
    def shout(text: str, context: CallContext, api_key: str = "") -> str:
        """Shout text (and look up this call's ledger row while it runs)."""
        row = host.ledger.get(f"{context.run_id}:{context.call_id}")
        seen.append(None if row is None else row.status)
        return text.upper()

    @expediter.tool
    def crash(reason: str = "boom") -> str:
        """Raise an exception."""
        raise RuntimeError(reason)

    host = make_host(shout, crash, record_calls=True, database_url=migrated_url)
    return host


def test_a_direct_call_is_proposed_while_it_runs_and_executed_after(
    recording_host: Host, seen: list[str | None]
) -> None:
    event = recording_host.call("shout", "shout", {"text": "hi", "api_key": "sk-1"}, user_id="u1")
    assert (event.status, event.result) == ("completed", "HI")
    assert seen == ["proposed"]
    row = recording_host.ledger.get(event.key)
    assert (row.status, row.result, row.user_id) == ("executed", "HI", "u1")
    assert (row.tool, row.action, row.call_id) == ("shout", "shout", event.call_id)
    assert row.key == f"{row.run_id}:{row.call_id}"
    assert row.message_id is None
    assert row.arguments == {"text": "hi", "api_key": "***"}
    assert row.duration_ms == pytest.approx(event.duration_ms)


def test_a_tool_that_raises_leaves_a_failed_row_with_its_error(recording_host: Host) -> None:
    event = recording_host.call("crash", "crash", {"reason": "disk full"})
    assert event.status == "error"
    row = recording_host.ledger.get(event.key)
    assert (row.status, row.error, row.result) == ("failed", event.error, None)
    assert "disk full" in row.error
    assert row.duration_ms is not None


def test_an_argument_error_leaves_a_failed_row_naming_the_parameter(
    recording_host: Host, seen: list[str | None]
) -> None:
    cases = [({"text": 5}, "text"), ({}, "text"), ({"text": "hi", "volume": 11}, "volume")]
    for arguments, parameter in cases:
        event = recording_host.call("shout", "shout", arguments)
        assert event.error_type == "ArgumentError", arguments
        row = recording_host.ledger.get(event.key)
        assert (row.status, row.tool, row.action) == ("failed", "shout", "shout")
        assert f"'{parameter}'" in row.error, (arguments, row.error)
    assert seen == []  # the tool never ran


def test_an_unknown_tool_leaves_a_failed_row(recording_host: Host) -> None:
    event = recording_host.call("shuot", "shout", {"text": "hi"}, user_id="u1")
    assert event.error_type == "ToolNotFound"
    row = recording_host.ledger.get(event.key)
    assert (row.status, row.tool, row.user_id) == ("failed", "shuot", "u1")
    assert "no tool named 'shuot'" in row.error


def test_every_call_of_a_run_shows_in_rows(recording_host: Host) -> None:
    events = [
        recording_host.call(
            "shout", "shout", {"text": str(index)}, run_id="run-7", call_id=f"c{index}"
        )
        for index in range(5)
    ]
    events.append(recording_host.call("crash", "crash", {}, run_id="run-7", call_id="c5"))
    found = {row.key: row for row in recording_host.ledger.rows(limit=0)}
    assert set(found) == {f"run-7:c{index}" for index in range(6)}
    assert [found[event.key].status for event in events] == ["executed"] * 5 + ["failed"]
    assert {row.run_id for row in found.values()} == {"run-7"}


def test_calls_without_a_run_id_each_get_their_own_generated_key(recording_host: Host) -> None:
    events = [recording_host.call("shout", "shout", {"text": "a"}) for _ in range(3)]
    rows = recording_host.ledger.rows()
    assert len({event.key for event in events}) == 3
    assert {row.key for row in rows} == {event.key for event in events}
    assert all(row.key == f"{row.run_id}:{row.call_id}" for row in rows)


def test_a_host_that_does_not_record_calls_opens_no_database(
    make_host: Callable[..., Host], expediter_home: Path
) -> None:
    @expediter.tool
    def ping() -> str:
        """Answer."""
        return "pong"

    host = make_host(ping, record_calls=False)
    assert host.call("ping", "ping").ok
    assert not (expediter_home / "expediter.db").exists()
