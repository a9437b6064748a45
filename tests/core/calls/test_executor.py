"""Running a turn's calls: names and arguments checked before anything runs, tools that raise,
concurrency, deadlines and cancellation in ``arun``, and the host's wrappers and observers.
Each case checks the event and, where one is written, the ledger row."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from support.responses import openai_response

import expediter
from expediter.core.host import Host
from expediter.core.ledger.records import LedgerRow
from expediter.core.records.calls import CallEvent, ToolCall
from expediter.core.turns.toolset import Toolset
from expediter.hookspecs.tool import Action, CallContext

MODES = ["run", "arun"]


# -- tools ----------------------------------------------------------------------------------------


@expediter.tool
def lookup(order: str) -> dict[str, Any]:
    """Look an order up."""
    return {"order": order, "state": "shipped"}


@expediter.tool(require_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@expediter.tool
def explode(depth: int = 1) -> str:
    """Fail loudly."""
    raise KeyError("missing")


class Mailbox:
    """A raw-hook tool whose ``account`` is fixed by the operator."""

    name = "mailbox"

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    @expediter.hookimpl
    def get_actions_metadata(self) -> list[Action]:
        parameters = {
            "type": "object",
            "properties": {"query": {"type": "string"}, "account": {"type": "string"}},
            "required": ["query"],
        }
        return [
            Action(
                "search", "Search the mailbox.", parameters, fixed={"account": "ops@example.com"}
            )
        ]

    @expediter.hookimpl
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
        self.received.append(dict(arguments))
        return {"hits": 0, "account": arguments["account"]}


class Catalog:
    """A raw-hook tool offering many actions."""

    name = "catalog"

    def __init__(self, count: int) -> None:
        self.count = count

    @expediter.hookimpl
    def get_actions_metadata(self) -> list[Action]:
        return [Action(f"item_{i:02d}", f"Item {i}.") for i in range(self.count)]

    @expediter.hookimpl
    def execute_action(self, action: str) -> str:
        return action


# -- helpers --------------------------------------------------------------------------------------


async def _collect(events: AsyncIterator[CallEvent]) -> list[CallEvent]:
    return [event async for event in events]


def execute(
    toolset: Toolset, calls: list[ToolCall], mode: str = "run", message_id: str = "m1"
) -> list[CallEvent]:
    """Run the calls with ``run`` or ``arun``; the final event of each call."""
    if mode == "run":
        events = list(toolset.run(calls, message_id=message_id))
    else:
        events = asyncio.run(_collect(toolset.arun(calls, message_id=message_id)))
    return [event for event in events if event.status != "pending"]


def turn(
    toolset: Toolset, *calls: tuple[str, str, Any], mode: str = "run", message_id: str = "m1"
) -> list[CallEvent]:
    """Parse the calls from a provider response and run them; one final event per call."""
    parsed = toolset.parse_calls("openai", openai_response(*calls))
    events = execute(toolset, parsed, mode, message_id)
    assert [event.call_id for event in events] == [call.call_id for call in parsed]
    return events


def row(host: Host, key: str) -> LedgerRow:
    found = host.ledger.get(key)
    assert found is not None, f"no ledger row {key}"
    return found


def comparable(event: CallEvent) -> tuple[Any, ...]:
    """An event without its timing and run-specific key."""
    return (
        event.status,
        event.call_id,
        event.name,
        event.tool,
        event.action,
        event.arguments,
        event.result,
        event.error,
        event.error_type,
        event.reason,
        event.content,
    )


# -- arguments and names --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_operator_fixed_values_cannot_be_overridden_by_the_model(make_host, mode: str) -> None:
    mailbox = Mailbox()
    host = make_host(mailbox, record_calls=True)
    toolset = host.toolset()
    assert "account" not in json.dumps(toolset.schemas("openai"))

    (event,) = turn(
        toolset, ("c1", "search", {"query": "invoice", "account": "ceo@example.com"}), mode=mode
    )

    assert mailbox.received == [{"query": "invoice", "account": "ops@example.com"}]
    assert (event.status, event.result) == ("completed", {"hits": 0, "account": "ops@example.com"})
    assert row(host, "m1:c1").result == {"hits": 0, "account": "ops@example.com"}


@pytest.mark.parametrize("mode", MODES)
def test_undeclared_arguments_are_refused_and_the_tool_never_runs(make_host, mode: str) -> None:
    mailbox = Mailbox()
    host = make_host(mailbox, record_calls=True)
    (event,) = turn(host.toolset(), ("c1", "search", {"query": "x", "sudo": True}), mode=mode)

    assert (event.status, event.error_type) == ("error", "ArgumentError")
    assert "unknown argument 'sudo'" in (event.error or "")
    assert "expected: query, account" in (event.error or "")
    failed = row(host, "m1:c1")
    assert failed.status == "failed"
    assert "unknown argument 'sudo'" in (failed.error or "")
    assert mailbox.received == []


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"query": "inv', "not valid JSON"),
        ('{"query": "a"} {"query": "b"}', "more than one JSON value"),
        ('["invoice"]', "must be a JSON object, not array"),
    ],
    ids=["truncated", "two-objects", "array"],
)
def test_malformed_arguments_are_an_error_naming_the_problem(
    make_host, arguments: str, problem: str
) -> None:
    mailbox = Mailbox()
    host = make_host(mailbox, record_calls=True)
    toolset = host.toolset()
    calls = toolset.parse_calls("openai", openai_response(("c1", "search", arguments)))
    (event,) = execute(toolset, calls)

    assert (event.status, event.error_type) == ("error", "ArgumentError")
    assert "search" in (event.error or "")
    assert problem in (event.error or "")
    failed = row(host, "m1:c1")
    assert failed.status == "failed"
    assert problem in (failed.error or "")
    assert mailbox.received == []
    (message,) = toolset.result_messages("openai", calls, [event])
    assert problem in message["content"]


def test_an_unknown_name_lists_at_most_30_available_names(make_host) -> None:
    host = make_host(Catalog(35), record_calls=True)
    toolset = host.toolset()
    names = toolset.name_map.names
    assert len(names) == 35

    (event,) = turn(toolset, ("c1", "item_99", {}))

    assert (event.status, event.error_type, event.tool) == ("error", "ToolNotFound", None)
    error = event.error or ""
    assert "'item_99'" in error
    assert ", ".join(names[:30]) + ", and 5 more" in error
    assert all(name not in error for name in names[30:])
    failed = row(host, "m1:c1")
    assert (failed.status, failed.error) == ("failed", error)


def test_the_third_call_of_the_same_unknown_name_is_told_to_stop(make_host) -> None:
    host = make_host(lookup, record_calls=True)
    toolset = host.toolset()
    first, second = turn(toolset, ("c1", "get_order", {}), ("c2", "get_order", {}))
    other, third = turn(toolset, ("c3", "find_order", {}), ("c4", "get_order", {}), message_id="m2")

    for event in (first, second, other):
        assert event.error_type == "ToolNotFound"
        assert "Available: lookup" in (event.error or "")
        assert "Stop" not in (event.error or "")
    assert third.error_type == "ToolNotFound"
    assert "Stop calling 'get_order'" in (third.error or "")
    assert "lookup" in (third.error or "")
    assert "attempt 3" in (third.error or "")
    assert row(host, "m2:c4").error == third.error


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_that_raises_becomes_an_error_event_and_a_failed_row(
    make_host, caplog, mode: str
) -> None:
    host = make_host(lookup, explode, record_calls=True)
    with caplog.at_level(logging.ERROR, logger="expediter"):
        first, crashed, last = turn(
            host.toolset(),
            ("c1", "lookup", {"order": "A1"}),
            ("c2", "explode", {}),
            ("c3", "lookup", {"order": "A3"}),
            mode=mode,
        )

    assert (first.status, last.status) == ("completed", "completed")
    assert (crashed.status, crashed.error_type, crashed.error) == (
        "error",
        "KeyError",
        "KeyError: 'missing'",
    )
    failed = row(host, "m1:c2")
    assert (failed.status, failed.error) == ("failed", "KeyError: 'missing'")
    assert row(host, "m1:c3").status == "executed"
    records = [r for r in caplog.records if r.name == "expediter.core.calls.executor"]
    assert [r.exc_info[0] for r in records if r.exc_info] == [KeyError]


def test_a_call_already_in_the_ledger_is_not_run_again(make_host) -> None:
    runs: list[str] = []

    @expediter.tool
    def charge(order: str) -> str:
        """Charge a card."""
        runs.append(order)
        return f"charged {order}"

    host = make_host(charge, record_calls=True)
    (first,) = turn(host.toolset(), ("c1", "charge", {"order": "A1"}))
    (again,) = turn(host.toolset(), ("c1", "charge", {"order": "A1"}))

    assert first.status == "completed"
    assert (again.status, again.error_type) == ("error", "LedgerError")
    assert "already has a call 'm1:c1'" in (again.error or "")
    assert runs == ["A1"]
    assert (row(host, "m1:c1").status, row(host, "m1:c1").result) == ("executed", "charged A1")


# -- concurrency, deadlines, cancellation ------------------------------------------------------


def test_twenty_async_calls_finish_in_about_the_time_of_the_slowest(make_host) -> None:
    finished: list[int] = []

    @expediter.tool
    async def nap(n: int) -> int:
        """Sleep a moment."""
        await asyncio.sleep(0.2 - n * 0.005)  # later calls finish first
        finished.append(n)
        return n

    host = make_host(nap, record_calls=True)
    toolset = host.toolset()
    host.ledger  # noqa: B018 - open the ledger before the clock starts
    started = time.perf_counter()
    events = turn(toolset, *[(f"c{n}", "nap", {"n": n}) for n in range(20)], mode="arun")
    elapsed = time.perf_counter() - started

    assert elapsed < 1.5, f"20 calls of 0.2 s took {elapsed:.2f} s: they did not overlap"
    assert [event.result for event in events] == list(range(20))
    assert all(event.status == "completed" for event in events)
    assert finished[0] > finished[-1]  # they ran at once, yet the events kept the call order
    assert {row(host, f"m1:c{n}").status for n in range(20)} == {"executed"}


def test_sync_tools_in_arun_do_not_block_each_other(make_host) -> None:
    @expediter.tool
    def crunch(n: int) -> int:
        """Work a while."""
        time.sleep(0.2)
        return n * n

    toolset = make_host(crunch).toolset()
    started = time.perf_counter()
    events = turn(toolset, *[(f"c{n}", "crunch", {"n": n}) for n in range(5)], mode="arun")
    elapsed = time.perf_counter() - started

    assert [event.result for event in events] == [0, 1, 4, 9, 16]
    assert elapsed < 0.7, f"5 sync calls of 0.2 s took {elapsed:.2f} s: they ran one by one"


@pytest.mark.parametrize("mode", MODES)
def test_call_timeout_cancels_a_stuck_async_tool_and_records_it_failed(
    make_host, mode: str
) -> None:
    cancelled = threading.Event()

    @expediter.tool
    async def hang(n: int) -> str:
        """Wait for an answer that never comes."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "woke up"

    host = make_host(hang, lookup, record_calls=True, call_timeout=0.3)
    started = time.perf_counter()
    stuck, fine = turn(
        host.toolset(), ("c1", "hang", {"n": 1}), ("c2", "lookup", {"order": "A"}), mode=mode
    )

    assert time.perf_counter() - started < 3
    assert cancelled.wait(2), "the tool never saw its cancellation"
    assert (stuck.status, stuck.error_type) == ("error", "TimeoutError")
    assert "did not finish within 0.3 s" in (stuck.error or "")
    failed = row(host, "m1:c1")
    assert failed.status == "failed"
    assert "did not finish within 0.3 s" in (failed.error or "")
    assert fine.status == "completed"


