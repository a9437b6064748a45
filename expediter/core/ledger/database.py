"""Where the ledger lives: URLs, raw DBAPI connections, and telling an outage from a bug.

The hot path runs on one held DBAPI connection in autocommit mode (``sqlite3`` or psycopg 3)
with statements compiled once by SQLAlchemy; SQLAlchemy engines are used only for migrations.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import attrs

from expediter.errors import LedgerError

__all__ = [
    "Database",
    "default_url",
    "is_instantly_busy",
    "is_outage",
]

Dialect = Literal["sqlite", "postgresql"]

_SYNCHRONOUS = {"off", "normal", "full", "extra"}


def default_url(home: Path) -> str:
    """The embedded default: an SQLite file in the data directory."""
    return f"sqlite:///{home / 'expediter.db'}"


@attrs.frozen
class Database:
    """A parsed database URL and how to connect to it."""

    url: str
    dialect: Dialect
    #: SQLite: the file path; PostgreSQL: the libpq connection string.
    target: str
    #: SQLite's ``synchronous`` pragma (``normal`` unless the URL says ``?synchronous=full``).
    synchronous: str = "normal"

    @classmethod
    def parse(cls, url: str) -> Database:
        """Read ``sqlite:///path`` or ``postgresql[+psycopg]://user:pass@host:port/db``."""
        parts = urlsplit(url)
        scheme = parts.scheme.split("+", 1)[0]
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        if scheme == "sqlite":
            path = url.split("://", 1)[1].split("?", 1)[0]
            path = path[1:] if path.startswith("/") else path
            if not path or path == ":memory:":
                raise LedgerError("the ledger needs an SQLite file, not an in-memory database")
            synchronous = query.get("synchronous", "normal").lower()
            if synchronous not in _SYNCHRONOUS:
                raise LedgerError(f"synchronous must be one of {sorted(_SYNCHRONOUS)}")
            return cls(url, "sqlite", os.path.expanduser(path), synchronous)
        if scheme in ("postgresql", "postgres"):
            rest = url.split("://", 1)[1]
            return cls("postgresql+psycopg://" + rest, "postgresql", "postgresql://" + rest)
        raise LedgerError(
            f"unsupported database URL {_redact(url)!r}: use sqlite:///path or postgresql://..."
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
        return _redact(self.url)

    def connect(self, timeout: float = 5.0) -> Any:
        """A new autocommit DBAPI connection."""
        if self.dialect == "sqlite":
            Path(self.target).parent.mkdir(parents=True, exist_ok=True)
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

        connection = psycopg.connect(
            self.target, autocommit=True, connect_timeout=max(1, int(timeout)), prepare_threshold=0
        )
        # JSON columns come back as text on both databases (LedgerRow decodes them once).
        for name in ("json", "jsonb"):
            connection.adapters.register_loader(name, TextLoader)
        return connection


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@", 1)
    return url


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

        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    return isinstance(exc, ConnectionError | TimeoutError)


def is_instantly_busy(exc: BaseException, waited: float) -> bool:
    """SQLite answered "locked"/"busy" without using its busy timeout (e.g. a WAL snapshot
    that another process just moved on): worth trying again at once."""
    if not isinstance(exc, sqlite3.OperationalError) or waited > 0.5:
        return False
    message = str(exc).lower()
    return "locked" in message or "busy" in message
