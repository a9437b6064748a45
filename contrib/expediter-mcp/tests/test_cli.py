"""``expediter mcp add`` and ``expediter mcp tools``, and ``expediter call`` on an mcp
instance, through the real command line (the pack installed, its commands found as any
pack's are), each test in its own EXPEDITER_HOME."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from servers import ADD

import expediter
from expediter.cli import cli
from expediter.core.instances.keys import generate_key

Run = Callable[..., Result]


@pytest.fixture
def run(expediter_home: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    """Run ``expediter ARGS...`` with a fresh home and master key; no traceback allowed."""
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    monkeypatch.setenv("EXPEDITER_LOAD_PLUGINS", "mcp")

    def invoke(*args: str, input: str | None = None) -> Result:
        result = CliRunner().invoke(cli, list(args), input=input)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            result.exception
        )
        assert "Traceback" not in result.output
        return result

    return invoke


def _secrets(instance_id: str) -> dict[str, Any]:
    with expediter.Host() as host:
        return dict(host.instances.get(instance_id, decrypt=True).secrets or {})


def test_add_stores_an_mcp_instance_and_prints_its_id(run: Run, token_server: Any) -> None:
    result = run(
        "mcp",
        "add",
        token_server.url,
        "--name",
        "docs",
        "--auth",
        "bearer",
        "--secret",
        "token=token-ann",
        "--allow-network",
        "127.0.0.1",
    )
    assert result.exit_code == 0, result.output
    instance_id = result.stdout.strip()
    listed = json.loads(run("instances", "ls", "--json").stdout)
    (record,) = listed
    assert (record["id"], record["name"], record["tool"]) == (instance_id, "docs", "mcp")
    assert record["config"]["token"] == "***"
    assert record["config"]["allow_networks"] == ["127.0.0.1/32"]
    assert _secrets(instance_id) == {"token": "token-ann"}
    assert "token-ann" not in result.output


def test_tools_lists_the_names_call_takes(run: Run, token_server: Any) -> None:
    added = run(
        "mcp",
        "add",
        token_server.url,
        "--name",
        "docs",
        "--auth",
        "bearer",
        "--secret",
        "token=token-bob",
        "--allow-network",
        "127.0.0.0/8",
    )
    instance_id = added.stdout.strip()
    tools = run("mcp", "tools", instance_id, "--json")
    assert tools.exit_code == 0, tools.output
    names = {item["name"]: item["mcp_name"] for item in json.loads(tools.stdout)}
    assert names[ADD] == "math.add"
    table = run("mcp", "tools", instance_id)
    assert ADD in table.stdout
    assert "math.add" in table.stdout
    called = run("call", instance_id, "whoami", "--json")
    assert called.exit_code == 0, called.output
    assert json.loads(called.stdout)["result"]["structured_content"]["client"] == "bob"
    failed = run("call", instance_id, "fail", "--args", '{"message": "nope"}', "--json")
    assert failed.exit_code == 1
    assert json.loads(failed.stdout)["status"] == "error"


def test_tools_says_why_the_guard_refused(run: Run, http_server: Any) -> None:
    instance_id = run("mcp", "add", http_server.url, "--name", "local").stdout.strip()
    result = run("mcp", "tools", instance_id)
    assert result.exit_code == 1
    assert "egress guard refused" in result.stderr
    assert "127.0.0.1" in result.stderr
    assert "--allow-network" in result.stderr


def test_add_refuses_what_it_cannot_store(run: Run) -> None:
    not_url = run("mcp", "add", "ftp://host/x", "--name", "x")
    assert not_url.exit_code == 2
    assert "not an http or https URL" in not_url.stderr
    bad_secret = run("mcp", "add", "https://h.example/mcp", "--name", "x", "--secret", "tokn=1")
    assert bad_secret.exit_code == 2
    assert "no secret field tokn" in bad_secret.stderr
    bad_net = run("mcp", "add", "https://h.example/mcp", "--name", "x", "--allow-network", "x")
    assert bad_net.exit_code == 2


def test_add_stdio_splits_the_command_line(run: Run) -> None:
    result = run(
        "mcp",
        "add",
        "mcp-server-time --local-timezone UTC",
        "--transport",
        "stdio",
        "--name",
        "time",
        "--json",
    )
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)["config"]
    assert (config["command"], config["args"]) == ("mcp-server-time", ["--local-timezone", "UTC"])


def test_login_refuses_an_instance_without_oauth(run: Run) -> None:
    instance_id = run("mcp", "add", "https://h.example/mcp", "--name", "x").stdout.strip()
    result = run("mcp", "login", instance_id)
    assert result.exit_code == 2
    assert "does not use OAuth" in result.stderr


def test_tools_needs_no_key_for_an_instance_without_secrets(
    expediter_home: Path, monkeypatch: pytest.MonkeyPatch, http_server: Any
) -> None:
    monkeypatch.delenv("EXPEDITER_SECRET_KEYS", raising=False)
    monkeypatch.setenv("EXPEDITER_LOAD_PLUGINS", "mcp")
    runner = CliRunner()
    added = runner.invoke(
        cli, ["mcp", "add", http_server.url, "--name", "open", "--allow-network", "127.0.0.1"]
    )
    assert added.exit_code == 0, added.output
    listed = runner.invoke(cli, ["mcp", "tools", added.stdout.strip()])
    assert listed.exit_code == 0, listed.output
    assert "whoami" in listed.stdout


# --- a server URL the egress guard refuses -------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "kind", "option"),
    [
        ("http://127.0.0.1:9/mcp", "(loopback)", "--allow-network 127.0.0.1/32"),
        ("http://192.168.1.20:8000/mcp", "(private network)", "--allow-network 192.168.1.20/32"),
        ("http://[fe80::1]/mcp", "(link-local)", "--allow-network fe80::1/128"),
        ("http://localhost:9/mcp", "(loopback)", "--allow-network 127.0.0.1/32 --allow-network"),
    ],
)
def test_add_warns_about_a_refused_url_and_stores_it(
    run: Run, url: str, kind: str, option: str
) -> None:
    result = run("mcp", "add", url, "--name", "local")
    assert result.exit_code == 0, result.output
    (warning,) = result.stderr.splitlines()
    assert warning.startswith("warning: the server URL names ")
    assert kind in warning
    assert f"`{option}" in warning
    (record,) = json.loads(run("instances", "ls", "--json").stdout)
    assert record["id"] == result.stdout.strip()


@pytest.mark.parametrize(
    "extra",
    [
        ["--allow-network", "127.0.0.1"],
        ["--transport", "stdio"],  # a command line, not a URL
    ],
)
def test_add_does_not_warn_when_nothing_is_refused(run: Run, extra: list[str]) -> None:
    url = "http://127.0.0.1:9/mcp" if "stdio" not in extra else "mcp-server-time"
    result = run("mcp", "add", url, "--name", "local", *extra)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_add_resolves_no_name(run: Run) -> None:
    # The test net fails a real lookup: a name is judged when it is dialed, not here.
    result = run("mcp", "add", "https://mcp.internal.test/mcp", "--name", "remote")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_a_refused_call_keeps_the_models_text_and_gives_the_ledger_the_hint(
    run: Run, http_server: Any
) -> None:
    instance_id = run("mcp", "add", http_server.url, "--name", "local").stdout.strip()
    called = run("call", instance_id, "whoami", "--json")
    assert called.exit_code == 1
    event = json.loads(called.stdout)
    assert (event["error_type"], event["error"]) == ("EgressBlocked", "blocked by egress policy")
    row = json.loads(run("ledger", "show", event["key"], "--json").stdout)
    assert row["error"].startswith("blocked by egress policy: 127.0.0.1 is in 127.0.0.0/8")
    assert "`--allow-network 127.0.0.1/32`" in row["error"]
    assert "EXPEDITER_EGRESS_ALLOW=127.0.0.1/32" in row["error"]


def test_tools_names_the_range_to_allow(run: Run, http_server: Any) -> None:
    instance_id = run("mcp", "add", http_server.url, "--name", "local").stdout.strip()
    result = run("mcp", "tools", instance_id)
    assert result.exit_code == 1
    assert "`--allow-network 127.0.0.1/32`" in result.stderr


# --- tools list / tools show of mcp instances ---------------------------------------------------


class _Silent:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.held: list[Any] = []
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        for connection in self.held:
            connection.close()


def test_tools_show_and_list_give_an_mcp_instances_tools(run: Run, http_server: Any) -> None:
    added = run("mcp", "add", http_server.url, "--name", "srv", "--allow-network", "127.0.0.1")
    instance_id = added.stdout.strip()
    shown = run("tools", "show", instance_id)
    assert shown.exit_code == 0, shown.output
    assert f"{ADD}: Add two numbers." in shown.stdout
    assert "a: integer (required)" in shown.stdout
    data = json.loads(run("tools", "show", instance_id, "--json").stdout)
    assert {ADD, "whoami", "sleep"} <= {action["name"] for action in data["actions"]}
    rows = json.loads(run("tools", "list", "--json").stdout)
    (row,) = [row for row in rows if row.get("instance_id") == instance_id]
    assert {ADD, "whoami", "sleep"} <= set(row["actions"])
    assert (row["name"], row["tool"], row["source"], row["error"]) == (
        "srv",
        "mcp",
        "instance",
        None,
    )


def test_an_unreachable_server_is_that_instances_error(run: Run, http_server: Any) -> None:
    import time

    silent = _Silent()
    try:
        closed = run(
            "mcp",
            "add",
            "http://127.0.0.1:9/mcp",
            "--name",
            "gone",
            "--allow-network",
            "127.0.0.1",
        ).stdout.strip()
        mute = run(
            "mcp",
            "add",
            silent.url,
            "--name",
            "mute",
            "--allow-network",
            "127.0.0.1",
            "--config",
            '{"timeout": 1}',
        ).stdout.strip()
        working = run(
            "mcp", "add", http_server.url, "--name", "srv", "--allow-network", "127.0.0.1"
        ).stdout.strip()
        started = time.monotonic()
        listed = run("tools", "list", "--json")
        took = time.monotonic() - started
    finally:
        silent.close()
    assert listed.exit_code == 0, listed.output
    assert took < 15  # the instance's own time limit, not a hang
    rows = {row.get("instance_id"): row for row in json.loads(listed.stdout)}
    assert rows[closed]["actions"] == []
    assert "failed to connect" in rows[closed]["error"]
    assert rows[mute]["actions"] == []
    assert "did not answer within 1 s" in rows[mute]["error"]
    assert "whoami" in rows[working]["actions"]
    shown = run("tools", "show", closed)
    assert shown.exit_code == 0
    assert "its actions cannot be listed: " in shown.stdout
