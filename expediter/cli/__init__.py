"""The ``expediter`` command line: the group (``expediter.cli.app``) and its commands."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from expediter.cli import call, demo, instances, ledger, tools, turns
from expediter.cli.app import cli, cli_logging, error_line, pass_host, verbosity

__all__ = ["cli", "main", "pass_host"]

cli.add_command(tools.plugins)
cli.add_command(tools.tools)
cli.add_command(tools.providers)
cli.add_command(call.call)
cli.add_command(turns.parse)
cli.add_command(turns.run)
cli.add_command(turns.approvals)
cli.add_command(turns.approve)
cli.add_command(turns.deny)
cli.add_command(ledger.ledger)
cli.add_command(ledger.db)
cli.add_command(demo.demo)
cli.add_command(instances.instances)
cli.add_command(instances.keys)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line (the ``expediter`` console script): logging on standard error, and
    any error that ends a command as one ``Error: ...`` line and exit status 1."""
    with cli_logging():
        try:
            cli.main(args=list(argv) if argv is not None else None, prog_name="expediter")
        except Exception as exc:
            # The group turns expediter and file-system errors into one line; anything
            # else is a bug, reported in one line too unless -v asks for the traceback.
            if verbosity():
                raise
            name = type(exc).__name__
            click.echo(
                f"Error: unexpected {name}: {error_line(exc)} (run with -v for the traceback)",
                err=True,
            )
            sys.exit(1)
