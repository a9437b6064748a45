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
from expediter.core.records.limits import LARGEST_INT, SMALLEST_INT
from expediter.core.records.redaction import log_hidden
from expediter.core.records.text import clean_text, json_text, model_copy, sanitize
from expediter.errors import ActionNotFound, ArgumentError, EgressBlocked, LedgerError, ToolNotFound
from expediter.hookspecs.tool import ToolError, ToolResult

__all__ = [
    "Outcome",
    "ToolExit",
    "clean_text",
    "exception_text",
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
    #: What the host changed in the result to send it (e.g. non-finite numbers as null).
    note: str | None = None
    #: What the ledger and the logs get instead of ``error`` when the model must see less
    #: (an egress refusal's reason).
    detail: str | None = None


class _Notes(list[str]):
    """Where a result was changed to become JSON (a list, so ``to_json_value`` appends)."""

    def text(self) -> str | None:
        if not self:
            return None
        shown = "; ".join(self[:3])
        return shown + (f"; and {len(self) - 3} more" if len(self) > 3 else "")


def _json_or_error(value: Any, notes: _Notes) -> tuple[Any, str | None]:
    try:
        return to_json_value(value, notes, clean=True), None
    except NotJSON as exc:
        return None, f"the tool's result cannot be sent to the model: {exc}"
    except RecursionError:
        return None, "the tool's result cannot be sent to the model: it is nested too deeply"


def _in_band_error(value: Mapping[str, Any]) -> str | None:
    if value.get("status") == "error":
        detail = value.get("error") or value.get("message") or "the tool reported an error"
        return clean_text(json_text(detail))
    error = value.get("error")
    if error:
        return clean_text(error if isinstance(error, str) else json.dumps(to_json_value(error)))
    return None


class ToolExit(Exception):
    """A tool raised ``SystemExit`` or ``KeyboardInterrupt`` where it would stop more than the
    call (an event loop, a worker thread's caller): carried as an ordinary exception."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(type(original).__name__)
        self.original = original

    @property
    def interrupted(self) -> bool:
        """The tool (or the user) interrupted the program: it still stops, after the rows."""
        return isinstance(self.original, KeyboardInterrupt)


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in when the exception cannot say what it is (its ``__str__``
    raises, or returns something that is not text)."""
    try:
        text = str(exc)
    except Exception:
        return "(its message could not be read)"
    return text if isinstance(text, str) else "(its message could not be read)"


def _message(message: Any) -> str:
    """A ``ToolError``'s message as text (a tool may pass anything)."""
    if isinstance(message, str):
        return clean_text(message)
    try:
        return clean_text(json_text(to_json_value(message)))
    except Exception:
        return f"the tool reported an error ({type(message).__name__} message)"


_SCALARS = frozenset({str, int, bool, type(None)})


def outcome_from_value(value: Any) -> Outcome:
    """Normalize a returned value: ``ToolError``, ``ToolResult`` and error dicts mean error."""
    if type(value) in _SCALARS and (type(value) is not int or SMALLEST_INT < value < LARGEST_INT):
        return Outcome(True, value=sanitize(value) if type(value) is str else value)
    if isinstance(value, BaseException):
        return outcome_from_exception(value)
    notes = _Notes()
    if isinstance(value, ToolResult):
        data, problem = _json_or_error(value.value, notes)
        if problem is not None:
            return Outcome(False, error=problem, error_type="ResultError")
        if not value.ok:
            message = value.error or (
                data if isinstance(data, str) else "the tool reported an error"
            )
            return Outcome(
                False,
                value=data,
                error=_message(message),
                error_type="ToolError",
                note=notes.text(),
            )
        return Outcome(True, value=data, note=notes.text())
    data, problem = _json_or_error(value, notes)
    if problem is not None:
        return Outcome(False, error=problem, error_type="ResultError")
    if isinstance(data, Mapping):
        reported = _in_band_error(data)
        if reported is not None:
            return Outcome(
                False, value=data, error=reported, error_type="ToolError", note=notes.text()
            )
    return Outcome(True, value=data, note=notes.text())


def outcome_from_exception(exc: BaseException) -> Outcome:
    """Normalize an exception: expected errors keep their message, others name their type."""
    if isinstance(exc, ArgumentError):
        return Outcome(False, error=clean_text(exc.message), error_type="ArgumentError")
    if isinstance(exc, EgressBlocked):
        # The model learns only that the policy refused; the ledger row and logs say why.
        return Outcome(
            False,
            error=EgressBlocked.MESSAGE,
            error_type="EgressBlocked",
            detail=clean_text(_egress_detail(exc)),
        )
    if isinstance(exc, ToolNotFound | ActionNotFound | LedgerError):
        return Outcome(False, error=clean_text(str(exc)), error_type=type(exc).__name__)
    if isinstance(exc, ToolError):
        data, _ = _json_or_error(exc.data, _Notes())
        return Outcome(False, value=data, error=_message(exc.message), error_type="ToolError")
    if isinstance(exc, ToolExit):
        exc = exc.original
    if isinstance(exc, KeyboardInterrupt):
        return Outcome(False, error="interrupted", error_type="KeyboardInterrupt")
    if isinstance(exc, SystemExit):
        return Outcome(
            False,
            error=f"the tool tried to exit the program (sys.exit({_exit_code(exc)})); "
            "it was stopped and the host carries on",
            error_type="SystemExit",
            crashed=True,
        )
    message = exception_text(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return Outcome(False, error=clean_text(text), error_type=type(exc).__name__, crashed=True)


def _egress_detail(exc: EgressBlocked) -> str:
    """An egress refusal as the operator reads it: reason and hint (a subclass may carry
    anything, even a ``detail`` that raises)."""
    try:
        detail = exc.detail
    except Exception:
        detail = None
    if isinstance(detail, str):
        return detail
    reason = getattr(exc, "reason", None)
    return f"{EgressBlocked.MESSAGE}: {reason if isinstance(reason, str) else '(no reason given)'}"


def _exit_code(exc: SystemExit) -> str:
    code = exc.code
    if code is None or type(code) is int:
        return "" if code is None else str(code)
    return "..."


def outcome_of(
    value: Any,
    exc: BaseException | None,
    *,
    tool: str | None,
    action: str | None,
    log: logging.Logger,
    secrets: frozenset[str] = frozenset(),
) -> Outcome:
    """Normalize what a call returned or raised (a value that cannot be normalized counts as
    raised); a crash is logged to ``log`` with its traceback, ``secrets`` hidden from both
    (the outcome's texts are the caller's to hide)."""
    if exc is None:
        try:
            return outcome_from_value(value)
        except Exception as problem:
            exc = problem
    try:
        outcome = outcome_from_exception(exc)
    except Exception:  # nothing the tool raised may escape, not even from its own methods
        outcome = Outcome(
            False, error=type(exc).__name__, error_type=type(exc).__name__, crashed=True
        )
    if outcome.crashed:
        log_hidden(
            log,
            logging.ERROR,
            "tool %s action %s raised %s",
            tool,
            action,
            type(exc).__name__,
            secrets=secrets,
            exc=exc,
            extra={"tool": tool, "action": action},
        )
    return outcome
