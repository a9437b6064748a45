"""``expediter parse``: read a saved model response into the tool calls it makes."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from expediter.cli import CliState, pass_state
from expediter.cli.output import echo_json, echo_table, event_text, shorten
from expediter.cli.tools import PROVIDER_NAMES

__all__ = ["approvals", "approve", "deny", "parse", "read_response", "run"]


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


_provider_option = click.option(
    "--provider", required=True, type=click.Choice(PROVIDER_NAMES), help="Who wrote the response."
)
_response_option = click.option(
    "--response",
    "response_path",
    required=True,
    metavar="FILE",
    help="The saved response as JSON ('-' reads standard input).",
)


@click.command()
@_provider_option
@_response_option
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


def _print_events(events: list[Any], as_json: bool) -> None:
    if as_json:
        for event in events:
            click.echo(json.dumps(event.to_dict(), ensure_ascii=False))
        return
    echo_table(
        ["STATUS", "CALL ID", "NAME", "TOOL", "ACTION", "MS", "RESULT / ERROR"],
        [
            [
                event.status,
                event.call_id,
                event.name,
                event.tool or "-",
                event.action or "-",
                "" if event.duration_ms is None else f"{event.duration_ms:.1f}",
                event_text(event, 60),
            ]
            for event in events
        ],
    )


@click.command()
@_provider_option
@_response_option
@click.option("--user", "user_id", default=None, help="Run on behalf of this user id.")
@click.option("--message-id", default=None, help="The assistant message's id (keys the ledger).")
@click.option("--run-id", default=None, help="The run's id, for calls outside a conversation.")
@click.option(
    "--headless", is_flag=True, help="No human to ask: calls needing approval are denied."
)
@click.option(
    "--allow",
    "allowlist",
    multiple=True,
    metavar="INSTANCE_OR_TOOL",
    help="In a headless run, let this instance (or tool) run without approval; repeatable.",
)
@click.option("--messages", is_flag=True, help="Print the provider's result messages instead.")
@click.option("--json", "as_json", is_flag=True, help="One JSON event per line.")
@pass_state
def run(
    state: CliState,
    provider: str,
    response_path: str,
    user_id: str | None,
    message_id: str | None,
    run_id: str | None,
    headless: bool,
    allowlist: tuple[str, ...],
    messages: bool,
    as_json: bool,
) -> None:
    """Run the tool calls of a saved model response through the host.

    Prints one event per call (completed, error, denied, awaiting_approval or
    requires_client_execution); with --messages, the messages that give the results back to
    the model instead.
    """
    response = read_response(response_path)
    toolset = state.host().toolset(user_id=user_id, headless=headless, allowlist=allowlist)
    calls = toolset.parse_calls(provider, response)
    events = list(toolset.run(calls, message_id=message_id, run_id=run_id))
    if messages:
        echo_json(toolset.result_messages(provider, calls, events))
        return
    _print_events(events, as_json)


@click.group()
def approvals() -> None:
    """Calls waiting for a human's decision."""


@approvals.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def list_approvals(state: CliState, as_json: bool) -> None:
    """List the calls waiting for approval, oldest first."""
    from expediter.core.ledger.records import iso
    from expediter.errors import LedgerError

    try:
        rows = state.ledger().pending_approvals()
    except LedgerError as exc:
        raise click.ClickException(str(exc)) from exc
    items = [
        {
            "key": row.key,
            "call_id": row.call_id,
            "user_id": row.user_id,
            "tool": row.tool,
            "action": row.action,
            "arguments": row.arguments,
            "requested_at": iso(row.updated_at),
            "reason": row.request.get("reason") if isinstance(row.request, dict) else None,
        }
        for row in rows
    ]
    if as_json:
        echo_json(items)
        return
    echo_table(
        ["KEY", "USER", "TOOL", "ACTION", "REQUESTED", "ARGUMENTS"],
        [
            [
                item["key"],
                item["user_id"] or "-",
                item["tool"] or "-",
                item["action"] or "-",
                (item["requested_at"] or "")[:19],
                shorten(json.dumps(item["arguments"]), 50),
            ]
            for item in items
        ],
    )


def _decide(state: CliState, key: str, approved: bool, reason: str | None, as_json: bool) -> None:
    import getpass

    from expediter.errors import ExpediterError

    try:
        event = state.host().resume(key, approved, approver=getpass.getuser(), reason=reason)
    except ExpediterError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        echo_json(event.to_dict())
    else:
        _print_events([event], as_json=False)
    sys.exit(0 if event.status in ("completed", "denied") else 1)


@click.command()
@click.argument("key")
@click.option("--reason", default=None, help="Why (recorded with the decision).")
@click.option("--json", "as_json", is_flag=True, help="Print the call's final event as JSON.")
@pass_state
def approve(state: CliState, key: str, reason: str | None, as_json: bool) -> None:
    """Approve a waiting call and run it now (from any machine sharing the ledger)."""
    _decide(state, key, True, reason, as_json)


@click.command()
@click.argument("key")
@click.option("--reason", default=None, help="Why (the model is told).")
@click.option("--json", "as_json", is_flag=True, help="Print the denied event as JSON.")
@pass_state
def deny(state: CliState, key: str, reason: str | None, as_json: bool) -> None:
    """Deny a waiting call; the model is told it was denied and why."""
    _decide(state, key, False, reason, as_json)
