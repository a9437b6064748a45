"""The outage spool: ledger writes that could not reach the database, kept in order on disk.

Appends and replays take an exclusive lock on a lock file beside the spool, so concurrent
processes on one machine neither interleave nor lose entries. Every spooled write is one of
the repository's guarded statements, so replaying an entry twice changes nothing the second
time.

A spooled write the database refuses for good (a data error, not an outage) is set aside in a
dead-letter file beside the spool, and the replay goes on: one bad entry never holds back the
writes after it (``expediter ledger deadletters`` lists, retries and drops them). The spool
also knows the keys of the calls it holds, so a host can refuse to run a key again while its
first record waits in the spool. Every file here is its owner's only (0600 in 0700 folders).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from expediter.core.environment import private_dir, private_opener
from expediter.errors import LedgerError

__all__ = ["AlreadySpooled", "Spool"]

logger = logging.getLogger(__name__)

#: Characters of a database's answer kept with a dead letter.
_ERROR_LIMIT = 2000
#: Bytes of the spool's first line that (with its inode) tell the file this process read from
#: a rewritten one.
_PREFIX = 4096


class AlreadySpooled(LedgerError):
    """A call's ``proposed`` record is already in the spool (its key was run once already)."""

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = tuple(keys)
        super().__init__(f"already recorded in this host's spool: {', '.join(self.keys)}")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    private_dir(path.parent)
    with open(path, "a+b", opener=private_opener) as handle:
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


def _write_lines(path: Path, lines: Sequence[str], mode: str) -> None:
    """Write (``w``) or append (``a``) whole lines, durably, to a private file."""
    with open(path, mode, encoding="utf-8", opener=private_opener) as handle:
        handle.write("".join(f"{line}\n" for line in lines))
        handle.flush()
        os.fsync(handle.fileno())


