"""The ``expediter`` command group, its global options, and the state commands share.

Logging is set up by ``main()`` (the console script) through ``cli_logging()``, never when the
group merely runs (click's ``CliRunner``, a host application importing ``cli``), so the
"expediter" loggers of the calling process keep their handlers and propagation.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import click

from expediter.__about__ import __version__
from expediter.cli.output import escape, unescape
from expediter.core.records.text import one_line

if TYPE_CHECKING:
    from pathlib import Path

    from expediter.core.config import HostConfig
    from expediter.core.discovery.manifest import PackCommands
    from expediter.core.host import Host
    from expediter.core.ledger import Ledger

__all__ = [
    "CliState",
    "cli",
    "cli_logging",
    "error_line",
    "pass_host",
    "pass_state",
    "verbosity",
]

P = ParamSpec("P")
R = TypeVar("R")

logger = logging.getLogger(__name__)

#: How many matching keys an ambiguous key prefix lists.
_KEYS_LISTED = 5


class _Formatter(logging.Formatter):
    """One line per record; tracebacks only at ``-v`` and above or for tool crashes."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.verbose = 0

    def format(self, record: logging.LogRecord) -> str:
        # ``exc_text`` alone: a traceback formatted with secrets hidden (``log_hidden``).
        traceback = record.exc_info or record.exc_text
        if traceback and record.levelno < logging.ERROR and self.verbose < 1:
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        # A traceback quotes the exception's message, which a tool may have written.
        return escape(super().format(record), keep_newlines=True)

    def formatMessage(self, record: logging.LogRecord) -> str:
        # A message quoting a driver's error may span lines ("...refused\n\tIs the server
        # running..."): keep it on one.
        return escape(one_line(super().formatMessage(record)))


class _CliHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The console script's handler on the "expediter" logger (standard error)."""

    def __init__(self) -> None:
        super().__init__()
        self.formatter: _Formatter = _Formatter()
        self.setFormatter(self.formatter)
        self.addFilter(self._quiet_about_packs)

    @property
    def verbose(self) -> int:
        """The ``-v`` count of the running command."""
        return self.formatter.verbose

    def _quiet_about_packs(self, record: logging.LogRecord) -> bool:
        # Commands print pack load errors themselves (`plugins`, `tools list`); the log
        # records about them (tagged with the pack) would repeat them, so they need -v.
        return self.verbose > 0 or not hasattr(record, "pack")


def _cli_handler() -> _CliHandler | None:
    for handler in logging.getLogger("expediter").handlers:
        if isinstance(handler, _CliHandler):
            return handler
    return None


@contextlib.contextmanager
def cli_logging() -> Iterator[None]:
    """Print the "expediter" loggers' warnings on standard error, one line each, while a
    command runs (``-v`` shows more); the logger is restored afterwards."""
    root = logging.getLogger("expediter")
    saved = (root.handlers[:], root.level, root.propagate)
    root.handlers[:] = [_CliHandler()]
    root.setLevel(logging.WARNING)
    root.propagate = False
    try:
        yield
    finally:
        root.handlers[:], level, root.propagate = saved
        root.setLevel(level)


def _set_verbosity(verbose: int) -> None:
    """Apply ``-v`` to the console script's handler (nothing when ``main()`` did not set one)."""
    handler = _cli_handler()
    if handler is None:
        return
    handler.formatter.verbose = verbose
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    logging.getLogger("expediter").setLevel(level)


def verbosity() -> int:
    """The ``-v`` count of the command ``main()`` runs (0 outside ``main()``)."""
    handler = _cli_handler()
    return 0 if handler is None else handler.verbose


def error_line(exc: BaseException, home: Path | None = None) -> str:
    """One line for an error that ends a command: its message, whitespace collapsed, and for a
    file-system error inside the data directory, what to check."""
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else ""
        text = f"{exc.strerror}: {where}" if where else exc.strerror
        if home is not None and where and _inside(str(where), home):
            text += (
                f" (the data directory EXPEDITER_HOME={home} must be a writable directory; "
                "set EXPEDITER_HOME to one)"
            )
    else:
        text = str(exc) or type(exc).__name__
    return escape(one_line(text))


