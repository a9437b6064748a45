"""``expediter demo``: a short scripted run through the host, printing what happens."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from expediter.cli.app import CliState, error_line, pass_state
from expediter.cli.call import exit_code, print_outcome
from expediter.cli.ledger import print_rows
from expediter.cli.output import escape, shorten, warn
from expediter.cli.tools import print_tools
from expediter.cli.turns import approval_items, print_approvals, print_events

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


@contextlib.contextmanager
def _tracebacks_hidden() -> Iterator[None]:
    """Keep the executor's traceback of a crashing tool out of the transcript."""
    from expediter.core.calls import executor

    log = logging.getLogger(executor.__name__)
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = False


def _show_call(state: CliState, tool: str, action: str, arguments: dict[str, Any]) -> None:
    click.secho(
        f"\n$ expediter call {tool} {action} --args '{json.dumps(arguments)}'; echo $?", bold=True
    )
    with _tracebacks_hidden():
        event = state.host().call(tool, action, arguments)
    print_outcome(event, err=False)
    click.echo(exit_code(event.status, event.error_type))


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


def _stream_capture(reply: dict[str, Any]) -> str:
    """The reply as OpenAI would have streamed it (``stream=True``), as server-sent events saved
    from the wire: a role chunk, each call's name then its arguments in two pieces, the finish
    reason, ``[DONE]``."""
    (choice,) = reply["choices"]

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
        body = {
            "id": reply["id"],
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        return f"data: {json.dumps(body)}\n\n"

    events = [chunk({"role": "assistant", "content": None})]
    for index, call in enumerate(choice["message"]["tool_calls"]):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        for piece in (arguments[:half], arguments[half:]):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    events.append(chunk({}, choice["finish_reason"]))
    return "".join(events) + "data: [DONE]\n\n"


def _shown_path(path: Path) -> str:
    """``path`` as a reader in the current directory can type it on a command line."""
    try:
        path = path.relative_to(Path.cwd())
    except (OSError, ValueError):  # elsewhere (or no current directory): as it is
        pass
    return escape(shlex.quote(str(path)))


def _save_reply(state: CliState, reply: dict[str, Any]) -> Path | None:
    """Write the model's reply to ``EXPEDITER_HOME/demo/``: ``reply.json`` as the API returns it
    and ``reply.sse`` as its stream would have come; None (and a warning) when that fails."""
    folder = state.config.home / "demo"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "reply.json").write_text(json.dumps(reply, indent=2) + "\n", encoding="utf-8")
        (folder / "reply.sse").write_text(_stream_capture(reply), encoding="utf-8")
    except OSError as exc:
        warn(f"the demo's reply files could not be saved in {folder}: {exc}")
        return None
    return folder


def _show_turn(state: CliState) -> Path | None:
    host = state.host()
    toolset = host.toolset(user_id="demo-user")
    stamp = f"{time.time_ns():x}"
    click.secho("\nOne model turn, with approvals and a policy.", bold=True)
    offered = ", ".join(tool["function"]["name"] for tool in toolset.schemas("openai"))
    click.echo(f"The model is offered {offered} (`expediter tools schema` prints them)")
    reply = _scripted_reply(stamp)
    folder = _save_reply(state, reply)
    saved = "reply.json" if folder is None else _shown_path(folder / "reply.json")
    click.echo(
        f"and answers with five calls (an OpenAI reply, one name made up), saved as {saved}:"
    )
    calls = toolset.parse_calls("openai", reply)
    # Keyed by the reply's own id, as `run` keys a saved reply without --message-id.
    message_id = toolset.message_id("openai", reply)
    click.secho(f"\n$ expediter run --provider openai --response {saved}", bold=True)
    with _tracebacks_hidden():
        events = list(toolset.run(calls, message_id=message_id))
    print_events(events)
    waiting = [event for event in events if event.status == "awaiting_approval"]
    if waiting and host.record_calls:
        keys = {event.key for event in waiting}
        click.secho("\n$ expediter approvals ls", bold=True)
        print_approvals(
            [
                item
                for item in approval_items(host.ledger.pending_approvals())
                if item["key"] in keys
            ]
        )
        for event in waiting:
            click.secho(f"\n$ expediter approve {event.key} --reason 'draft, safe'", bold=True)
            resumed = host.resume(event.key, True, approver="demo", reason="draft, safe")
            print_events([resumed])
            events = [resumed if e.key == event.key else e for e in events]
    click.echo("\nThe results go back to the model (`run --messages` prints these):")
    for message in toolset.result_messages("openai", calls, events):
        click.echo(f"  {message['tool_call_id']}: {shorten(message['content'], 70)}")
    return folder


def _show_ledger(state: CliState) -> None:
    host = state.host()
    if not host.record_calls:
        return
    from expediter.core.ledger import parse_duration

    click.secho(f"\nEvery call above is in the ledger ({host.ledger.database.display}):", bold=True)
    click.secho("$ expediter ledger ls --since 1m", bold=True)
    print_rows(host.ledger.rows(since=parse_duration("1m")))


def _check_ledger(state: CliState) -> None:
    """Stop at once, in one line, when the ledger the demo records its calls in is unusable."""
    from expediter.errors import LedgerError

    host = state.host()
    if not host.record_calls:
        return
    try:
        host.ledger.check()
    except LedgerError as exc:
        raise click.ClickException(
            f"{error_line(exc)} (the demo records its calls there: set EXPEDITER_HOME to a "
            "writable directory, or --database to a reachable database)"
        ) from exc


@click.command()
@pass_state
def demo(state: CliState) -> None:
    """List the built-in tools, call them, and run a model turn with approvals.

    Each `$ expediter ...` line is followed by what that command prints; the demo's host also
    offers three tools of its own (delete_file, flaky, send_email) and an email policy. The
    model's reply is left in EXPEDITER_HOME/demo/ (reply.json, and reply.sse as a stream).
    """
    host = state.host(plugins=_demo_plugins())
    _check_ledger(state)
    click.secho(
        "expediter demo: tools are discovered, listed and called through the host.", bold=True
    )
    click.secho("\n$ expediter tools list", bold=True)
    print_tools(host.catalogue())
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
    click.secho(
        "\nA wrong argument type is refused before the tool runs (exit status 2):", bold=True
    )
    _show_call(state, "clock", "now", {"timezone": 42})
    click.secho("\nA tool's own error (ToolError) reaches the model as an error result:", bold=True)
    _show_call(state, "clock", "now", {"timezone": "Mars/Olympus_Mons"})
    click.secho(
        "\nA tool that raises becomes an error result (the host logs the traceback on "
        "standard error, left out here):",
        bold=True,
    )
    _show_call(state, "flaky", "flaky", {})
    folder = _show_turn(state)
    _show_ledger(state)
    if folder is not None:
        stream, saved = _shown_path(folder / "reply.sse"), _shown_path(folder / "reply.json")
        click.echo(
            f"\nThe model's reply is saved in {_shown_path(folder)}: reply.json, and reply.sse, "
            f"the same reply as a stream. `expediter parse --stream {stream}` reads it; with this "
            f"EXPEDITER_HOME, `expediter run --response {saved}` runs none of its calls twice "
            "(the demo's own three tools are unknown names outside it)."
        )
    home = os.environ.get("EXPEDITER_HOME")
    click.echo(
        "\nNext: `expediter tools schema --provider gemini`, `expediter approvals ls`, "
        "`expediter ledger ls`" + (f" (EXPEDITER_HOME={escape(home)})" if home else "") + "."
    )
