"""`expediter ledger ...` and `expediter db ...`: calls made with `expediter call` read back,
filtered, summed up, swept and replayed, and the schema created, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.events import LEDGER_FIELDS

from expediter.cli import cli
from expediter.core.ledger import Ledger
from expediter.core.ledger.database import Database
from expediter.core.ledger.repository import COLUMNS, Repository, Statements
from expediter.core.ledger.schema import HEAD, upgrade
from expediter.testing.postgres import PostgresCluster

TOOLS = '''
import expediter

@expediter.tool
def shout(text: str, api_key: str = "") -> str:
    """Shout text."""
    return text.upper()

@expediter.tool
def crash(reason: str = "boom") -> str:
    """Raise an exception."""
    raise RuntimeError(reason)
'''
#: The fields of `ledger ls --json` / `ledger show --json` (docs/ledger.md, docs/operations.md).
DOCUMENTED = set(LEDGER_FIELDS)


@pytest.fixture
def pg_url(fresh_pg_url: Callable[[], str]) -> str:
    """A new, empty PostgreSQL database."""
    return fresh_pg_url()


@pytest.fixture(params=["default", "postgresql"])
def database(request: pytest.FixtureRequest) -> str | None:
    """The `--database` to pass: None for the default SQLite file in EXPEDITER_HOME, or a
    PostgreSQL database upgraded with `expediter db upgrade`."""
    if request.param == "default":
        return None
    url = request.getfixturevalue("pg_url")
    assert run("--database", url, "db", "upgrade")[0] == 0
    return url


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "loud.py").write_text(textwrap.dedent(TOOLS))
    return directory


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run `expediter ARGS`: exit code, standard output, standard error."""
    environment = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})}
    result = CliRunner().invoke(cli, list(args), prog_name="expediter", env=environment)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def expediter(tools_dir: Path, database: str | None) -> Callable[..., tuple[int, str, str]]:
    """`run` with the test tools and the test database."""
    prefix = ["--tools-dir", str(tools_dir)]
    if database is not None:
        prefix += ["--database", database]

    def invoke(*args: str) -> tuple[int, str, str]:
        return run(*prefix, *args)

    return invoke


def ls(expediter: Callable[..., tuple[int, str, str]], *options: str) -> list[dict[str, Any]]:
    code, out, err = expediter("ledger", "ls", "--json", *options)
    assert code == 0, err
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


@pytest.fixture
def three_calls(expediter: Callable[..., tuple[int, str, str]]) -> list[dict[str, Any]]:
    """Two completed calls by two users and one crash; their events, oldest first."""
    events = []
    for args in (
        ["loud", "shout", "--args", '{"text": "a", "api_key": "sk-1"}', "--user", "u1"],
        ["loud", "shout", "--args", '{"text": "b"}', "--user", "u2"],
        ["loud", "crash", "--args", '{"reason": "disk full"}'],
    ):
        code, out, _ = expediter("call", *args, "--json")
        assert code in (0, 1)
        events.append(json.loads(out))
    return events


def repository_for(url: str) -> Repository:
    database = Database.parse(url)
    return Repository(database.connect(), Statements(database.dialect))


def url_of(database: str | None, home: Path) -> str:
    return database or f"sqlite:///{home / 'expediter.db'}"


def put(repository: Repository, key: str, **columns: Any) -> None:
    now = time.time()
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(key=key, call_id=key, status="proposed", attempted_at=now, updated_at=now)
    row.update(columns)
    assert repository.insert(row)


# -- ledger ls --------------------------------------------------------------------------------


def test_calls_made_with_expediter_call_show_in_ledger_ls_newest_first(
    expediter: Callable[..., tuple[int, str, str]], three_calls: list[dict[str, Any]]
) -> None:
    rows = ls(expediter)
    assert [row["key"] for row in rows] == [event["key"] for event in reversed(three_calls)]
    assert all(set(row) >= DOCUMENTED for row in rows)
    assert [(row["status"], row["user_id"], row["action"]) for row in rows] == [
        ("failed", None, "crash"),
        ("executed", "u2", "shout"),
        ("executed", "u1", "shout"),
    ]
    assert {row["tool"] for row in rows} == {"loud"}
    assert all(row["key"] == f"{row['run_id']}:{row['call_id']}" for row in rows)
    assert rows[0]["error"] == three_calls[2]["error"]
    assert rows[2]["arguments"] == {"text": "a", "api_key": "***"}


