"""Where the ledger lives: URLs, raw DBAPI connections, and telling an outage from a bug.

The hot path runs on one held DBAPI connection in autocommit mode (``sqlite3`` or psycopg 3)
with statements compiled once by SQLAlchemy; SQLAlchemy engines are used only for migrations.
"""

from __future__ import annotations

import ipaddress
import os
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qs

import attrs

from expediter.core.environment import private_dir
from expediter.core.records.redaction import HOST_PORTS, mask_url, mask_url_in
from expediter.errors import LedgerError

__all__ = [
    "Database",
    "attempt",
    "default_url",
    "is_instantly_busy",
    "is_outage",
]

Dialect = Literal["sqlite", "postgresql"]
T = TypeVar("T")

_SYNCHRONOUS = {"off", "normal", "full", "extra"}
#: A '%' not followed by two hex digits: libpq refuses it, quoting the token.
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def default_url(home: Path) -> str:
    """The embedded default: an SQLite file in the data directory."""
    return f"sqlite:///{home / 'expediter.db'}"


def _masked_repr(value: str) -> str:
    return repr(mask_url(value))


@attrs.frozen
class Database:
    """A parsed database URL and how to connect to it (its repr hides the password)."""

    url: str = attrs.field(repr=_masked_repr)
    dialect: Dialect
    #: SQLite: the file path; PostgreSQL: the libpq connection string.
    target: str = attrs.field(repr=_masked_repr)
    #: SQLite's ``synchronous`` pragma (``normal`` unless the URL says ``?synchronous=full``).
    synchronous: str = "normal"
    #: SQLite: whether a missing folder for the file is made (the default ledger in the data
    #: directory); a URL someone wrote names a folder that must exist, so a mistyped path is
    #: an error instead of a new, empty ledger.
    create_folder: bool = False

    @classmethod
    def parse(cls, url: str) -> Database:
        """Read ``sqlite:///path`` or ``postgresql[+psycopg]://user:pass@host:port/db``."""
        scheme, separator, rest = url.partition("://")
        scheme = scheme.split("+", 1)[0].lower() if separator else ""
        if scheme == "sqlite":
            path, _, query_text = rest.partition("?")
            query = {key: values[-1] for key, values in parse_qs(query_text).items()}
            path = path[1:] if path.startswith("/") else path
            if not path or path == ":memory:":
                raise LedgerError("the ledger needs an SQLite file, not an in-memory database")
            synchronous = query.get("synchronous", "normal").lower()
            if synchronous not in _SYNCHRONOUS:
                raise LedgerError(f"synchronous must be one of {sorted(_SYNCHRONOUS)}")
            return cls(url, "sqlite", os.path.expanduser(path), synchronous)
        if scheme in ("postgresql", "postgres"):
            problem = _postgres_problem(rest)
            if problem:
                raise LedgerError(f"invalid database URL {mask_url(url)!r}: {problem}")
            return cls("postgresql+psycopg://" + rest, "postgresql", "postgresql://" + rest)
        raise LedgerError(
            f"unsupported database URL {mask_url(url)!r}: use sqlite:///path or postgresql://..."
        )

    @property
    def sqlalchemy_url(self) -> str:
        """The URL for SQLAlchemy (migrations): PostgreSQL through psycopg 3."""
        if self.dialect == "sqlite":
            return f"sqlite:///{self.target}"
        return self.url

    @property
    def display(self) -> str:
        """The URL without its password, for messages."""
        return mask_url(self.url)

    def scrub(self, text: str) -> str:
        """A driver's error message with this database's password hidden (libpq quotes a
        malformed URL, or a part of it, in its errors)."""
        return mask_url_in(mask_url_in(text, self.target), self.url)

    def prepare_file(self) -> None:
        """SQLite: the database file (and, with ``create_folder``, its folder) made usable by
        their owner only (0600 in 0700), since sqlite creates ``-wal`` and ``-shm`` with the
        file's permissions; LedgerError when the folder a URL names does not exist."""
        path = Path(self.target)
        if self.create_folder:
            private_dir(path.parent)
        elif not path.parent.is_dir():
            raise LedgerError(
                f"the ledger {self.display} is in a folder that does not exist ({path.parent}): "
                "check the path in the database URL, or create the folder"
            )
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        except FileExistsError:
            return  # an existing ledger keeps the mode its owner gave it
        except OSError:
            return  # sqlite3 reports why it cannot open the file
        os.close(fd)

    def connect(self, timeout: float = 5.0) -> Any:
        """A new autocommit DBAPI connection."""
        if self.dialect == "sqlite":
            self.prepare_file()
            lite = sqlite3.connect(
                self.target, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            lite.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            # Switching to WAL takes a lock another process may hold: only when not yet WAL.
            mode = lite.execute("PRAGMA journal_mode").fetchone()
            if not mode or str(mode[0]).lower() != "wal":
                lite.execute("PRAGMA journal_mode=WAL")
            lite.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
            return lite
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise LedgerError(
                "PostgreSQL needs psycopg 3: pip install 'expediter[postgres]'"
            ) from exc
        from psycopg.types.string import TextLoader

        failure: Exception | None = None
        try:
            connection = psycopg.connect(
                self.target,
                autocommit=True,
                connect_timeout=max(1, int(timeout)),
                prepare_threshold=0,
            )
        except psycopg.Error as exc:
            scrubbed = self.scrub(str(exc))
            if scrubbed == str(exc):
                raise
            failure = _same_error(exc, scrubbed)
        if failure is not None:
            # Raised outside the except block: the original (quoting the password) is not
            # chained to it. Same type, so an outage is still told from a bug.
            raise failure
        # JSON columns come back as text on both databases (LedgerRow decodes them once).
        for name in ("json", "jsonb"):
            connection.adapters.register_loader(name, TextLoader)
        return connection


def _same_error(exc: Exception, message: str) -> Exception:
    try:
        return type(exc)(message)
    except Exception:
        return LedgerError(message)


def _postgres_problem(rest: str) -> str | None:
    """What libpq would refuse in a URL by quoting it (password included) in its error."""
    hosts = rest[rest.rfind("@") + 1 :]
    hosts = re.split(r"[/?]", hosts, maxsplit=1)[0]
    for host in hosts.split(","):
        if host.startswith("["):
            address, closing, _ = host[1:].partition("]")
            if not closing:
                return "the IPv6 host address needs a closing ']' (e.g. postgresql://[::1]:5432/db)"
            try:
                ipaddress.IPv6Address(address)
            except ValueError:
                return "the host in brackets is not an IPv6 address (e.g. postgresql://[::1]/db)"
        elif "[" in host or "]" in host:
            return "a bracket in the host: only an IPv6 address goes in brackets"
    head = rest.split("/", 1)[0]
    if "@" not in head and "@" in rest[len(head) :] and not HOST_PORTS.fullmatch(head):
        # ``user:pa/ss@host``: libpq ends the user part at the first '/', misreading the rest.
        return "write a '/' in a user name or password as %2F"
    if _BAD_PERCENT.search(rest):
        return (
            "'%' must start a percent-encoded byte such as %40; write a '%' in a user name or "
            "password as %25"
        )
    return None


def is_outage(exc: BaseException) -> bool:
    """Whether an error means the database cannot be reached now (so writes go to the spool)."""
    if isinstance(exc, sqlite3.OperationalError):
        message = str(exc).lower()
        return any(
            text in message
            for text in ("locked", "unable to open", "disk i/o", "readonly", "busy", "full")
        )
    module = type(exc).__module__
    if module.startswith("psycopg"):
        import psycopg

        if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            return False
        # Class 54 (program limit exceeded, e.g. an index row too large) is a refusal of this
        # write, not an outage: spooling it would only replay the refusal.
        sqlstate = getattr(exc, "sqlstate", None) or ""
        return not sqlstate.startswith("54")
    return isinstance(exc, ConnectionError | TimeoutError)


def is_instantly_busy(exc: BaseException, waited: float) -> bool:
    """SQLite answered "locked"/"busy" without using its busy timeout (e.g. a WAL snapshot
    that another process just moved on): worth trying again at once."""
    if not isinstance(exc, sqlite3.OperationalError) or waited > 0.5:
        return False
    message = str(exc).lower()
    return "locked" in message or "busy" in message


def attempt(
    work: Callable[[Any], T],
    connect: Callable[[], Any],
    disconnect: Callable[[], None],
    *,
    held: bool,
) -> T:
    """Run ``work`` on the connection ``connect`` gives; when a ``held`` connection turns out
    dead (the server restarted), ``disconnect`` and run it once more on a new one. SQLite's
    instant "database is locked" answers (contention between processes, not an outage) are
    retried briefly. Any other error (and an outage on a new connection) is raised as it is."""
    pause = 0.005
    while True:
        started = time.monotonic()
        try:
            return work(connect())
        except LedgerError:
            raise
        except Exception as exc:
            if is_instantly_busy(exc, time.monotonic() - started) and pause < 1.0:
                time.sleep(pause)
                pause *= 2
                continue
            if not (held and is_outage(exc)):
                raise
            disconnect()
            held = False