def test_a_sync_tool_past_its_deadline_is_told_to_stop_through_its_context(make_host) -> None:
    stopped = threading.Event()

    @expediter.tool
    def poll(n: int, context: CallContext) -> str:
        """Poll until told to stop."""
        give_up = time.monotonic() + 0.8
        while time.monotonic() < give_up:
            if context.is_cancelled():
                stopped.set()
                return "stopped"
            time.sleep(0.01)
        return "never told"

    host = make_host(poll, call_timeout=0.2)
    (event,) = turn(host.toolset(), ("c1", "poll", {"n": 1}), mode="arun")
    assert event.error_type == "TimeoutError"
    assert stopped.wait(2)  # the thread still running saw is_cancelled() and returned


def test_closing_arun_early_tells_a_sync_tool_still_running_to_stop(make_host) -> None:
    stopped = threading.Event()
    started = threading.Event()

    @expediter.tool
    def poll(n: int, context: CallContext) -> str:
        """Poll until told to stop."""
        started.set()
        give_up = time.monotonic() + 5
        while time.monotonic() < give_up:
            if context.is_cancelled():
                stopped.set()
                return "stopped"
            time.sleep(0.01)
        return "never told"

    host = make_host(poll, lookup)  # no call_timeout: only the cancellation can stop it
    toolset = host.toolset()
    calls = toolset.parse_calls(
        "openai", openai_response(("c1", "lookup", {"order": "A"}), ("c2", "poll", {"n": 1}))
    )

    async def first_then_close() -> None:
        events = toolset.arun(calls, message_id="m1")
        first = await anext(events)
        while first.status == "pending":
            first = await anext(events)
        await asyncio.to_thread(started.wait, 5)
        await events.aclose()  # type: ignore[attr-defined]

    asyncio.run(first_then_close())
    assert stopped.wait(3)


