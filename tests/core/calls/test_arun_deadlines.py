"""An async tool that swallows cancellation: its call is reported at its deadline, and the tool,
left running, is kept until it ends (however little else holds it) so that what it still does is
recorded as late. Closing ``arun`` early records the calls that had already ended as they ended.

The tools here ignore every cancellation until the test lets them go, and wait on an
``asyncio.Event`` only their own frame holds (the test keeps a weak reference): an event loop
holds its tasks weakly, so nothing but expediter keeps such a task alive. The ordering, never the
speed, is what is checked: the call is reported before the tool ends."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import expediter
from expediter.core.host import Host
from expediter.core.ledger.records import LedgerRow
from expediter.core.records.calls import CallEvent, ToolCall

#: The executor logs a timed-out call with its traceback, which holds the tool's task; pytest
#: keeps the records it captures, so these tests keep that one out (as a log file would).
EXECUTOR_LOG = "expediter.core.calls.executor"
TIMEOUT = 0.3


@pytest.fixture(autouse=True)
def _untraced_timeouts() -> Iterator[None]:
    logger = logging.getLogger(EXECUTOR_LOG)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


class Stubborn:
    """A tool ignoring every cancellation until ``release``, and what became of its calls."""

    def __init__(self) -> None:
        self.gates: list[tuple[weakref.ReferenceType[asyncio.Event], asyncio.AbstractEventLoop]]
        self.gates = []
        self.swallowed = 0
        self.ended: list[str] = []
        self.all_ended = threading.Event()
        self.expected = 1

    def tool(self) -> Any:
        state = self

        @expediter.tool
        async def stubborn(label: str) -> str:
            """Ignore being cancelled until let go, then finish anyway."""
            gate = asyncio.Event()  # only this frame holds it
            state.gates.append((weakref.ref(gate), asyncio.get_running_loop()))
            while not gate.is_set():
                try:
                    await gate.wait()
                except asyncio.CancelledError:
                    state.swallowed += 1
            state.ended.append(label)
            if len(state.ended) >= state.expected:
                state.all_ended.set()
            return f"{label} did it anyway"

        return stubborn

    def alive(self) -> int:
        """How many of the tool's running calls still exist."""
        return sum(ref() is not None for ref, _ in self.gates)

    def release(self) -> None:
        """Let every call of the tool that still exists finish."""
        for ref, loop in self.gates:
            gate = ref()
            if gate is not None and not loop.is_closed():
                loop.call_soon_threadsafe(gate.set)


@expediter.tool
async def quick() -> str:
    """Answer at once."""
    return "quick"


def _call(toolset: Any, call_id: str, action: str, **arguments: Any) -> ToolCall:
    (offered,) = [o for o in toolset.actions if o.action.name == action]
    return ToolCall(
        call_id=call_id,
        name=offered.name,
        arguments=arguments,
        instance_id=offered.instance_id,
        tool=offered.tool,
        action=action,
    )


def _final(events: list[CallEvent]) -> list[CallEvent]:
    return [e for e in events if e.status != "pending"]


async def _collect() -> None:
    """Let the loop run what the ended turn left scheduled, then collect the garbage."""
    for _ in range(5):
        await asyncio.sleep(0)
    gc.collect()


def _wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def _row(host: Host, key: str) -> LedgerRow:
    row = host.ledger.get(key)
    assert row is not None, f"no row {key}"
    return row


def _timed_out(host: Host, event: CallEvent) -> None:
    """The call's event and its row say it timed out, as ``run()`` says it."""
    assert (event.status, event.error_type) == ("error", "TimeoutError")
    assert f"did not finish within {TIMEOUT} s" in (event.error or "")
    row = _row(host, event.key)
    assert (row.status, row.late) == ("failed", False)
    assert f"did not finish within {TIMEOUT} s" in (row.error or "")


def _recorded_late(host: Host, key: str, result: str) -> None:
    _wait_for(lambda: _row(host, key).status == "executed")
    row = _row(host, key)
    assert (row.status, row.late, row.result) == ("executed", True, result)


