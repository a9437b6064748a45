"""Ids on the command line are used exactly as given: a ``--user``, an instance id or an
instance name that cannot be stored exactly (NUL, a lone surrogate, an undecodable byte of the
command line, more than 512 characters, empty) is a usage error (exit status 2, one ``Error:``
line naming the option), and nothing of the user it would have been taken for is read,
changed or recorded. A legitimate non-ASCII id works as it is.

tests/core/instances/test_exact_identity.py tries every form on every operation of the Python
API, on SQLite and PostgreSQL; these check that every command refuses them before the host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from expediter.cli import cli
from expediter.core.instances.keys import generate_key

WEATHER = '''
import expediter


class Weather(expediter.Toolbox):
    """Weather."""

    name = "weather"
    config_fields = [expediter.ConfigField("api_key", required=True, secret=True)]

    @expediter.action
    def forecast(self, city: str, context: expediter.CallContext) -> dict:
        """Forecast.

        Args:
            city: The city.
        """
        return {"key_tail": self.config["api_key"][-4:], "invoker": ascii(context.user_id)}
'''
SECRET = "sk-alice-cli-3c9e1a"
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "weather.py").write_text(textwrap.dedent(WEATHER))
    return directory


@pytest.fixture
def expediter(tools_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    """`expediter --tools-dir TOOLS ARGS` in process: exit code, standard output and error."""
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    monkeypatch.setenv("EXPEDITER_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(*args: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(
            cli, ["--tools-dir", str(tools_dir), *args], prog_name="expediter"
        )
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr

    return run


def _add(expediter: Run, user: str, name: str = "home") -> str:
    code, out, err = expediter(
        "instances", "add", "weather", "--name", name, "--secret", f"api_key={SECRET}",
        "--user", user,
    )  # fmt: skip
    assert code == 0, err
    return out.strip()


def _state(expediter: Run, user: str) -> tuple[str, str]:
    """The user's instances as ``instances ls --json`` prints them, and the ledger's rows."""
    code, listed, err = expediter("instances", "ls", "--user", user, "--json")
    assert code == 0, err
    code, rows, err = expediter("ledger", "ls", "--json", "--limit", "0")
    assert code == 0, err
    return listed, rows


#: The hostile forms of the base user id "alice" (or of its stored form).
HOSTILE = {
    "nul-after": "alice\x00",
    "nul-before": "\x00alice",
    "nul-inside": "al\x00ice",
    "undecodable-byte": "alice\udcff",
    "lone-surrogate": "alice\ud800",
    "empty": "",
    "too-long": "alice" + "x" * 600,
}


def _commands(instance_id: str, response: Path) -> dict[str, tuple[str, ...]]:
    """Every command taking ``--user``, as it would be used against alice's data."""
    return {
        "instances add": (
            "instances", "add", "weather", "--name", "planted", "--secret", "api_key=x",
        ),
        "instances ls": ("instances", "ls", "--json"),
        "instances enable": ("instances", "enable", instance_id),
        "instances disable": ("instances", "disable", instance_id),
        "call": ("call", instance_id, "forecast", "--args", '{"city": "Oslo"}', "--json"),
        "tools schema": ("tools", "schema", "--provider", "openai"),
        "parse": ("parse", "--provider", "openai", "--response", str(response)),
        "run": ("run", "--provider", "openai", "--response", str(response), "--json"),
        "ledger ls": ("ledger", "ls", "--json"),
    }  # fmt: skip


def _response(tmp_path: Path) -> Path:
    path = tmp_path / "response.json"
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "forecast", "arguments": json.dumps({"city": "Oslo"})},
    }
    path.write_text(json.dumps({"choices": [{"message": {"tool_calls": [call]}}]}))
    return path


def _refused(code: int, out: str, err: str, option: str) -> None:
    assert code == 2, (out, err)
    # click's usage lines, then the one line saying what is wrong.
    errors = [line for line in err.splitlines() if line.startswith("Error")]
    assert errors == [err.strip().splitlines()[-1]], err
    assert errors[0].startswith(f"Error: Invalid value for '{option}': "), err
    assert "cannot be stored exactly" in err or "is empty" in err
    assert "\x00" not in err
    assert not any("\ud800" <= char <= "\udfff" for char in err)


