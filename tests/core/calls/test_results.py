"""What a tool returned or raised, as an outcome (``core/results.py``) and as a host event."""

import enum
import logging
from collections.abc import Callable
from typing import Any

import attrs
import pytest

import expediter
from expediter.core.calls.results import Outcome, outcome_from_exception, outcome_from_value
from expediter.errors import ActionNotFound, ArgumentError, ToolNotFound
from expediter.hookspecs.tool import ToolError, ToolResult

CallTool = Callable[..., expediter.CallEvent]


class Quota(ToolError):
    """A tool's own error type."""


class Size(enum.Enum):
    BIG = "big"


# -- returned values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("text", Outcome(True, value="text"), id="str"),
        pytest.param(None, Outcome(True), id="none"),
        pytest.param([1, Size.BIG], Outcome(True, value=[1, "big"]), id="list"),
        pytest.param(
            {"status": "ok", "n": 1}, Outcome(True, value={"status": "ok", "n": 1}), id="ok-dict"
        ),
        pytest.param(
            {"error": None, "n": 1}, Outcome(True, value={"error": None, "n": 1}), id="null-error"
        ),
        pytest.param(
            {"error": "", "n": 1}, Outcome(True, value={"error": "", "n": 1}), id="empty-error"
        ),
        pytest.param({"error": False}, Outcome(True, value={"error": False}), id="false-error"),
        pytest.param(ToolResult("done"), Outcome(True, value="done"), id="ToolResult-ok"),
        pytest.param(ToolResult(Size.BIG), Outcome(True, value="big"), id="ToolResult-converted"),
    ],
)
def test_plain_values_are_ok(value: Any, expected: Outcome) -> None:
    outcome = outcome_from_value(value)
    assert outcome == expected
    assert outcome.ok


def test_an_outcome_is_ok_or_not_with_no_status_words_of_its_own() -> None:
    # Statuses are CallStatus's words (core.records.statuses); an outcome only says ok or not.
    assert attrs.fields(Outcome)[0].name == "ok"
    assert not hasattr(Outcome(True), "status")
    assert outcome_from_value("fine").ok is True
    assert outcome_from_exception(ValueError("bad")).ok is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            ToolResult(status="error", error="no such city"),
            Outcome(False, error="no such city", error_type="ToolError"),
            id="ToolResult-error",
        ),
        pytest.param(
            ToolResult({"city": "Atlantis"}, status="error", error="no such city"),
            Outcome(
                False, value={"city": "Atlantis"}, error="no such city", error_type="ToolError"
            ),
            id="ToolResult-error-with-value",
        ),
        pytest.param(
            ToolResult("the value explains", status="error"),
            Outcome(
                False,
                value="the value explains",
                error="the value explains",
                error_type="ToolError",
            ),
            id="ToolResult-error-message-from-value",
        ),
        pytest.param(
            ToolResult(status="error"),
            Outcome(False, error="the tool reported an error", error_type="ToolError"),
            id="ToolResult-error-bare",
        ),
        pytest.param(
            {"status": "error", "error": "quota exceeded"},
            Outcome(
                False,
                value={"status": "error", "error": "quota exceeded"},
                error="quota exceeded",
                error_type="ToolError",
            ),
            id="status-error-dict",
        ),
        pytest.param(
            {"status": "error", "message": "try later"},
            Outcome(
                False,
                value={"status": "error", "message": "try later"},
                error="try later",
                error_type="ToolError",
            ),
            id="status-error-message",
        ),
        pytest.param(
            {"status": "error"},
            Outcome(
                False,
                value={"status": "error"},
                error="the tool reported an error",
                error_type="ToolError",
            ),
            id="status-error-bare",
        ),
        pytest.param(
            {"error": "boom", "partial": [1]},
            Outcome(
                False,
                value={"error": "boom", "partial": [1]},
                error="boom",
                error_type="ToolError",
            ),
            id="truthy-error",
        ),
    ],
)
def test_in_band_errors_are_errors(value: Any, expected: Outcome) -> None:
    outcome = outcome_from_value(value)
    assert outcome == expected
    assert not outcome.ok
    assert not outcome.crashed


def test_non_string_error_value_is_reported_as_text() -> None:
    outcome = outcome_from_value({"error": {"code": 429, "kind": Size.BIG}})
    assert not outcome.ok
    assert outcome.error_type == "ToolError"
    assert isinstance(outcome.error, str)
    assert "429" in outcome.error
    assert "big" in outcome.error


def test_returned_tool_error_is_an_error() -> None:
    outcome = outcome_from_value(ToolError("city not found", data={"tried": ["Oslo"]}))
    assert outcome == Outcome(
        False, value={"tried": ["Oslo"]}, error="city not found", error_type="ToolError"
    )


@pytest.mark.parametrize(
    "value",
    [object(), 10**5000, ToolResult(object()), ToolResult(object(), status="error")],
    ids=["object", "huge-int", "ToolResult-object", "ToolResult-error-object"],
)
def test_unserializable_value_is_a_result_error(value: Any) -> None:
    outcome = outcome_from_value(value)
    assert not outcome.ok
    assert outcome.error_type == "ResultError"
    assert outcome.value is None
    assert (outcome.error or "").startswith("the tool's result cannot be sent to the model: ")
    assert not outcome.crashed


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_non_finite_number_is_sent_as_null_with_a_note(value: float) -> None:
    outcome = outcome_from_value({"ratio": value, "rows": [1.5, value]})
    assert outcome.ok
    assert outcome.value == {"ratio": None, "rows": [1.5, None]}
    assert "the result.ratio was" in (outcome.note or "")
    assert "sent as null" in (outcome.note or "")