def test_arun_reports_a_stubborn_tool_at_its_deadline_and_keeps_it_until_it_ends(
    make_host: Callable[..., Host], shared_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    state = Stubborn()
    host = make_host(state.tool(), record_calls=True, call_timeout=TIMEOUT, database_url=shared_url)
    toolset = host.toolset()

    async def turn() -> tuple[list[CallEvent], bool, int]:
        try:
            calls = [_call(toolset, "c1", "stubborn", label="one")]
            events = [e async for e in toolset.arun(calls, message_id="m1")]
            before = not state.ended  # arun returned while the tool still ran
            await _collect()
            kept = state.alive()
            (event,) = _final(events)
            _timed_out(host, event)  # and still, while the tool runs
        finally:
            state.release()
        await asyncio.to_thread(state.all_ended.wait, 10)
        return events, before, kept

    events, before, kept = asyncio.run(turn())
    assert before
    assert state.swallowed >= 1
    assert kept == 1, "the tool's task was collected while it ran"
    (event,) = _final(events)
    _recorded_late(host, event.key, "one did it anyway")
    assert any("finished after it was reported failed" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.name == "asyncio"], "asyncio complained"


def test_the_callers_loop_never_waits_for_a_tool_that_ignores_its_deadline(
    make_host: Callable[..., Host], caplog: pytest.LogCaptureFixture
) -> None:
    # The tool runs on the host's loop: the caller's asyncio.run, which at shutdown waits for
    # every task left on its loop, ends while the tool still runs (it used to wait for it).
    state = Stubborn()
    host = make_host(state.tool(), record_calls=True, call_timeout=TIMEOUT)
    toolset = host.toolset()

    async def turn() -> list[CallEvent]:
        calls = [_call(toolset, "c1", "stubborn", label="alone")]
        return _final([e async for e in toolset.arun(calls, message_id="m1")])

    # Where the caller's loop would wait for the tool, a watchdog lets the tool go, so that
    # the test fails rather than hangs.
    watchdog = threading.Timer(5.0, state.release)
    watchdog.start()
    try:
        (event,) = asyncio.run(turn())
        assert not state.ended, "the caller's loop waited for the tool"
        _timed_out(host, event)
        ((_, loop),) = state.gates
        assert not loop.is_closed()  # the host's loop, not the caller's (closed by now)
    finally:
        watchdog.cancel()
        state.release()
    assert state.all_ended.wait(10)
    _recorded_late(host, event.key, "alone did it anyway")
    assert not [r for r in caplog.records if r.name == "asyncio"], "asyncio complained"


def test_the_callers_loop_never_waits_for_a_sync_tool_past_its_deadline(
    make_host: Callable[..., Host], caplog: pytest.LogCaptureFixture
) -> None:
    # Sync tools under arun run in the host's threads, not the caller's default executor,
    # which asyncio.run joins at shutdown (it used to wait for the tool to return).
    gate, ended = threading.Event(), threading.Event()

    @expediter.tool
    def sleepy() -> str:
        """Block until let go, past the deadline."""
        gate.wait(10)
        ended.set()
        return "woke up"

    host = make_host(sleepy, record_calls=True, call_timeout=TIMEOUT)
    toolset = host.toolset()

    async def turn() -> list[CallEvent]:
        return _final([e async for e in toolset.arun([_call(toolset, "c1", "sleepy")])])

    watchdog = threading.Timer(5.0, gate.set)  # fail, not hang, where the loop would wait
    watchdog.start()
    try:
        (event,) = asyncio.run(turn())
        assert not ended.is_set(), "the caller's asyncio.run waited for the tool's thread"
        assert (event.status, event.error_type) == ("error", "TimeoutError")
    finally:
        watchdog.cancel()
        gate.set()
    assert ended.wait(10)
    _recorded_late(host, event.key, "woke up")


def test_several_stubborn_calls_in_one_turn_each_time_out_and_are_each_recorded_late(
    make_host: Callable[..., Host], caplog: pytest.LogCaptureFixture
) -> None:
    state = Stubborn()
    state.expected = 3
    host = make_host(state.tool(), quick, record_calls=True, call_timeout=TIMEOUT)
    toolset = host.toolset()

    async def turn() -> tuple[list[CallEvent], bool, int]:
        try:
            calls = [
                _call(toolset, "c1", "stubborn", label="one"),
                _call(toolset, "c2", "quick"),
                _call(toolset, "c3", "stubborn", label="two"),
                _call(toolset, "c4", "stubborn", label="three"),
            ]
            events = _final([e async for e in toolset.arun(calls, message_id="m1")])
            before = not state.ended
            await _collect()
            kept = state.alive()
        finally:
            state.release()
        await asyncio.to_thread(state.all_ended.wait, 10)
        return events, before, kept

    events, before, kept = asyncio.run(turn())
    assert before
    assert kept == 3, "a tool's task was collected while it ran"
    assert [e.call_id for e in events] == ["c1", "c2", "c3", "c4"]
    assert (events[1].status, events[1].result) == ("completed", "quick")
    stubborn = [events[0], events[2], events[3]]
    for event in stubborn:
        assert (event.status, event.error_type) == ("error", "TimeoutError")
    for event, label in zip(stubborn, ("one", "two", "three"), strict=True):
        _recorded_late(host, event.key, f"{label} did it anyway")
    assert _row(host, events[1].key).status == "executed"
    assert not [r for r in caplog.records if r.name == "asyncio"], "asyncio complained"


def test_run_keeps_a_tool_that_ignores_every_cancellation_until_the_test_lets_it_go(
    make_host: Callable[..., Host], caplog: pytest.LogCaptureFixture
) -> None:
    # On the host's background loop (run/call): the tool would never end by itself.
    state = Stubborn()
    host = make_host(state.tool(), record_calls=True, call_timeout=TIMEOUT)
    try:
        event = host.call("stubborn", "stubborn", {"label": "forever"})
        assert not state.ended
        _timed_out(host, event)
        gc.collect()
        assert state.alive() == 1, "the tool's task was collected while it ran"
    finally:
        state.release()
    assert state.all_ended.wait(10)
    _recorded_late(host, event.key, "forever did it anyway")
    assert not [r for r in caplog.records if r.name == "asyncio"], "asyncio complained"


def test_closing_arun_early_records_the_calls_that_had_already_ended_as_they_ended(
    make_host: Callable[..., Host], caplog: pytest.LogCaptureFixture
) -> None:
    class Three(expediter.Toolbox):
        name = "three"

        @expediter.action
        async def first(self) -> str:
            """Answer after a few turns of the loop."""
            for _ in range(3):
                await asyncio.sleep(0)
            return "first"

        @expediter.action
        async def second(self) -> str:
            """Answer at once."""
            return "second"

        @expediter.action
        async def third(self) -> str:
            """Fail at once."""
            raise ValueError("third failed")

        @expediter.action
        async def fourth(self) -> str:
            """Run until cancelled."""
            await asyncio.sleep(30)
            return "fourth"

    host = make_host(Three(), record_calls=True)
    toolset = host.toolset()
    calls = [
        _call(toolset, f"c{i}", action)
        for i, action in enumerate(("first", "second", "third", "fourth"), start=1)
    ]

    async def first_then_close() -> CallEvent:
        events = toolset.arun(calls, message_id="m1")
        event = await anext(events)
        while event.status == "pending":
            event = await anext(events)
        for _ in range(20):
            await asyncio.sleep(0)  # the second and third calls have ended by now
        await events.aclose()  # type: ignore[attr-defined]
        gc.collect()
        return event

    first = asyncio.run(first_then_close())
    assert (first.status, first.result) == ("completed", "first")
    second, third, fourth = (_row(host, f"m1:c{i}") for i in (2, 3, 4))
    assert (second.status, second.result, second.error) == ("executed", "second", None)
    assert third.status == "failed"
    assert "third failed" in (third.error or "")
    assert fourth.status == "failed"
    assert "the turn was cancelled" in (fourth.error or "")
    assert not [r for r in caplog.records if r.name == "asyncio"], "asyncio complained"
