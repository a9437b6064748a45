"""The command line: help everywhere, JSON shapes, and the exit codes of `expediter call`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from support.events import EVENT_FIELDS

from expediter.cli import cli

TOOLS = '''
import expediter

@expediter.tool
def shout(text: str, times: int = 1) -> str:
    """Shout text.

    Args:
        text: What to shout.
        times: How many times.
    """
    return (text.upper() + " ") * times

@expediter.tool
def crash(reason: str = "boom") -> str:
    """Raise an exception."""
    raise RuntimeError(reason)
'''

INTERNAL = '''
import expediter

@expediter.tool(internal=True)
def plumbing() -> str:
    """Internal helper."""
    return "ok"
'''


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "loud.py").write_text(textwrap.dedent(TOOLS))
    (directory / "pipes.py").write_text(textwrap.dedent(INTERNAL))
    return directory


def run(*args: str, tools_dir: Path | None = None) -> tuple[int, str, str]:
    prefix = ["--tools-dir", str(tools_dir)] if tools_dir else []
    # Packs installed in the test virtualenv must not change what these tests see.
    env = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = CliRunner().invoke(cli, [*prefix, *args], prog_name="expediter", env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from all_commands(command, (*prefix, name))


@pytest.mark.parametrize("path", [(), *all_commands(cli)], ids=lambda p: " ".join(p) or "root")
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    code, out, _ = run(*path, "--help")
    assert code == 0
    assert out.startswith("Usage: expediter")


def test_tools_list_json_has_the_documented_shape(tools_dir: Path) -> None:
    code, out, _ = run("tools", "list", "--json", tools_dir=tools_dir)
    assert code == 0
    rows = json.loads(out)
    assert [row["name"] for row in rows] == [
        "clock",
        "loud",
        "memory",
        "notes",
        "think",
        "todo_list",
    ]
    loud = rows[1]
    assert {"name", "pack", "source", "internal", "actions"} <= set(loud)
    assert (loud["pack"], loud["source"], loud["internal"]) == ("loud", "directory", False)
    assert loud["actions"] == ["shout", "crash"]


def test_internal_tools_show_only_with_all(tools_dir: Path) -> None:
    _, out, _ = run("tools", "list", "--json", "--all", tools_dir=tools_dir)
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["pipes"]["internal"] is True
    _, table, _ = run("tools", "list", "--all", tools_dir=tools_dir)
    assert "pipes (internal)" in table
    _, plain, _ = run("tools", "list", tools_dir=tools_dir)
    assert "pipes" not in plain


def test_tools_show_prints_schemas_and_config(tools_dir: Path) -> None:
    code, out, _ = run("tools", "show", "loud", "--json", tools_dir=tools_dir)
    assert code == 0
    data = json.loads(out)
    shout = data["actions"][0]
    assert shout["parameters"]["required"] == ["text"]
    assert shout["parameters"]["properties"]["times"] == {
        "type": "integer",
        "description": "How many times.",
        "default": 1,
    }
    assert data["config"] == []
    code, text, _ = run("tools", "show", "loud", tools_dir=tools_dir)
    assert "times: integer (optional, default 1)  How many times." in text


def test_tools_show_of_an_unknown_tool_is_a_usage_error() -> None:
    code, _, err = run("tools", "show", "clok")
    assert code == 2
    assert "no tool named 'clok'; did you mean clock?" in err


def test_plugins_json_lists_packs_with_sources_and_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import does_not_exist\n")
    code, out, _ = run("plugins", "--json", tools_dir=tmp_path)
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert {"name", "version", "source", "tools", "error"} <= set(rows["clock"])
    assert rows["clock"]["source"] == "built-in"
    assert rows["clock"]["error"] is None
    assert rows["bad"]["source"] == "directory"
    assert rows["bad"]["error"] == "ModuleNotFoundError: No module named 'does_not_exist'"


def test_call_prints_the_result_and_exits_zero(tools_dir: Path) -> None:
    code, out, _ = run(
        "call", "loud", "shout", "--args", '{"text": "hi", "times": 2}', tools_dir=tools_dir
    )
    assert (code, out) == (0, "HI HI \n")


def test_call_json_prints_the_event(tools_dir: Path) -> None:
    code, out, _ = run(
        "call",
        "loud",
        "shout",
        "--args",
        '{"text": "a"}',
        "--user",
        "u7",
        "--json",
        tools_dir=tools_dir,
    )
    event = json.loads(out)
    assert code == 0
    assert set(event) >= EVENT_FIELDS
    assert (event["status"], event["result"], event["user_id"]) == ("completed", "A ", "u7")


def test_a_bad_argument_exits_two_naming_the_parameter(tools_dir: Path) -> None:
    code, _, err = run("call", "loud", "shout", "--args", '{"text": 5}', tools_dir=tools_dir)
    assert code == 2
    assert "argument 'text': expected string, got integer 5" in err
    code, _, err = run("call", "loud", "shout", "--args", "{}", tools_dir=tools_dir)
    assert code == 2
    assert "argument 'text': missing" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("{oops", "--args is not valid JSON: Expecting property name"),
        ("[1]", "--args must be a JSON object"),
    ],
)
def test_malformed_args_json_is_a_usage_error(tools_dir: Path, args: str, message: str) -> None:
    code, _, err = run("call", "loud", "shout", "--args", args, tools_dir=tools_dir)
    assert code == 2
    assert message in err


def test_unknown_tool_or_action_exits_two(tools_dir: Path) -> None:
    assert run("call", "nope", "x", tools_dir=tools_dir)[0] == 2
    assert run("call", "loud", "whisper", tools_dir=tools_dir)[0] == 2


def test_a_tool_that_raises_exits_one_with_type_and_message(
    tools_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    code, out, _ = run(
        "call",
        "loud",
        "crash",
        "--args",
        '{"reason": "disk full"}',
        "--json",
        tools_dir=tools_dir,
    )
    assert code == 1
    event = json.loads(out)
    assert (event["status"], event["error"]) == ("error", "RuntimeError: disk full")
    # The host logs the traceback; nothing escapes as a crash.
    assert any(record.exc_info for record in caplog.records if record.levelname == "ERROR")


def test_demo_lists_and_calls_the_builtins() -> None:
    code, out, _ = run("demo")
    assert code == 0
    for expected in (
        "$ expediter tools list",
        "clock",
        "think",
        "\n$ expediter call clock now --args '{\"timezone\": 42}'; echo $?\nerror (Argument",
        "RuntimeError: the upstream service is down",
    ):
        assert expected in out
    assert "Traceback" not in out


def test_version_option() -> None:
    from expediter import __version__

    code, out, _ = run("--version")
    assert (code, out.strip()) == (0, f"expediter, version {__version__}")


def test_a_tools_directory_given_by_the_environment_and_the_option_counts_once(
    tools_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tools_dir.parent)
    env = {
        "EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1",
        "EXPEDITER_HOME": str(tmp_path / "home"),
        "EXPEDITER_TOOLS_PATH": "./tools",
    }
    result = CliRunner().invoke(
        cli, ["--tools-dir", f"{tools_dir}/", "plugins", "--json"], prog_name="expediter", env=env
    )
    assert result.exit_code == 0, result.output
    names = [pack["name"] for pack in json.loads(result.stdout)]
    assert sorted(name for name in names if name in ("loud", "pipes")) == ["loud", "pipes"]
    result = CliRunner().invoke(
        cli,
        ["--tools-dir", "tools", "call", "loud", "shout", "--args", '{"text": "a"}'],
        prog_name="expediter",
        env=env,
    )
    assert result.exit_code == 0, result.output


CONFIGURED = '''
import expediter


class Forecast(expediter.Toolbox):
    """Forecasts."""

    name = "forecast"
    config_fields = [
        expediter.ConfigField("units", enum=("metric", "imperial"), default="metric"),
        expediter.ConfigField("auth", enum=("none", "bearer"), default="none"),
        expediter.ConfigField(
            "token", secret=True, required=True, depends_on={"auth": "bearer"},
            description="The API token.",
        ),
    ]

    @expediter.action
    def today(self) -> str:
        """Today's forecast."""
        return "sunny"
'''


def test_tools_show_gives_each_config_fields_choices_default_and_condition(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "configured"
    directory.mkdir()
    (directory / "forecast.py").write_text(CONFIGURED)
    code, out, _ = run("tools", "show", "forecast", tools_dir=directory)
    assert code == 0
    assert '    units: string, optional, one of "metric", "imperial", default "metric"' in out
    assert '    token: string, required, secret, when auth="bearer"  The API token.' in out