def test_an_in_band_error_object_reaches_the_model_as_json_not_a_repr() -> None:
    outcome = outcome_from_value({"status": "error", "error": {"code": 7, "why": "no"}})
    assert (outcome.ok, outcome.error) == (False, '{"code": 7, "why": "no"}')


# -- exceptions -----------------------------------------------------------------------------------


def test_tool_error_keeps_its_message_and_data() -> None:
    outcome = outcome_from_exception(ToolError("over quota", data={"limit": 10}))
    assert outcome == Outcome(
        False, value={"limit": 10}, error="over quota", error_type="ToolError"
    )


def test_tool_error_subclass_is_a_tool_error() -> None:
    outcome = outcome_from_exception(Quota("over quota"))
    assert outcome == Outcome(False, error="over quota", error_type="ToolError")


def test_argument_error_is_not_a_crash() -> None:
    outcome = outcome_from_exception(ArgumentError("f: argument 'x': bad", parameter="x"))
    assert outcome == Outcome(False, error="f: argument 'x': bad", error_type="ArgumentError")


@pytest.mark.parametrize(
    ("exc", "error_type"),
    [(ToolNotFound("no tool named 'x'"), "ToolNotFound"), (ActionNotFound("no"), "ActionNotFound")],
)
def test_lookup_errors_keep_their_type(exc: Exception, error_type: str) -> None:
    outcome = outcome_from_exception(exc)
    assert outcome == Outcome(False, error=str(exc), error_type=error_type)


@pytest.mark.parametrize(
    ("exc", "text", "error_type"),
    [
        (ValueError("bad input"), "ValueError: bad input", "ValueError"),
        (KeyError("city"), "KeyError: 'city'", "KeyError"),
        (
            ZeroDivisionError("division by zero"),
            "ZeroDivisionError: division by zero",
            "ZeroDivisionError",
        ),
        (RuntimeError(), "RuntimeError", "RuntimeError"),
        (ValueError(""), "ValueError", "ValueError"),
    ],
    ids=["message", "key-error", "builtin", "no-args", "empty-message"],
)
def test_plain_exception_is_a_crash_named_by_its_type(
    exc: Exception, text: str, error_type: str
) -> None:
    outcome = outcome_from_exception(exc)
    assert outcome == Outcome(False, error=text, error_type=error_type, crashed=True)


def test_returned_plain_exception_is_treated_like_a_raised_one() -> None:
    outcome = outcome_from_value(ValueError("oops"))
    assert outcome == Outcome(
        False, error="ValueError: oops", error_type="ValueError", crashed=True
    )


# -- through a host -------------------------------------------------------------------------------


@expediter.tool
def lookup(city: str, how: str = "raise") -> Any:
    """Look a city up, failing in the way asked for."""
    if how == "raise":
        raise ToolError(f"no such city: {city}", data={"city": city})
    if how == "return":
        return ToolError(f"no such city: {city}")
    if how == "result":
        return ToolResult({"city": city}, status="error", error="not found")
    if how == "dict":
        return {"status": "error", "error": "quota exceeded"}
    if how == "crash":
        raise ValueError(f"bad city {city!r}")
    if how == "empty":
        raise RuntimeError
    if how == "subclass":
        raise Quota("over quota")
    return {"city": city}


@pytest.mark.parametrize(
    ("how", "error", "error_type", "result"),
    [
        ("raise", "no such city: Oslo", "ToolError", {"city": "Oslo"}),
        ("return", "no such city: Oslo", "ToolError", None),
        ("result", "not found", "ToolError", {"city": "Oslo"}),
        ("dict", "quota exceeded", "ToolError", {"status": "error", "error": "quota exceeded"}),
        ("subclass", "over quota", "ToolError", None),
        ("crash", "ValueError: bad city 'Oslo'", "ValueError", None),
        ("empty", "RuntimeError", "RuntimeError", None),
    ],
)
def test_errors_become_error_events(
    call_tool: CallTool, how: str, error: str, error_type: str, result: Any
) -> None:
    event = call_tool(lookup, "lookup", {"city": "Oslo", "how": how})
    assert event.status == "error"
    assert event.error == error
    assert event.error_type == error_type
    assert event.result == result
    assert not event.ok


def test_completed_call_is_ok(call_tool: CallTool) -> None:
    event = call_tool(lookup, "lookup", {"city": "Oslo", "how": "fine"})
    assert event.status == "completed"
    assert event.ok
    assert event.result == {"city": "Oslo"}
    assert event.error is None
    assert event.error_type is None
    assert event.duration_ms is not None
    assert event.duration_ms >= 0


def test_crash_is_logged_with_its_traceback(
    call_tool: CallTool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="expediter.core.calls.executor"):
        call_tool(lookup, "lookup", {"city": "Oslo", "how": "crash"})
    [record] = [r for r in caplog.records if r.name == "expediter.core.calls.executor"]
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], ValueError)
    assert "Oslo" not in record.getMessage()  # arguments are not logged


def test_in_band_error_is_not_logged_as_a_crash(
    call_tool: CallTool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="expediter.core.calls.executor"):
        call_tool(lookup, "lookup", {"city": "Oslo", "how": "raise"})
    assert [r for r in caplog.records if r.name == "expediter.core.calls.executor"] == []


def test_error_event_json_form_carries_the_error(call_tool: CallTool) -> None:
    data = call_tool(lookup, "lookup", {"city": "Oslo", "how": "crash"}).to_dict()
    assert data["status"] == "error"
    assert data["error"] == "ValueError: bad city 'Oslo'"
    assert data["error_type"] == "ValueError"
    assert data["result"] is None
    assert data["arguments"] == {"city": "Oslo", "how": "crash"}
