"""What a turn's calls return, as the model, the ledger and a UI see it: JSON only, control
characters removed, three bounded copies of huge results, and in-band error statuses (the tool's
own, and those a ``normalize_result`` host plugin recognizes)."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

import pytest

import expediter
from expediter.core.host import Host
from expediter.core.ledger.columns import RESULT_LIMIT
from expediter.core.ledger.database import Database
from expediter.core.ledger.records import LedgerRow
from expediter.core.ledger.schema import upgrade
from expediter.core.records.calls import DISPLAY_LIMIT, CallEvent, ToolCall
from expediter.core.turns.toolset import Toolset
from expediter.hookspecs.tool import Action, CallContext, ToolError, ToolResult

HEAD, TAIL = "HEAD-of-the-result|", "|TAIL-of-the-result"
HUGE = HEAD + "x" * 10_000_000 + TAIL


class Returns:
    """A raw-hook tool whose ``give`` action returns (or raises) whatever it was given."""

    name = "returns"

    def __init__(self, value: Any) -> None:
        self.value = value

    @expediter.hookimpl
    def get_actions_metadata(self) -> list[Action]:
        return [Action("give", "Return the prepared value.")]

    @expediter.hookimpl
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value


def one_call(host: Host, message_id: str = "m1") -> tuple[Toolset, list[ToolCall], CallEvent]:
    """Call ``give`` once through a turn; the toolset, the calls and the final event."""
    toolset = host.toolset()
    response = {
        "choices": [
            {
                "message": {
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "give"}}]
                }
            }
        ]
    }
    calls = toolset.parse_calls("openai", response)
    (event,) = [e for e in toolset.run(calls, message_id=message_id) if e.status != "pending"]
    return toolset, calls, event


def model_text(toolset: Toolset, calls: list[ToolCall], event: CallEvent) -> str:
    (message,) = toolset.result_messages("openai", calls, [event])
    assert message["tool_call_id"] == "c1"
    content: str = message["content"]
    return content


def row(host: Host, key: str = "m1:c1") -> LedgerRow:
    found = host.ledger.get(key)
    assert found is not None
    return found


class Opaque:
    """Something with no JSON form."""


# -- JSON only ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (Opaque(), "the result is a Opaque"),
        ({"rows": [1, Opaque()]}, "the result.rows[1]"),
        ({1: "one"}, "non-string key"),
    ],
    ids=["object", "nested-object", "int-key"],
)
def test_a_result_with_no_json_form_is_a_result_error(make_host, value: Any, where: str) -> None:
    host = make_host(Returns(value), record_calls=True)
    toolset, calls, event = one_call(host)

    assert (event.status, event.error_type, event.result) == ("error", "ResultError", None)
    assert "cannot be sent to the model" in (event.error or "")
    assert where in (event.error or "")
    assert "object at 0x" not in model_text(toolset, calls, event)  # never a repr
    failed = row(host)
    assert (failed.status, failed.error, failed.result) == ("failed", event.error, None)


def test_a_non_finite_number_reaches_the_model_and_the_ledger_as_null(make_host) -> None:
    host = make_host(Returns({"ratio": math.nan, "big": math.inf}), record_calls=True)
    toolset, calls, event = one_call(host)

    assert (event.status, event.result) == ("completed", {"ratio": None, "big": None})
    assert "NaN" not in model_text(toolset, calls, event)
    assert "the result.ratio was nan" in (event.note or "")
    assert event.to_dict()["note"] == event.note
    assert row(host).status == "executed"


# -- control characters ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "clean"),
    [
        (
            {"note": "a\x00b\x07c\td\ne\r\nf\x1b[0m\x7f", "items": ["\x00x", 1], "ke\x00y": True},
            {"note": "abc\td\ne\r\nf[0m", "items": ["x", 1], "key": True},
        ),
        ("line one\x00\nline\x0btwo\tend\x1f", "line one\nlinetwo\tend"),
        (ToolResult({"text": "nul\x00"}), {"text": "nul"}),
    ],
    ids=["dict", "string", "tool-result"],
)
def test_nul_and_control_characters_are_removed_but_tabs_and_newlines_kept(
    make_host, value: Any, clean: Any
) -> None:
    host = make_host(Returns(value), record_calls=True)
    toolset, calls, event = one_call(host)

    assert (event.status, event.result) == ("completed", clean)
    expected_text = clean if isinstance(clean, str) else json.dumps(clean, ensure_ascii=False)
    assert event.content == expected_text
    assert model_text(toolset, calls, event) == expected_text
    assert "\\u00" not in expected_text
    assert event.to_dict()["result"] == clean
    recorded = row(host)
    assert (recorded.status, recorded.result) == ("executed", clean)


def test_control_characters_are_removed_from_error_messages_too(make_host) -> None:
    host = make_host(Returns(ToolError("bad\x00input\x07")), record_calls=True)
    toolset, calls, event = one_call(host)
    assert event.error == "badinput"
    assert model_text(toolset, calls, event) == "badinput"


def test_a_failure_whose_message_holds_nul_is_recorded_on_postgresql(
    make_host, fresh_pg_url: Callable[[], str]
) -> None:
    url = fresh_pg_url()
    upgrade(Database.parse(url))
    host = make_host(Returns(ValueError("nul\x00here")), record_calls=True, database_url=url)
    _, _, event = one_call(host)
    assert event.status == "error"
    failed = row(host)
    assert failed.status == "failed"
    assert "nulhere" in (failed.error or "")


# -- huge results -----------------------------------------------------------------------------


@pytest.mark.parametrize("tokens", [4000, 1000])
def test_a_10mb_result_is_bounded_in_all_three_copies(make_host, tokens: int) -> None:
    host = make_host(Returns(HUGE), record_calls=True, model_result_tokens=tokens)
    toolset, calls, event = one_call(host)
    limit = tokens * 4

    assert event.status == "completed"
    assert event.result == HUGE  # the caller still gets the whole value
    content = event.content or ""
    assert limit - 100 <= len(content) <= limit
    assert content.startswith(HEAD + "xxx")
    assert content.endswith("xxx" + TAIL)
    assert "characters omitted" in content
    assert model_text(toolset, calls, event) == content

    display = event.to_dict()["result"]
    assert isinstance(display, str)
    assert DISPLAY_LIMIT - 100 <= len(display) <= DISPLAY_LIMIT
    assert display.startswith(HEAD)
    assert "more characters" in display[-60:]

    recorded = row(host)
    assert recorded.status == "executed"
    assert isinstance(recorded.result, str)
    stored = json.dumps(recorded.result, ensure_ascii=False)
    assert RESULT_LIMIT - 1000 <= len(stored) <= RESULT_LIMIT
    assert HEAD in recorded.result[:50]
    assert "more characters not recorded" in recorded.result[-80:]


def test_the_ledger_copy_of_a_long_string_starts_with_the_string(make_host) -> None:
    host = make_host(Returns(HUGE), record_calls=True)
    one_call(host)
    assert row(host).result.startswith(HEAD)


def test_a_huge_structured_result_is_cut_as_json_text_for_the_model(make_host) -> None:
    rows = [{"id": i, "name": f"customer {i}", "notes": "y" * 200} for i in range(50_000)]
    host = make_host(Returns({"rows": rows}), record_calls=True)
    toolset, calls, event = one_call(host)

    content = event.content or ""
    assert len(content) <= 16_000
    assert content.startswith('{"rows": [{"id": 0, "name": "customer 0"')
    assert content.endswith('"notes": "' + "y" * 200 + '"}]}')
    assert model_text(toolset, calls, event) == content
    display = event.to_dict()["result"]
    assert isinstance(display, str)
    assert len(display) <= DISPLAY_LIMIT
    assert display.startswith('{"rows": [{"id": 0')
    assert len(json.dumps(row(host).result, ensure_ascii=False)) <= RESULT_LIMIT


def test_small_results_reach_the_model_whole(make_host) -> None:
    value = {"text": "x" * 15_000}
    host = make_host(Returns(value), record_calls=True)
    toolset, calls, event = one_call(host)
    assert json.loads(event.content or "") == value
    assert json.loads(model_text(toolset, calls, event)) == value
    assert row(host).result == value


# -- in-band errors -----------------------------------------------------------------------------


class HttpStatus:
    """A host plugin: results carrying an HTTP status of 400 or more are errors."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    @expediter.hookimpl
    def normalize_result(self, tool: str, action: str, result: Any) -> ToolResult | None:
        self.seen.append((tool, action))
        if isinstance(result, dict) and result.get("http_status", 200) >= 400:
            message = f"HTTP {result['http_status']}: {result.get('body', '')}"
            return ToolResult(result, status="error", error=message)
        return None


