"""Secrets stay secret: planted values hunted for everywhere a call leaves a trace.

Distinctive values (``PLANTED-SECRET-<uuid>``) are passed as an argument named ``password``,
one named ``user_pin``, an ``Annotated[str, expediter.Secret]`` parameter called ``note`` (a
name that does not look secret), and as the wrong type for a secret parameter (an integer for
``password``); the calls run through ``toolset.run``, ``host.call``, ``expediter call --json``
and ``expediter run --json``, with logging at DEBUG. Then the SQLite file and its ``-wal``, the
spool, every file in the data directory, the captured logs, the events, the messages for the
model and the commands' output are searched: no planted value may appear. A PostgreSQL URL's
password is hunted in what ``expediter ledger ls --database URL`` prints when the server is
unreachable. Last, the files expediter creates are private whatever the umask.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.responses import openai_response

from expediter.core.host import Host
from expediter.core.records.calls import CallEvent

from .conftest import Expediter

TOOLS = '''
"""Keeps secrets."""
from typing import Annotated

import expediter


@expediter.tool
def login(password: str, user_pin: str = "", site: str = "example.org") -> str:
    """Log in to a site."""
    return "logged in"


@expediter.tool
def stash(note: Annotated[str, expediter.Secret], topic: str = "") -> str:
    """Keep a private note."""
    return "stashed"


@expediter.tool(require_approval=True)
def wire(amount: int, password: str, memo: str = "") -> str:
    """Send money (a human approves first)."""
    return "sent"
'''

#: Every planted value contains this; a fresh one per test run.
PLANTED = f"PLANTED-SECRET-{uuid.uuid4().hex}"
#: An integer given to a secret string parameter (an argument-type error).
PLANTED_NUMBER = 7_000_000_000_000 + uuid.uuid4().int % 1_000_000_000_000

#: An ordinary value next to each secret: it must be found where the secret is searched for
#: (the search would find a leak).
CONTROL = f"VISIBLE-{uuid.uuid4().hex}"

#: ``case -> (action, arguments, what must not appear)``.
CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    "password": ("login", {"password": f"{PLANTED}-pw", "site": CONTROL}, PLANTED),
    "user_pin": (
        "login",
        {"password": "", "user_pin": f"{PLANTED}-pin", "site": CONTROL},
        PLANTED,
    ),
    "note_marked_secret": ("stash", {"note": f"{PLANTED}-note", "topic": CONTROL}, PLANTED),
    "password_wrong_type": (
        "login",
        {"password": PLANTED_NUMBER, "site": CONTROL},
        str(PLANTED_NUMBER),
    ),
    "note_wrong_type": (
        "stash",
        {"note": PLANTED_NUMBER, "topic": CONTROL},
        str(PLANTED_NUMBER),
    ),
}
#: What a case's calls end as.
OUTCOMES = {
    "password": "completed",
    "user_pin": "completed",
    "note_marked_secret": "completed",
    "password_wrong_type": "error",
    "note_wrong_type": "error",
}


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "vault.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    return directory


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def _host(tools: Path, home: Path, **options: Any) -> Host:
    return Host(tools_path=[tools], home=home, autoload=False, builtins=False, **options)


def _files_text(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (the SQLite file, its -wal and -shm, the spool, caches), as
    text (bytes decoded leniently, so JSON in SQLite pages is searchable)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            found[str(path.relative_to(folder))] = path.read_bytes().decode("latin-1")
    return found


def _logs_text(caplog: pytest.LogCaptureFixture) -> str:
    """The captured records: messages, arguments, ``extra=`` fields and tracebacks."""
    formatter = logging.Formatter()
    parts = []
    for record in caplog.records:
        parts.append(record.getMessage())
        parts.append(repr(record.__dict__))
        if record.exc_info:
            parts.append(formatter.formatException(record.exc_info))
    return "\n".join(parts)


def _events_text(events: list[CallEvent]) -> str:
    return "\n".join(
        json.dumps(event.to_dict(), default=repr) + repr(event) + str(event.error)
        for event in events
    )


def _assert_nowhere(needle: str, places: dict[str, str]) -> None:
    leaks = [where for where, text in places.items() if needle in text]
    assert not leaks, f"{needle!r} found in: {', '.join(leaks)}"


def _case_params() -> list[Any]:
    return [pytest.param(case, id=case) for case in CASES]


# -- the Python API ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", _case_params())
def test_a_secret_leaves_no_trace_through_the_python_api(
    case: str, tools: Path, home: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    action, arguments, needle = CASES[case]
    host = _host(tools, home)
    try:
        toolset = host.toolset(user_id="ann")
        response = openai_response(("c1", action, arguments))
        calls = toolset.parse_calls("openai", response)
        events = list(toolset.run(calls, message_id="m1"))
        events.append(host.call("vault", action, arguments, user_id="ann"))
        assert [event.status for event in events] == [OUTCOMES[case]] * 2
        messages = toolset.result_messages("openai", calls, events[:1])
        places = {
            "events": _events_text(events),
            "messages for the model": json.dumps(messages, default=repr),
            "logs": _logs_text(debug_logs),
            **{f"file {name} (open)": text for name, text in _files_text(home).items()},
        }
        assert any(name.endswith("-wal (open)") for name in places), "the WAL was searched"
        assert CONTROL in places["events"]
        assert any(CONTROL in text for name, text in places.items() if name.startswith("file"))
        _assert_nowhere(needle, places)
    finally:
        host.close()
    _assert_nowhere(needle, {f"file {n}": t for n, t in _files_text(home).items()})


@pytest.mark.parametrize("case", _case_params())
def test_a_secret_leaves_no_trace_in_the_spool_during_an_outage(
    case: str, tools: Path, home: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    database_password = f"{PLANTED}-db"
    url = f"postgresql://ann:{database_password}@127.0.0.1:1/ledger"
    action, arguments, needle = CASES[case]
    host = _host(tools, home, database_url=url)
    try:
        event = host.call("vault", action, arguments, user_id="ann")
        assert event.status == OUTCOMES[case]
        places = {
            "event": _events_text([event]),
            "logs": _logs_text(debug_logs),
            "host config": repr(host.config),
            "ledger database": repr(host.ledger.database) + host.ledger.database.display,
            **{f"file {name}": text for name, text in _files_text(home).items()},
        }
        assert any(name.startswith("file spool") for name in places), "the spool was searched"
        assert any(CONTROL in text for name, text in places.items() if name.startswith("file"))
        _assert_nowhere(needle, places)
        _assert_nowhere(database_password, places)
    finally:
        host.close()


def test_a_paused_calls_secret_leaves_no_trace(
    tools: Path, home: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    host = _host(tools, home)
    try:
        toolset = host.toolset(user_id="ann")
        arguments = {"amount": 5, "password": f"{PLANTED}-wire", "memo": CONTROL}
        calls = toolset.parse_calls("openai", openai_response(("c1", "wire", arguments)))
        events = list(toolset.run(calls, message_id="m1"))
        assert [event.status for event in events] == ["awaiting_approval"]
        places = {
            "events": _events_text(events),
            "logs": _logs_text(debug_logs),
            "pending approvals": json.dumps(
                [row.to_dict() for row in host.ledger.pending_approvals()], default=repr
            ),
            **{f"file {name}": text for name, text in _files_text(home).items()},
        }
        assert CONTROL in places["pending approvals"]
        _assert_nowhere(PLANTED, places)
    finally:
        host.close()


# -- the command line ----------------------------------------------------------------------------


@pytest.fixture
def command(expediter: Expediter, tools: Path) -> Callable[..., tuple[str, str]]:
    """Run ``expediter -vv ARGS`` (debug logs on standard error) with the tools directory;
    returns its exit status and output, and every file in its data directory, as texts."""

    def run(*args: str) -> tuple[str, str]:
        env = {"EXPEDITER_TOOLS_PATH": str(tools), "EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
        result = expediter.run("-vv", *args, env=env)
        assert "Traceback" not in result.stderr, str(result)
        files = "\n".join(f"{name}: {text}" for name, text in _files_text(expediter.home).items())
        # What it printed (not the command line, which holds the planted values).
        output = f"exit status {result.returncode}\n{result.stdout}\n{result.stderr}"
        return output, files

    return run


@pytest.mark.parametrize("case", _case_params())
def test_a_secret_leaves_no_trace_through_expediter_call(
    case: str, command: Callable[..., tuple[str, str]]
) -> None:
    action, arguments, needle = CASES[case]
    output, files = command("call", "vault", action, "--args", json.dumps(arguments), "--json")
    assert f'"status": "{OUTCOMES[case]}"' in output
    assert CONTROL in output
    assert CONTROL in files
    _assert_nowhere(needle, {"output": output, "data directory": files})
    output, files = command("call", "vault", action, "--args", json.dumps(arguments))
    _assert_nowhere(needle, {"output (text)": output, "data directory": files})


@pytest.mark.parametrize("case", _case_params())
def test_a_secret_leaves_no_trace_through_expediter_run(
    case: str, command: Callable[..., tuple[str, str]], tmp_path: Path
) -> None:
    action, arguments, needle = CASES[case]
    response = tmp_path / "response.json"
    response.write_text(json.dumps(openai_response(("c1", action, arguments))))
    output, files = command("run", "--provider", "openai", "--response", str(response), "--json")
    assert f'"status": "{OUTCOMES[case]}"' in output
    assert CONTROL in output
    output_messages, files_after = command(
        "run", "--provider", "openai", "--response", str(response), "--messages"
    )
    places = {
        "run --json": output,
        "run --messages": output_messages,
        "data directory": files,
        "data directory after": files_after,
    }
    _assert_nowhere(needle, places)


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("postgresql://ann:{pw}@127.0.0.1:1/ledger", id="userinfo"),
        pytest.param("postgresql://ann@127.0.0.1:1/ledger?password={pw}", id="query"),
        pytest.param("postgresql://ann:{pw}#x?y@127.0.0.1:1/ledger", id="hash-and-question"),
        pytest.param("postgresql://ann:pa/{pw}@127.0.0.1:1/ledger", id="slash"),
        pytest.param("postgresql://ann:{pw}@[::1/ledger", id="malformed-ipv6"),
        pytest.param("postgresql://ann:%zz{pw}@127.0.0.1:1/ledger", id="bad-percent"),
        pytest.param("host=127.0.0.1 port=1 password={pw}", id="libpq-keywords"),
    ],
)
def test_a_database_urls_password_is_never_printed(
    url: str, command: Callable[..., tuple[str, str]]
) -> None:
    password = f"{PLANTED}-db"
    output, files = command("--database", url.format(pw=password), "ledger", "ls")
    assert "exit status 1" in output
    assert "Error:" in output
    _assert_nowhere(password, {"output": output, "data directory": files})


@pytest.mark.parametrize("subcommand", [("db", "upgrade"), ("db", "current")])
@pytest.mark.parametrize(
    "url",
    [
        pytest.param("postgresql://ann:{pw}@127.0.0.1:1/ledger", id="userinfo"),
        pytest.param("postgresql://ann@127.0.0.1:1/ledger?password={pw}", id="query"),
    ],
)
def test_the_schema_commands_never_print_a_database_password(
    url: str, subcommand: tuple[str, str], command: Callable[..., tuple[str, str]]
) -> None:
    password = f"{PLANTED}-db"
    output, files = command("--database", url.format(pw=password), *subcommand)
    assert "exit status 1" in output
    _assert_nowhere(password, {"output": output, "data directory": files})


# -- private files -------------------------------------------------------------------------------


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.usefixtures("umask_022")
def test_the_sqlite_ledger_and_the_data_folder_are_private(tools: Path, tmp_path: Path) -> None:
    home = tmp_path / "several" / "levels" / "data"
    host = _host(tools, home)
    try:
        assert host.call("vault", "login", {"password": "x"}).status == "completed"
        database = home / "expediter.db"
        files = [database, database.with_name("expediter.db-wal")]
        files.append(database.with_name("expediter.db-shm"))
        assert {path.name: _mode(path) for path in files} == {path.name: 0o600 for path in files}
        for folder in (home, home.parent, home.parent.parent):
            assert _mode(folder) == 0o700, folder
    finally:
        host.close()


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.usefixtures("umask_022")
def test_an_existing_folder_keeps_its_mode(tools: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    host = _host(tools, shared)
    try:
        host.call("vault", "login", {"password": "x"})
        assert _mode(shared) == 0o755
        assert _mode(shared / "expediter.db") == 0o600
    finally:
        host.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG data folder")
@pytest.mark.usefixtures("umask_022")
def test_the_default_per_user_data_folder_is_private(
    expediter: Expediter, tools: Path, tmp_path: Path
) -> None:
    xdg = tmp_path / "xdg"
    env = {
        "EXPEDITER_HOME": None,
        "XDG_DATA_HOME": str(xdg / "share"),
        "EXPEDITER_TOOLS_PATH": str(tools),
        "EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    result = expediter.run("call", "vault", "login", "--args", '{"password": "x"}', env=env)
    assert result.returncode == 0, str(result)
    data = xdg / "share" / "expediter"
    assert _mode(data) == 0o700
    assert _mode(xdg / "share") == 0o700
    assert _mode(data / "expediter.db") == 0o600
