"""The CLI reads the same ``HostConfig`` as ``Host()``: the ledger, the approval expiry."""

from __future__ import annotations

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
