"""``expediter ledger ...`` and ``expediter db ...``: read the call ledger, sweep it, migrate it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from expediter.cli.app import CliState, error_line, pass_state
from expediter.cli.output import echo_json, echo_table, escape, shorten, warn
from expediter.cli.targets import USER_ID
from expediter.core.records.statuses import LEDGER_STATUSES

if TYPE_CHECKING:
    from expediter.core.ledger import Ledger

__all__ = ["db", "ledger", "print_rows"]


def _open(state: CliState) -> Ledger:
    ledger = state.ledger()
    ledger.check()
    return ledger


def _since(value: str | None) -> float | None:
    if value is None:
        return None
    from expediter.core.ledger import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from exc


@click.group()
def ledger() -> None:
    """Read the record of every tool call, sweep abandoned calls, replay the outage spool,
    and handle the spooled writes the database refused (dead letters)."""


@ledger.command("ls")
@click.option("--status", type=click.Choice(LEDGER_STATUSES), help="Only calls in this status.")
@click.option("--user", "user_id", type=USER_ID, help="Only calls made on behalf of this user.")
@click.option("--tool", help="Only calls of this tool.")
@click.option("--since", metavar="DURATION", help="Only calls in the last 45s, 30m, 1h, 2d...")
@click.option("--limit", default=100, show_default=True, help="At most this many (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def list_calls(
    state: CliState,
    status: str | None,
    user_id: str | None,
    tool: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List recorded calls, newest first.

    Long keys are cut at the end ("…"); what is shown is still a key prefix that
    `ledger show`, `approve` and `deny` accept.
    """
    seconds = _since(since)
    rows = _open(state).rows(
        status=status, user_id=user_id, tool=tool, since=seconds, limit=max(0, limit)
    )
    if as_json:
        echo_json([row.to_dict() for row in rows])
    else:
        print_rows(rows)


def print_rows(rows: Iterable[Any]) -> None:
    """The table of ``ledger ls``; a long key is cut at the end, so it stays a key prefix."""
    echo_table(
        ["KEY", "STATUS", "TOOL", "ACTION", "USER", "ATTEMPTED", "MS", "ERROR"],
        [
            [
                shorten(row.key, 44, collapse=False),
                row.status + (" (late)" if row.late else ""),
                row.tool or "-",
                row.action or "-",
                row.user_id or "-",
                (row.to_dict()["attempted_at"] or "")[:19],
                "" if row.duration_ms is None else f"{row.duration_ms:.1f}",
                shorten(row.error or "", 50),
            ]
            for row in rows
        ],
    )


@ledger.command("show")
@click.argument("key")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def show_call(state: CliState, key: str, as_json: bool) -> None:
    """Show one recorded call, arguments and result included, and the keys of its duplicate
    executions (the same call run again while the database was unreachable).

    KEY is the call's ledger key, or any unique beginning of it (as `ledger ls` shows it).
    """
    ledger = _open(state)
    full = state.call_key(key)
    row = None if full is None else ledger.get(full)
    if row is None:
        raise click.UsageError(f"the ledger has no call {key!r}")
    data = row.to_dict()
    data["duplicates"] = ledger.duplicates(row.key)
    if as_json:
        echo_json(data)
        return
    for name, value in data.items():
        if name == "duplicates":
            text = ", ".join(value) or None
        else:
            text = value if isinstance(value, str) or value is None else json.dumps(value)
        click.echo(f"{name:>16}: {'-' if text is None else escape(text)}")


@ledger.command("stats")
@click.option("--since", metavar="DURATION", help="Only calls in the last 45s, 30m, 1h, 2d...")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def stats(state: CliState, since: str | None, as_json: bool) -> None:
    """Calls, failures and p50/p95 duration per tool (and on standard error, how many
    spooled writes the database refused, when there are any)."""
    ledger = _open(state)
    found = ledger.stats(since=_since(since))
    _warn_deadletters(ledger)
    if as_json:
        echo_json([item.to_dict() for item in found])
        return

    def ms(value: Any) -> str:
        return "-" if value is None else f"{value:.1f}"

    echo_table(
        ["TOOL", "CALLS", "FAILURES", "P50 MS", "P95 MS"],
        [[s.tool, s.calls, s.failures, ms(s.p50_ms), ms(s.p95_ms)] for s in found],
    )


