"""The ledger's writes as applied to a repository, by name (``insert``, ``finish``, ...): the
live path, the outage spool's replay and a retried dead letter all apply them here.

A replayed ``insert`` that meets a row of another attempt is a duplicate execution that still
happened (a call run twice during an outage, e.g. by two hosts): it is recorded as a row of its
own, ``KEY#dup-N`` with ``duplicate_of = KEY``, and that attempt's later writes find it there
(``row_of``), so no execution disappears without a trace.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

from expediter.core.ledger.repository import Repository
from expediter.errors import LedgerError

__all__ = ["OPERATIONS", "Moved", "apply", "duplicate_key", "row_of"]

logger = logging.getLogger(__name__)

#: The writes the ledger spools (``upsert`` and ``insert_many`` only in older spools).
OPERATIONS = frozenset({"insert", "insert_many", "upsert", "finish", "decide", "confirm"})
#: Told (key, attempt id, the key of its row) when a replay records an attempt as a duplicate.
Moved = Callable[[str, str, str], None]
_DUPLICATE = "{}#dup-{}"  # stored_key (columns.py) keeps the number of a long key's


def duplicate_key(key: str, number: int) -> str:
    """The key of the ``number``-th duplicate execution of ``key`` (from 1)."""
    return _DUPLICATE.format(key, number)


def row_of(repository: Repository, key: str, attempt_id: str | None) -> str | None:
    """The key of the row attempt ``attempt_id`` of ``key`` wrote: ``key`` itself or one of
    its duplicates; None when there is none."""
    row = repository.get(key)
    if row is None or attempt_id is None:
        return None
    if row.get("attempt_id") == attempt_id:
        return key
    for number in itertools.count(1):
        candidate = duplicate_key(key, number)
        row = repository.get(candidate)
        if row is None:
            return None
        if row.get("attempt_id") == attempt_id:
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover


def apply(
    repository: Repository,
    operation: str,
    params: dict[str, Any],
    *,
    replaying: bool = False,
    moved: Moved | None = None,
) -> Any:
    """Run one write; what it answers (see ``Ledger._write``). ``replaying``: the write comes
    from the spool (or the dead letters), so its call may have run already."""
    if operation == "insert":
        if repository.insert(params) or _ours(repository, params):
            return True
        # Live: the key exists, the call must not run. Replayed: it ran (or was decided).
        return _record_duplicate(repository, params, moved) if replaying else False
    if operation == "insert_many":
        rows = params["rows"]
        created = repository.insert_many(rows)
        for index, row in enumerate(rows):
            if not created[index]:
                created[index] = _ours(repository, row) or (
                    replaying and _record_duplicate(repository, row, moved)
                )
        return created
    if operation == "upsert":
        return repository.upsert_executed(params)
    if operation == "finish":
        return _finish(repository, params, replaying=replaying)
    if operation == "decide":
        params = dict(params)
        attempt = params.pop("for_attempt", None)
        if attempt is not None:
            # Spooled after its call's spooled insert: it decides that attempt's row (maybe a
            # duplicate's), never another attempt's row of the same key.
            found = row_of(repository, params["key"], attempt)
            if found is None:
                return _no_row(params["key"], replaying=replaying)
            params["key"] = found
        return repository.decide(**params)
    if operation == "confirm":
        return repository.confirm(**params)
    raise LedgerError(f"unknown ledger operation {operation!r}")


def _ours(repository: Repository, row: dict[str, Any]) -> bool:
    """Whether the existing row of ``row``'s key is this attempt's (a retry after a lost
    reply, or a replay, meets the row it wrote)."""
    existing = repository.get(row["key"])
    return existing is not None and existing.get("attempt_id") == row["attempt_id"]


def _record_duplicate(repository: Repository, row: dict[str, Any], moved: Moved | None) -> bool:
    key = row["key"]
    for number in itertools.count(1):
        candidate = duplicate_key(key, number)
        if repository.insert_duplicate({**row, "key": candidate, "duplicate_of": key}):
            logger.warning(
                "call %s ran more than once while the ledger was unreachable: this execution "
                "is recorded as %s",
                key,
                candidate,
            )
            break
        if _ours(repository, {**row, "key": candidate}):
            break
    if moved is not None:
        moved(key, row["attempt_id"], candidate)
    return True


def _no_row(key: str, *, replaying: bool) -> bool:
    """A write for an attempt that has no row: nothing to change live; replayed, its insert
    was set aside (or given up), so this write is set aside too, to be retried after it."""
    if replaying:
        raise LedgerError(
            f"call {key!r} has no row of this attempt: its first record was not written "
            "(retry its insert's dead letter first)"
        )
    return False


def _finish(repository: Repository, params: dict[str, Any], *, replaying: bool) -> bool:
    if repository.finish(**params):
        return True
    # Swept while it ran: the result still counts, marked late.
    if repository.finish(**{**params, "expected": "abandoned", "late": True}):
        return True
    # The attempt's row may be a duplicate's, recorded when the spool was replayed.
    found = row_of(repository, params["key"], params["attempt_id"])
    if found is None:
        return _no_row(params["key"], replaying=replaying)
    if found == params["key"]:
        return False
    moved = {**params, "key": found}
    return repository.finish(**moved) or repository.finish(
        **{**moved, "expected": "abandoned", "late": True}
    )
