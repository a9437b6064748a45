"""``expediter call TOOL ACTION``: run one action by hand."""

from __future__ import annotations

import sys
from typing import Any

import click

from expediter.cli.app import CliState, pass_state
from expediter.cli.output import dump_json, echo_json, escape
from expediter.cli.targets import TOOL_OR_INSTANCE, USER_ID, check_configured, tool_target
from expediter.core.records.jsonread import read_json

__all__ = ["USAGE_ERRORS", "call", "exit_code", "print_outcome"]

#: Error types that mean the call itself was wrong (exit status 2), not the tool.
USAGE_ERRORS = frozenset({"ArgumentError", "ToolNotFound", "ToolConflict", "ActionNotFound"})


def exit_code(status: str, error_type: str | None) -> int:
    """0 for a completed call, 2 for bad usage or bad arguments, 1 for any other error."""
    if status == "completed":
        return 0
    return 2 if error_type in USAGE_ERRORS else 1


@click.command()
@click.argument("tool", type=TOOL_OR_INSTANCE)
@click.argument("action")
@click.option(
    "--args",
    "args_json",
    default="{}",
    metavar="JSON",
    help="The arguments as a JSON object (default: {}).",
)
@click.option(
    "--user", "user_id", type=USER_ID, default=None, help="Call on behalf of this user id."
)
@click.option("--json", "as_json", is_flag=True, help="Print the call's event as JSON.")
@pass_state
def call(
    state: CliState, tool: str, action: str, args_json: str, user_id: str | None, as_json: bool
) -> None:
    """Run one action of a tool through the host and print the result.

    TOOL is a tool's name, or a stored instance's id, its name or a unique beginning of its
    id (`instances ls` shows them).

    Exit status: 0 when the call completed, 1 when it ended in an error result,
    2 for bad usage or bad arguments.
    """
    try:
        arguments = read_json(args_json)
    except ValueError as exc:
        raise click.UsageError(f"--args {exc}") from None
    if not isinstance(arguments, dict):
        raise click.UsageError(f"--args must be a JSON object, not {type(arguments).__name__}")
    host = state.host()
    target = tool_target(host, tool, user_id)
    check_configured(host, target)
    event = host.call(target, action, arguments, user_id=user_id)
    if as_json:
        echo_json(event.to_dict())
    else:
        print_outcome(event)
    sys.exit(exit_code(event.status, event.error_type))


def print_outcome(event: Any, *, err: bool = True) -> None:
    """What ``call`` prints: the result (a string as is, else indented JSON), or
    ``error (TYPE): message`` (on standard error unless ``err`` is False)."""
    if event.ok:
        result = event.result
        click.echo(
            escape(result, keep_newlines=True)
            if isinstance(result, str)
            else dump_json(result, indent=2)
        )
    else:
        click.echo(escape(f"error ({event.error_type}): {event.error}"), err=err)
