"""The operator's direct calls (``Host.call``/``acall``) run through the same pipeline as a
turn: approval counted as the operator's, forced prompts and denials refused, deadlines for
async and sync tools, ``normalize_result`` and ``on_call_event``, and ``duration_ms`` timing
only the tool."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import expediter
from expediter.core.host import Host
from expediter.hookspecs.tool import CallContext, Decision, ToolResult


@expediter.tool(require_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


class Wipe(expediter.Toolbox):
    """Delete everything; always asks, forced."""

    @expediter.action
    def wipe(self) -> str:
        """Wipe it."""
        return "wiped"

    def preview_decision(
        self, action: str, arguments: dict[str, Any], context: CallContext
    ) -> Decision | None:
        return Decision.ask("wiping needs two people", forced=True)


@expediter.tool
def ping() -> str:
    """Ping."""
    return "pong"


class NoPings:
    @expediter.hookimpl
    def tool_call_policy(self, call: Any, action: Any, context: CallContext) -> Decision | None:
        return Decision.denied("pings are off today") if action.name == "ping" else None


def test_an_action_needing_approval_runs_as_approved_by_the_operator(make_host) -> None:
    host = make_host(refund, record_calls=True)
    event = host.call("refund", "refund", {"order": "A1"})
    assert (event.status, event.result) == ("completed", "refunded A1")
    row = host.ledger.get(event.key)
    assert row is not None
    assert (row.status, row.decision) == ("executed", "operator")
    assert row.decision_reason == "the action requires approval"


def test_a_forced_prompt_still_refuses_the_operators_call(make_host) -> None:
    host = make_host(Wipe, record_calls=True)
    event = host.call("wipe", "wipe")
    assert (event.status, event.error_type) == ("denied", "Denied")
    assert "wiping needs two people" in (event.error or "")
    row = host.ledger.get(event.key)
    assert row is not None
    assert (row.status, row.decision) == ("denied", "forced")


def test_a_policy_denial_refuses_the_operators_call(make_host) -> None:
    host = make_host(ping, NoPings(), record_calls=True)
    event = host.call("ping", "ping")
    assert event.status == "denied"
    assert event.reason == "pings are off today"
    row = host.ledger.get(event.key)
    assert row is not None
    assert row.status == "denied"


def test_normalize_result_and_observers_see_direct_calls(make_host) -> None:
    seen: list[str] = []

    class Plugin:
        @expediter.hookimpl
        def normalize_result(self, tool: str, action: str, result: Any) -> ToolResult | None:
            return ToolResult(status="error", error="pong is an error here")

        @expediter.hookimpl
        def on_call_event(self, event: Any) -> None:
            seen.append(event.status)

    event = make_host(ping, Plugin()).call("ping", "ping")
    assert (event.status, event.error) == ("error", "pong is an error here")
    assert seen == ["pending", "error"]


def test_an_async_tool_called_directly_is_cancelled_at_its_deadline(make_host) -> None:
    @expediter.tool
    async def stuck() -> str:
        """Never finishes."""
        await asyncio.sleep(30)
        return "late"

    host = make_host(stuck, record_calls=True, call_timeout=0.2)
    started = time.monotonic()
    event = host.call("stuck", "stuck")
    assert time.monotonic() - started < 10
    assert (event.status, event.error_type) == ("error", "TimeoutError")
    row = host.ledger.get(event.key)
    assert row is not None
    assert row.status == "failed"


def test_a_sync_tool_past_its_deadline_is_recorded_as_an_overrun(make_host) -> None:
    @expediter.tool
    def slow(context: CallContext) -> str:
        """Runs past its deadline, then returns anyway."""
        while not context.is_cancelled():
            time.sleep(0.01)
        return "done anyway"

    host = make_host(slow, record_calls=True, call_timeout=0.1)
    # The ledger is made first: on a busy machine creating it could take the whole 0.1 s,
    # and a tool that starts past its deadline returns at once, in no time.
    assert host.ledger is not None
    event = host.call("slow", "slow")
    assert (event.status, event.error_type) == ("error", "TimeoutError")
    assert "overran its deadline" in (event.error or "")
    row = host.ledger.get(event.key)
    assert row is not None
    assert (row.status, row.result) == ("failed", "done anyway")


def test_duration_times_the_tool_not_opening_the_ledger(
    make_host, monkeypatch: pytest.MonkeyPatch
) -> None:
    from expediter.core.ledger import Ledger

    opened = Ledger.open

    def slow_open(self: Ledger) -> None:
        time.sleep(0.5)
        opened(self)

    monkeypatch.setattr(Ledger, "open", slow_open)
    host = make_host(ping, record_calls=True)
    event = host.call("ping", "ping")
    assert event.ok
    assert event.duration_ms is not None
    assert event.duration_ms < 500


def test_acall_runs_a_sync_tool_off_the_callers_loop(make_host) -> None:
    @expediter.tool
    def nap() -> str:
        """Sleep a little."""
        time.sleep(0.3)
        return "rested"

    host = make_host(nap)

    async def both() -> tuple[Any, float]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        event = await host.acall("nap", "nap")
        ticker.cancel()
        return event, ticks

    event, ticks = asyncio.run(both())
    assert event.result == "rested"
    assert ticks >= 3  # the loop kept running while the tool slept


def test_direct_calls_and_turns_run_through_the_same_pipeline(
    make_host, monkeypatch: pytest.MonkeyPatch
) -> None:
    from expediter.core.calls.executor import Executor

    began: list[str] = []
    begin = Executor.begin

    def counting(self: Executor, turn: Any, call: Any, **ids: Any) -> Any:
        began.append(call.name)
        return begin(self, turn, call, **ids)

    monkeypatch.setattr(Executor, "begin", counting)
    host: Host = make_host(ping)
    assert host.call("ping", "ping").ok
    toolset = host.toolset()
    (event,) = toolset.run([expediter.ToolCall("c1", "ping", {}, "ping", "ping", "ping")])
    assert event.ok
    assert began == ["ping", "ping"]