@pytest.mark.parametrize(
    ("status", "outcome"), [(500, "error"), (404, "error"), (200, "completed")]
)
def test_normalize_result_maps_a_tools_in_band_status_to_an_error(
    make_host, status: int, outcome: str
) -> None:
    plugin = HttpStatus()
    value = {"http_status": status, "body": "upstream says so"}
    host = make_host(Returns(value), plugin, record_calls=True)
    toolset, calls, event = one_call(host)

    assert plugin.seen == [("returns", "give")]
    assert event.status == outcome
    recorded = row(host)
    if outcome == "error":
        message = f"HTTP {status}: upstream says so"
        assert (event.error, event.error_type, event.result) == (message, "ToolError", value)
        assert model_text(toolset, calls, event) == message
        assert (recorded.status, recorded.error) == ("failed", message)
    else:
        assert event.result == value
        assert (recorded.status, recorded.result) == ("executed", value)


def test_a_normalize_result_plugin_that_raises_is_logged_and_ignored(make_host, caplog) -> None:
    class Broken:
        @expediter.hookimpl
        def normalize_result(self, tool: str, action: str, result: Any) -> None:
            raise RuntimeError("normalizer bug")

    host = make_host(Returns({"ok": 1}), Broken(), record_calls=True)
    with caplog.at_level(logging.ERROR, logger="expediter"):
        _, _, event = one_call(host)
    assert (event.status, event.result) == ("completed", {"ok": 1})
    assert row(host).status == "executed"
    assert any("normalize_result failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"status": "error", "message": "quota exceeded"}, "quota exceeded"),
        ({"status": "error", "error": "no such user"}, "no such user"),
        ({"status": "error"}, "the tool reported an error"),
        ({"error": "boom", "partial": [1]}, "boom"),
        (ToolResult({"partial": 1}, status="error", error="half done"), "half done"),
        (ToolError("not allowed for this account"), "not allowed for this account"),
    ],
    ids=["status-message", "status-error", "status-only", "error-key", "tool-result", "raised"],
)
def test_in_band_error_results_are_errors(make_host, value: Any, message: str) -> None:
    host = make_host(Returns(value), record_calls=True)
    toolset, calls, event = one_call(host)

    assert (event.status, event.error_type, event.error) == ("error", "ToolError", message)
    assert model_text(toolset, calls, event) == message
    failed = row(host)
    assert (failed.status, failed.error) == ("failed", message)


@pytest.mark.parametrize(
    "value",
    [{"status": "ok", "error": None}, {"error": ""}, {"status": "done"}, {"error": []}],
    ids=["status-ok", "empty-error", "other-status", "empty-list"],
)
def test_results_without_an_error_signal_are_completed(make_host, value: Any) -> None:
    host = make_host(Returns(value), record_calls=True)
    _, _, event = one_call(host)
    assert (event.status, event.result) == ("completed", value)
    assert (row(host).status, row(host).result) == ("executed", value)
