"""``expediter demo``: a short scripted run through the host, printing what happens."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import click

from expediter.cli import CliState, pass_state
from expediter.cli.call import exit_code
from expediter.cli.output import echo_table

__all__ = ["demo"]


def _flaky_tool() -> object:
    import expediter

    @expediter.tool(name="flaky")
    def flaky(fail: bool = True) -> str:
        """A demo tool that raises, to show that a crash becomes an error result.

        Args:
            fail: Raise an exception instead of answering.
        """
        if fail:
            raise RuntimeError("the upstream service is down")
        return "fine"

    return flaky


def _show_call(state: CliState, tool: str, action: str, arguments: dict[str, Any]) -> None:
    args = json.dumps(arguments)
    click.secho(f"\n$ expediter call {tool} {action} --args '{args}'", bold=True)
    event = state.host().call(tool, action, arguments)
    if event.ok:
        result = event.result
        click.echo(result if isinstance(result, str) else json.dumps(result, indent=2))
    else:
        click.echo(f"error ({event.error_type}): {event.error}")
    code = exit_code(event.status, event.error_type)
    click.echo(f"-> {event.status}, exit status {code}, {event.duration_ms:.2f} ms")


#: A scripted Anthropic reply: text, two parallel calls and one name that was never offered.
_SCRIPTED_REPLY: dict[str, Any] = {
    "id": "msg_demo",
    "type": "message",
    "role": "assistant",
    "stop_reason": "tool_use",
    "content": [
        {"type": "text", "text": "I'll check the time in Tokyo and convert the meeting."},
        {"type": "tool_use", "id": "toolu_01", "name": "now", "input": {"timezone": "Asia/Tokyo"}},
        {
            "type": "tool_use",
            "id": "toolu_02",
            "name": "convert",
            "input": {"time": "09:00", "from_timezone": "Europe/Paris", "to_timezone": "UTC"},
        },
        {"type": "tool_use", "id": "toolu_03", "name": "clock_now", "input": {}},
    ],
}


def _show_turn(state: CliState) -> None:
    host = state.host()
    toolset = host.toolset()
    click.secho("\nOne model turn, Anthropic style:", bold=True)
    click.secho("$ expediter tools schema --provider anthropic", bold=True)
    click.echo("offered: " + ", ".join(tool["name"] for tool in toolset.schemas("anthropic")))
    click.secho("$ expediter parse --provider anthropic --response reply.json", bold=True)
    calls = toolset.parse_calls("anthropic", _SCRIPTED_REPLY)
    echo_table(
        ["CALL ID", "NAME", "TOOL", "ACTION", "ERROR"],
        [[c.call_id, c.name, c.tool or "-", c.action or "-", c.error or ""] for c in calls],
    )
    events = [
        host.call(c.tool, c.action, c.arguments, call_id=c.call_id)
        for c in calls
        if c.tool and c.action and c.error is None
    ]
    click.echo("results sent back (one user message, a tool_result per tool_use id):")
    for message in toolset.result_messages("anthropic", calls, events):
        for block in message["content"]:
            flag = "error" if block["is_error"] else "ok"
            click.echo(f"  {block['tool_use_id']} [{flag}] {block['content'][:70]}")


def _show_ledger(state: CliState, started: float) -> None:
    host = state.host()
    if not host.record_calls:
        return
    since = time.time() - started + 1
    rows = [row for row in host.ledger.rows(since=since, limit=0) if row.attempted_at >= started]
    click.secho("\nEvery call above is in the ledger:", bold=True)
    click.secho("$ expediter ledger ls --since 1m", bold=True)
    echo_table(
        ["STATUS", "TOOL", "ACTION", "MS", "ERROR"],
        [
            [
                row.status,
                row.tool or "-",
                row.action or "-",
                "" if row.duration_ms is None else f"{row.duration_ms:.1f}",
                (row.error or "")[:60],
            ]
            for row in reversed(rows)
        ],
    )
    click.echo(f"(database: {host.ledger.database.display})")


@click.command()
@pass_state
def demo(state: CliState) -> None:
    """List the built-in tools and call them through the host."""
    host = state.host(plugins=[_flaky_tool()])
    started = time.time()
    click.secho(
        "expediter demo: tools are discovered, listed and called through the host.", bold=True
    )
    click.secho("\n$ expediter tools list", bold=True)
    echo_table(
        ["NAME", "ACTIONS", "PACK", "SOURCE"],
        [
            [info.name, ", ".join(info.summary()["actions"]), info.pack, info.source]
            for info in host.catalogue()
        ],
    )
    _show_call(
        state, "think", "think", {"thought": "Convert 09:00 Paris time for the New York team."}
    )
    _show_call(state, "clock", "now", {"timezone": "Asia/Tokyo"})
    _show_call(
        state,
        "clock",
        "convert",
        {"time": "09:00", "from_timezone": "Europe/Paris", "to_timezone": "America/New_York"},
    )
    click.secho("\nA wrong argument type is refused before the tool runs, naming the parameter:")
    _show_call(state, "clock", "now", {"timezone": 42})
    click.secho("\nA tool's own error (ToolError) reaches the model as an error result:")
    _show_call(state, "clock", "now", {"timezone": "Mars/Olympus_Mons"})
    click.secho("\nA tool that raises becomes an error result; the host logs the traceback:")
    logging.getLogger("expediter.core.host").disabled = True
    try:
        _show_call(state, "flaky", "flaky", {})
    finally:
        logging.getLogger("expediter.core.host").disabled = False
    _show_turn(state)
    _show_ledger(state, started)
    click.echo(
        "\nNext: `expediter tools show clock`, `expediter tools schema --provider gemini`, "
        "`expediter plugins`, "
        '`expediter call clock now --args \'{"timezone": "UTC"}\' --json`.'
    )
