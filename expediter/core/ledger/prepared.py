"""The ledger's writes on PostgreSQL: server-side prepared statements run through libpq.

psycopg's ``cursor.execute`` spends about 40 µs of client CPU per statement in Python (query
conversion, adaptation, the wait generator), which is most of a ledger call's CPU and what kept
4 workers at 0.57x pgbench's throughput (benchmarks/README.md: >= 0.8x). The ledger's writes
have fixed text and simple values (text, numbers, booleans, NULL), so they are prepared once
per connection and run with ``PQexecPrepared`` in the text format, the way ``pgbench -M
prepared`` does. libpq releases the GIL while it waits for the server. Reads keep using
psycopg's cursors.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, final

__all__ = ["PreparedWriter"]

_MARKER = re.compile(r"%s")
_repr = float.__repr__
#: Texts up to this long are remembered encoded, up to this many at a time.
_SHORT = 64
_KNOWN = 512


def _encode(value: Any) -> bytes | None:
    """A parameter in PostgreSQL's text format (``None`` is NULL)."""
    if value is None:
        return None
    if isinstance(value, str):  # str subclasses too (the status enums)
        return str.encode(value)
    if value is True or value is False:
        return b"t" if value else b"f"
    if isinstance(value, float):
        return float.__repr__(value).encode()
    if isinstance(value, int):
        return int.__repr__(value).encode()
    raise TypeError(f"the ledger cannot write a {type(value).__name__} value")


@final
class PreparedWriter:
    """Runs statements on a psycopg connection's libpq handle; each text is prepared once.

    The subset of a DBAPI cursor the ledger's writes use: ``execute(text, values)`` then
    ``rowcount``. Errors are raised as psycopg's exceptions (a lost connection is
    ``psycopg.OperationalError``), like the cursor would.
    """

    def __init__(self, connection: Any) -> None:
        from psycopg import pq

        self._connection = connection
        self._pgconn = connection.pgconn
        self._names: dict[str, bytes] = {}
        #: Short texts already encoded (see ``execute``).
        self._known: dict[str, bytes] = {}
        self._ok = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
        self.rowcount = -1

    def _prepare(self, text: str) -> bytes:
        count = iter(range(1, 10_000))
        numbered = _MARKER.sub(lambda _: f"${next(count)}", text)
        name = f"expediter_{len(self._names) + 1}".encode()
        self._check(self._pgconn.prepare(name, numbered.encode()))
        self._names[text] = name
        return name

    def _check(self, result: Any) -> Any:
        if result.status in self._ok:
            return result
        import psycopg
        from psycopg import errors, pq

        if self._pgconn.status != pq.ConnStatus.OK:
            message = self._pgconn.error_message.decode(errors="replace").strip()
            raise psycopg.OperationalError(message or "the connection to the server was lost")
        raise errors.error_from_result(result, encoding=self._connection.info.encoding)

    def execute(self, text: str, values: Sequence[Any]) -> PreparedWriter:
        """Run ``text`` (``%s`` placeholders) with positional ``values``."""
        name = self._names.get(text) or self._prepare(text)
        # The common types inline (this runs for every value of every write), and the short
        # texts that repeat from call to call (tool, action, user, worker, statuses) encoded
        # once: about a fifth of a call's client CPU with 4 workers (the throughput budget).
        known = self._known
        params = [
            None
            if v is None
            else (known.get(v) or self._remember(v))
            if type(v) is str
            else _repr(v).encode()
            if type(v) is float
            else (b"t" if v else b"f")
            if type(v) is bool
            else _encode(v)
            for v in values
        ]
        result = self._pgconn.exec_prepared(name, params)
        if result.status not in self._ok:
            self._check(result)
        self.rowcount = result.command_tuples or 0
        return self

    def _remember(self, text: str) -> bytes:
        """``text`` encoded, and remembered when it is short (the cache is emptied when full)."""
        encoded = text.encode()
        if len(text) <= _SHORT:
            if len(self._known) >= _KNOWN:
                self._known.clear()
            self._known[text] = encoded
        return encoded

    def command(self, text: bytes) -> None:
        """Run a statement without parameters (``BEGIN``, ``COMMIT``, ``ROLLBACK``)."""
        self._check(self._pgconn.exec_(text))