@pytest.mark.parametrize("command", list(_commands("ID", Path("R"))))
@pytest.mark.parametrize("form", list(HOSTILE))
def test_every_user_option_refuses_an_id_that_cannot_be_stored_exactly(
    expediter: Run, tmp_path: Path, form: str, command: str
) -> None:
    owner = "alice\ufffd" if "surrogate" in form or "byte" in form else "alice"
    if form == "too-long":
        from expediter.core.ledger.columns import stored_key

        owner = stored_key(HOSTILE[form])
    instance_id = _add(expediter, owner)
    assert expediter("call", instance_id, "forecast", "--args", '{"city": "x"}')[0] == 0
    before = _state(expediter, owner)
    arguments = _commands(instance_id, _response(tmp_path))[command]
    code, out, err = expediter(*arguments, "--user", HOSTILE[form])
    _refused(code, out, err, "--user")
    assert SECRET[-4:] not in out
    assert _state(expediter, owner) == before


def _id_commands(instance_id: str) -> dict[str, tuple[str, ...]]:
    return {
        "instances show": ("instances", "show", instance_id, "--json"),
        "instances rm": ("instances", "rm", instance_id),
        "instances set": ("instances", "set", instance_id, "--secret", "api_key=stolen"),
        "instances enable": ("instances", "enable", instance_id),
        "instances disable": ("instances", "disable", instance_id),
        "call": ("call", instance_id, "forecast", "--args", '{"city": "x"}'),
        "tools show": ("tools", "show", instance_id, "--json"),
    }


@pytest.mark.parametrize("command", list(_id_commands("ID")))
@pytest.mark.parametrize("form", ["{}\x00", "\x00{}", "{}\udcff"])
def test_every_instance_id_argument_refuses_an_id_that_cannot_be_stored_exactly(
    expediter: Run, form: str, command: str
) -> None:
    instance_id = _add(expediter, "alice")
    before = _state(expediter, "alice")
    hostile = form.format(instance_id)
    arguments = _id_commands(hostile)[command]
    code, out, err = expediter(*arguments)
    option = "ID_OR_TOOL" if command.endswith(("enable", "disable")) else "ID"
    if command in ("call", "tools show"):
        option = "TOOL" if command == "call" else "TOOL_OR_INSTANCE_ID"
    _refused(code, out, err, option)
    assert _state(expediter, "alice") == before


@pytest.mark.parametrize("name", ["ho\x00me", "home\ud800", "\udcffhome"])
def test_an_instance_name_that_cannot_be_stored_exactly_is_refused_not_cleaned(
    expediter: Run, name: str
) -> None:
    instance_id = _add(expediter, "alice")
    before = _state(expediter, "alice")
    code, out, err = expediter(
        "instances", "add", "weather", "--name", name, "--secret", "api_key=x", "--user", "alice"
    )
    _refused(code, out, err, "--name")
    _refused(*expediter("instances", "set", instance_id, "--name", name), "--name")
    assert _state(expediter, "alice") == before


@pytest.mark.parametrize("user", ["zoë", "用户", "alice\x1b[2J"])
def test_a_legitimate_non_ascii_id_works_exactly(expediter: Run, user: str) -> None:
    instance_id = _add(expediter, user)
    _add(expediter, user.upper() + "x", name="other")
    code, out, err = expediter("instances", "ls", "--user", user, "--json")
    assert code == 0, err
    [listed] = json.loads(out)
    assert (listed["id"], listed["owner_id"]) == (instance_id, user)
    code, out, err = expediter(
        "call", "home", "forecast", "--args", '{"city": "x"}', "--user", user, "--json"
    )
    assert code == 0, err
    event = json.loads(out)
    assert event["result"] == {"key_tail": SECRET[-4:], "invoker": ascii(user)}
    assert (event["user_id"], event["owner_id"]) == (user, user)
    code, out, err = expediter("ledger", "ls", "--user", user, "--json")
    assert code == 0, err
    assert [row["user_id"] for row in json.loads(out)] == [user]


def test_an_undecodable_byte_on_a_real_command_line_is_refused(
    tmp_path: Path, tools_dir: Path
) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("EXPEDITER_")}
    env.update(EXPEDITER_HOME=str(tmp_path / "home"), EXPEDITER_SECRET_KEYS=generate_key())
    command = [sys.executable, "-m", "expediter", "--tools-dir", str(tools_dir)]
    added = subprocess.run(
        [*command, "instances", "add", "weather", "--name", "h", "--secret", "api_key=k",
         "--user", "alice\ufffd"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert added.stdout.strip()
    listed = subprocess.run(
        [*command.copy(), "instances", "ls", "--json", "--user", os.fsencode("alice\udcff")],
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 2, listed.stdout
    assert listed.stdout == b""
    assert b"Error: Invalid value for '--user': user id 'alice\\udcff'" in listed.stderr
    assert b"lone surrogate (U+DCFF, what the undecodable byte 0xFF becomes)" in listed.stderr
