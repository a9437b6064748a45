"""The ledger: a durable record of every tool call, on SQLite (embedded) or PostgreSQL.

One held autocommit connection per process, statements compiled once, a lease on every running
call renewed by a background thread, and an on-disk spool that keeps writes in order while the
database cannot be reached, replayed when it answers again.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, final

import attrs

from expediter.core.ledger.attempts import Attempt, Proposal
from expediter.core.ledger.columns import (
    RESULT_LIMIT,
    capped,
    column_text,
    forks,
    json_column,
    new_attempt_id,
    parse_duration,
)
from expediter.core.ledger.database import Database, default_url, is_instantly_busy, is_outage
from expediter.core.ledger.records import LedgerRow, ToolStats
from expediter.core.ledger.repository import INSERT_ORDER, Repository, Statements
from expediter.core.ledger.schema import HEAD, current_revision, upgrade
from expediter.core.ledger.spool import Spool
from expediter.core.ledger.waiting import FINAL_STATUSES, sleeper_for, wait_for
from expediter.core.records.redaction import redact
from expediter.errors import LedgerError

if TYPE_CHECKING:
    from expediter.core.config import HostConfig

__all__ = [
    "CLIENT_SIDE",
    "FINAL_STATUSES",
    "RESULT_LIMIT",
    "Attempt",
    "Ledger",
    "Proposal",
    "parse_duration",
    "redact",
]

#: The ``decision`` of a call the application runs itself (waiting for its result).
CLIENT_SIDE = "client_side"

logger = logging.getLogger(__name__)

_SWEEP_BATCH = 1000
#: ``_write``'s answer when a write reached neither the database nor the spool.
_LOST = object()
#: ``_write``'s answer when a fail-closed ledger could not record a call (so it must not run).
_REFUSED = object()
#: The writes that create rows (refused rather than spooled by a fail-closed ledger).
_INSERTS = frozenset({"insert", "insert_many"})
T = TypeVar("T")


@final
class Ledger:
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
        self.database = Database.parse(url or default_url(home))
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
        self._statements = Statements(self.database.dialect)
        self._repository: Repository | None = None
        self._lock = threading.RLock()
        self._retry_at = 0.0
        self._backoff = 0.5
        self._spooled = self.spool.pending()
        self._running: dict[str, Attempt] = {}
        self._keeper: threading.Thread | None = None
        #: ``forks()`` when the keeper started (-1: not started).
        self._keeper_fork = -1
        self._closed = threading.Event()

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
                raise LedgerError(
                    f"the ledger schema of {self.database.display} is at {revision or 'nothing'}, "
                    f"expediter needs {HEAD}: run `expediter db upgrade`"
                )
            connection.close()
            upgrade(self.database)
            connection = self.database.connect()
        self._repository = Repository(connection, self._statements)
        return self._repository

    def _attempt(self, work: Callable[[Repository], T]) -> T:
        """Run ``work`` on the connection; when a held connection turns out dead (the server
        restarted), reconnect once and run it again. SQLite's instant "database is locked"
        answers (contention between processes, not an outage) are retried briefly."""
        held = self._repository is not None
        pause = 0.005
        while True:
            started = time.monotonic()
            try:
                return work(self._connect())
            except LedgerError:
                raise
            except Exception as exc:
                if is_instantly_busy(exc, time.monotonic() - started) and pause < 1.0:
                    time.sleep(pause)
                    pause *= 2
                    continue
                if not (held and is_outage(exc)):
                    raise
                self._disconnect()
                held = False

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
        self._closed.set()
        with self._lock:
            self._disconnect()

    # -- writing ------------------------------------------------------------------------------

    def _apply(self, repository: Repository, operation: str, params: dict[str, Any]) -> Any:
        if operation == "insert":
            if repository.insert(params):
                return True
            # A retry after a lost reply (or a replay) may meet the row this attempt wrote.
            existing = repository.get(params["key"])
            return existing is not None and existing.get("attempt_id") == params["attempt_id"]
        if operation == "insert_many":
            rows = params["rows"]
            created = repository.insert_many(rows)
            for index, row in enumerate(rows):
                if not created[index]:
                    existing = repository.get(row["key"])
                    created[index] = (
                        existing is not None and existing.get("attempt_id") == row["attempt_id"]
                    )
            return created
        if operation == "upsert":
            return repository.upsert_executed(params)
        if operation == "finish":
            if repository.finish(**params):
                return True
            # Swept while it ran: the result still counts, marked late.
            late = {**params, "expected": "abandoned", "late": True}
            return repository.finish(**late)
        if operation == "decide":
            return repository.decide(**params)
        if operation == "confirm":
            return repository.confirm(**params)
        raise LedgerError(f"unknown ledger operation {operation!r}")

    def _write(self, operation: str, params: dict[str, Any]) -> Any:
        """Run a write, or keep it in the spool while the database is unreachable."""
        with self._lock:
            repository = self._repository
            if repository is not None and not self._spooled:
                # The common case, on the held connection (the per-call budgets of DESIGN.md
                # section 9); any failure takes the full path below, which retries it.
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
                self.spool.append(operation, params)
            except OSError as exc:
                logger.error(
                    "ledger write %s lost: neither the database nor the spool %s took it (%s)",
                    operation,
                    self.spool.path,
                    exc,
                )
                return _LOST
            self._spooled = True
            return None

    def _replay_and_apply(
        self, repository: Repository, operation: str, params: dict[str, Any]
    ) -> Any:
        if self._spooled:
            self.spool.replay(lambda op, p: self._apply(repository, op, p))
            self._spooled = self.spool.pending()
        return self._apply(repository, operation, params)

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
    ) -> Attempt:
        """Record a call as ``proposed`` (with a lease when it is about to run), before it runs.

        ``request`` is what a paused call needs to resume in another process. With
        ``fail_closed`` an unreachable database raises LedgerError (the call must not run).
        """
        now = time.time()
        attempt_id = new_attempt_id()
        # The values in INSERT_ORDER, written on the held connection without building the row
        # dict, which only a spooled or retried write needs: with 4 workers on 2 cores every
        # bit of Python per call shows (DESIGN.md section 9, the throughput budget).
        recorded = None if arguments is None else json_column(redact(arguments))
        values = (
            key, call_id, name, message_id, run_id, user_id, owner_id, instance_id, tool, action,
            recorded, decision, None, "proposed",
            None, None, now, now, None, None, now + self.lease_seconds if lease else None,
            self.worker_id, attempt_id, None if request is None else json_column(request),
            None if reason is None else column_text(reason),
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
        if created is True and lease:
            attempt = Attempt(key, user_id, attempt_id, time.monotonic(), True)
            self._hold(attempt)
            return attempt
        return self._started(dict(zip(INSERT_ORDER, values, strict=True)), created, lease)

    def begin_many(self, proposals: Sequence[Proposal]) -> list[Attempt]:
        """Record several calls (e.g. one turn's) as ``proposed`` in one commit; one attempt
        per proposal, in order, each with ``created`` as ``begin`` reports it (a key that
        already exists, in the database or earlier in ``proposals``, is ``created=False``)."""
        if not proposals:
            return []
        now = time.time()
        rows = [self._proposed(now, *attrs.astuple(p, recurse=False)) for p in proposals]
        created = self._write("insert_many", {"rows": rows})
        if created is _REFUSED:
            raise self._refused()
        if not isinstance(created, list):  # spooled (None) or lost: the same for every row
            created = [created] * len(rows)
        return [
            self._started(row, done, proposal.lease)
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
    ) -> dict[str, Any]:
        """The ``proposed`` row of a call (the parameters in ``Proposal``'s field order)."""
        return {
            "key": key,
            "call_id": call_id,
            "name": name,
            "message_id": message_id,
            "run_id": run_id,
            "user_id": user_id,
            "owner_id": owner_id,
            "instance_id": instance_id,
            "tool": tool,
            "action": action,
            "arguments": None if arguments is None else json_column(redact(arguments)),
            "decision": decision,
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
        }

    def _refused(self) -> LedgerError:
        return LedgerError(
            f"the ledger at {self.database.display} is unreachable and fail_closed is set: "
            "the call was not run"
        )

    def _started(self, row: dict[str, Any], created: Any, lease: bool) -> Attempt:
        """The attempt of a ``proposed`` row, given what writing it answered."""
        recorded = created is not _LOST
        if not recorded:
            created = None
        attempt = Attempt(
            row["key"],
            row["user_id"],
            row["attempt_id"],
            time.monotonic(),
            created,
            recorded=recorded,
        )
        if not recorded:
            attempt.row = row
        if created is not False and lease:
            self._hold(attempt)
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
        claim = status == "approved"
        attempt_id = new_attempt_id() if claim else None
        params = {
            "key": key,
            "user_id": user_id,
            "expected": expected,
            "status": status,
            "decision": decision,
            "decided_by": decided_by,
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
            self._hold(attempt)
        return attempt

    def pending_approvals(self, *, limit: int = 0) -> list[LedgerRow]:
        """Calls waiting for a human's decision, oldest first (client-side calls excluded)."""
        from expediter.core.ledger import queries

        query, params = queries.pending_approvals(client_side=CLIENT_SIDE, limit=limit)
        found = self._read(lambda repository: repository.select(query, params))
        return [LedgerRow.from_db(row) for row in found]

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
        if self._running.get(key) is attempt:
            del self._running[key]
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
        if not attempt.recorded:
            row = {**attempt.row, **params, "updated_at": now, "lease_expires_at": None}
            for name in ("expected", "user_id", "attempt_id", "key"):
                row.pop(name, None)
            row.update(key=attempt.key, user_id=attempt.user_id, attempt_id=attempt.attempt_id)
            applied = self._write("upsert", row)
        else:
            applied = self._write("finish", params)
        if applied is _LOST:
            return None
        if applied is False:
            logger.warning("ledger row %s was not in the expected state to finish", attempt.key)
        return applied  # type: ignore[no-any-return]

    def confirm(self, message_id: str) -> int | None:
        """Mark a message's executed calls ``confirmed`` (the model saw their results)."""
        return self._write("confirm", {"message_id": message_id, "now": time.time()})  # type: ignore[no-any-return]

    # -- leases -------------------------------------------------------------------------------

    def _hold(self, attempt: Attempt) -> None:
        self._running[attempt.key] = attempt
        # The keeper runs until close(); only a forked child needs its own (an int compare
        # per call instead of Thread.is_alive(): the per-call budgets).
        if self._keeper_fork != forks():
            with self._lock:
                if self._keeper_fork != forks():
                    self._keeper = threading.Thread(
                        target=self._renew_leases, name="expediter-lease", daemon=True
                    )
                    self._keeper.start()
                    self._keeper_fork = forks()

    def _renew_leases(self) -> None:
        interval = max(0.05, self.lease_seconds / 3)
        while not self._closed.wait(interval):
            for attempt in list(self._running.values()):
                if time.monotonic() - attempt.started < interval:
                    continue
                try:
                    with self._lock:
                        renewed = self._attempt(functools.partial(self._renew, attempt))
                    if not renewed and attempt.key in self._running:
                        logger.warning("could not renew the lease of ledger row %s", attempt.key)
                except Exception as exc:
                    logger.warning("renewing the lease of %s failed: %s", attempt.key, exc)

    def _renew(self, attempt: Attempt, repository: Repository) -> bool:
        until = time.time() + self.lease_seconds
        return repository.renew(
            attempt.key, attempt.user_id, attempt.attempt_id, attempt.status, until
        )

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
        """Apply the spooled writes now; returns how many were applied."""
        with self._lock:
            done = self._read(
                lambda repository: self.spool.replay(lambda op, p: self._apply(repository, op, p))
            )
            self._spooled = self.spool.pending()
            if not self._spooled:
                self._retry_at, self._backoff = 0.0, 0.5
            return done

    # -- reading ------------------------------------------------------------------------------

    def get(self, key: str) -> LedgerRow | None:
        """The row of a key, or None."""
        row = self._read(lambda repository: repository.get(key))
        return None if row is None else LedgerRow.from_db(row)

    def rows(
        self,
        *,
        status: str | None = None,
        user_id: str | None = None,
        tool: str | None = None,
        since: float | None = None,
        limit: int = 100,
    ) -> list[LedgerRow]:
        """Rows newest first, filtered; ``since`` is seconds ago; ``limit=0`` for all."""
        from expediter.core.ledger import queries

        query, params = queries.rows(
            status=status, user_id=user_id, tool=tool, since=since, limit=limit
        )
        found = self._read(lambda repository: repository.select(query, params))
        return [LedgerRow.from_db(row) for row in found]

    def stats(self, *, since: float | None = None) -> list[ToolStats]:
        """Calls, failures and p50/p95 duration per tool."""
        from expediter.core.ledger import queries

        query, params = queries.stats(since=since)
        found = self._read(lambda repository: repository.select(query, params))
        return queries.tool_stats(found)

    def wait(self, keys: Iterable[str], timeout: float | None = None) -> dict[str, LedgerRow]:
        """Wait until every key's call is final (executed, confirmed, failed, denied or
        abandoned), or ``timeout`` seconds (None: no limit); the rows final by then, by key.

        Never raises for a timeout, and an unknown key just never becomes final. PostgreSQL
        wakes it with LISTEN on a connection of its own; on SQLite it polls.
        """

        def final(pending: list[str]) -> dict[str, LedgerRow]:
            found = self._read(lambda repository: repository.get_many(pending))
            return {
                key: LedgerRow.from_db(row)
                for key, row in found.items()
                if row["status"] in FINAL_STATUSES
            }

        return wait_for(
            list(dict.fromkeys(keys)), timeout, lambda: sleeper_for(self.database), final
        )

    def keys_with_prefix(self, prefix: str, limit: int = 10) -> list[str]:
        """Up to ``limit`` keys that start with ``prefix`` (exactly, case included), sorted."""
        import sqlalchemy as sa

        from expediter.core.ledger.tables import tool_call_attempts as t

        # LIKE (its wildcards escaped) can use an index; substr keeps it exact where LIKE
        # ignores case (SQLite).
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = (
            sa.select(t.c.key)
            .where(t.c.key.like(sa.bindparam("f_pattern"), escape="\\"))
            .where(sa.func.substr(t.c.key, 1, len(prefix)) == sa.bindparam("f_prefix"))
            .order_by(t.c.key)
            .limit(max(1, limit))
        )
        params = {"f_pattern": escaped + "%", "f_prefix": prefix}
        found = self._read(lambda repository: repository.select(query, params))
        return [str(row["key"]) for row in found]