def test_ledger_ls_prints_a_table(
    expediter: Callable[..., tuple[int, str, str]], three_calls: list[dict[str, Any]]
) -> None:
    code, out, _ = expediter("ledger", "ls")
    assert code == 0
    header, *lines = out.splitlines()
    assert header.split() == ["KEY", "STATUS", "TOOL", "ACTION", "USER", "ATTEMPTED", "MS", "ERROR"]
    assert len(lines) == 3
    assert lines[0].split()[1:4] == ["failed", "loud", "crash"]
    assert "disk full" in lines[0]
    assert lines[2].split()[1:5] == ["executed", "loud", "shout", "u1"]


def test_ledger_ls_filters_by_status_user_tool_since_and_limit(
    expediter: Callable[..., tuple[int, str, str]], three_calls: list[dict[str, Any]]
) -> None:
    crash, second, first = (event["key"] for event in reversed(three_calls))
    cases = [
        (["--status", "failed"], [crash]),
        (["--status", "executed"], [second, first]),
        (["--status", "confirmed"], []),
        (["--user", "u1"], [first]),
        (["--tool", "loud"], [crash, second, first]),
        (["--tool", "quiet"], []),
        (["--since", "1h"], [crash, second, first]),
        (["--limit", "1"], [crash]),
        (["--limit", "0"], [crash, second, first]),
        (["--status", "executed", "--user", "u2", "--limit", "5"], [second]),
    ]
    for options, expected in cases:
        assert [row["key"] for row in ls(expediter, *options)] == expected, options


def test_ledger_ls_since_leaves_out_older_calls(
    expediter: Callable[..., tuple[int, str, str]], database: str | None, expediter_home: Path
) -> None:
    url = url_of(database, expediter_home)
    upgrade(Database.parse(url))
    repository = repository_for(url)
    put(repository, "old", attempted_at=time.time() - 7200)
    put(repository, "new", attempted_at=time.time() - 60)
    repository.connection.close()
    assert [row["key"] for row in ls(expediter, "--since", "1h")] == ["new"]
    assert [row["key"] for row in ls(expediter, "--since", "3h")] == ["new", "old"]


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        (["--since", "yesterday"], "--since"),
        (["--status", "done"], "--status"),
        (["--limit", "many"], "--limit"),
    ],
    ids=["since", "status", "limit"],
)
def test_ledger_ls_rejects_bad_options_as_usage_errors(options: list[str], complaint: str) -> None:
    code, _, err = run("ledger", "ls", *options)
    assert code == 2
    assert complaint in err


def test_ledger_ls_shows_100_calls_unless_told_otherwise(
    expediter: Callable[..., tuple[int, str, str]], database: str | None, expediter_home: Path
) -> None:
    url = url_of(database, expediter_home)
    upgrade(Database.parse(url))
    repository = repository_for(url)
    start = time.time() - 1000
    for index in range(101):
        put(repository, f"run:{index:03d}", attempted_at=start + index)
    repository.connection.close()
    rows = ls(expediter)
    assert len(rows) == 100
    assert (rows[0]["key"], rows[-1]["key"]) == ("run:100", "run:001")
    assert len(ls(expediter, "--limit", "0")) == 101


def test_ledger_ls_of_an_empty_ledger_prints_only_the_header(
    expediter: Callable[..., tuple[int, str, str]],
) -> None:
    assert ls(expediter) == []
    code, out, _ = expediter("ledger", "ls")
    assert (code, out.split()) == (
        0,
        ["KEY", "STATUS", "TOOL", "ACTION", "USER", "ATTEMPTED", "MS", "ERROR"],
    )


# -- ledger show, stats, sweep, replay --------------------------------------------------------


