"""``expediter demo``: a short scripted run through the host, printing what happens."""

from __future__ import annotations

import json
import logging
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


@click.command()
@pass_state
def demo(state: CliState) -> None:
    """List the built-in tools and call them through the host."""
    host = state.host(plugins=[_flaky_tool()])
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
    click.echo(
        "\nNext: `expediter tools show clock`, `expediter plugins`, "
        '`expediter call clock now --args \'{"timezone": "UTC"}\' --json`.'
    )