def _inside(path: str, home: Path) -> bool:
    from pathlib import Path  # not at import: `expediter --help` stays quick

    try:
        Path(path).resolve().relative_to(home.resolve())
    except (OSError, ValueError, RuntimeError):
        return False
    return True


class CliState:
    """What every command shares: the configuration (read once), and the host or ledger
    opened on first use."""

    def __init__(self, config: HostConfig, refresh: bool) -> None:
        self.config = config
        self.refresh = refresh
        self._host: Host | None = None
        self._ledger: Ledger | None = None

    def _check_home(self) -> None:
        home = self.config.home
        if home.exists() and not home.is_dir():
            raise click.ClickException(
                f"the data directory EXPEDITER_HOME={home} is not a directory: set "
                "EXPEDITER_HOME to a directory (it is created when missing)"
            )

    def ledger(self) -> Ledger:
        """The ledger the configuration names (no pack imported)."""
        if self._host is not None:
            return self._host.ledger
        if self._ledger is None:
            from expediter.core.ledger import Ledger

            self._check_home()
            self._ledger = Ledger.from_config(self.config)
        return self._ledger

    def close(self) -> None:
        """Close what the command opened (the host's loop and ledger, or the ledger); a
        failure to close is logged, not raised: the command's outcome stands."""
        for opened in (self._host, self._ledger):
            if opened is None:
                continue
            try:
                opened.close()
            except Exception as exc:
                logger.warning("closing %s failed: %s", type(opened).__name__, error_line(exc))

    def call_key(self, text: str, *, status: str | None = None) -> str | None:
        """The ledger key ``text`` names: itself when it is a key, else the one key it begins
        (a key shortened by ``ledger ls``, its "…" included), else None. A prefix that begins
        several keys is a usage error listing them. A key as the tables print it, its control
        characters escaped (``\\x1b``, ``\\u202e``), names the key itself. With ``status``
        (``approve`` and ``deny``: calls awaiting approval), a prefix counts only the keys of
        calls in that status, and names any other key only when none is."""
        for candidate in dict.fromkeys((text, unescape(text))):
            found = self._call_key(candidate, status)
            if found is not None:
                return found
        return None

    def _call_key(self, text: str, status: str | None) -> str | None:
        ledger = self.ledger()
        if ledger.get(text) is not None:
            return text
        prefix = text.removesuffix("…").removesuffix("...")
        if not prefix:
            return None
        for wanted in dict.fromkeys((status, None)):
            found = ledger.keys_with_prefix(prefix, limit=_KEYS_LISTED + 1, status=wanted)
            if len(found) > 1:
                listed = escape(", ".join(found[:_KEYS_LISTED]))
                more = ", ..." if len(found) > _KEYS_LISTED else ""
                which = "keys" if wanted is None else f"keys of calls {wanted}"
                raise click.UsageError(
                    f"{text!r} begins several {which} ({listed}{more}); give more of the key"
                )
            if found:
                return found[0]
        return None

    def host(self, plugins: Sequence[object] = (), *, strict: bool | None = None) -> Host:
        """The host, built from the configuration.

        ``strict=False`` lets diagnostic commands run under ``EXPEDITER_STRICT_PLUGINS``.
        """
        if self._host is None:
            from expediter.core.host import Host

            self._check_home()
            config = self.config if strict is None else self.config.replace(strict_plugins=strict)
            self._host = Host(config=config, plugins=plugins, refresh=self.refresh)
        return self._host


pass_state = click.make_pass_decorator(CliState)


def pass_host(function: Callable[Concatenate[Host, P], R]) -> Callable[P, R]:
    """Give a command the host ``expediter`` is configured with as its first argument.

    The host is built on first use from the environment (``HostConfig.from_env()``) and the
    global options (``--tools-dir``, ``--database``, ``--refresh``), as every built-in
    command's is, and closed when the command ends.
    """

    @functools.wraps(function)
    def with_host(*args: P.args, **kwargs: P.kwargs) -> R:
        ctx = click.get_current_context()
        state = ctx.find_object(CliState)
        if state is None:
            raise click.UsageError(
                f"{ctx.command_path} needs the expediter command line: run it as an "
                "`expediter` subcommand"
            )
        return ctx.invoke(function, state.host(), *args, **kwargs)

    return with_host


