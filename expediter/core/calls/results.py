"""Turn what a tool returned (or raised) into an outcome: ok with JSON data, or an error."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import attrs

from expediter.core.authoring.conversion import NotJSON, to_json_value

# ``clean_text``, ``model_copy`` and ``sanitize`` live in ``core.records.text``; they stay
# importable from here, where the executor has always found them.
from expediter.core.records.text import clean_text, model_copy, sanitize
from expediter.errors import ActionNotFound, ArgumentError, LedgerError, ToolNotFound
from expediter.hookspecs.tool import ToolError, ToolResult

__all__ = [
    "Outcome",
    "clean_text",
    "model_copy",
    "outcome_from_exception",
    "outcome_from_value",
    "sanitize",
]


@attrs.frozen
class Outcome:
    """A call's normalized result: ok with a JSON value, or an error.

    The call's status is ``completed`` or ``error`` from ``ok`` (``CallStatus``); an outcome
    has no status vocabulary of its own.
    """

    #: Whether the call succeeded.
    ok: bool
    value: Any = None
    error: str | None = None
    #: ``ArgumentError``, ``ToolNotFound``, ``ToolError``, or the type of the exception raised.
    error_type: str | None = None
    #: Whether the error came from the tool raising an unexpected exception.
    crashed: bool = False


def _json_or_error(value: Any) -> tuple[Any, str | None]:
    try:
        return sanitize(to_json_value(value)), None
    except NotJSON as exc:
        return None, f"the tool's result cannot be sent to the model: {exc}"


def _in_band_error(value: Mapping[str, Any]) -> str | None:
    if value.get("status") == "error":
        detail = value.get("error") or value.get("message") or "the tool reported an error"
        return clean_text(str(detail))
    error = value.get("error")
    if error:
        return clean_text(error if isinstance(error, str) else json.dumps(to_json_value(error)))
    return None


_SCALARS = frozenset({str, int, bool, type(None)})


def outcome_from_value(value: Any) -> Outcome:
    """Normalize a returned value: ``ToolError``, ``ToolResult`` and error dicts mean error."""
    if type(value) in _SCALARS:
        return Outcome(True, value=sanitize(value) if type(value) is str else value)
    if isinstance(value, BaseException):
        return outcome_from_exception(value)
    if isinstance(value, ToolResult):
        data, problem = _json_or_error(value.value)
        if problem is not None:
            return Outcome(False, error=problem, error_type="ResultError")
        if not value.ok:
            message = value.error or (
                data if isinstance(data, str) else "the tool reported an error"
            )
            return Outcome(False, value=data, error=clean_text(message), error_type="ToolError")
        return Outcome(True, value=data)
    data, problem = _json_or_error(value)
    if problem is not None:
        return Outcome(False, error=problem, error_type="ResultError")
    if isinstance(data, Mapping):
        reported = _in_band_error(data)
        if reported is not None:
            return Outcome(False, value=data, error=reported, error_type="ToolError")
    return Outcome(True, value=data)


def outcome_from_exception(exc: BaseException) -> Outcome:
    """Normalize an exception: expected errors keep their message, others name their type."""
    if isinstance(exc, ArgumentError):
        return Outcome(False, error=clean_text(exc.message), error_type="ArgumentError")
    if isinstance(exc, ToolNotFound | ActionNotFound | LedgerError):
        return Outcome(False, error=clean_text(str(exc)), error_type=type(exc).__name__)
    if isinstance(exc, ToolError):
        data, _ = _json_or_error(exc.data)
        return Outcome(False, value=data, error=clean_text(exc.message), error_type="ToolError")
    message = str(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return Outcome(False, error=clean_text(text), error_type=type(exc).__name__, crashed=True)


def outcome_of(
    value: Any,
    exc: BaseException | None,
    *,
    tool: str | None,
    action: str | None,
    log: logging.Logger,
) -> Outcome:
    """Normalize what a call returned or raised (a value that cannot be normalized counts as
    raised); a crash is logged to ``log`` with its traceback."""
    if exc is None:
        try:
            return outcome_from_value(value)
        except Exception as problem:
            exc = problem
    outcome = outcome_from_exception(exc)
    if outcome.crashed:
        log.error(
            "tool %s action %s raised %s",
            tool,
            action,
            type(exc).__name__,
            exc_info=exc,
            extra={"tool": tool, "action": action},
        )
    return outcome
