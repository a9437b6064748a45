"""The outage spool: ledger writes that could not reach the database, kept in order on disk.

Appends and replays take an exclusive lock on a lock file beside the spool, so concurrent
processes on one machine neither interleave nor lose entries. Every spooled write is one of
the repository's guarded statements, so replaying an entry twice changes nothing the second
time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["Spool"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: one process per spool
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class Spool:
    """An append-only JSON-lines file of pending ledger writes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = path.with_name(path.name + ".lock")

    def pending(self) -> bool:
        """Whether writes are waiting to be replayed."""
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def append(self, operation: str, params: dict[str, Any]) -> None:
        """Keep one write for later (durably: fsync'ed)."""
        line = json.dumps({"op": operation, "params": params}, separators=(",", ":")) + "\n"
        with _locked(self.lock), open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def _read(self, line: str) -> dict[str, Any] | None:
        """One entry; a torn or unreadable line is set aside (not retried forever)."""
        if not line.strip():
            return None
        try:
            entry = json.loads(line)
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("params"), dict)
                and entry.get("op")
            ):
                return entry
        except ValueError:
            pass
        rejected = self.path.with_name(self.path.name + ".rejected")
        with open(rejected, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        logger.error("an unreadable ledger spool entry was set aside in %s", rejected)
        return None

    def replay(self, apply: Callable[[str, dict[str, Any]], Any]) -> int:
        """Apply every pending write in order; stop at the first failure, keeping the rest.

        Returns how many entries were applied (their statements ran, whether or not the guard
        let them change a row).
        """
        with _locked(self.lock):
            try:
                lines = self.path.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                return 0
            done = 0
            try:
                for line in lines:
                    entry = self._read(line)
                    if entry is not None:
                        apply(entry["op"], entry["params"])
                    done += 1
            finally:
                rest = lines[done:]
                temporary = self.path.with_name(self.path.name + ".tmp")
                temporary.write_text("".join(f"{line}\n" for line in rest), encoding="utf-8")
                os.replace(temporary, self.path)
                if done:
                    logger.info("replayed %d ledger writes from %s", done, self.path)
            return done