def test_ledger_show_prints_one_call_with_its_arguments_and_result(
    expediter: Callable[..., tuple[int, str, str]], three_calls: list[dict[str, Any]]
) -> None:
    key = three_calls[0]["key"]
    code, out, _ = expediter("ledger", "show", key, "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) >= DOCUMENTED
    assert (data["key"], data["status"], data["result"]) == (key, "executed", "A")
    assert data["arguments"] == {"text": "a", "api_key": "***"}
    code, text, _ = expediter("ledger", "show", key)
    assert code == 0
    fields = dict(line.strip().split(": ", 1) for line in text.splitlines())
    assert (fields["key"], fields["status"], fields["user_id"]) == (key, "executed", "u1")
    assert fields["message_id"] == "-"
    assert json.loads(fields["arguments"]) == {"text": "a", "api_key": "***"}
    assert "sk-1" not in text


def test_ledger_show_of_an_unknown_key_exits_two(
    expediter: Callable[..., tuple[int, str, str]],
) -> None:
    code, _, err = expediter("ledger", "show", "run:nothing")
    assert code == 2
    assert "the ledger has no call 'run:nothing'" in err


def test_ledger_ls_shortens_keys_to_prefixes_ledger_show_accepts(
    expediter: Callable[..., tuple[int, str, str]], three_calls: list[dict[str, Any]]
) -> None:
    code, out, _ = expediter("ledger", "ls")
    assert code == 0
    shown = [line.split()[0] for line in out.splitlines()[1:]]
    newest_first = [event["key"] for event in reversed(three_calls)]
    assert all(len(key) > 44 for key in newest_first)  # long enough to be cut
    for cut, key in zip(shown, newest_first, strict=True):
        assert cut.endswith("…")
        assert key.startswith(cut.removesuffix("…"))  # the end is cut, not the middle
        for pasted in (cut, cut.removesuffix("…")):
            code, out, err = expediter("ledger", "show", pasted, "--json")
            assert code == 0, err
            assert json.loads(out)["key"] == key


def test_ledger_show_takes_a_unique_key_prefix_and_lists_an_ambiguous_ones_keys(
    expediter: Callable[..., tuple[int, str, str]], three_calls: list[dict[str, Any]]
) -> None:
    keys = sorted(event["key"] for event in three_calls)
    shared = keys[0][:8]
    assert all(key.startswith(shared) for key in keys)

    code, out, err = expediter("ledger", "show", shared)
    assert (code, out) == (2, "")
    assert f"{shared!r} begins several keys ({', '.join(keys)})" in err

    unique = keys[1].split(":")[0] + ":"
    code, out, err = expediter("ledger", "show", unique, "--json")
    assert code == 0, err
    assert json.loads(out)["key"] == keys[1]

    for no_match in ("%", "_", shared.upper() + "X", "nothing"):
        code, _, err = expediter("ledger", "show", no_match)
        assert code == 2
        assert f"the ledger has no call {no_match!r}" in err


def test_ledger_stats_sums_up_calls_failures_and_durations_per_tool(
    expediter: Callable[..., tuple[int, str, str]], three_calls: list[dict[str, Any]]
) -> None:
    code, out, _ = expediter("ledger", "stats", "--json")
    assert code == 0
    (loud,) = json.loads(out)
    assert (loud["tool"], loud["calls"], loud["failures"]) == ("loud", 3, 1)
    durations = sorted(event["duration_ms"] for event in three_calls)
    assert loud["p50_ms"] == pytest.approx(durations[1], abs=0.01)
    assert durations[1] <= loud["p95_ms"] <= durations[2] + 0.01
    code, table, _ = expediter("ledger", "stats")
    header, line = table.splitlines()
    assert header.split() == ["TOOL", "CALLS", "FAILURES", "P50", "MS", "P95", "MS"]
    assert line.split()[:3] == ["loud", "3", "1"]
    code, out, _ = expediter("ledger", "stats", "--since", "1s", "--json")
    assert code == 0


def test_ledger_sweep_abandons_calls_whose_lease_expired(
    expediter: Callable[..., tuple[int, str, str]], database: str | None, expediter_home: Path
) -> None:
    url = url_of(database, expediter_home)
    upgrade(Database.parse(url))
    repository = repository_for(url)
    put(repository, "run:dead", lease_expires_at=time.time() - 5, attempt_id="a1")
    put(repository, "run:alive", lease_expires_at=time.time() + 600)
    repository.connection.close()
    code, out, _ = expediter("ledger", "sweep")
    assert (code, out) == (0, "abandoned 1 call(s): run:dead\n")
    assert [row["key"] for row in ls(expediter, "--status", "abandoned")] == ["run:dead"]
    code, out, _ = expediter("ledger", "sweep", "--json")
    assert (code, json.loads(out)) == (0, [])
    assert expediter("ledger", "sweep")[1] == "abandoned 0 call(s)\n"
    # The dead worker's result turns up after all: recorded, and shown as late.
    repository = repository_for(url)
    assert repository.finish(
        "run:dead",
        None,
        "a1",
        expected="abandoned",
        status="executed",
        result='"late"',
        error=None,
        finished_at=time.time(),
        duration_ms=1.0,
        late=True,
    )
    repository.connection.close()
    _, table, _ = expediter("ledger", "ls", "--status", "executed")
    assert table.splitlines()[1].split()[:3] == ["run:dead", "executed", "(late)"]
    assert ls(expediter, "--status", "executed")[0]["late"] is True


def test_ledger_replay_writes_the_spooled_calls_in_order(
    expediter: Callable[..., tuple[int, str, str]], database: str | None, expediter_home: Path
) -> None:
    url = url_of(database, expediter_home)
    upgrade(Database.parse(url))
    spool = Ledger(database, home=expediter_home).spool  # the spool the command reads
    now = time.time()
    row: dict[str, Any] = dict.fromkeys(c for c in COLUMNS if c != "late")
    row.update(
        key="run:spooled",
        call_id="spooled",
        user_id="ann",
        status="proposed",
        attempted_at=now,
        updated_at=now,
        lease_expires_at=now + 60,
        attempt_id="a1",
    )
    spool.append("insert", row)
    spool.append(
        "finish",
        {
            "key": "run:spooled",
            "user_id": "ann",
            "attempt_id": "a1",
            "expected": "proposed",
            "status": "executed",
            "result": '"done"',
            "error": None,
            "finished_at": now + 1,
            "duration_ms": 1000.0,
        },
    )
    code, out, _ = expediter("ledger", "replay")
    assert code == 0
    assert out == f"replayed 2 write(s) from {spool.path}\n"
    assert not spool.pending()
    (replayed,) = ls(expediter)
    assert (replayed["key"], replayed["status"], replayed["result"]) == (
        "run:spooled",
        "executed",
        "done",
    )
    assert expediter("ledger", "replay")[1] == f"replayed 0 write(s) from {spool.path}\n"


def spooled_finish(key: str, expected: str = "proposed") -> dict[str, Any]:
    """A spooled ``finish`` of ``key`` (one that asks for an impossible move when ``expected``
    is a final status: the ledger refuses it for good)."""
    return {
        "key": key,
        "user_id": "ann",
        "attempt_id": "a1",
        "expected": expected,
        "status": "executed",
        "result": '"done"',
        "error": None,
        "finished_at": time.time(),
        "duration_ms": 1.0,
    }


def test_ledger_replay_sets_a_refused_write_aside_without_a_traceback(
    expediter: Callable[..., tuple[int, str, str]], database: str | None, expediter_home: Path
) -> None:
    upgrade(Database.parse(url_of(database, expediter_home)))
    spool = Ledger(database, home=expediter_home).spool
    spool.append("finish", spooled_finish("run:refused", expected="confirmed"))
    spool.append("confirm", {"message_id": "m1", "now": time.time()})

    code, out, err = expediter("ledger", "replay")
    assert code == 0, err
    assert out == f"replayed 1 write(s) from {spool.path}\n"
    assert "Traceback" not in err
    assert err == (
        "warning: 1 spooled ledger write(s) the database refused are set aside in "
        f"{spool.deadletter_path}: see `expediter ledger deadletters`\n"
    )
    assert not spool.pending()

    code, out, err = expediter("ledger", "stats", "--json")
    assert (code, json.loads(out)) == (0, [])
    assert "1 spooled ledger write(s)" in err


def test_ledger_deadletters_lists_retries_and_drops_them(
    expediter: Callable[..., tuple[int, str, str]], database: str | None, expediter_home: Path
) -> None:
    url = url_of(database, expediter_home)
    upgrade(Database.parse(url))
    assert expediter("ledger", "deadletters", "--json")[:2] == (0, "[]\n")
    spool = Ledger(database, home=expediter_home).spool
    now = time.time()
    row: dict[str, Any] = dict.fromkeys(c for c in COLUMNS if c not in ("late", "duplicate_of"))
    row.update(
        key="run:held",
        call_id="held",
        user_id="ann",
        status="proposed",
        attempted_at=now,
        updated_at=now,
        attempt_id="a1",
    )
    spool.append("finish", spooled_finish("run:held", expected="denied"))
    spool.append("insert", {**row, "key": "run:bogus", "status": "bogus"})
    spool.append("insert", row)
    assert expediter("ledger", "replay")[0] == 0

    code, out, err = expediter("ledger", "deadletters", "--json")
    assert code == 0, err
    letters = json.loads(out)
    assert [(item["operation"], item["key"]) for item in letters] == [
        ("finish", "run:held"),
        ("insert", "run:bogus"),
    ]
    for item in letters:
        assert set(item) >= {"id", "operation", "key", "error", "set_aside_at", "params"}
        assert item["set_aside_at"].endswith("+00:00")
    assert "denied -> executed" in letters[0]["error"]

    code, table, _ = expediter("ledger", "deadletters")
    assert code == 0
    header, *lines = table.splitlines()
    assert header.split() == ["ID", "SET", "ASIDE", "OPERATION", "KEY", "ERROR"]
    assert [line.split()[0] for line in lines] == [item["id"] for item in letters]

    finish, insert = (item["id"] for item in letters)
    code, _, err = expediter("ledger", "deadletters", "retry", insert)
    assert code == 1
    assert f"the database refused dead letter {insert} again" in err
    assert "Traceback" not in err
    code, out, _ = expediter("ledger", "deadletters", "drop", insert)
    assert (code, out) == (0, f"dead letter {insert} dropped\n")

    code, _, err = expediter("ledger", "deadletters", "retry", finish)
    assert code == 1
    assert "denied -> executed" in err
    assert [item["id"] for item in json.loads(expediter("ledger", "deadletters", "--json")[1])] == [
        finish
    ]

    assert expediter("ledger", "deadletters", "drop", finish)[0] == 0
    assert [row["key"] for row in ls(expediter)] == ["run:held"]
    assert expediter("ledger", "deadletters", "--json")[1] == "[]\n"
    for command in ("retry", "drop"):
        code, _, err = expediter("ledger", "deadletters", command, "nope")
        assert code == 1
        assert "no dead letter 'nope'" in err


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


def test_a_dead_letter_retried_once_the_database_takes_it_is_removed(
    expediter: Callable[..., tuple[int, str, str]], database: str | None, expediter_home: Path
) -> None:
    url = url_of(database, expediter_home)
    upgrade(Database.parse(url))
    connection = Database.parse(url).connect()
    for sql in (_SQLITE_TRIGGER,) if url.startswith("sqlite") else _PG_TRIGGER:
        connection.execute(sql)
    now = time.time()
    row: dict[str, Any] = dict.fromkeys(c for c in COLUMNS if c not in ("late", "duplicate_of"))
    row.update(
        key="run:forbidden",
        call_id="forbidden",
        tool="forbidden",
        status="proposed",
        attempted_at=now,
        updated_at=now,
        attempt_id="a1",
    )
    spool = Ledger(database, home=expediter_home).spool
    spool.append("insert", row)
    assert expediter("ledger", "replay")[0] == 0
    [letter] = json.loads(expediter("ledger", "deadletters", "--json")[1])
    assert "the forbidden tool is refused" in letter["error"]

    code, _, err = expediter("ledger", "deadletters", "retry", letter["id"])
    assert code == 1
    assert "the forbidden tool is refused" in err
    connection.execute(
        "DROP TRIGGER refuse_forbidden"
        + ("" if url.startswith("sqlite") else " ON tool_call_attempts")
    )
    connection.close()
    code, out, err = expediter("ledger", "deadletters", "retry", letter["id"])
    assert (code, out) == (0, f"dead letter {letter['id']} applied and removed\n"), err
    assert expediter("ledger", "deadletters", "--json")[1] == "[]\n"
    assert [row["key"] for row in ls(expediter)] == ["run:forbidden"]


def test_ledger_show_lists_a_calls_duplicate_executions(
    expediter: Callable[..., tuple[int, str, str]], database: str | None, expediter_home: Path
) -> None:
    url = url_of(database, expediter_home)
    upgrade(Database.parse(url))
    repository = repository_for(url)
    put(repository, "run:twice", attempt_id="a1")
    now = time.time()
    duplicate: dict[str, Any] = dict.fromkeys(COLUMNS)
    duplicate.update(
        key="run:twice#dup-1",
        call_id="twice",
        status="executed",
        attempted_at=now + 1,
        updated_at=now + 1,
        attempt_id="a2",
        duplicate_of="run:twice",
    )
    assert repository.insert_duplicate(duplicate)
    repository.connection.close()

    code, out, _ = expediter("ledger", "show", "run:twice", "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) >= DOCUMENTED
    assert (data["duplicates"], data["duplicate_of"]) == (["run:twice#dup-1"], None)
    code, text, _ = expediter("ledger", "show", "run:twice")
    fields = dict(line.strip().split(": ", 1) for line in text.splitlines())
    assert fields["duplicates"] == "run:twice#dup-1"

    data = json.loads(expediter("ledger", "show", "run:twice#dup-1", "--json")[1])
    assert (data["duplicates"], data["duplicate_of"]) == ([], "run:twice")
    fields = dict(
        line.strip().split(": ", 1)
        for line in expediter("ledger", "show", "run:twice#dup-1")[1].splitlines()
    )
    assert (fields["duplicates"], fields["duplicate_of"]) == ("-", "run:twice")


@pytest.mark.parametrize("hostile", ["run:\x00", "run:\udcff", "run:a\ud800b"])
def test_ledger_show_of_a_key_no_database_can_hold_answers_normally(
    expediter: Callable[..., tuple[int, str, str]],
    database: str | None,
    expediter_home: Path,
    hostile: str,
) -> None:
    upgrade(Database.parse(url_of(database, expediter_home)))
    code, _, err = expediter("ledger", "show", hostile)
    assert code == 2
    assert "the ledger has no call" in err
    ledger = Ledger(database, home=expediter_home)
    try:
        ledger.finish(ledger.begin(key=hostile, call_id="c", user_id=None), ok=True, result=1)
    finally:
        ledger.close()
    code, out, err = expediter("ledger", "show", hostile, "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "executed"


# -- db upgrade, db current -------------------------------------------------------------------


def test_db_upgrade_and_db_current_on_sqlite(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    url = f"sqlite:///{tmp_path / 'db' / 'ledger.db'}"
    assert run("--database", url, "db", "current") == (
        0,
        "no schema yet: run `expediter db upgrade`\n",
        "",
    )
    assert run("--database", url, "db", "upgrade") == (0, f"{url} is at {HEAD}\n", "")
    assert run("--database", url, "db", "current")[1] == f"{HEAD} (head)\n"
    assert run("--database", url, "db", "upgrade")[:2] == (0, f"{url} is at {HEAD}\n")


def test_db_current_says_when_the_schema_is_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(Database.parse(url))
    connection = Database.parse(url).connect()
    connection.execute("UPDATE alembic_version SET version_num = '0000_older'")
    connection.close()
    assert run("--database", url, "db", "current")[1] == (
        f"0000_older (head is {HEAD}: run `expediter db upgrade`)\n"
    )


def test_db_upgrade_and_db_current_on_postgresql_through_the_option(pg_url: str) -> None:
    assert run("--database", pg_url, "db", "current")[1] == (
        "no schema yet: run `expediter db upgrade`\n"
    )
    code, out, _ = run("--database", pg_url, "db", "upgrade")
    assert (code, out) == (0, f"{pg_url} is at {HEAD}\n")
    assert run("--database", pg_url, "db", "current")[1] == f"{HEAD} (head)\n"


def test_db_upgrade_and_db_current_on_postgresql_through_the_environment(pg_url: str) -> None:
    env = {"EXPEDITER_DATABASE_URL": pg_url}
    assert run("db", "current", env=env)[1] == "no schema yet: run `expediter db upgrade`\n"
    assert run("db", "upgrade", env=env)[:2] == (0, f"{pg_url} is at {HEAD}\n")
    assert run("db", "current", env=env)[1] == f"{HEAD} (head)\n"
    assert ls(lambda *args: run(*args, env=env)) == []


def test_db_upgrade_hides_the_password_of_the_database_url(
    pg_cluster: PostgresCluster, pg_url: str
) -> None:
    # The test cluster trusts every local connection, so any password gets in.
    url = pg_url.replace(f"//{pg_cluster.user}@", f"//{pg_cluster.user}:hunter2@")
    code, out, err = run("--database", url, "db", "upgrade")
    assert code == 0
    assert "hunter2" not in out + err
    assert f"{pg_cluster.user}:***@" in out


def test_an_out_of_date_postgresql_stops_ledger_commands_and_calls_with_the_command_to_run(
    pg_url: str, tools_dir: Path
) -> None:
    prefix = ["--tools-dir", str(tools_dir), "--database", pg_url]
    for command in (["ledger", "ls"], ["ledger", "stats"], ["ledger", "sweep"]):
        code, _, err = run(*prefix, *command)
        assert code == 1, command
        assert "run `expediter db upgrade`" in err
    code, out, err = run(*prefix, "call", "loud", "shout", "--args", '{"text": "a"}', "--json")
    event = json.loads(out)
    assert (code, event["status"], event["error_type"]) == (1, "error", "LedgerError")
    assert "run `expediter db upgrade`" in event["error"]


def test_db_current_of_an_unreachable_database_exits_one(pg_cluster: PostgresCluster) -> None:
    url = f"postgresql://{pg_cluster.user}@127.0.0.1:1/nothing"
    code, _, err = run("--database", url, "db", "current")
    assert code == 1
    assert "cannot reach" in err


# -- help -------------------------------------------------------------------------------------


HELP = [
    (["ledger"], ["ls", "show", "stats", "sweep", "replay", "deadletters"]),
    (["ledger", "ls"], ["--status", "--user", "--tool", "--since", "--limit", "--json"]),
    (["ledger", "show"], ["KEY", "--json"]),
    (["ledger", "stats"], ["--since", "--json"]),
    (["ledger", "sweep"], ["--json"]),
    (["ledger", "replay"], ["spool", "dead letter"]),
    (["ledger", "deadletters"], ["--json", "retry", "drop"]),
    (["ledger", "deadletters", "retry"], ["ID"]),
    (["ledger", "deadletters", "drop"], ["ID"]),
    (["db"], ["upgrade", "current"]),
    (["db", "upgrade"], ["migrations"]),
    (["db", "current"], ["revision"]),
    ([], ["--database", "EXPEDITER_DATABASE_URL"]),
]


@pytest.mark.parametrize(
    ("command", "mentions"),
    [
        pytest.param(command, mentions, id=" ".join(command) or "expediter")
        for command, mentions in HELP
    ],
)
def test_every_ledger_and_db_command_explains_itself(
    command: list[str], mentions: list[str]
) -> None:
    code, out, _ = run(*command, "--help")
    assert code == 0
    assert out.startswith(f"Usage: expediter {' '.join(command)}".rstrip())
    for word in mentions:
        assert word in out, word
