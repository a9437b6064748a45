"""The ``expediter`` command line."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from expediter.__about__ import __version__

if TYPE_CHECKING:
    from expediter.core.host import Host
    from expediter.core.ledger import Ledger

__all__ = ["CliState", "cli", "main", "pass_state"]


class _Formatter(logging.Formatter):
    """One line per record; tracebacks only at ``-v`` and above or for tool crashes."""

    def __init__(self, verbose: int) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and record.levelno < logging.ERROR and self.verbose < 1:
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        return super().format(record)


def _configure_logging(verbose: int) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_Formatter(verbose))
    root = logging.getLogger("expediter")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING)
    root.propagate = False
    if not verbose:
        # Commands print pack load errors themselves (`plugins`, `tools list`); the log
        # records about them (tagged with the pack) would repeat them, so they need -v.
        handler.addFilter(lambda record: not hasattr(record, "pack"))


class CliState:
    """Options shared by every command; the host is created on first use."""

    def __init__(self, tools_dirs: Sequence[str], refresh: bool, database: str | None) -> None:
        self.tools_dirs = tuple(tools_dirs)
        self.refresh = refresh
        self.database = database
        self._host: Host | None = None
        self._ledger: Ledger | None = None

    def ledger(self) -> Ledger:
        """The ledger named by ``--database`` / ``EXPEDITER_DATABASE_URL`` (no pack imported)."""
        if self._host is not None:
            return self._host.ledger
        if self._ledger is None:
            import os

            from expediter.core.config import expediter_home
            from expediter.core.ledger import Ledger
            from expediter.errors import LedgerError

            url = self.database or os.environ.get("EXPEDITER_DATABASE_URL") or None
            lease = float(os.environ.get("EXPEDITER_LEASE_SECONDS") or 60)
            try:
                self._ledger = Ledger(url, home=expediter_home(), lease_seconds=lease)
            except LedgerError as exc:
                raise click.ClickException(str(exc)) from exc
        return self._ledger

    def close(self) -> None:
        """Close what the command opened (the host's loop and ledger, or the ledger)."""
        if self._host is not None:
            self._host.close()
        if self._ledger is not None:
            self._ledger.close()

    def host(self, plugins: Sequence[object] = (), *, strict: bool | None = None) -> Host:
        """The host configured from the environment and the global options.

        ``strict=False`` lets diagnostic commands run under ``EXPEDITER_STRICT_PLUGINS``.
        """
        if self._host is None:
            from expediter.core.host import Host
            from expediter.errors import PluginLoadError

            try:
                self._host = Host.from_env(
                    tools_path=self.tools_dirs,
                    plugins=plugins,
                    refresh=self.refresh,
                    strict=strict,
                    database_url=self.database,
                )
            except PluginLoadError as exc:
                raise click.ClickException(str(exc)) from exc
        return self._host


pass_state = click.make_pass_decorator(CliState)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="expediter")
@click.option(
    "--tools-dir",
    "tools_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="A directory of tool modules (each module is one tool); repeatable. "
    "Added to EXPEDITER_TOOLS_PATH.",
)
@click.option(
    "--refresh", is_flag=True, help="Rebuild the cached tool manifest (imports every pack)."
)
@click.option(
    "--database",
    metavar="URL",
    default=None,
    help="The ledger database: sqlite:///path or postgresql://user@host/db "
    "(default: EXPEDITER_DATABASE_URL, else an SQLite file in EXPEDITER_HOME).",
)
@click.option("-v", "--verbose", count=True, help="Log more (-vv for debug).")
@click.pass_context
def cli(
    ctx: click.Context,
    tools_dirs: tuple[str, ...],
    refresh: bool,
    database: str | None,
    verbose: int,
) -> None:
    """expediter: offer tools to LLMs and run their calls safely.

    Tools come from installed tool packs (the `expediter` entry-point group), from tools
    directories (EXPEDITER_TOOLS_PATH, --tools-dir) and from the built-ins.
    """
    _configure_logging(verbose)
    ctx.obj = CliState(tools_dirs, refresh, database)
    ctx.call_on_close(ctx.obj.close)


def _register_commands() -> None:
    from expediter.cli import call as call_commands
    from expediter.cli import demo as demo_commands
    from expediter.cli import ledger as ledger_commands
    from expediter.cli import tools as tools_commands
    from expediter.cli import turns as turn_commands

    cli.add_command(tools_commands.plugins)
    cli.add_command(tools_commands.tools)
    cli.add_command(call_commands.call)
    cli.add_command(turn_commands.parse)
    cli.add_command(turn_commands.run)
    cli.add_command(turn_commands.approvals)
    cli.add_command(turn_commands.approve)
    cli.add_command(turn_commands.deny)
    cli.add_command(ledger_commands.ledger)
    cli.add_command(ledger_commands.db)
    cli.add_command(demo_commands.demo)


_register_commands()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line (the ``expediter`` console script)."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="expediter")
