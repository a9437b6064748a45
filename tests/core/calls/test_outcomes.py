"""A call decided elsewhere gets back to the model: ``host.outcome`` rebuilds a call's current
event from the ledger, ``host.wait`` returns when calls are final (or at its timeout), and
``result_messages`` takes the refreshed events, on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.hosts import ledger_host

import expediter
from expediter.core.host import Host
from expediter.errors import LedgerError


@expediter.tool(require_approval=True)
def refund(order: str) -> dict[str, Any]:
    """Refund an order."""
    return {"refunded": order}


def _pause(host: Host, *orders: str) -> tuple[Any, list[Any], list[Any]]:
    toolset = host.toolset(user_id="ann")
    calls = [
        expediter.ToolCall(f"c{index}", "refund", {"order": order}, "refund", "refund", "refund")
        for index, order in enumerate(orders, 1)
    ]
    events = list(toolset.run(calls, message_id="m1"))
    assert {event.status for event in events} == {"awaiting_approval"}
    return toolset, calls, events


def test_outcome_follows_a_call_from_its_pause_to_its_result(
    shared_url: str, tmp_path: Path
) -> None:
    with (
        ledger_host(shared_url, tmp_path / "a", refund) as chat,
        ledger_host(shared_url, tmp_path / "b", refund) as operator,
    ):
        toolset, calls, events = _pause(chat, "A1")
        waiting = chat.outcome("m1:c1")
        assert (waiting.status, waiting.user_id, waiting.tool) == (
            "awaiting_approval",
            "ann",
            "refund",
        )
        operator.resume("m1:c1", True, approver="bob")
        done = chat.outcome("m1:c1")
        assert (done.status, done.result) == ("completed", {"refunded": "A1"})
        assert done.content == '{"refunded": "A1"}'
        messages = toolset.result_messages("openai", calls, [done])
        assert messages == [{"role": "tool", "tool_call_id": "c1", "content": '{"refunded": "A1"}'}]
        stale = toolset.result_messages("openai", calls, events)
        assert stale != messages  # the paused event tells the model it is not finished


def test_outcome_of_an_unknown_key_is_a_ledger_error(make_host) -> None:
    host = make_host(refund, record_calls=True)
    with pytest.raises(LedgerError, match="no call 'nope'"):
        host.outcome("nope")


def test_a_denied_call_comes_back_denied_with_the_reason(shared_url: str, tmp_path: Path) -> None:
    with (
        ledger_host(shared_url, tmp_path / "a", refund) as chat,
        ledger_host(shared_url, tmp_path / "b", refund) as operator,
    ):
        _pause(chat, "A1")
        operator.resume("m1:c1", False, approver="bob", reason="duplicate")
        event = chat.outcome("m1:c1")
        assert event.status == "denied"
        assert "duplicate" in (event.error or "")


def test_wait_returns_as_soon_as_every_call_is_decided(shared_url: str, tmp_path: Path) -> None:
    with (
        ledger_host(shared_url, tmp_path / "a", refund) as chat,
        ledger_host(shared_url, tmp_path / "b", refund) as operator,
    ):
        _, _, events = _pause(chat, "A1", "B2")
        keys = [event.key for event in events]

        def decide() -> None:
            time.sleep(0.3)
            operator.resume(keys[0], True, approver="bob")
            operator.resume(keys[1], False, approver="bob", reason="no")

        deciding = threading.Thread(target=decide)
        started = time.monotonic()
        deciding.start()
        final = chat.wait(keys, timeout=30)
        waited = time.monotonic() - started
        deciding.join()
        assert [final[key].status for key in keys] == ["completed", "denied"]
        assert waited < 15  # woken by the decisions, not by the timeout


def test_wait_returns_what_is_final_at_its_timeout_without_raising(
    shared_url: str, tmp_path: Path
) -> None:
    with (
        ledger_host(shared_url, tmp_path / "a", refund) as chat,
        ledger_host(shared_url, tmp_path / "b", refund) as operator,
    ):
        _, _, events = _pause(chat, "A1", "B2")
        operator.resume(events[0].key, True, approver="bob")
        final = chat.wait([event.key for event in events], timeout=0.3)
        assert list(final) == [events[0].key]
        assert final[events[0].key].status == "completed"
        assert chat.wait(["no-such-key"], timeout=0.1) == {}
