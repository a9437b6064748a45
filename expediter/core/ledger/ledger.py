"""The ledger: a durable record of every tool call, on SQLite (embedded) or PostgreSQL.

One held autocommit connection per process, statements compiled once, a lease on every running
call renewed by a background thread, and an on-disk spool that keeps writes in order while the
database cannot be reached, replayed when it answers again.

Delivery guarantees (docs/ledger.md; docs/ledger.md, "Delivery guarantees"): by default a
call runs even while the database is unreachable, and every execution is recorded (at least
once, never silently twice): a key already in this host's spool is refused, and a duplicate
execution that still happens is recorded on replay as its own row. With ``fail_closed=True``
nothing runs unless the database took its ``proposed`` row first (at most once).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, final

import attrs

from expediter.core.ledger import operations
from expediter.core.ledger.attempts import Attempt, Proposal
from expediter.core.ledger.columns import (
    ARGUMENTS_LIMIT,
    KEY_LIMIT,
    RESULT_LIMIT,
    capped,
    column_text,
    json_column,
    new_attempt_id,
    parse_duration,
    stored_key,
)
from expediter.core.ledger.database import Database, attempt, default_url, is_outage
from expediter.core.ledger.leases import LeaseKeeper
from expediter.core.ledger.reading import CLIENT_SIDE, LedgerReads
from expediter.core.ledger.records import DeadLetter
from expediter.core.ledger.repository import INSERT_ORDER, Repository, Statements
from expediter.core.ledger.schema import HEAD, current_revision, upgrade
from expediter.core.ledger.spool import AlreadySpooled, Spool
from expediter.core.ledger.waiting import FINAL_STATUSES
from expediter.core.records.redaction import redact
from expediter.errors import LedgerError

if TYPE_CHECKING:
    from expediter.core.config import HostConfig

__all__ = [
    "ARGUMENTS_LIMIT",
    "CLIENT_SIDE",
    "FINAL_STATUSES",
    "RESULT_LIMIT",
    "Attempt",
    "DeadLetter",
    "Ledger",
    "Proposal",
    "parse_duration",
    "redact",
]


logger = logging.getLogger(__name__)

_SWEEP_BATCH = 1000
#: ``_write``'s answer when a write reached neither the database nor the spool.
_LOST = object()
_DOWN = "unreachable"
#: ``begin``'s text values in one string, checked at once (the quickest way measured).
_PROBE = "%s" * 11
#: ``_write``'s answer when a fail-closed ledger could not record a call (so it must not run).
_REFUSED = object()
#: The writes that create rows (refused rather than spooled by a fail-closed ledger).
_INSERTS = frozenset({"insert", "insert_many"})
T = TypeVar("T")


@final
class Ledger(LedgerReads):
    """Records calls; reads them back for ``expediter ledger`` and the Python API."""

    def __init__(
        self,
        url: str | None = None,
        *,
        home: Path,
        lease_seconds: float = 60.0,
        fail_closed: bool = False,
        auto_upgrade: bool | None = None,
        approval_seconds: float = 86400.0,
    ) -> None:
        self.database = (
            Database.parse(url)
            if url
            else attrs.evolve(Database.parse(default_url(home)), create_folder=True)
        )
        self.lease_seconds = float(lease_seconds)
        #: How long a call may wait for a human's decision before the sweeper abandons it.
        self.approval_seconds = float(approval_seconds)
        self.fail_closed = fail_closed
        #: Embedded SQLite is upgraded on open; PostgreSQL needs `expediter db upgrade`.
        self.auto_upgrade = (
            self.database.dialect == "sqlite" if auto_upgrade is None else auto_upgrade
        )
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
        digest = hashlib.sha256(self.database.url.encode()).hexdigest()[:16]
        self.spool = Spool(home / "spool" / f"ledger-{digest}.jsonl")
        # The keys a previous run left in the spool are refused while the database is down.
        self.spool.load()
        self._statements = Statements(self.database.dialect)
        self._repository: Repository | None = None
        self._lock = threading.RLock()
        self._retry_at = 0.0
        self._backoff = 0.5
        self._spooled = self.spool.pending()
        #: The attempts running in this process, their leases renewed.
        self.leases = LeaseKeeper(self.lease_seconds, self._renew_lease)

    @classmethod
    def from_config(cls, config: HostConfig, *, fail_closed: bool = False) -> Ledger:
        """The ledger a ``HostConfig`` names (what ``Host()`` and the CLI both open)."""
        return cls(
            config.database_url,
            home=config.home,
            lease_seconds=config.lease_seconds,
            approval_seconds=config.approval_seconds,
            fail_closed=fail_closed,
        )

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> Repository:
        if self._repository is not None:
            return self._repository
        connection = self.database.connect()
        revision = current_revision(connection)
        if revision != HEAD:
            if not self.auto_upgrade:
                connection.close()
                found = (
                    f"has no schema yet (no tables), and expediter needs {HEAD}"
                    if revision is None
                    else f"has schema {revision}, and expediter needs {HEAD}"
                )
                raise LedgerError(
                    f"the ledger {self.database.display} {found}: run `expediter db upgrade`"
                )
            connection.close()
            upgrade(self.database)
            connection = self.database.connect()
        self._repository = Repository(connection, self._statements)
        return self._repository

    def _attempt(self, work: Callable[[Repository], T]) -> T:
        """Run ``work`` on the connection (see ``database.attempt``: a dead held connection is
        replaced once, SQLite's instant "locked" answers are retried)."""
        return attempt(work, self._connect, self._disconnect, held=self._repository is not None)

    def _read(self, work: Callable[[Repository], T]) -> T:
        """Run a read (or a sweep): an unreachable database is a LedgerError."""
        with self._lock:
            try:
                return self._attempt(work)
            except LedgerError:
                raise
            except Exception as exc:
                if is_outage(exc):
                    self._disconnect()
                    raise LedgerError(
                        f"the ledger at {self.database.display} is unreachable: {exc}"
                    ) from exc
                raise

    def _disconnect(self) -> None:
        repository, self._repository = self._repository, None
        if repository is not None:
            try:
                repository.connection.close()
            except Exception:
                logger.debug("closing a broken ledger connection failed", exc_info=True)

    def open(self) -> None:
        """Connect now, so the first call does not pay for it; an outage is only logged (writes
        go to the spool), a schema that needs upgrading raises LedgerError."""
        with self._lock:
            try:
                self._attempt(lambda repository: repository)
            except LedgerError:
                raise
            except Exception as exc:
                if not is_outage(exc):
                    raise LedgerError(f"the ledger at {self.database.display}: {exc}") from exc
                self._retry_at = time.monotonic() + self._backoff
                logger.warning("the ledger at %s is unreachable: %s", self.database.display, exc)

    def check(self) -> None:
        """Connect now (and upgrade embedded SQLite): raises LedgerError when unusable."""
        with self._lock:
            try:
                self._connect()
            except LedgerError:
                raise
            except Exception as exc:
                raise LedgerError(
                    f"the ledger at {self.database.display} is unreachable: {exc}"
                ) from exc

    def close(self) -> None:
        """Stop renewing leases and close the connection."""
        self.leases.close()
        with self._lock:
            self._disconnect()

    # -- writing ------------------------------------------------------------------------------

    def _apply(self, repository: Repository, operation: str, params: dict[str, Any]) -> Any:
        return operations.apply(repository, operation, params)

    def _replayed(self, repository: Repository, operation: str, params: dict[str, Any]) -> Any:
        """Apply a write from the spool (or a dead letter): its call may have run already."""
        return operations.apply(repository, operation, params, replaying=True, moved=self._moved)

    def _moved(self, key: str, attempt_id: str, row_key: str) -> None:
        """A replay recorded attempt ``attempt_id`` as a duplicate: if it still runs here, its
        lease and its result go to that row."""
        attempt = self.leases.get(attempt_id)
        if attempt is not None and attempt.key == key:
            attempt.key = row_key

    def _write(self, operation: str, params: dict[str, Any]) -> Any:
        """Run a write, or keep it in the spool while the database is unreachable."""
        with self._lock:
            repository = self._repository
            if repository is not None and not self._spooled:
                # The common case, on the held connection (the per-call budgets in
                # benchmarks/README.md); any failure takes the full path below, which retries it.
                try:
                    return self._apply(repository, operation, params)
                except LedgerError:
                    raise
                except Exception:
                    logger.debug("ledger write %s failed; trying again", operation, exc_info=True)
            # A fail-closed host asks the database every time: it must not run calls blind.
            # So does a decision on a paused call: only the database can say who decided first.
            refuse = (operation in _INSERTS and self.fail_closed) or (
                operation == "decide" and params.get("expected") == "awaiting_approval"
            )
            if refuse or time.monotonic() >= self._retry_at:
                try:
                    result = self._attempt(
                        lambda repo: self._replay_and_apply(repo, operation, params)
                    )
                    self._retry_at, self._backoff = 0.0, 0.5
                    return result
                except LedgerError:
                    raise
                except Exception as exc:
                    if not is_outage(exc):
                        raise LedgerError(f"the ledger write {operation} failed: {exc}") from exc
                    self._disconnect()
                    self._retry_at = time.monotonic() + self._backoff
                    self._backoff = min(self._backoff * 2, 30.0)
                    logger.warning(
                        "the ledger at %s is unreachable (%s); writes go to %s until it answers",
                        self.database.display,
                        exc,
                        self.spool.path,
                    )
            if refuse:
                return _REFUSED
            try:
                return self._spool(operation, params)
            except OSError as exc:
                logger.error(
                    "ledger write %s lost: neither the database nor the spool %s took it (%s)",
                    operation,
                    self.spool.path,
                    exc,
                )
                return _LOST

    def _spool(self, operation: str, params: dict[str, Any]) -> Any:
        """Keep a write in the spool; None, or for ``insert_many`` a list with None for each
        row kept and False for each row whose key the spool (or the batch) already holds."""
        if operation == "insert_many":
            answer = self._spool_rows(params["rows"])
        else:
            if operation == "decide":
                attempt = self.spool.keys.get(params["key"])
                if attempt is not None:
                    params = {**params, "for_attempt": attempt}
            try:
                self.spool.append(operation, params)
            except AlreadySpooled as exc:
                raise LedgerError(
                    f"the call {params['key']!r} is already recorded in this host's spool "
                    f"(the ledger at {self.database.display} is {_DOWN}): it was not run again"
                ) from exc
            answer = None
        self._spooled = True
        return answer

    def _spool_rows(self, rows: list[dict[str, Any]]) -> list[Any]:
        """Spool a batch's rows as one append of ``insert`` writes (each replayed, and if need
        be set aside, on its own), leaving out keys already spooled or repeated."""
        refused: set[str] = set()
        while True:
            seen: set[str] = set()
            kept = []
            for row in rows:
                key = row["key"]
                if key not in refused and key not in seen and key not in self.spool.keys:
                    kept.append(row)
                seen.add(key)
            try:
                if kept:
                    self.spool.extend([("insert", row) for row in kept])
            except AlreadySpooled as exc:  # another process spooled some meanwhile
                refused.update(exc.keys)
                continue
            chosen = {id(row) for row in kept}
            return [None if id(row) in chosen else False for row in rows]

    def _replay_and_apply(
        self, repository: Repository, operation: str, params: dict[str, Any]
    ) -> Any:
        if self._spooled:
            self._replay_spool(repository)
        return self._apply(repository, operation, params)

    def _replay_spool(self, repository: Repository) -> int:
        """Apply the spool; a write the database refuses for good becomes a dead letter."""
        done = self.spool.replay(
            functools.partial(self._replayed, repository), refused=_refused_for_good
        )
        self._spooled = self.spool.pending()
        return done

    def begin(
        self,
        *,
        key: str,
        call_id: str,
        user_id: str | None,
        name: str | None = None,
        run_id: str | None = None,
        message_id: str | None = None,
        owner_id: str | None = None,
        instance_id: str | None = None,
        tool: str | None = None,
        action: str | None = None,
        arguments: Any = None,
        request: Any = None,
        lease: bool = True,
        decision: str | None = None,
        reason: str | None = None,
        delegated_from: str | None = None,
    ) -> Attempt:
        """Record a call as ``proposed`` (with a lease when it is about to run), before it runs.

        ``request`` is what a paused call needs to resume in another process. Every value is
        stored in a form both databases take (see ``columns``; the attempt's ``key`` is the
        key's stored form). LedgerError means the call must not run: the database is
        unreachable and ``fail_closed`` is set, or the key is already in this host's spool, or
        neither the database nor the spool could take the record.
        """
        now = time.time()
        attempt_id = new_attempt_id()
        # Every value storable on both databases (columns.py); one check of all the texts at
        # once for the common case, plain short ASCII (the per-call budgets).
        probe = _PROBE % (
            key, call_id, name, message_id, run_id, user_id, owner_id, instance_id, tool, action,
            decision,
        )  # fmt: skip
        if len(probe) > KEY_LIMIT or not probe.isascii() or "\x00" in probe:
            key, message_id, user_id = stored_key(key), stored_key(message_id), stored_key(user_id)
            call_id = column_text(call_id)
            name, run_id, owner_id, instance_id, tool, action, decision = map(
                column_text, (name, run_id, owner_id, instance_id, tool, action, decision)
            )
        # The values in INSERT_ORDER, written on the held connection without building the row
        # dict, which only a spooled or retried write needs: with 4 workers on 2 cores every
        # bit of Python per call shows (benchmarks/README.md, the throughput budget).
        recorded = None if arguments is None else capped(redact(arguments), ARGUMENTS_LIMIT)
        values = (
            key, call_id, name, message_id, run_id, user_id, owner_id, instance_id, tool, action,
            recorded, decision, None, "proposed",
            None, None, now, now, None, None, now + self.lease_seconds if lease else None,
            self.worker_id, attempt_id, None if request is None else json_column(request),
            None if reason is None else column_text(reason),
            None if delegated_from is None else column_text(delegated_from),
        )  # fmt: skip
        with self._lock:
            repository = self._repository
            if repository is not None and not self._spooled:
                try:
                    created: Any = repository.propose(values)
                except Exception:
                    created = self._write("insert", dict(zip(INSERT_ORDER, values, strict=True)))
            else:
                created = self._write("insert", dict(zip(INSERT_ORDER, values, strict=True)))
        if created is _REFUSED:
            raise self._refused()
        if created is _LOST:
            raise self._lost()
        if created is True and lease:
            attempt = Attempt(key, user_id, attempt_id, time.monotonic(), True)
            self.leases.hold(attempt)
            return attempt
        return self._started(key, user_id, attempt_id, created, lease)

    def begin_many(self, proposals: Sequence[Proposal]) -> list[Attempt]:
        """Record several calls (e.g. one turn's) as ``proposed`` in one commit; one attempt
        per proposal, in order, each with ``created`` as ``begin`` reports it (a key that
        already exists, in the database or earlier in ``proposals``, is ``created=False``).

        While the database is unreachable the rows go to the spool, and a key this host's
        spool already holds is ``created=False`` too (it must not run again). LedgerError when
        neither the database nor the spool takes them (none may run), or with
        ``fail_closed`` while the database is unreachable.
        """
        if not proposals:
            return []
        now = time.time()
        rows = [self._proposed(now, *attrs.astuple(p, recurse=False)) for p in proposals]
        created = self._write("insert_many", {"rows": rows})
        if created is _REFUSED:
            raise self._refused()
        if created is _LOST:
            raise self._lost()
        return [
            self._started(row["key"], row["user_id"], row["attempt_id"], done, proposal.lease)
            for row, done, proposal in zip(rows, created, proposals, strict=True)
        ]

    def _proposed(
        self,
        now: float,
        key: str,
        call_id: str,
        user_id: str | None,
        name: str | None,
        run_id: str | None,
        message_id: str | None,
        owner_id: str | None,
        instance_id: str | None,
        tool: str | None,
        action: str | None,
        arguments: Any,
        request: Any,
        lease: bool,
        decision: str | None,
        reason: str | None,
        delegated_from: str | None = None,
    ) -> dict[str, Any]:
        """The ``proposed`` row of a call (the parameters in ``Proposal``'s field order)."""
        return {
            "key": stored_key(key),
            "call_id": column_text(call_id),
            "name": column_text(name),
            "message_id": stored_key(message_id),
            "run_id": column_text(run_id),
            "user_id": stored_key(user_id),
            "owner_id": column_text(owner_id),
            "instance_id": column_text(instance_id),
            "tool": column_text(tool),
            "action": column_text(action),
            "arguments": None if arguments is None else capped(redact(arguments), ARGUMENTS_LIMIT),
            "decision": column_text(decision),
            "decided_by": None,
            "decision_reason": column_text(reason),
            "status": "proposed",
            "result": None,
            "error": None,
            "attempted_at": now,
            "updated_at": now,
            "finished_at": None,
            "duration_ms": None,
            "lease_expires_at": now + self.lease_seconds if lease else None,
            "worker_id": self.worker_id,
            "attempt_id": new_attempt_id(),
            "request": json_column(request),
            "delegated_from": column_text(delegated_from),
        }

    def _refused(self) -> LedgerError:
        return LedgerError(
            f"the ledger at {self.database.display} is unreachable and fail_closed is set: "
            "the call was not run"
        )

    def _lost(self) -> LedgerError:
        return LedgerError(
            f"neither the ledger at {self.database.display} nor its spool {self.spool.path} "
            "could record the call, so it was not run; check that the data directory "
            "(EXPEDITER_HOME) is writable"
        )

    def _started(
        self, key: str, user_id: str | None, attempt_id: str, created: Any, lease: bool
    ) -> Attempt:
        """The attempt of a ``proposed`` row, given what writing it answered."""
        attempt = Attempt(key, user_id, attempt_id, time.monotonic(), created)
        if created is not False and lease:
            self.leases.hold(attempt)
        return attempt

    def decide(
        self,
        key: str,
        user_id: str | None,
        *,
        expected: str,
        status: str,
        decision: str | None,
        decided_by: str | None = None,
        reason: str | None = None,
    ) -> Attempt | None:
        """Record a decision on a row: ``awaiting_approval``, ``denied`` or ``approved``.

        ``approved`` claims the row for this process (a new attempt with a lease, ready to run
        and finish). Returns the attempt, ``created=None`` when the write went to the spool
        (the outcome is unknown), or None when the row was not in ``expected`` (e.g. another
        worker decided first). A decision on a paused call (``expected="awaiting_approval"``)
        is never spooled: with the database unreachable it raises LedgerError.
        """
        now = time.time()
        key, user_id = stored_key(key), stored_key(user_id)
        claim = status == "approved"
        attempt_id = new_attempt_id() if claim else None
        params = {
            "key": key,
            "user_id": user_id,
            "expected": expected,
            "status": status,
            "decision": column_text(decision),
            "decided_by": column_text(decided_by),
            "now": now,
            "error": column_text(reason) if status == "denied" else None,
            "decision_reason": column_text(reason),
            "lease_expires_at": now + self.lease_seconds if claim else None,
            "worker_id": self.worker_id if claim else None,
            "attempt_id": attempt_id,
        }
        applied = self._write("decide", params)
        if applied is _REFUSED:
            raise LedgerError(
                f"the ledger at {self.database.display} is unreachable: the decision on call "
                f"{key!r} was not recorded (nothing ran); try again when it answers"
            )
        if applied is False or applied is _LOST:
            return None
        created = True if applied is True else None
        attempt = Attempt(key, user_id, attempt_id or "", time.monotonic(), created, status)
        if claim and created:
            self.leases.hold(attempt)
        return attempt

    def finish(
        self,
        attempt: Attempt,
        *,
        ok: bool,
        result: Any = None,
        error: str | None = None,
        duration_ms: float | None = None,
    ) -> bool | None:
        """Record how a call ended: ``executed`` or ``failed`` (``late`` if it was swept)."""
        if attempt.created is False:
            return False
        key = attempt.key
        self.leases.release(attempt)
        now = time.time()
        expected = attempt.status
        if attempt.recorded and (expected == "proposed" or expected == "approved"):
            # The per-call path (see begin): the move is allowed, the values go as a tuple.
            values = (
                "executed" if ok else "failed", capped(result),
                None if error is None else column_text(error), now, now, duration_ms, False, key,
                expected, attempt.user_id, attempt.attempt_id,
            )  # fmt: skip
            with self._lock:
                repository = self._repository
                if repository is not None and not self._spooled:
                    try:
                        if repository.finish_values(values, announce=expected == "approved"):
                            return True
                    except Exception:
                        logger.debug("finishing %s failed; trying again", key, exc_info=True)
        params = {
            "key": attempt.key,
            "user_id": attempt.user_id,
            "attempt_id": attempt.attempt_id,
            "expected": attempt.status,
            "status": "executed" if ok else "failed",
            "result": capped(result),
            "error": column_text(error),
            "finished_at": now,
            "duration_ms": duration_ms,
        }
        applied = self._write("finish", params)
        if applied is _LOST:
            return None
        if applied is False:
            logger.warning("ledger row %s was not in the expected state to finish", attempt.key)
        return applied  # type: ignore[no-any-return]

    def confirm(self, message_id: str) -> int | None:
        """Mark a message's executed calls ``confirmed`` (the model saw their results)."""
        params = {"message_id": stored_key(message_id), "now": time.time()}
        return self._write("confirm", params)  # type: ignore[no-any-return]

    # -- leases -------------------------------------------------------------------------------

    def _renew_lease(self, attempt: Attempt) -> bool:
        with self._lock:
            return self._attempt(functools.partial(self._renew, attempt))

    def _renew(self, attempt: Attempt, repository: Repository) -> bool:
        until = time.time() + self.lease_seconds
        key, attempt_id = attempt.key, attempt.attempt_id
        if repository.renew(key, attempt.user_id, attempt_id, attempt.status, until):
            return True
        # Its row may be a duplicate's, recorded by a replay in another process.
        found = operations.row_of(repository, key, attempt_id)
        if found is None or found == key:
            return False
        attempt.key = found
        return repository.renew(found, attempt.user_id, attempt_id, attempt.status, until)

    def sweep(self) -> list[str]:
        """Mark rows whose lease expired (their worker died) ``abandoned``, and approvals older
        than ``approval_seconds``; returns their keys."""

        def sweep_all(repository: Repository) -> list[str]:
            swept: list[str] = []
            now = time.time()
            while True:
                batch = repository.sweep(now, _SWEEP_BATCH)
                swept.extend(batch)
                if len(batch) < _SWEEP_BATCH:
                    break
            swept.extend(repository.expire_approvals(now - self.approval_seconds, now))
            return swept

        return self._read(sweep_all)

    def replay(self) -> int:
        """Apply the spooled writes now; returns how many were applied. A write the database
        refuses for good is set aside (``deadletters``); LedgerError when the database cannot
        be reached."""
        with self._lock:
            try:
                done = self._read(self._replay_spool)
            except (LedgerError, OSError):
                raise
            except Exception as exc:
                raise LedgerError(f"replaying the spool {self.spool.path} failed: {exc}") from exc
            if not self._spooled:
                self._retry_at, self._backoff = 0.0, 0.5
            return done

    # -- dead letters -------------------------------------------------------------------------

    def deadletters(self) -> list[DeadLetter]:
        """The spooled writes the database refused for good, set aside, oldest first."""
        return [_dead_letter(entry) for entry in self.spool.deadletters()]

    def _deadletter(self, letter_id: str) -> DeadLetter:
        for letter in self.deadletters():
            if letter.id == letter_id:
                return letter
        raise LedgerError(
            f"there is no dead letter {letter_id!r}: `expediter ledger deadletters` lists them"
        )

    def retry_deadletter(self, letter_id: str) -> None:
        """Apply a dead letter again; it is removed when the database takes it. LedgerError
        (the letter kept) when the database refuses it again or cannot be reached."""
        letter = self._deadletter(letter_id)
        with self._lock:
            try:
                self._attempt(
                    lambda repository: self._replayed(
                        repository, letter.operation, dict(letter.params)
                    )
                )
            except Exception as exc:
                if is_outage(exc):
                    self._disconnect()
                    raise LedgerError(
                        f"the ledger at {self.database.display} is {_DOWN} ({exc}); dead "
                        f"letter {letter_id} is kept"
                    ) from exc
                error = " ".join((str(exc) or type(exc).__name__).split())
                raise LedgerError(
                    f"the database refused dead letter {letter_id} again: {error}"
                ) from exc
        self.spool.remove_deadletter(letter_id)

    def drop_deadletter(self, letter_id: str) -> None:
        """Delete a dead letter (its write is given up); LedgerError for an unknown id."""
        if not self.spool.remove_deadletter(letter_id):
            self._deadletter(letter_id)  # raises: no such letter
            raise LedgerError(f"dead letter {letter_id!r} could not be removed")


def _refused_for_good(exc: BaseException) -> bool:
    """Whether a replayed write's error is the database refusing it (set it aside), not an
    outage (stop and keep it)."""
    return not is_outage(exc)


def _dead_letter(entry: dict[str, Any]) -> DeadLetter:
    """A dead-letter file's entry as a record."""
    key = entry.get("key")
    moment = entry.get("set_aside_at")
    return DeadLetter(
        id=str(entry.get("id")),
        operation=str(entry.get("operation")),
        key=None if key is None else str(key),
        error=str(entry.get("error") or ""),
        set_aside_at=float(moment) if isinstance(moment, int | float) else 0.0,
        params=dict(entry.get("params") or {}),
    )