def _created_keys(operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """The (key, attempt id) of each row a spooled write creates."""
    rows: Any = [params] if operation == "insert" else []
    if operation == "insert_many":
        rows = params.get("rows")
    if not isinstance(rows, list):
        return []
    return [
        (row["key"], str(row.get("attempt_id")))
        for row in rows
        if isinstance(row, dict) and isinstance(row.get("key"), str)
    ]


class Spool:
    """An append-only JSON-lines file of pending ledger writes, and its dead letters."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = path.with_name(path.name + ".lock")
        #: Spooled writes the database refused for good (JSON lines).
        self.deadletter_path = path.with_name(path.stem + ".deadletters.jsonl")
        #: Unreadable (torn) spool lines.
        self.rejected_path = path.with_name(path.name + ".rejected")
        #: The keys whose ``proposed`` record is in the spool, with its attempt id.
        self.keys: dict[str, str] = {}
        #: What ``keys`` was read from: the spool's inode and first line, and how far it was read.
        self._inode = -1
        self._prefix = b""
        self._offset = 0

    def pending(self) -> bool:
        """Whether writes are waiting to be replayed."""
        try:
            return self.path.stat().st_size > 0
        except OSError:
            return False

    def load(self) -> None:
        """Read the keys of the spooled calls (cheap when the spool is empty)."""
        if self.pending():
            self._catch_up()
        else:
            self.keys.clear()
            self._inode, self._prefix, self._offset = -1, b"", 0

    def _catch_up(self) -> None:
        """Bring ``keys`` up to date with the file: read only what was appended since, unless
        the file was rewritten (a replay elsewhere), then all of it."""
        try:
            with open(self.path, "rb") as handle:
                status = os.fstat(handle.fileno())
                head = handle.read(len(self._prefix)) if self._prefix else b""
                same = status.st_ino == self._inode and head == self._prefix
                start = self._offset if same and status.st_size >= self._offset else 0
                handle.seek(start)
                data = handle.read()
                self._inode = status.st_ino
        except OSError:
            data, start = b"", 0
        if start == 0:
            self.keys.clear()
            self._prefix = data[: min(data.find(b"\n") + 1 or len(data), _PREFIX)]
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        for line in data[:end].splitlines():
            self._note(line)
        self._offset = start + end

    def _note(self, line: bytes) -> None:
        try:
            entry = json.loads(line)
            self.keys.update(_created_keys(entry["op"], entry["params"]))
        except (ValueError, TypeError, KeyError, AttributeError):
            pass  # a torn line: replay sets it aside

    def append(self, operation: str, params: dict[str, Any]) -> None:
        """Keep one write for later (durably: fsync'ed); see ``extend``."""
        self.extend([(operation, params)])

    def extend(self, entries: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Keep writes for later, in order, in one durable append.

        Raises ``AlreadySpooled`` (and keeps nothing) when a write would create a row whose
        key the spool already holds, or that two of ``entries`` create.
        """
        created = [pair for op, params in entries for pair in _created_keys(op, params)]
        lines = [
            json.dumps({"op": operation, "params": params}, separators=(",", ":"))
            for operation, params in entries
        ]
        with _locked(self.lock):
            if created:
                self._catch_up()
                seen: set[str] = set()
                taken = []
                for key, _ in created:
                    if key in self.keys or key in seen:
                        taken.append(key)
                    seen.add(key)
                if taken:
                    raise AlreadySpooled(taken)
            _write_lines(self.path, lines, "a")
            if created:
                self.keys.update(created)
                self._catch_up()

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
        _write_lines(self.rejected_path, [line], "a")
        logger.error("an unreadable ledger spool entry was set aside in %s", self.rejected_path)
        return None

    def replay(
        self,
        apply: Callable[[str, dict[str, Any]], Any],
        *,
        refused: Callable[[BaseException], bool] = lambda exc: True,
    ) -> int:
        """Apply every pending write in order. A write whose error ``refused`` calls permanent
        is set aside as a dead letter and the replay goes on; any other error (an outage)
        stops it, keeping that write and the rest.

        Returns how many entries were applied (their statements ran, whether or not the guard
        let them change a row).
        """
        with _locked(self.lock):
            try:
                text = self.path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                return 0
            lines = text.splitlines()
            done = applied = 0
            try:
                for line in lines:
                    entry = self._read(line)
                    if entry is not None:
                        try:
                            apply(entry["op"], entry["params"])
                        except Exception as exc:
                            if not refused(exc):
                                raise
                            self._set_aside(entry["op"], entry["params"], exc)
                        else:
                            applied += 1
                    done += 1
            finally:
                if done:
                    temporary = self.path.with_name(self.path.name + ".tmp")
                    _write_lines(temporary, lines[done:], "w")
                    os.replace(temporary, self.path)
                    self._catch_up()
                if applied:
                    logger.info("replayed %d ledger writes from %s", applied, self.path)
            return applied

    # -- dead letters -----------------------------------------------------------------------

    def _set_aside(self, operation: str, params: dict[str, Any], exc: BaseException) -> None:
        """Keep a refused write in the dead-letter file (under the spool's lock)."""
        error = " ".join((str(exc) or type(exc).__name__).split())[:_ERROR_LIMIT]
        key = params.get("key")
        if key is None and operation == "insert_many":
            key = ", ".join(str(k) for k, _ in _created_keys(operation, params)) or None
        letter = {
            "id": os.urandom(6).hex(),
            "set_aside_at": time.time(),
            "operation": operation,
            "key": key if key is None else str(key),
            "error": error,
            "params": params,
        }
        _write_lines(self.deadletter_path, [json.dumps(letter, separators=(",", ":"))], "a")
        logger.error(
            "a spooled ledger write (%s of %s) the database refused was set aside in %s: %s",
            operation,
            key,
            self.deadletter_path,
            error,
        )

    def deadletters(self) -> list[dict[str, Any]]:
        """The writes set aside, oldest first."""
        try:
            text = self.deadletter_path.read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for line in text.splitlines():
            try:
                letter = json.loads(line)
            except ValueError:
                continue
            if isinstance(letter, dict) and isinstance(letter.get("params"), dict):
                found.append(letter)
        return found

    def remove_deadletter(self, letter_id: str) -> bool:
        """Delete one dead letter; whether it was there."""
        with _locked(self.lock):
            try:
                lines = self.deadletter_path.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                return False
            kept = []
            for line in lines:
                try:
                    if json.loads(line).get("id") == letter_id:
                        continue
                except (ValueError, AttributeError):
                    pass
                kept.append(line)
            if len(kept) == len(lines):
                return False
            temporary = self.deadletter_path.with_name(self.deadletter_path.name + ".tmp")
            _write_lines(temporary, kept, "w")
            os.replace(temporary, self.deadletter_path)
            return True
