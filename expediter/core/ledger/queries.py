"""The operators' reads (``ledger ls``, ``ledger stats``, ``approvals ls``), built with SQLAlchemy.

These run once per command, so they are composed and compiled when asked; importing this module
imports SQLAlchemy, which the call path never does (see ``statements.py``).

Which index serves which read (``tables.py``): ``ls`` newest first and ``--since`` walk
``ix_tool_call_attempts_attempted``; ``ls --user`` walks ``ix_tool_call_attempts_user``
(partial: rows with a user); approvals walk ``ix_tool_call_attempts_waiting``; ``--status`` and
``--tool`` filter what those walks find.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from expediter.core.ledger.records import ToolStats
from expediter.core.ledger.tables import tool_call_attempts as t

__all__ = ["duplicates", "keys_with_prefix", "pending_approvals", "rows", "stats", "tool_stats"]

Query = tuple[Any, dict[str, Any]]


def rows(
    *,
    status: str | None = None,
    user_id: str | None = None,
    tool: str | None = None,
    since: float | None = None,
    limit: int = 100,
) -> Query:
    """Rows newest first, filtered; ``since`` is seconds ago; ``limit=0`` for all."""
    query = sa.select(t).order_by(t.c.attempted_at.desc(), t.c.key)
    params: dict[str, Any] = {}
    for column, value in (("status", status), ("user_id", user_id), ("tool", tool)):
        if value is not None:
            query = query.where(t.c[column] == sa.bindparam(f"f_{column}"))
            params[f"f_{column}"] = value
    if since is not None:
        query = query.where(t.c.attempted_at >= sa.bindparam("f_since"))
        params["f_since"] = time.time() - since
    if limit and limit > 0:
        query = query.limit(sa.bindparam("f_limit"))
        params["f_limit"] = int(limit)
    return query, params


def stats(*, since: float | None = None) -> Query:
    """Tool, status and duration of every call (of the last ``since`` seconds)."""
    query = sa.select(t.c.tool, t.c.status, t.c.duration_ms)
    params: dict[str, Any] = {}
    if since is not None:
        query = query.where(t.c.attempted_at >= sa.bindparam("f_since"))
        params["f_since"] = time.time() - since
    return query, params


def pending_approvals(*, client_side: str, limit: int = 0) -> Query:
    """Calls waiting for a human's decision, oldest first (those whose decision is
    ``client_side``, waiting for the application's result, excluded)."""
    query = (
        sa.select(t)
        .where(t.c.status == "awaiting_approval")
        .where(t.c.decision.is_distinct_from(client_side))
        .order_by(t.c.updated_at, t.c.key)
    )
    if limit > 0:
        query = query.limit(limit)
    return query, {}


def keys_with_prefix(prefix: str, limit: int = 10, status: str | None = None) -> Query:
    """Up to ``limit`` keys that start with ``prefix`` (exactly, case included), sorted; only
    those of rows in ``status`` when it is given."""
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
    params: dict[str, Any] = {"f_pattern": escaped + "%", "f_prefix": prefix}
    if status is not None:
        query = query.where(t.c.status == sa.bindparam("f_status"))
        params["f_status"] = status
    return query, params


def duplicates(key: str) -> Query:
    """The keys of the duplicate executions of ``key`` recorded on replay, oldest first
    (``ix_tool_call_attempts_duplicate``)."""
    query = (
        sa.select(t.c.key)
        .where(t.c.duplicate_of == sa.bindparam("f_key"))
        .order_by(t.c.attempted_at, t.c.key)
    )
    return query, {"f_key": key}


def tool_stats(found: list[dict[str, Any]]) -> list[ToolStats]:
    """Calls, failures and p50/p95 duration per tool, from ``stats`` rows."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in found:
        grouped.setdefault(row["tool"] or "-", []).append(row)
    return [_stats(tool, rows) for tool, rows in sorted(grouped.items())]


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    return round(ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower), 3)


def _stats(tool: str, rows: list[dict[str, Any]]) -> ToolStats:
    durations = [float(row["duration_ms"]) for row in rows if row["duration_ms"] is not None]
    failures = sum(1 for row in rows if row["status"] == "failed")
    abandoned = sum(1 for row in rows if row["status"] == "abandoned")
    return ToolStats(
        tool,
        len(rows),
        failures,
        _percentile(durations, 0.5),
        _percentile(durations, 0.95),
        abandoned,
    )
