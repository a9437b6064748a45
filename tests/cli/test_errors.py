"""Every command ends in one clear line and its exit status, never a traceback (an unusable data
directory or ledger included); and the console script's logging set-up stays inside ``main()``,
so a process that imports or invokes ``cli`` keeps its own logging."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.responses import openai_response

from expediter.cli import cli, main

EXPEDITER = Path(sys.executable).with_name("expediter")
UNREACHABLE_POSTGRES = "postgresql://nobody@127.0.0.1:1/x"


@pytest.fixture
def response_file(tmp_path: Path) -> Path:
    path = tmp_path / "reply.json"
    path.write_text(json.dumps(openai_response(("c1", "now", {"timezone": "UTC"}))))
    return path


def commands(response_file: Path) -> dict[str, list[str]]:
    return {
        "demo": ["demo"],
        "call": ["call", "clock", "now"],
        "ledger ls": ["ledger", "ls"],
        "run": ["run", "--provider", "openai", "--response", str(response_file)],
        "approvals ls": ["approvals", "ls"],
    }


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The console script in this process: its exit status, standard output and error."""
    with pytest.raises(SystemExit) as exited:
        main(args)
    captured = capsys.readouterr()
    code = exited.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


def ends_in_one_error_line(err: str) -> str:
    """The last line of standard error, checked to be the only ``Error:`` line."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines, "nothing on standard error"
    assert lines[-1].startswith("Error: "), err
    assert sum(line.startswith("Error: ") for line in lines) == 1, err
    assert not any(line[:1].isspace() for line in lines), err  # no continuation lines
    return lines[-1]


@pytest.mark.parametrize("command", ["demo", "call", "ledger ls", "run", "approvals ls"])
def test_a_data_directory_that_is_a_file_ends_in_one_line_naming_it(
    command: str,
    tmp_path: Path,
    response_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "not-a-directory"
    home.write_text("")
    monkeypatch.setenv("EXPEDITER_HOME", str(home))

    code, out, err = run_main(commands(response_file)[command], capsys)

    assert (code, out) == (1, "")
    line = ends_in_one_error_line(err)
    assert f"EXPEDITER_HOME={home} is not a directory" in line


@pytest.mark.parametrize("command", ["demo", "ledger ls", "approvals ls"])
def test_a_database_path_that_cannot_be_created_ends_in_one_line(
    command: str,
    tmp_path: Path,
    response_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = ["--database", f"sqlite:///{blocker}/ledger.db", *commands(response_file)[command]]

    code, _, err = run_main(args, capsys)

    assert code == 1
    assert str(blocker) in ends_in_one_error_line(err)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes to read-only directories"
)
@pytest.mark.parametrize("command", ["demo", "ledger ls", "approvals ls"])
def test_a_read_only_data_directory_ends_in_one_line(
    command: str,
    tmp_path: Path,
    response_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "read-only"
    home.mkdir()
    home.chmod(0o555)
    monkeypatch.setenv("EXPEDITER_HOME", str(home))
    try:
        code, _, err = run_main(commands(response_file)[command], capsys)
    finally:
        home.chmod(0o755)
    assert code == 1
    assert "expediter.db" in ends_in_one_error_line(err)


@pytest.mark.parametrize("command", ["demo", "ledger ls", "approvals ls"])
def test_an_unreachable_postgresql_ends_in_one_line(
    command: str, response_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("psycopg")
    args = ["--database", UNREACHABLE_POSTGRES, *commands(response_file)[command]]

    code, _, err = run_main(args, capsys)

    assert code == 1
    line = ends_in_one_error_line(err)
    assert "unreachable" in line
    # libpq's two lines stay two sentences on the one line.
    assert "Connection refused. Is the server running" in line


def test_strict_plugin_problems_are_one_line_each_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.py").write_text('raise RuntimeError("boom one")\n')
    (tmp_path / "b.py").write_text("import no_such_module_here\n")
    monkeypatch.setenv("EXPEDITER_STRICT_PLUGINS", "1")

    code, _, err = run_main(["--tools-dir", str(tmp_path), "tools", "list"], capsys)

    assert code == 1
    assert ends_in_one_error_line(err) == (
        "Error: tool packs failed to load (EXPEDITER_STRICT_PLUGINS is set): pack 'a': "
        "RuntimeError: boom one; pack 'b': ModuleNotFoundError: No module named "
        "'no_such_module_here'"
    )


@pytest.mark.parametrize("command", ["call", "run"])
def test_calls_still_run_when_postgresql_is_unreachable_with_one_warning_line(
    command: str, response_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The ledger fails open (the outage spool keeps the record): the call runs, and the
    # warning saying so is one line, however many lines the driver's message has.
    pytest.importorskip("psycopg")
    args = ["--database", UNREACHABLE_POSTGRES, *commands(response_file)[command]]

    code, out, err = run_main(args, capsys)

    assert code == 0, err
    assert "UTC" in out
    assert "Traceback" not in err
    warnings = [line for line in err.splitlines() if "unreachable" in line]
    assert warnings, err
    assert all(line.startswith("WARNING ") for line in warnings), err
    assert not any(line[:1].isspace() for line in err.splitlines()), err


def test_the_console_script_prints_no_traceback(tmp_path: Path) -> None:
    home = tmp_path / "not-a-directory"
    home.write_text("")
    env = {**os.environ, "EXPEDITER_HOME": str(home), "EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}

    done = subprocess.run(
        [str(EXPEDITER), "demo"], capture_output=True, text=True, env=env, timeout=60
    )

    assert (done.returncode, done.stdout) == (1, "")
    assert ends_in_one_error_line(done.stderr).startswith("Error: the data directory")


def test_an_unexpected_exception_is_one_line_and_minus_v_shows_its_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from expediter.core.ledger import Ledger

    def broken(self: Ledger, **_: object) -> None:
        raise KeyError("status")

    monkeypatch.setattr(Ledger, "rows", broken)

    code, _, err = run_main(["ledger", "ls"], capsys)
    assert code == 1
    assert ends_in_one_error_line(err) == (
        "Error: unexpected KeyError: 'status' (run with -v for the traceback)"
    )
    with pytest.raises(KeyError):
        main(["-v", "ledger", "ls"])


def test_an_unknown_provider_from_the_core_is_bad_usage(
    response_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from expediter.core.turns.toolset import Toolset
    from expediter.errors import UnknownProvider

    def unknown(self: Toolset, provider: str, response: object) -> None:
        raise UnknownProvider(f"unknown provider {provider!r}")

    monkeypatch.setattr(Toolset, "parse_calls", unknown)

    code, _, err = run_main(commands(response_file)["run"], capsys)

    assert code == 2
    assert ends_in_one_error_line(err) == "Error: unknown provider 'openai'"


# -- logging --------------------------------------------------------------------------------------


def logger_state() -> tuple[list[logging.Handler], int, bool]:
    root = logging.getLogger("expediter")
    return root.handlers[:], root.level, root.propagate


def test_invoking_cli_leaves_the_expediter_logger_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = logger_state()

    result = CliRunner().invoke(cli, ["-vv", "ledger", "ls"], prog_name="expediter")

    assert result.exit_code == 0, result.output
    assert logger_state() == before
    assert logging.getLogger("expediter").propagate
    with caplog.at_level(logging.WARNING):
        logging.getLogger("expediter.core.host").warning("after the command")
    assert "after the command" in caplog.text


def test_main_logs_on_standard_error_while_it_runs_and_restores_the_logger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "boom.py").write_text(
        "import expediter\n\n@expediter.tool\ndef boom() -> str:\n"
        '    """Fail."""\n    raise RuntimeError("kaboom")\n'
    )
    before = logger_state()

    code, _, err = run_main(["--tools-dir", str(tools), "call", "boom", "boom"], capsys)

    assert code == 1
    assert "ERROR expediter.core.calls.executor: tool boom action boom raised" in err
    assert "Traceback" in err  # a tool crash keeps its traceback in the log
    assert logger_state() == before


def test_minus_v_adds_the_pack_load_log_with_its_traceback_through_main(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "bad.py").write_text("raise ImportError('needs libfoo')\n")
    args = ["--tools-dir", str(tools), "tools", "list"]

    quiet = run_main(args, capsys)
    verbose = run_main(["-v", *args], capsys)

    assert quiet[0] == verbose[0] == 0
    assert quiet[2].strip() == "warning: pack 'bad' failed to load: ImportError: needs libfoo"
    assert "WARNING expediter.core.discovery.packs: tool module bad" in verbose[2]
    assert "Traceback" in verbose[2]


def test_an_os_error_inside_the_data_directory_names_it(tmp_path: Path) -> None:
    from expediter.cli.app import error_line

    inside = NotADirectoryError(20, "Not a directory", str(tmp_path / "spool" / "x.jsonl"))
    outside = PermissionError(13, "Permission denied", "/elsewhere/file")

    assert error_line(inside, tmp_path) == (
        f"Not a directory: {tmp_path / 'spool' / 'x.jsonl'} (the data directory "
        f"EXPEDITER_HOME={tmp_path} must be a writable directory; set EXPEDITER_HOME to one)"
    )
    assert error_line(outside, tmp_path) == "Permission denied: /elsewhere/file"
    assert error_line(ValueError("two\n\tlines")) == "two lines"
