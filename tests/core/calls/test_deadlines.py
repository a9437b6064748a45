"""A call's deadline starts when its tool starts; a call reported failed never finishes its side
effect unrecorded: one that never started never starts later, and a result that arrives after
the failure is recorded as late."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Any

import pytest

import expediter
from expediter.core.records.calls import ToolCall


def _calls(toolset: Any, action: str, count: int) -> list[ToolCall]:
    (offered,) = [o for o in toolset.actions if o.action.name == action]
    return [
        ToolCall(
            call_id=f"c{i}",
            name=offered.name,
            arguments={},
            instance_id=offered.instance_id,
            tool=offered.tool,
            action=action,
        )
        for i in range(count)
    ]


def _wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def test_waiting_for_a_worker_thread_does_not_count_against_the_deadline(make_host) -> None:
    @expediter.tool
    def slow() -> str:
        """Take a while."""
        time.sleep(0.3)
        return "done"

    host = make_host(slow, record_calls=True, call_timeout=0.5)
    toolset = host.toolset()

    async def main() -> list[Any]:
        # Two threads for six 0.3 s calls: the last ones wait 0.6 s for a thread.
        asyncio.get_running_loop().set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=2)
        )
        return [e async for e in toolset.arun(_calls(toolset, "slow", 6), message_id="m1")]

    events = [e for e in asyncio.run(main()) if e.status != "pending"]
    assert [e.status for e in events] == ["completed"] * 6
    assert all(host.ledger.get(e.key).status == "executed" for e in events)
    assert all(e.duration_ms < 500 for e in events)  # the tool's time, not the queue's


def test_a_call_cancelled_before_it_started_never_starts(
    make_host, monkeypatch: pytest.MonkeyPatch
) -> None:
    from expediter.core.calls import eventloop

    monkeypatch.setattr(eventloop, "TOOL_THREADS", 1)  # the host's threads: one at a time
    started: list[int] = []

    @expediter.tool
    def slow() -> str:
        """Take a while."""
        started.append(1)
        time.sleep(0.3)
        return "done"

    host = make_host(slow, record_calls=True, call_timeout=5)
    toolset = host.toolset()

    async def main() -> None:
        events = toolset.arun(_calls(toolset, "slow", 4), message_id="m1")
        async for event in events:
            if event.status == "completed":
                break
        await events.aclose()

    asyncio.run(main())
    time.sleep(0.8)  # long enough for queued calls to have started, were they going to
    assert len(started) <= 2  # the first, and at most one a thread took before the close
    rows = [host.ledger.get(f"m1:c{i}") for i in range(4)]
    assert rows[0].status == "executed"
    never = [r for r in rows if r.status == "failed" and "not run" in (r.error or "")]
    assert len(never) >= 2


def test_an_async_tool_that_ignores_cancellation_is_reported_at_its_deadline_and_recorded_late(
    make_host,
) -> None:
    finished = threading.Event()

    @expediter.tool
    async def stubborn() -> str:
        """Ignore being cancelled, and finish anyway."""
        try:
            await asyncio.sleep(0.6)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)
        finished.set()
        return "did it anyway"

    host = make_host(stubborn, record_calls=True, call_timeout=0.2)
    started = time.perf_counter()
    event = host.call("stubborn", "stubborn")
    assert time.perf_counter() - started < 0.45  # reported at its deadline, not when it ended
    assert (event.status, event.error_type) == ("error", "TimeoutError")
    assert finished.wait(5)
    _wait_for(lambda: host.ledger.get(event.key).status == "executed")
    late = host.ledger.get(event.key)
    assert (late.status, late.late, late.result) == ("executed", True, "did it anyway")


def test_a_sync_tool_timed_out_in_arun_is_recorded_late_when_it_finishes(make_host) -> None:
    @expediter.tool
    def slow() -> str:
        """Outlive the deadline."""
        time.sleep(0.5)
        return "finished late"

    host = make_host(slow, record_calls=True, call_timeout=0.2)
    toolset = host.toolset()

    async def main() -> list[Any]:
        return [e async for e in toolset.arun(_calls(toolset, "slow", 1), message_id="m1")]

    (event,) = [e for e in asyncio.run(main()) if e.status != "pending"]
    assert (event.status, event.error_type) == ("error", "TimeoutError")
    _wait_for(lambda: host.ledger.get("m1:c0").status == "executed")
    assert host.ledger.get("m1:c0").late is True


def test_an_async_tool_blocking_the_loop_does_not_make_the_next_call_time_out(make_host) -> None:
    class Pair(expediter.Toolbox):
        name = "pair"

        @expediter.action
        async def blocks(self) -> str:
            """Block the event loop (well past the next call's deadline)."""
            time.sleep(1.0)
            return "blocked"

        @expediter.action
        async def quick(self) -> str:
            """Answer at once."""
            return "quick"

    host = make_host(Pair(), record_calls=True, call_timeout=0.3)
    first = host.call("pair", "blocks")
    second = host.call("pair", "quick")
    assert (first.status, first.error_type) == ("error", "TimeoutError")
    assert (second.status, second.result) == ("completed", "quick")


@pytest.mark.parametrize("stubborn", [False, True], ids=["cancellable", "ignores-cancellation"])
def test_closing_the_host_while_a_call_runs_tells_its_caller(make_host, stubborn: bool) -> None:
    # The loop stops with the host: a caller waiting for a tool on it used to wait forever.
    started = threading.Event()

    @expediter.tool
    async def nap() -> str:
        """Wait until the host goes away."""
        started.set()
        while True:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                if not stubborn:
                    raise

    host = make_host(nap, call_timeout=60)
    events: list[Any] = []
    caller = threading.Thread(target=lambda: events.append(host.call("nap", "nap", {})))
    caller.daemon = True
    caller.start()
    assert started.wait(10)
    host.close()
    caller.join(10)
    assert not caller.is_alive(), "the caller still waits for a host that closed"
    (event,) = events
    assert (event.status, event.error_type) == ("error", "RuntimeError")
    assert "the host was closed while the call was running" in (event.error or "")