#: Where the packs' commands found for one command line are kept (``ctx.meta``).
_PACK_COMMANDS = "expediter.pack_commands"
#: Why the packs' commands could not be listed (``ctx.meta``), when they could not.
_UNLISTED = "expediter.pack_commands_unlisted"


class _Group(click.Group):
    """The command group; an expediter or file-system error ending any command becomes one
    ``Error: ...`` line and exit status 1 (2 for a usage error), never a traceback.

    Packs add commands with their ``register_commands(cli)`` hook. Their names and help come
    from the manifest, so listing them imports no pack: a pack is imported when its command
    runs. A name taken by a built-in command or by two packs is reported and not added.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            from expediter.errors import ExpediterError, IdentifierError, UnknownProvider

            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                raise  # click reports a closed pipe itself
            if not isinstance(exc, ExpediterError | OSError):
                raise
            state = ctx.find_object(CliState)
            # A pack's command passing on an id no database keeps exactly: bad usage too.
            bad_usage = isinstance(exc, UnknownProvider | IdentifierError)
            kind = _BadUsage if bad_usage else click.ClickException
            raise kind(error_line(exc, state.config.home if state else None)) from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The built-in commands and the packs', by name."""
        return sorted({*super().list_commands(ctx), *self._pack_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """A built-in command, or a pack's (imported only when it runs)."""
        command = super().get_command(ctx, cmd_name)
        if command is None:
            command = self._pack_commands(ctx).get(cmd_name)
        if command is None and ctx.meta.get(_UNLISTED) is not None:
            # Perhaps a pack's command, unknown only because the packs could not be listed:
            # say why (a bad EXPEDITER_* value), not "no such command".
            raise click.ClickException(
                f"{ctx.meta[_UNLISTED]} (no command {cmd_name!r} among the built-in ones, and "
                "the packs' commands cannot be listed until that is fixed)"
            )
        return command

    def _pack_commands(self, ctx: click.Context) -> dict[str, click.Command]:
        found: dict[str, click.Command] | None = ctx.meta.get(_PACK_COMMANDS)
        if found is None:
            found = ctx.meta[_PACK_COMMANDS] = self._usable(_installed_commands(ctx))
        return found

    def _usable(self, installed: list[PackCommands]) -> dict[str, click.Command]:
        """One placeholder per pack command whose name is the pack's alone."""
        owners: dict[str, list[tuple[str, str, str]]] = {}
        for pack, pack_id, commands in installed:
            for name, text in commands:
                owners.setdefault(name, []).append((pack, pack_id, text))
        usable: dict[str, click.Command] = {}
        for name, claims in sorted(owners.items()):
            packs = " and ".join(f"{pack!r}" for pack, _, _ in claims)
            if name in self.commands:
                logger.warning(
                    "pack %s adds a command %r, the name of a built-in command; it is not "
                    "added (ask its author to rename it)",
                    packs,
                    name,
                )
            elif len(claims) > 1:
                choices = " or ".join(f"EXPEDITER_DISABLE_PLUGINS={pack}" for pack, _, _ in claims)
                logger.warning(
                    "packs %s both add a command %r; neither is added. Disable one with %s",
                    packs,
                    name,
                    choices,
                )
            else:
                pack, pack_id, text = claims[0]
                usable[name] = _PackCommand(name, text, pack=pack, pack_id=pack_id)
        return usable


def _installed_commands(ctx: click.Context) -> list[PackCommands]:
    """The packs' commands: from the commands index when it is current for this environment
    (imports no pack, no configuration), else from discovery (the manifest, or on a cold
    cache every pack imported once)."""
    tools_dirs: tuple[str, ...] = ctx.params.get("tools_dirs") or ()
    refresh = bool(ctx.params.get("refresh"))
    if not tools_dirs and not refresh:
        from expediter.core.discovery.manifest import read_commands

        indexed = read_commands()
        if indexed is not None:
            return indexed
    from expediter.core.config import HostConfig
    from expediter.core.host import Host

    try:
        config = HostConfig.from_env(tools_path=tools_dirs, strict_plugins=False)
    except ValueError as exc:  # a bad EXPEDITER_* value: the command reports it, once
        ctx.meta[_UNLISTED] = str(exc)
        return []
    try:
        host = Host(config=config, refresh=refresh, record_calls=False)
    except Exception as exc:  # the command itself reports an unusable configuration
        logger.warning("the packs' commands cannot be listed: %s", error_line(exc))
        ctx.meta[_UNLISTED] = error_line(exc)
        return []
    try:
        packs = host.packs
    finally:
        host.close()
    from expediter.core.discovery.manifest import write_commands

    # The next `expediter --help` reads them from the index (the manifest may have been warm).
    write_commands(config.home, config.plugin_settings, packs)
    return [
        (pack.name, pack.id, tuple((command.name, command.help) for command in pack.commands))
        for pack in packs
        if pack.commands
    ]


class _PackCommand(click.Command):
    """A pack's command as the manifest describes it; the pack is imported (and its
    ``register_commands`` run) only when the command runs or shows its own help."""

    def __init__(self, name: str, text: str, *, pack: str, pack_id: str) -> None:
        super().__init__(name, help=text, short_help=text, add_help_option=False)
        self.pack = pack
        self.pack_id = pack_id

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """Parse the arguments with the pack's own command."""
        return self._load(parent).make_context(info_name, args, parent=parent, **extra)

    def _load(self, parent: click.Context | None) -> click.Command:
        state = parent.find_object(CliState) if parent is not None else None
        if state is None:
            raise click.UsageError(f"{self.name} runs only as an `expediter` subcommand")
        from expediter.core.discovery.packs import PackRef, load_pack, pack_commands

        info = next((pack for pack in state.host().packs if pack.id == self.pack_id), None)
        refresh = "run `expediter --refresh --help` to rebuild the tool cache"
        if info is None:
            raise click.ClickException(f"pack {self.pack!r} is gone; {refresh}")
        ref = PackRef(info.name, info.version, info.source, info.location)
        loaded = load_pack(ref, describe=False)
        if loaded.info.error is not None:
            raise click.ClickException(
                f"pack {self.pack!r} failed to load: {escape(loaded.info.error)}"
            )
        try:
            command = pack_commands(loaded).get(self.name or "")
        except Exception as exc:
            raise click.ClickException(
                f"pack {self.pack!r}: register_commands raised {type(exc).__name__}: "
                f"{error_line(exc)}"
            ) from exc
        if command is None:
            raise click.ClickException(
                f"pack {self.pack!r} no longer adds the command {self.name!r}; {refresh}"
            )
        return command


class _BadUsage(click.ClickException):
    """An error that means the command was used wrongly: exit status 2, like click's own."""

    exit_code = 2


@click.group(
    cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="expediter")
@click.option(
    "--tools-dir",
    "tools_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    # Eager, like --help: `expediter --tools-dir DIR --help` lists DIR's packs' commands.
    is_eager=True,
    help="A directory of tool modules (each module is one tool); repeatable. "
    "Added to EXPEDITER_TOOLS_PATH.",
)
@click.option(
    "--refresh",
    is_flag=True,
    is_eager=True,
    help="Rebuild the cached tool manifest (imports every pack).",
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
    _set_verbosity(verbose)
    from expediter.core.config import HostConfig

    try:
        config = HostConfig.from_env(tools_path=tools_dirs, database_url=database)
    except ValueError as exc:  # a bad EXPEDITER_* value: the environment, not the command line
        raise click.ClickException(str(exc)) from exc
    ctx.obj = CliState(config, refresh)
    ctx.call_on_close(ctx.obj.close)
