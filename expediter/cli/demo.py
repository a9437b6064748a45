"""``expediter demo``: a short scripted run through the host, printing what happens."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

import click

from expediter.cli import CliState, pass_state
from expediter.cli.call import exit_code
from expediter.cli.output import echo_table, event_text, shorten

__all__ = ["demo"]


def _demo_plugins() -> list[object]:
    """Tools and a policy that exist only in the demo."""
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

    @expediter.tool(require_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file (a demo: nothing is deleted). A human must approve each call.

        Args:
            path: The file to delete.
        """
        return f"deleted {path}"

    @expediter.tool
    def send_email(to: str, body: str) -> str:
        """Send an email (a demo: nothing is sent).

        Args:
            to: The recipient's address.
            body: The message.
        """
        return f"sent to {to}"

    class ExternalMail:
        """A host policy: no email leaves example.com."""

        @expediter.hookimpl
        def tool_call_policy(self, call: Any, action: Any, context: Any) -> Any:
            to = str(call.arguments.get("to", ""))
            if call.tool == "send_email" and not to.endswith("@example.com"):
                return expediter.Decision.denied(f"{to} is outside example.com")
            return None

    return [flaky, delete_file, send_email, ExternalMail()]


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


def _scripted_reply(stamp: str) -> dict[str, Any]:
    """An OpenAI Chat Completions reply with parallel calls (and one invented name)."""

    def call(index: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"call_{stamp}_{index}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }

    return {
        "id": f"chatcmpl-{stamp}",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        call(1, "now", {"timezone": "Asia/Tokyo"}),
                        call(2, "delete_file", {"path": "/tmp/report-draft.txt"}),
                        call(3, "send_email", {"to": "bob@elsewhere.org", "body": "hi"}),
                        call(4, "flaky", {}),
                        call(5, "clock_now", {}),
                    ],
                },
            }
        ],
    }


def _event_rows(events: list[Any]) -> list[list[str]]:
    return [
        [
            event.status,
            event.name,
            event_text(event, 64),
        ]
        for event in events
    ]


def _show_turn(state: CliState) -> None:
    host = state.host()
    toolset = host.toolset(user_id="demo-user")
    stamp = f"{time.time_ns():x}"
    message_id = f"msg_{stamp}"
    click.secho("\nOne model turn, with approvals and a policy:", bold=True)
    click.secho("$ expediter tools schema --provider openai", bold=True)
    click.echo(
        "offered: " + ", ".join(tool["function"]["name"] for tool in toolset.schemas("openai"))
    )
    reply = _scripted_reply(stamp)
    calls = toolset.parse_calls("openai", reply)
    click.secho(f"$ expediter run --provider openai --message-id {message_id} ...", bold=True)
    logging.getLogger("expediter.core.calls.executor").disabled = True
    try:
        events = list(toolset.run(calls, message_id=message_id))
    finally:
        logging.getLogger("expediter.core.calls.executor").disabled = False
    echo_table(["STATUS", "NAME", "RESULT / ERROR / REASON"], _event_rows(events))
    waiting = [event for event in events if event.status == "awaiting_approval"]
    if waiting and host.record_calls:
        click.secho("\n$ expediter approvals ls", bold=True)
        for row in host.ledger.pending_approvals():
            if row.key in {event.key for event in waiting}:
                click.echo(f"{row.key}  {row.tool}.{row.action}  {json.dumps(row.arguments)}")
        for event in waiting:
            click.secho(f"$ expediter approve {event.key} --reason 'draft, safe'", bold=True)
            resumed = host.resume(event.key, True, approver="demo", reason="draft, safe")
            echo_table(["STATUS", "NAME", "RESULT"], _event_rows([resumed]))
            events = [resumed if e.key == event.key else e for e in events]
    click.echo("\nresults sent back to the model (role: tool messages):")
    for message in toolset.result_messages("openai", calls, events):
        click.echo(f"  {message['tool_call_id']}: {shorten(message['content'], 70)}")


def _show_ledger(state: CliState, started: float) -> None:
    host = state.host()
    if not host.record_calls:
        return
    since = time.time() - started + 1
    rows = [row for row in host.ledger.rows(since=since, limit=0) if row.attempted_at >= started]
    click.secho("\nEvery call above is in the ledger:", bold=True)
    click.secho("$ expediter ledger ls --since 1m", bold=True)
    echo_table(
        ["STATUS", "TOOL", "ACTION", "DECISION", "MS", "ERROR"],
        [
            [
                row.status,
                row.tool or "-",
                row.action or "-",
                row.decision or "",
                "" if row.duration_ms is None else f"{row.duration_ms:.1f}",
                shorten(row.error or "", 50),
            ]
            for row in reversed(rows)
        ],
    )
    click.echo(f"(database: {host.ledger.database.display})")


@click.command()
@pass_state
def demo(state: CliState) -> None:
    """List the built-in tools, call them, and run a model turn with approvals."""
    host = state.host(plugins=_demo_plugins())
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
    home = os.environ.get("EXPEDITER_HOME")
    click.echo(
        "\nNext: `expediter tools schema --provider gemini`, `expediter approvals ls`, "
        "`expediter ledger ls`" + (f" (EXPEDITER_HOME={home})" if home else "") + "."
    )