def test_closing_arun_early_cancels_the_remaining_calls_and_fails_their_rows(make_host) -> None:
    cancelled: list[int] = []

    @expediter.tool
    async def wait(n: int) -> int:
        """Wait ``n`` seconds."""
        try:
            await asyncio.sleep(n)
        except asyncio.CancelledError:
            cancelled.append(n)
            raise
        return n

    host = make_host(wait, record_calls=True)
    toolset = host.toolset()
    calls = toolset.parse_calls(
        "openai",
        openai_response(
            ("c1", "wait", {"n": 0}), ("c2", "wait", {"n": 30}), ("c3", "wait", {"n": 20})
        ),
    )

    async def first_then_close() -> CallEvent:
        events = toolset.arun(calls, message_id="m1")
        first = await anext(events)
        while first.status == "pending":
            first = await anext(events)
        await events.aclose()  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)  # let the cancelled tasks run to their end
        return first

    started = time.perf_counter()
    first = asyncio.run(first_then_close())

    assert time.perf_counter() - started < 3
    assert (first.call_id, first.status, first.result) == ("c1", "completed", 0)
    assert sorted(cancelled) == [20, 30]
    assert row(host, "m1:c1").status == "executed"
    for key in ("m1:c2", "m1:c3"):
        left = row(host, key)
        assert left.status == "failed", f"{key} was left {left.status}"
        assert "cancelled" in (left.error or "")


