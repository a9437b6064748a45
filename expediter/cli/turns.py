"""``expediter parse``: read a saved model response into the tool calls it makes."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from expediter.cli import CliState, pass_state
from expediter.cli.output import echo_json, echo_table, shorten
from expediter.cli.tools import PROVIDER_NAMES

__all__ = ["parse", "read_response"]


def read_response(path: str) -> dict[str, Any]:
    """Load a response saved as JSON from a file, or from standard input for ``-``."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as exc:
        raise click.UsageError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise click.UsageError(f"{path} must hold a JSON object (the provider's response)")
    return data


@click.command()
@click.option(
    "--provider", required=True, type=click.Choice(PROVIDER_NAMES), help="Who wrote the response."
)
@click.option(
    "--response",
    "response_path",
    required=True,
    metavar="FILE",
    help="The saved response as JSON ('-' reads standard input).",
)
@click.option("--user", "user_id", default=None, help="Resolve names against this user's tools.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def parse(
    state: CliState, provider: str, response_path: str, user_id: str | None, as_json: bool
) -> None:
    """Show the tool calls in a saved model response, mapped to tools and actions."""
    response = read_response(response_path)
    calls = state.host().toolset(user_id=user_id).parse_calls(provider, response)
    if as_json:
        echo_json([call.to_dict() for call in calls])
        return
    echo_table(
        ["CALL ID", "NAME", "TOOL", "ACTION", "ARGUMENTS", "ERROR"],
        [
            [
                call.call_id,
                call.name,
                call.tool or "-",
                call.action or "-",
                shorten(json.dumps(call.arguments, ensure_ascii=False), 50),
                shorten(call.error or "", 60),
            ]
            for call in calls
        ],
    )