@ledger.command("sweep")
@click.option("--json", "as_json", is_flag=True, help="Print the abandoned keys as JSON.")
@pass_state
def sweep(state: CliState, as_json: bool) -> None:
    """Mark calls whose worker stopped renewing its lease as abandoned."""
    keys = _open(state).sweep()
    if as_json:
        echo_json(keys)
        return
    listed = ": " + escape(", ".join(keys)) if keys else ""
    click.echo(f"abandoned {len(keys)} call(s){listed}")


@ledger.command("replay")
@pass_state
def replay(state: CliState) -> None:
    """Write the calls recorded in the outage spool to the database, in order.

    A write the database refuses for good is set aside as a dead letter (see `ledger
    deadletters`) and the replay goes on.
    """
    from expediter.errors import LedgerError

    led = _open(state)
    try:
        done = led.replay()
    except LedgerError:
        raise
    except Exception as exc:  # never a traceback: one line saying what failed
        raise click.ClickException(
            f"replaying {led.spool.path} failed: {error_line(exc, state.config.home)}"
        ) from exc
    left = " (some remain: the database stopped answering)" if led.spool.pending() else ""
    click.echo(f"replayed {done} write(s) from {led.spool.path}{left}")
    _warn_deadletters(led)


def _warn_deadletters(ledger: Ledger) -> None:
    """Say on standard error how many spooled writes are set aside, if any."""
    count = len(ledger.deadletters())
    if count:
        warn(
            f"{count} spooled ledger write(s) the database refused are set aside in "
            f"{ledger.spool.deadletter_path}: see `expediter ledger deadletters`"
        )


@ledger.group("deadletters", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
@click.pass_context
def deadletters(ctx: click.Context, state: CliState, as_json: bool) -> None:
    """List the spooled writes the database refused for good (dead letters), oldest first.

    `deadletters retry ID` applies one again, `deadletters drop ID` deletes it. Listing
    needs no database.
    """
    if ctx.invoked_subcommand is not None:
        return
    letters = state.ledger().deadletters()
    if as_json:
        echo_json([letter.to_dict() for letter in letters])
        return
    echo_table(
        ["ID", "SET ASIDE", "OPERATION", "KEY", "ERROR"],
        [
            [
                letter.id,
                (letter.to_dict()["set_aside_at"] or "")[:19],
                letter.operation,
                shorten(letter.key or "-", 44),
                shorten(letter.error, 60),
            ]
            for letter in letters
        ],
    )


@deadletters.command("retry")
@click.argument("letter_id", metavar="ID")
@pass_state
def retry_deadletter(state: CliState, letter_id: str) -> None:
    """Apply a dead letter again; it is removed once the database takes it (exit 1 with the
    database's answer when it refuses it again)."""
    _open(state).retry_deadletter(letter_id)
    click.echo(f"dead letter {escape(letter_id)} applied and removed")


@deadletters.command("drop")
@click.argument("letter_id", metavar="ID")
@pass_state
def drop_deadletter(state: CliState, letter_id: str) -> None:
    """Delete a dead letter: its write is given up."""
    state.ledger().drop_deadletter(letter_id)
    click.echo(f"dead letter {escape(letter_id)} dropped")


@click.group()
def db() -> None:
    """Create or upgrade the ledger's database schema."""


@db.command("upgrade")
@pass_state
def upgrade(state: CliState) -> None:
    """Apply the bundled migrations (creates the tables in a new database)."""
    from expediter.core.ledger.schema import upgrade as run_upgrade

    database = state.ledger().database
    from expediter.errors import LedgerError

    try:
        reached = run_upgrade(database)
    except LedgerError:
        raise  # says what to do itself
    except Exception as exc:
        raise click.ClickException(
            f"upgrading {database.display} failed: {error_line(exc)}"
        ) from exc
    click.echo(f"{database.display} is at {reached}")


@db.command("current")
@pass_state
def current(state: CliState) -> None:
    """Print the schema revision of the database (and whether it is the newest)."""
    from expediter.core.ledger.schema import HEAD, current_revision

    database = state.ledger().database
    try:
        connection = database.connect()
    except Exception as exc:
        raise click.ClickException(f"cannot reach {database.display}: {exc}") from exc
    try:
        revision = current_revision(connection)
    finally:
        connection.close()
    if revision is None:
        click.echo("no schema yet: run `expediter db upgrade`")
    elif revision == HEAD:
        click.echo(f"{revision} (head)")
    else:
        click.echo(f"{revision} (head is {HEAD}: run `expediter db upgrade`)")
