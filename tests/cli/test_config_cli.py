"""The CLI reads the same ``HostConfig`` as ``Host()``: the ledger, the approval expiry."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import expediter
from expediter.cli import cli
from expediter.core.host import Host


@expediter.tool(require_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def test_ledger_sweep_abandons_approvals_older_than_the_configured_expiry(
    monkeypatch, expediter_home
) -> None:
    with Host(plugins=[refund], builtins=False) as host:
        toolset = host.toolset()
        call = expediter.ToolCall("c1", "refund", {"order": "A1"}, "refund", "refund", "refund")
        (paused,) = toolset.run([call], message_id="m-expiry")
    assert paused.status == "awaiting_approval"
    runner = CliRunner()
    kept = runner.invoke(cli, ["ledger", "sweep", "--json"])
    assert kept.exit_code == 0, kept.output
    assert paused.key not in kept.output  # a day has not passed
    monkeypatch.setenv("EXPEDITER_APPROVAL_SECONDS", "0.001")
    swept = runner.invoke(cli, ["ledger", "sweep", "--json"])
    assert swept.exit_code == 0, swept.output
    assert paused.key in swept.output


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("EXPEDITER_LEASE_SECONDS", "abc", "EXPEDITER_LEASE_SECONDS must be a number of seconds"),
        ("EXPEDITER_CALL_TIMEOUT", "-1", "EXPEDITER_CALL_TIMEOUT must be a finite number"),
        ("EXPEDITER_APPROVAL_SECONDS", "inf", "EXPEDITER_APPROVAL_SECONDS must be a finite"),
        ("EXPEDITER_EGRESS_ALLOW", "nope", "EXPEDITER_EGRESS_ALLOW: 'nope' is not an IP range"),
    ],
)
@pytest.mark.parametrize("args", [["tools", "list"], ["--tools-dir", ".", "ledger", "ls"]])
def test_a_bad_environment_value_is_one_error_line_and_exit_1(
    expediter_home: Path, variable: str, value: str, message: str, args: list[str]
) -> None:
    result = CliRunner().invoke(cli, args, prog_name="expediter", env={variable: value})
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"Error: {result.stderr[7:].strip()}"]
    assert message in result.stderr
    assert "Usage:" not in result.stderr


@pytest.mark.parametrize(
    "command",
    [["ledger", "ls"], ["call", "think", "think", "--args", '{"thought": "x"}'], ["db", "upgrade"]],
)
def test_a_mistyped_sqlite_path_is_an_error_not_a_new_empty_ledger(
    tmp_path: Path, expediter_home: Path, command: list[str]
) -> None:
    missing = tmp_path / "no-such-folder" / "deeper"
    url = f"sqlite:///{missing / 'expediter.db'}"
    result = CliRunner().invoke(cli, ["--database", url, *command], prog_name="expediter")
    assert result.exit_code == 1, result.output
    assert f"is in a folder that does not exist ({missing})" in result.stderr
    assert not missing.parent.exists()


def test_the_default_ledger_still_makes_its_data_directory(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "new" / "home"
    monkeypatch.setenv("EXPEDITER_HOME", str(home))
    result = CliRunner().invoke(cli, ["ledger", "ls"], prog_name="expediter")
    assert result.exit_code == 0, result.output
    assert (home / "expediter.db").exists()
