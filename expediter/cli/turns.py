"""``expediter parse`` and ``run``: read a saved model response or stream into the tool calls
it makes (and run them); ``approvals``, ``approve`` and ``deny``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

from expediter.cli.app import CliState, pass_state
from expediter.cli.output import (
    echo_json,
    echo_json_line,
    echo_table,
    event_text,
    shorten,
    warn,
)
from expediter.cli.targets import INSTANCE_OR_TOOL, USER_ID
from expediter.cli.tools import provider_choice
from expediter.core.records.jsonread import read_json
from expediter.core.records.statuses import LedgerStatus

__all__ = [
    "approval_items",
    "approvals",
    "approve",
    "deny",
    "parse",
    "print_approvals",
    "print_events",
    "read_response",
    "read_stream",
    "run",
    "run_exit_code",
]

#: Event statuses that make ``expediter run`` exit 1.
_FAILED = frozenset({"error", "denied"})


def run_exit_code(statuses: Iterable[str]) -> int:
    """0 when every call completed or is waiting (for approval, for the client), 1 when any
    ended in ``error`` or ``denied``."""
    return 1 if any(status in _FAILED for status in statuses) else 0


def read_response(path: str) -> dict[str, Any]:
    """Load a response saved as JSON from a file, or from standard input for ``-``; anything
    that is not one JSON object (unreadable, binary, nested too deeply) is a usage error."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
        else:
            with open(path, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        raise click.UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise click.UsageError(
            f"{path} is not JSON: not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})"
        ) from exc
    try:
        response = read_json(text)
    except ValueError as exc:
        raise click.UsageError(f"{path} {exc}") from None
    if not isinstance(response, dict):
        raise click.UsageError(f"{path} must hold a JSON object (the provider's response)")
    return response


def read_stream(path: str) -> list[dict[str, Any]]:
    """The chunks of a stream saved as it came over the wire (server-sent events, NDJSON or a
    JSON array of chunks), from a file or from standard input for ``-``, read a block at a
    time; anything that is not such a stream is a usage error naming the line."""
    from expediter.core.turns.providers.wire import READ_SIZE, WireError, WireReader

    reader = WireReader()
    chunks: list[dict[str, Any]] = []
    try:
        if path == "-":
            source = getattr(sys.stdin, "buffer", sys.stdin)
            chunks = _read_blocks(reader, source, READ_SIZE)
        else:
            with open(path, "rb") as handle:
                chunks = _read_blocks(reader, handle, READ_SIZE)
    except OSError as exc:
        raise click.UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except WireError as exc:
        raise click.UsageError(f"{path} is not a stream of JSON chunks: {exc}") from exc
    for note in reader.notes:
        warn(f"{path}: {note}")
    if not chunks:
        raise click.UsageError(
            f"{path} holds no stream chunks: expected server-sent events ('data: {{...}}' "
            "lines), NDJSON (one JSON object per line) or a JSON array of chunks"
        )
    return chunks


def _read_blocks(reader: Any, source: Any, size: int) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = []
    while True:
        block = source.read(size)
        if not block:
            break
        chunks += reader.feed(block)
    chunks += reader.close()
    return chunks


def _read_input(
    response_path: str | None, stream_path: str | None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """The saved response (``--response``) or stream (``--stream``): exactly one is given."""
    if response_path is not None and stream_path is not None:
        raise click.UsageError("give --response FILE or --stream FILE, not both")
    if response_path is None and stream_path is None:
        raise click.UsageError(
            "missing the input: give --response FILE (a whole response as JSON) or "
            "--stream FILE (a stream saved as it came)"
        )
    if stream_path is not None:
        return None, read_stream(stream_path)
    assert response_path is not None
    return read_response(response_path), None


def _choose_provider(
    provider: str | None,
    response: dict[str, Any] | None,
    chunks: list[dict[str, Any]] | None,
    path: str,
) -> str:
    """The named provider, else the one the input's shape shows (said on standard error, so
    that standard output stays one document)."""
    if provider is not None:
        return provider
    from expediter.core.turns.providers.detect import (
        RESPONSE_SHAPES,
        STREAM_SHAPES,
        detect_provider,
        detect_stream_provider,
    )

    if chunks is not None:
        detected, what, shapes = detect_stream_provider(chunks), "stream", STREAM_SHAPES
        expected = f"stream chunks are told apart by {shapes}"
    else:
        detected, what = detect_provider(response), "response"
        expected = f"a response is told apart by its top-level fields: {RESPONSE_SHAPES}"
    if detected is None:
        raise click.UsageError(
            f"cannot tell which provider wrote the {what} in {path}; {expected}. "
            "Name it with --provider"
        )
    click.echo(
        f"expediter: provider detected from the {what}'s shape: {detected} "
        "(use --provider to choose)",
        err=True,
    )
    return detected


def _read_calls(
    toolset: Any,
    provider: str,
    response: dict[str, Any] | None,
    chunks: list[dict[str, Any]] | None,
) -> tuple[list[Any], Callable[[], dict[str, Any]]]:
    """The calls of the response or stream, read as ``provider``'s (with a hint on standard
    error when none are found and the input looks like another provider's), and what gives
    the whole response (for a stream, the one its chunks add up to, built when asked)."""
    if chunks is not None:
        _warn_stream_errors(chunks)
        stream = toolset.stream(provider).feed_all(chunks)
        calls: list[Any] = stream.calls()
        if not calls:
            _hint_other_stream_provider(toolset, provider, chunks)
        return calls, stream.response
    assert response is not None
    whole = response
    calls = toolset.parse_calls(provider, whole)
    _hint_other_provider(provider, whole, calls)
    return calls, lambda: whole


def _reply_id(toolset: Any, provider: str, response: dict[str, Any]) -> str | None:
    """The id the provider gave the reply (or the stream), which keys its calls in the ledger
    so that running the same saved reply again runs none of them twice; a warning when it
    has none."""
    found: str | None = toolset.message_id(provider, response)
    if found is None:
        warn(
            "the reply has no id to key its calls in the ledger: running it again runs its "
            "calls again (give --message-id to name the model's message)"
        )
    return found


def _stream_error(chunk: dict[str, Any]) -> Any:
    """What an error event or chunk says (an ``error`` event, an ``{"error": ...}`` chunk of
    OpenAI-compatible servers, Gemini or Ollama), or None for any other chunk."""
    kind, error = chunk.get("type"), chunk.get("error")
    if kind == "error" and error is None:
        error = chunk.get("message") or chunk  # the Responses API's error event
    if error is None or kind not in (None, "error"):
        return None
    return error.get("message") or error if isinstance(error, dict) else error


def _warn_stream_errors(chunks: list[dict[str, Any]]) -> None:
    """Say so when the provider reported an error inside the stream: the stream was most
    likely cut short there."""
    errors = [error for error in map(_stream_error, chunks) if error is not None]
    if not errors:
        return
    detail = errors[0]
    try:
        text = detail if isinstance(detail, str) else json.dumps(detail, default=repr)
    except (RecursionError, ValueError, TypeError):
        text = f"an error value that cannot be shown ({type(detail).__name__})"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    warn(f"the stream reports an error: {shorten(text, 200)}{more}")


def _also(detected: str) -> str:
    return f"{detected} (or mistral: the same shape)" if detected == "openai" else detected


def _hint_other_provider(provider: str, response: dict[str, Any], calls: Sequence[Any]) -> None:
    """Warn when a response yields no calls and looks like another provider's, which would."""
    if calls:
        return
    from expediter.core.turns.providers import PROVIDERS, detect_provider

    detected = detect_provider(response)
    named, other = PROVIDERS.get(provider), PROVIDERS.get(detected or "")
    if named is None or other is None:
        return  # nothing to compare (a pack's provider, or no shape found)
    if type(named).read_calls is type(other).read_calls:
        return  # read alike (openai, mistral, ollama): no calls either way
    found = len(other.read_calls(response))
    counted = f" ({found} tool calls)" if found else ""
    warn(
        f"no tool calls found reading the response as {provider}; it looks like a response "
        f"from {_also(other.name)}{counted}: try --provider {other.name}"
    )


def _hint_other_stream_provider(toolset: Any, provider: str, chunks: list[dict[str, Any]]) -> None:
    """Warn when a stream yields no calls read as ``provider`` but does as the provider its
    chunks look like."""
    from expediter.core.turns.providers.detect import detect_stream_provider
    from expediter.errors import ExpediterError

    detected = detect_stream_provider(chunks)
    if detected is None or detected == provider:
        return
    try:
        found = len(toolset.parse_stream(detected, chunks))
    except ExpediterError:
        return
    if found:
        warn(
            f"no tool calls found reading the stream as {provider}; it looks like a stream "
            f"from {_also(detected)} ({found} tool calls): try --provider {detected}"
        )


_provider_option = click.option(
    "--provider", required=True, type=provider_choice(), help="Who wrote the response."
)
# parse and run tell the provider from the input's shape when --provider is not given.
# Choices: the built-ins and the providers packs register, from the manifest.
_detected_provider_option = click.option(
    "--provider",
    default=None,
    type=provider_choice(),
    help="Who wrote the response or stream (default: told from its shape).",
)
_response_option = click.option(
    "--response",
    "response_path",
    default=None,
    metavar="FILE",
    help="The saved response as JSON ('-' reads standard input).",
)
_stream_option = click.option(
    "--stream",
    "stream_path",
    default=None,
    metavar="FILE",
    help="Instead of --response: a stream saved as it came (server-sent events, NDJSON or a "
    "JSON array of chunks; '-' reads standard input).",
)


@click.command()
@_detected_provider_option
@_response_option
@_stream_option
@click.option(
    "--user",
    "user_id",
    type=USER_ID,
    default=None,
    help="Resolve names against this user's tools.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def parse(
    state: CliState,
    provider: str | None,
    response_path: str | None,
    stream_path: str | None,
    user_id: str | None,
    as_json: bool,
) -> None:
    """Show the tool calls in a saved model response or stream, mapped to tools and actions.

    Without --provider, the provider is told from the input's shape (and named on standard
    error).
    """
    response, chunks = _read_input(response_path, stream_path)
    provider = _choose_provider(provider, response, chunks, response_path or stream_path or "")
    calls, _ = _read_calls(state.host().toolset(user_id=user_id), provider, response, chunks)
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


def print_events(events: Sequence[Any], as_json: bool = False) -> None:
    """What ``run``, ``approve`` and ``deny`` print: one JSON event per line, or a table."""
    if as_json:
        for event in events:
            echo_json_line(event.to_dict())
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
@_detected_provider_option
@_response_option
@_stream_option
@click.option(
    "--user", "user_id", type=USER_ID, default=None, help="Run on behalf of this user id."
)
@click.option(
    "--message-id",
    default=None,
    help="The assistant message's id (keys the ledger; default: the reply's own id).",
)
@click.option("--run-id", default=None, help="The run's id, for calls outside a conversation.")
@click.option(
    "--headless", is_flag=True, help="No human to ask: calls needing approval are denied."
)
@click.option(
    "--allow",
    "allowlist",
    multiple=True,
    type=INSTANCE_OR_TOOL,
    metavar="INSTANCE_OR_TOOL",
    help="In a headless run, let this instance (or tool) run without approval; repeatable.",
)
@click.option("--messages", is_flag=True, help="Print the provider's result messages instead.")
@click.option("--json", "as_json", is_flag=True, help="One JSON event per line.")
@pass_state
def run(
    state: CliState,
    provider: str | None,
    response_path: str | None,
    stream_path: str | None,
    user_id: str | None,
    message_id: str | None,
    run_id: str | None,
    headless: bool,
    allowlist: tuple[str, ...],
    messages: bool,
    as_json: bool,
) -> None:
    """Run the tool calls of a saved model response (or stream) through the host.

    Prints one event per call (completed, error, denied, awaiting_approval or
    requires_client_execution); with --messages, the messages that give the results back to
    the model instead. Without --provider, the provider is told from the input's shape (and
    named on standard error).

    Exit status: 0 when every call completed or is waiting (awaiting_approval,
    requires_client_execution), 1 when any call ended in error or denied, 2 for bad usage.
    """
    response, chunks = _read_input(response_path, stream_path)
    provider = _choose_provider(provider, response, chunks, response_path or stream_path or "")
    toolset = state.host().toolset(user_id=user_id, headless=headless, allowlist=allowlist)
    calls, whole = _read_calls(toolset, provider, response, chunks)
    if message_id is None and calls:
        message_id = _reply_id(toolset, provider, whole())
    events = list(toolset.run(calls, message_id=message_id, run_id=run_id))
    if messages:
        echo_json(toolset.result_messages(provider, calls, events))
    else:
        print_events(events, as_json)
    sys.exit(run_exit_code(event.status for event in events))


@click.group()
def approvals() -> None:
    """Calls waiting for a human's decision."""


@approvals.command("ls")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def list_approvals(state: CliState, as_json: bool) -> None:
    """List the calls waiting for approval, oldest first."""
    items = approval_items(state.ledger().pending_approvals())
    if as_json:
        echo_json(items)
    else:
        print_approvals(items)


def approval_items(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """The JSON form of ``approvals ls``, one object per waiting ledger row."""
    from expediter.core.ledger.records import iso

    return [
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


def print_approvals(items: Sequence[dict[str, Any]]) -> None:
    """The table of ``approvals ls``."""
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


def _approver(name: str | None) -> str:
    """Who decides: ``--as NAME`` as the host gives it, else the OS user as ``os:<name>``."""
    if name:
        return name
    import getpass

    try:
        return f"os:{getpass.getuser()}"
    except Exception:  # no user name in this environment (e.g. a container without passwd)
        return f"os:uid-{os.getuid()}" if hasattr(os, "getuid") else "os:unknown"


def _decide(
    state: CliState,
    key: str,
    approved: bool,
    reason: str | None,
    as_json: bool,
    approver: str | None,
) -> None:
    host = state.host()
    # Of the keys a prefix begins, only the waiting ones count (an unknown key: resume says
    # the ledger has no such call).
    key = state.call_key(key, status=LedgerStatus.AWAITING_APPROVAL) or key
    event = host.resume(key, approved, approver=_approver(approver), reason=reason)
    if as_json:
        echo_json(event.to_dict())
    else:
        print_events([event], as_json=False)
    sys.exit(0 if event.status in ("completed", "denied") else 1)


@click.command()
@click.argument("key")
@click.option("--reason", default=None, help="Why (recorded with the decision).")
@click.option(
    "--as",
    "approver",
    metavar="NAME",
    default=None,
    help="Who approves, as recorded (default: the OS user, as os:<name>).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the call's final event as JSON.")
@pass_state
def approve(
    state: CliState, key: str, reason: str | None, approver: str | None, as_json: bool
) -> None:
    """Approve a waiting call and run it now (from any machine sharing the ledger).

    KEY is the call's ledger key, or any unique beginning of it (as `ledger ls` shows it).
    """
    _decide(state, key, True, reason, as_json, approver)


@click.command()
@click.argument("key")
@click.option("--reason", default=None, help="Why (the model is told).")
@click.option(
    "--as",
    "approver",
    metavar="NAME",
    default=None,
    help="Who denies, as recorded, never told to the model (default: os:<OS user>).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the denied event as JSON.")
@pass_state
def deny(
    state: CliState, key: str, reason: str | None, approver: str | None, as_json: bool
) -> None:
    """Deny a waiting call; the model is told it was denied and why.

    KEY is the call's ledger key, or any unique beginning of it. The call's tool need not be
    loadable here: a denial runs nothing.
    """
    _decide(state, key, False, reason, as_json, approver)
