"""How ``Ledger.wait`` sleeps until a call may have changed: LISTEN on PostgreSQL, polling on
SQLite.

On PostgreSQL the writers announce a key (``pg_notify``, see ``statements.CHANNEL``) only when
a paused call is decided, an approved call finishes, or a sweep abandons a call, so ordinary
calls pay nothing for waiters. A waiter listens on a connection of its own, opened when it
starts waiting, and still re-reads every pending key now and then, in case it missed a notice
(its connection dropped, or the writer was an older version).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from expediter.core.ledger.database import Database
from expediter.core.ledger.statements import CHANNEL
from expediter.core.records.statuses import FINAL_LEDGER_STATUSES

__all__ = ["FINAL_STATUSES", "Listen", "Poll", "Sleeper", "sleeper_for", "wait_for"]

logger = logging.getLogger(__name__)
Row = TypeVar("Row")

#: Ledger statuses after which a call changes no more (``abandoned`` may still gain a late
#: result, but nobody waits for that).
FINAL_STATUSES = FINAL_LEDGER_STATUSES
#: Polling (SQLite): the first pause, its growth, and its cap, in seconds.
POLL_FIRST = 0.005
POLL_GROWTH = 1.5
POLL_CAP = 0.25
#: Listening (PostgreSQL): re-read every pending key at least this often, notice or not.
LISTEN_RECHECK = 2.0


class Sleeper(Protocol):
    """Sleeps until some keys may have changed."""

    def sleep(self, remaining: float | None) -> set[str] | None:
        """Sleep at most ``remaining`` seconds (None: no limit); the keys announced meanwhile,
        or None when every pending key should be read again."""

    def close(self) -> None:
        """Release what the sleeper holds."""


class Poll:
    """Short sleeps that grow up to ``POLL_CAP``, after each of which every key is read."""

    def __init__(self) -> None:
        self.pause = POLL_FIRST

    def sleep(self, remaining: float | None) -> set[str] | None:
        """Sleep the next pause (never past ``remaining``); always re-read everything."""
        pause = self.pause if remaining is None else min(self.pause, remaining)
        time.sleep(max(0.0, pause))
        self.pause = min(self.pause * POLL_GROWTH, POLL_CAP)
        return None

    def close(self) -> None:
        """Nothing to release."""


class Listen:
    """``LISTEN`` on a connection of its own; wakes when a key is announced."""

    def __init__(self, database: Database) -> None:
        self._connection: Any = database.connect()
        self._connection.execute(f"LISTEN {CHANNEL}")
        self._poll: Poll | None = None

    def sleep(self, remaining: float | None) -> set[str] | None:
        """Wait for notices (at most ``LISTEN_RECHECK`` seconds, then re-read everything)."""
        if self._poll is not None:
            return self._poll.sleep(remaining)
        limit = LISTEN_RECHECK if remaining is None else min(remaining, LISTEN_RECHECK)
        try:
            keys = {
                notice.payload
                for notice in self._connection.notifies(timeout=max(0.0, limit), stop_after=1)
            }
        except Exception as exc:
            # The listening connection failed (or psycopg is older than 3.2): poll instead.
            logger.warning("listening for ledger decisions failed (%s); polling instead", exc)
            self.close()
            self._poll = Poll()
            return None
        return keys or None

    def close(self) -> None:
        """Close the listening connection."""
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                logger.debug("closing the listening connection failed", exc_info=True)


def sleeper_for(database: Database) -> Sleeper:
    """How to wait on this database: LISTEN on PostgreSQL (polling if that fails), else poll."""
    if database.dialect != "postgresql":
        return Poll()
    try:
        return Listen(database)
    except Exception as exc:
        logger.warning("cannot listen for ledger decisions (%s); polling instead", exc)
        return Poll()


def wait_for(
    keys: list[str],
    timeout: float | None,
    sleeper: Callable[[], Sleeper],
    final: Callable[[list[str]], dict[str, Row]],
) -> dict[str, Row]:
    """Read ``final(keys)`` until it has every key or ``timeout`` seconds pass (None: no limit),
    sleeping in between; what was final by then, in the order of ``keys``.

    The first read's LedgerError (an unusable ledger) propagates; later ones (an outage while
    waiting) are logged and waited out.
    """
    from expediter.errors import LedgerError

    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    found: dict[str, Row] = {}
    # Start listening before the first read, so a decision made in between is not missed.
    sleeping = sleeper() if keys else None
    try:
        found.update(final(keys) if keys else {})
        while sleeping is not None and len(found) < len(keys):
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            woke = sleeping.sleep(remaining)
            pending = [k for k in keys if k not in found and (woke is None or k in woke)]
            if not pending:
                continue
            try:
                found.update(final(pending))
            except LedgerError as exc:
                logger.warning("waiting for ledger calls: %s", exc)
    finally:
        if sleeping is not None:
            sleeping.close()
    return {key: found[key] for key in keys if key in found}