def test_an_async_tool_raising_cancelled_error_itself_is_an_error_not_an_escape(
    make_host,
) -> None:
    @expediter.tool
    async def orphan(n: int) -> int:
        """Await a future that was cancelled."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        future.cancel()
        return await future

    host = make_host(orphan, lookup, record_calls=True)
    broken, fine = turn(
        host.toolset(), ("c1", "orphan", {"n": 1}), ("c2", "lookup", {"order": "A"}), mode="arun"
    )
    assert broken.status == "error"
    assert fine.status == "completed"


# -- wrappers and observers -------------------------------------------------------------------


class Tracer:
    """An ``execute_action`` wrapper recording every call it wraps."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, str, dict[str, Any]]] = []

    @expediter.hookimpl(wrapper=True)
    def execute_action(
        self, action: str, arguments: dict[str, Any], context: CallContext
    ) -> Iterator[None]:
        self.seen.append((context.call_id, action, dict(arguments)))
        return (yield)


class Observer:
    """An ``on_call_event`` observer; ``fail`` makes it raise after recording."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.events: list[CallEvent] = []

    @expediter.hookimpl
    def on_call_event(self, event: CallEvent) -> None:
        self.events.append(event)
        if self.fail:
            raise RuntimeError("the metrics backend is down")


@pytest.mark.parametrize("mode", MODES)
def test_an_execute_action_wrapper_sees_every_call_of_a_turn(make_host, mode: str) -> None:
    @expediter.tool
    async def later(n: int) -> int:
        """An async tool."""
        return n

    tracer = Tracer()
    host = make_host(lookup, explode, later, tracer)
    events = turn(
        host.toolset(),
        ("c1", "lookup", {"order": "A1"}),
        ("c2", "explode", {}),
        ("c3", "later", {"n": 3}),
        ("c4", "nothing_like_this", {}),
        mode=mode,
    )

    assert [event.status for event in events] == ["completed", "error", "completed", "error"]
    assert sorted(tracer.seen) == [
        ("c1", "lookup", {"order": "A1"}),
        ("c2", "explode", {}),
        ("c3", "later", {"n": 3}),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_on_call_event_observers_receive_pending_and_final_events(make_host, mode: str) -> None:
    observer = Observer()
    host = make_host(lookup, refund, explode, observer, record_calls=True)
    events = turn(
        host.toolset(),
        ("c1", "lookup", {"order": "A1"}),
        ("c2", "refund", {"order": "A2"}),
        ("c3", "explode", {}),
        mode=mode,
    )

    seen = {(event.call_id, event.status) for event in observer.events}
    assert seen == {
        ("c1", "pending"),
        ("c1", "completed"),
        ("c2", "awaiting_approval"),
        ("c3", "pending"),
        ("c3", "error"),
    }
    assert len(observer.events) == len(seen)
    for call_id in ("c1", "c3"):
        statuses = [e.status for e in observer.events if e.call_id == call_id]
        assert statuses[0] == "pending"
    finals = [event for event in observer.events if event.status != "pending"]
    assert sorted(finals, key=lambda e: e.call_id) == events
    assert all(a is b for a, b in zip(sorted(finals, key=lambda e: e.call_id), events, strict=True))
    pending = next(e for e in observer.events if e.status == "pending")
    assert (pending.key, pending.arguments, pending.duration_ms) == ("m1:c1", {"order": "A1"}, None)


def test_on_call_event_sees_the_events_of_a_resumed_call(make_host) -> None:
    observer = Observer()
    host = make_host(refund, observer, record_calls=True)
    turn(host.toolset(), ("c1", "refund", {"order": "A1"}), ("c2", "refund", {"order": "A2"}))
    observer.events.clear()
    approved = host.resume("m1:c1", True, approver="bob")
    denied = host.resume("m1:c2", False, approver="bob")

    assert [(e.call_id, e.status) for e in observer.events] == [
        ("c1", "pending"),
        ("c1", "completed"),
        ("c2", "denied"),
    ]
    assert observer.events[1] is approved
    assert observer.events[2] is denied


@pytest.mark.parametrize("mode", MODES)
def test_an_observer_that_raises_is_logged_and_changes_nothing(
    make_host, caplog, mode: str
) -> None:
    calls = (
        ("c1", "lookup", {"order": "A1"}),
        ("c2", "refund", {"order": "A2"}),
        ("c3", "explode", {}),
        ("c4", "no_such_tool", {}),
        ("c5", "lookup", '{"order": '),
    )
    plain = make_host(lookup, refund, explode, record_calls=True)
    expected = turn(plain.toolset(), *calls, mode=mode, message_id="plain")

    failing, healthy = Observer(fail=True), Observer()
    observed = make_host(lookup, refund, explode, failing, healthy, record_calls=True)
    with caplog.at_level(logging.ERROR, logger="expediter"):
        events = turn(observed.toolset(), *calls, mode=mode, message_id="observed")

    assert [comparable(event) for event in events] == [comparable(event) for event in expected]
    for call_id, *_ in calls:
        before, after = row(plain, f"plain:{call_id}"), row(observed, f"observed:{call_id}")
        assert (after.status, after.decision, after.result, after.error, after.arguments) == (
            before.status,
            before.decision,
            before.result,
            before.error,
            before.arguments,
        )
    assert [e.status for e in failing.events] == [e.status for e in healthy.events]
    assert len(healthy.events) == 7  # every final event, and pending for the two that ran
    complaints = [r for r in caplog.records if "on_call_event observer" in r.getMessage()]
    assert len(complaints) == len(failing.events)
    assert all(r.exc_info and r.exc_info[0] is RuntimeError for r in complaints)
