"""`expediter instances ...` and `expediter keys ...`: stored instances added, listed, changed,
switched and removed from the command line, their secrets sealed and never shown, the master
keys generated and rotated; `call` and `tools show` given an instance id."""

from __future__ import annotations

import binascii
import json
import sqlite3
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from expediter.cli import cli, main
from expediter.core.host import Host
from expediter.core.instances.keys import EXAMPLE_KEY, Keyring, generate_key

WEATHER = '''
import expediter


class Weather(expediter.Toolbox):
    """Weather."""

    name = "weather"
    config_fields = [
        expediter.ConfigField("api_key", required=True, secret=True),
        expediter.ConfigField("units", enum=("metric", "imperial")),
    ]

    @expediter.action
    def forecast(self, city: str) -> dict:
        """Forecast.

        Args:
            city: The city.
        """
        return {"city": city, "key_tail": self.config["api_key"][-4:]}
'''
#: The fields of `instances ls --json` (docs/operations.md, "JSON shapes").
DOCUMENTED = {"id", "name", "tool", "owner_id", "enabled", "config", "created_at", "updated_at"}
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "weather.py").write_text(textwrap.dedent(WEATHER))
    return directory


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The master key the commands (and the hosts a test builds) use."""
    value = generate_key()
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", value)
    monkeypatch.setenv("EXPEDITER_DISABLE_PLUGIN_AUTOLOAD", "1")
    for variable in ("EXPEDITER_SECRET_KEYS_FILE", "EXPEDITER_DEFAULT_TOOLS"):
        monkeypatch.delenv(variable, raising=False)
    return value


@pytest.fixture
def expediter(tools_dir: Path, key: str) -> Run:
    """`expediter --tools-dir TOOLS ARGS`: exit code, standard output, standard error."""

    def run(
        *args: str, env: dict[str, str | None] | None = None, stdin: str | None = None
    ) -> tuple[int, str, str]:
        result = CliRunner().invoke(
            cli,
            ["--tools-dir", str(tools_dir), *args],
            prog_name="expediter",
            env=env,
            input=stdin,
        )
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr

    return run


@pytest.fixture
def host(tools_dir: Path, key: str) -> Iterator[Callable[[], Host]]:
    """Build a host on the same home and tools (reading what the commands stored)."""
    hosts: list[Host] = []

    def make() -> Host:
        hosts.append(Host(tools_path=[tools_dir]))
        return hosts[-1]

    yield make
    for made in hosts:
        made.close()


def add(expediter: Run, *args: str, stdin: str | None = None) -> str:
    code, out, err = expediter("instances", "add", *args, stdin=stdin)
    assert code == 0, err
    return out.strip()


def forecast(expediter: Run, instance_id: str, *options: str) -> dict[str, Any]:
    code, out, err = expediter("call", instance_id, "forecast", "--args", '{"city": "x"}', *options)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


# -- instances add -------------------------------------------------------------------------------


def test_add_prints_the_new_id_alone(expediter: Run) -> None:
    code, out, err = expediter(
        "instances", "add", "weather", "--name", "w", "--secret", "api_key=sk-1234"
    )
    assert code == 0, err
    assert out.endswith("\n")
    assert out.count("\n") == 1
    assert str(uuid.UUID(out.strip())) == out.strip()
    assert err == ""


def test_add_json_shows_the_record_with_secrets_masked(expediter: Run) -> None:
    code, out, _ = expediter(
        "instances", "add", "weather", "--name", "w", "--config", '{"units": "metric"}',
        "--secret", "api_key=sk-masked-4321", "--user", "alice", "--json",
    )  # fmt: skip
    assert code == 0
    record = json.loads(out)
    assert set(record) >= DOCUMENTED
    assert record["config"] == {"units": "metric", "api_key": "***"}
    assert (record["tool"], record["name"], record["owner_id"]) == ("weather", "w", "alice")
    assert "sk-masked-4321" not in out


def test_secret_values_are_read_from_standard_input_and_from_files(
    expediter: Run, host: Callable[[], Host], tmp_path: Path
) -> None:
    from_stdin = add(
        expediter, "weather", "--name", "a", "--secret", "api_key=-", stdin="sk-stdin-1111\n"
    )
    secret_file = tmp_path / "key.txt"
    secret_file.write_text("sk-file-2222\n")
    from_file = add(expediter, "weather", "--name", "b", "--secret", f"api_key=@{secret_file}")
    registry = host().instances
    assert registry.get(from_stdin, decrypt=True).secrets == {"api_key": "sk-stdin-1111"}
    assert registry.get(from_file, decrypt=True).secrets == {"api_key": "sk-file-2222"}
    assert forecast(expediter, from_stdin)["key_tail"] == "1111"
    assert forecast(expediter, from_file)["key_tail"] == "2222"


def test_secret_options_are_checked_without_echoing_values(expediter: Run, tmp_path: Path) -> None:
    code, _, err = expediter("instances", "add", "weather", "--name", "w", "--secret", "sk-bare")
    assert code == 2
    assert "FIELD=VALUE" in err
    assert "sk-bare" not in err
    code, _, err = expediter(
        "instances", "add", "weather", "--name", "w",
        "--secret", "api_key=-", "--secret", "units=-", stdin="sk-x\n",
    )  # fmt: skip
    assert code == 2
    assert "standard input" in err
    code, _, err = expediter(
        "instances", "add", "weather", "--name", "w",
        "--config", '{"api_key": "sk-in-config"}', "--secret", "api_key=sk-in-argv",
    )  # fmt: skip
    assert code == 2
    assert "'api_key'" in err
    assert "--config and --secret" in err
    assert "sk-in-config" not in err
    assert "sk-in-argv" not in err
    code, _, err = expediter(
        "instances", "add", "weather", "--name", "w", "--secret", f"api_key=@{tmp_path}/none"
    )
    assert code == 2
    assert "cannot read" in err
    code, _, err = expediter("instances", "add", "weather", "--name", "w", "--config", "[1]")
    assert code == 2
    assert "JSON object" in err


def test_a_missing_required_secret_names_the_field(expediter: Run) -> None:
    code, out, err = expediter("instances", "add", "weather", "--name", "w")
    assert (code, out) == (1, "")
    assert err.startswith("Error: ")
    assert "'api_key'" in err


def test_adding_an_unknown_tool_is_a_usage_error(expediter: Run) -> None:
    code, _, err = expediter("instances", "add", "wether", "--name", "w")
    assert code == 2
    assert "no tool named 'wether'; did you mean weather?" in err


# -- listing and showing --------------------------------------------------------------------------


def test_ls_json_has_the_documented_shape_and_masks_secrets(expediter: Run) -> None:
    shared = add(expediter, "weather", "--name", "shared", "--secret", "api_key=sk-ls-aaaa")
    mine = add(
        expediter, "weather", "--name", "mine", "--secret", "api_key=sk-ls-bbbb", "--user", "al"
    )
    code, out, _ = expediter("instances", "ls", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [row["id"] for row in rows] == [shared, mine]
    for row in rows:
        assert set(row) >= DOCUMENTED
        assert row["config"]["api_key"] == "***"
        assert row["enabled"] is True
    assert [row["owner_id"] for row in rows] == [None, "al"]
    assert "sk-ls-" not in out
    code, table, _ = expediter("instances", "ls")
    lines = table.splitlines()
    assert lines[0].split() == ["ID", "NAME", "TOOL", "OWNER", "ENABLED"]
    assert lines[1].split() == [shared, "shared", "weather", "-", "yes"]
    assert lines[2].split() == [mine, "mine", "weather", "al", "yes"]


def test_ls_user_shows_their_instances_and_the_shared_ones(expediter: Run) -> None:
    shared = add(expediter, "weather", "--name", "s", "--secret", "api_key=k1")
    alices = add(expediter, "weather", "--name", "a", "--secret", "api_key=k2", "--user", "alice")
    bobs = add(expediter, "weather", "--name", "b", "--secret", "api_key=k3", "--user", "bob")
    _, out, _ = expediter("instances", "ls", "--user", "alice", "--json")
    assert {row["id"] for row in json.loads(out)} == {shared, alices}
    _, table, _ = expediter("instances", "ls", "--user", "alice")
    assert alices in table
    assert shared in table
    assert bobs not in table


def test_the_table_escapes_what_users_wrote(expediter: Run) -> None:
    instance_id = add(
        expediter, "weather", "--name", "w\u202eevil", "--secret", "api_key=k", "--user", "u\x1b[2J"
    )
    _, table, _ = expediter("instances", "ls")
    _, shown, _ = expediter("instances", "show", instance_id)
    for text in (table, shown):
        assert "\x1b" not in text
        assert "\u202e" not in text
        assert "u\\x1b[2J" in text


def test_show_set_rm_round_trip_keeps_the_stored_secret(expediter: Run) -> None:
    instance_id = add(expediter, "weather", "--name", "w", "--secret", "api_key=sk-round-9876")
    code, out, _ = expediter("instances", "show", instance_id, "--json")
    assert code == 0
    assert json.loads(out)["config"] == {"api_key": "***"}
    code, text, _ = expediter("instances", "show", instance_id)
    assert code == 0
    assert f"id: {instance_id}" in text
    assert "api_key" in text
    assert "sk-round" not in text

    code, _, err = expediter(
        "instances", "set", instance_id, "--name", "renamed", "--config", '{"units": "imperial"}'
    )
    assert code == 0, err
    record = json.loads(expediter("instances", "show", instance_id, "--json")[1])
    assert record["name"] == "renamed"
    assert record["config"] == {"units": "imperial", "api_key": "***"}
    assert forecast(expediter, instance_id)["key_tail"] == "9876"

    code, _, err = expediter("instances", "set", instance_id, "--secret", "api_key=sk-new-5555")
    assert code == 0, err
    assert forecast(expediter, instance_id)["key_tail"] == "5555"

    code, out, _ = expediter("instances", "rm", instance_id)
    assert (code, out) == (0, "")
    code, _, err = expediter("instances", "show", instance_id)
    assert code == 1
    assert "no tool instance" in err
    assert json.loads(expediter("instances", "ls", "--json")[1]) == []


def test_set_without_a_change_is_a_usage_error(expediter: Run) -> None:
    instance_id = add(expediter, "weather", "--name", "w", "--secret", "api_key=k")
    code, _, err = expediter("instances", "set", instance_id)
    assert code == 2
    assert "nothing to change" in err


def test_set_name_alone_keeps_a_required_secret(expediter: Run) -> None:
    instance_id = add(expediter, "weather", "--name", "w", "--secret", "api_key=sk-name-3333")
    code, _, err = expediter("instances", "set", instance_id, "--name", "renamed")
    assert code == 0, err
    assert forecast(expediter, instance_id)["key_tail"] == "3333"


# -- switching on and off ------------------------------------------------------------------------


def names_offered(make: Callable[[], Host], user_id: str) -> set[str]:
    return set(make().toolset(user_id=user_id).name_map.to_dict()["names"])


def test_disable_and_enable_an_instance(expediter: Run) -> None:
    instance_id = add(expediter, "weather", "--name", "w", "--secret", "api_key=k")
    code, out, err = expediter("instances", "disable", instance_id)
    assert (code, out.strip()) == (0, instance_id), err
    code, _, err = expediter("call", instance_id, "forecast", "--args", '{"city": "x"}')
    assert code != 0
    assert "disabled" in err
    code, out, _ = expediter("instances", "enable", instance_id)
    assert (code, out.strip()) == (0, instance_id)
    assert forecast(expediter, instance_id)["key_tail"] == "k"


def test_one_user_switches_a_shared_instance_off(expediter: Run, host: Callable[[], Host]) -> None:
    instance_id = add(expediter, "weather", "--name", "w", "--secret", "api_key=k")
    code, out, _ = expediter("instances", "disable", instance_id, "--user", "bob")
    assert (code, out.strip()) == (0, instance_id)
    assert "forecast" not in names_offered(host, "bob")
    assert "forecast" in names_offered(host, "alice")
    expediter("instances", "enable", instance_id, "--user", "bob")
    assert "forecast" in names_offered(host, "bob")


def test_one_user_opts_out_of_a_default_tool(expediter: Run, host: Callable[[], Host]) -> None:
    assert "now" in names_offered(host, "bob")
    code, out, err = expediter("instances", "disable", "clock", "--user", "bob")
    assert code == 0, err
    default_id = out.strip()
    assert str(uuid.UUID(default_id)) == default_id
    assert "now" not in names_offered(host, "bob")
    assert "now" in names_offered(host, "alice")
    code, out, _ = expediter("instances", "enable", "clock", "--user", "bob")
    assert (code, out.strip()) == (0, default_id)
    assert "now" in names_offered(host, "bob")


def test_switching_an_unknown_name_is_an_error(expediter: Run) -> None:
    code, _, err = expediter("instances", "disable", "nothing-here", "--user", "bob")
    assert code == 1
    assert "neither a stored instance nor a default tool" in err


# -- keys -----------------------------------------------------------------------------------------


def test_keys_generate_prints_one_key_and_nothing_else(
    expediter: Run, expediter_home: Path
) -> None:
    printed = []
    for _ in range(2):
        code, out, err = expediter("keys", "generate")
        assert (code, err) == (0, "")
        assert out.endswith("\n")
        assert out.count("\n") == 1
        value = out.strip()
        assert len(value) == 44
        assert set(value) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_="
        )
        assert len(binascii.a2b_base64(value.replace("-", "+").replace("_", "/"))) == 32
        printed.append(value)
    assert printed[0] != printed[1]
    assert not (expediter_home / "expediter.db").exists()
    assert Keyring.parse(",".join(printed)).keys  # both usable as keys


def sealed_blob(home: Path, instance_id: str) -> str:
    with sqlite3.connect(home / "expediter.db") as connection:
        (blob,) = connection.execute(
            "SELECT credentials FROM tool_instances WHERE id = ?", (instance_id,)
        ).fetchone()
    return str(blob)


def test_keys_rotate_reseals_with_the_new_key_in_front(
    expediter: Run, key: str, expediter_home: Path
) -> None:
    instance_id = add(expediter, "weather", "--name", "w", "--secret", "api_key=sk-rotate-4444")
    plain = add(expediter, "clock", "--name", "no-secrets")
    new = generate_key()
    both = {"EXPEDITER_SECRET_KEYS": f"{new},{key}"}
    assert Keyring.parse(f"{new},{key}").needs_rotation(sealed_blob(expediter_home, instance_id))
    code, out, err = expediter("keys", "rotate", env=both)
    assert (code, out, err) == (0, "resealed 1, already current 0, failed 0\n", "")
    assert not Keyring.parse(new).needs_rotation(sealed_blob(expediter_home, instance_id))
    # The old key may go now.
    only_new = {"EXPEDITER_SECRET_KEYS": new}
    code, out, err = expediter(
        "call", instance_id, "forecast", "--args", '{"city": "x"}', env=only_new
    )
    assert code == 0, err
    assert json.loads(out)["key_tail"] == "4444"
    code, out, _ = expediter("keys", "rotate", "--json", env=only_new)
    assert (code, json.loads(out)) == (0, {"resealed": 0, "current": 1, "failed": []})
    assert json.loads(expediter("instances", "show", plain, "--json")[1])["config"] == {}


def test_keys_rotate_reports_what_it_cannot_open(expediter: Run) -> None:
    instance_id = add(expediter, "weather", "--name", "w", "--secret", "api_key=k")
    stranger = {"EXPEDITER_SECRET_KEYS": generate_key()}
    code, out, err = expediter("keys", "rotate", env=stranger)
    assert (code, out) == (1, "resealed 0, already current 0, failed 1\n")
    assert err.startswith(f"instance {instance_id}: ")
    assert "not configured" in err
    code, out, _ = expediter("keys", "rotate", "--json", env=stranger)
    assert code == 1
    report = json.loads(out)
    assert (report["resealed"], report["current"]) == (0, 0)
    assert [failure["id"] for failure in report["failed"]] == [instance_id]
    assert "not configured" in report["failed"][0]["error"]


def test_a_secret_without_a_configured_key_names_the_variable(expediter: Run) -> None:
    unset = {"EXPEDITER_SECRET_KEYS": None}
    code, out, err = expediter(
        "instances", "add", "weather", "--name", "w", "--secret", "api_key=sk-nokey", env=unset
    )
    assert (code, out) == (1, "")
    assert "EXPEDITER_SECRET_KEYS" in err
    assert "sk-nokey" not in err


def test_the_documented_example_key_is_refused(expediter: Run) -> None:
    example = {"EXPEDITER_SECRET_KEYS": EXAMPLE_KEY}
    code, _, err = expediter(
        "instances", "add", "weather", "--name", "w", "--secret", "api_key=k", env=example
    )
    assert code == 1
    assert "EXPEDITER_SECRET_KEYS" in err
    assert "example" in err
    assert EXAMPLE_KEY not in err


# -- call and tools show with an instance id -----------------------------------------------------


def test_call_runs_each_instance_with_its_own_secret(expediter: Run) -> None:
    first = add(expediter, "weather", "--name", "one", "--secret", "api_key=sk-first-aaaa")
    second = add(
        expediter, "weather", "--name", "two", "--secret", "api_key=sk-second-bbbb", "--user", "u"
    )
    assert forecast(expediter, first)["key_tail"] == "aaaa"
    assert forecast(expediter, second)["key_tail"] == "bbbb"
    code, out, _ = expediter("call", second, "forecast", "--args", '{"city": "y"}', "--json")
    event = json.loads(out)
    assert (code, event["instance_id"], event["owner_id"]) == (0, second, "u")


def test_calling_a_tool_that_needs_configuration_names_the_field_and_the_fix(
    expediter: Run,
) -> None:
    code, out, err = expediter("call", "weather", "forecast", "--args", '{"city": "x"}')
    assert (code, out) == (2, "")
    assert (
        "Error: tool 'weather' needs configuration to run: 'api_key' (secret) must be set. "
        "Store an instance of it, then call the instance by its id or name: expediter "
        "instances add weather --name NAME --secret api_key=-"
    ) in " ".join(err.split())


def test_call_takes_an_instance_by_name_or_by_the_beginning_of_its_id(expediter: Run) -> None:
    instance_id = add(expediter, "weather", "--name", "home", "--secret", "api_key=sk-home-1111")
    assert forecast(expediter, "home")["key_tail"] == "1111"
    assert forecast(expediter, instance_id[:8])["key_tail"] == "1111"
    code, out, _ = expediter("call", "home", "forecast", "--args", '{"city": "x"}', "--json")
    assert (code, json.loads(out)["instance_id"]) == (0, instance_id)


def test_a_name_several_owners_use_is_ambiguous_until_the_user_says_whose(
    expediter: Run,
) -> None:
    ann = add(
        expediter, "weather", "--name", "w", "--secret", "api_key=sk-ann-aaaa", "--user", "ann"
    )
    bob = add(
        expediter, "weather", "--name", "w", "--secret", "api_key=sk-bob-bbbb", "--user", "bob"
    )
    code, out, err = expediter("call", "w", "forecast", "--args", '{"city": "x"}')
    assert (code, out) == (2, "")
    assert "2 tool instances are named 'w'" in err
    assert ann in err
    assert bob in err
    assert "sk-" not in err
    assert forecast(expediter, "w", "--user", "bob")["key_tail"] == "bbbb"


def test_an_id_beginning_shared_by_several_instances_is_ambiguous(expediter: Run) -> None:
    ids = [add(expediter, "weather", "--name", f"w{n}", "--secret", "api_key=k") for n in range(17)]
    first = next(i[0] for i in ids if sum(other[0] == i[0] for other in ids) > 1)
    code, _, err = expediter("call", first, "forecast", "--args", '{"city": "x"}')
    assert code == 2
    assert f"tool instances have ids beginning '{first}'" in err


def test_tools_show_accepts_an_instance_id(expediter: Run) -> None:
    instance_id = add(expediter, "weather", "--name", "w", "--secret", "api_key=sk-show-0000")
    code, text, _ = expediter("tools", "show", instance_id)
    assert code == 0
    assert text.splitlines()[0] == f"instance w ({instance_id}): shared, enabled"
    assert "forecast: Forecast." in text
    assert "api_key: string, required, secret" in text
    code, out, _ = expediter("tools", "show", instance_id, "--json")
    data = json.loads(out)
    assert data["name"] == "weather"
    assert data["instance"]["id"] == instance_id
    assert data["instance"]["config"] == {"api_key": "***"}
    assert "sk-show" not in text + out
    code, _, err = expediter("tools", "show", str(uuid.uuid4()))
    assert code == 2
    assert "no tool named" in err
    for spelling in ("w", instance_id[:6]):
        code, text, _ = expediter("tools", "show", spelling)
        assert code == 0
        assert text.splitlines()[0] == f"instance w ({instance_id}): shared, enabled"


# -- no secret leaks ------------------------------------------------------------------------------


def test_secrets_appear_in_no_output_log_or_database_file(
    expediter: Run,
    tools_dir: Path,
    expediter_home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secrets = ("sk-HUNT-alpha-7f3e9c1d2b6a", "sk-HUNT-bravo-0a8b6e4f5c3d")
    seen: list[str] = []

    def run(*args: str, stdin: str | None = None) -> str:
        code, out, err = expediter(*args, stdin=stdin)
        assert code == 0, err
        seen.extend((out, err))
        return out

    first = run(
        "instances", "add", "weather", "--name", "a", "--secret", "api_key=-",
        stdin=secrets[0] + "\n",
    ).strip()  # fmt: skip
    second = run(
        "instances", "add", "weather", "--name", "b", "--user", "bob",
        "--config", json.dumps({"api_key": secrets[1], "units": "metric"}), "--json",
    )  # fmt: skip
    second = json.loads(second)["id"]
    for instance_id in (first, second):
        run("call", instance_id, "forecast", "--args", '{"city": "x"}')
        run("call", instance_id, "forecast", "--args", '{"city": "x"}', "--json")
        run("instances", "show", instance_id)
        run("instances", "show", instance_id, "--json")
        run("tools", "show", instance_id, "--json")
    run("instances", "set", second, "--config", '{"units": "imperial"}')
    run("instances", "ls")
    run("instances", "ls", "--json")
    run("keys", "rotate")
    keys = [row["key"] for row in json.loads(run("ledger", "ls", "--json"))]
    assert len(keys) == 4
    for call_key in keys:
        run("ledger", "show", call_key)
        run("ledger", "show", call_key, "--json")

    # The console script at -vv: every log record on standard error.
    capsys.readouterr()
    for args in (
        ["instances", "add", "weather", "--name", "c", "--secret", f"api_key={secrets[0]}"],
        ["call", first, "forecast", "--args", '{"city": "z"}'],
        ["call", second, "forecast", "--args", '{"city": "z"}'],
        ["instances", "ls", "--json"],
        ["keys", "rotate"],
    ):
        with pytest.raises(SystemExit) as exited:
            main(["-vv", "--tools-dir", str(tools_dir), *args])
        assert exited.value.code in (0, None)
    logged = capsys.readouterr()
    assert "DEBUG" in logged.err
    seen.extend((logged.out, logged.err))

    printed = "\n".join(seen)
    files = [path for path in expediter_home.rglob("*") if path.is_file()]
    assert expediter_home / "expediter.db" in files
    stored = b"".join(path.read_bytes() for path in files)
    assert first.encode() in stored  # the files read are the ones the commands wrote
    for secret in secrets:
        assert secret not in printed
        assert secret.encode() not in stored
