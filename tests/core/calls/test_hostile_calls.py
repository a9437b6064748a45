"""Calls a model (or a careless application) shapes to break the turn: duplicate ids, a name
that disagrees with its tool and action, arguments nested too deep, NaN, huge numbers and
names. Each gets its own event and its own row, and none stops the turn."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from support.responses import openai_response

import expediter
from expediter.core.records.calls import ToolCall
from expediter.core.records.statuses import FINAL_LEDGER_STATUSES

RAN: list[str] = []


class Notes(expediter.Toolbox):
    name = "notes"

    @expediter.action
    def note(self, text: str = "") -> str:
        """Write a note (harmless)."""
        RAN.append("note")
        return "noted"

    @expediter.action(require_approval=True)
    def wipe(self) -> str:
        """Delete every note (needs approval)."""
        RAN.append("wipe")
        return "wiped"

    @expediter.action
    def echo(self, value: Any = None) -> Any:
        """Return the value."""
        return value


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def _offered(toolset: Any, action: str) -> Any:
    (found,) = [o for o in toolset.actions if o.action.name == action]
    return found


def _run(toolset: Any, calls: list[ToolCall], mode: str) -> list[Any]:
    if mode == "run":
        events = list(toolset.run(calls, message_id="m1"))
    else:

        async def collect() -> list[Any]:
            return [e async for e in toolset.arun(calls, message_id="m1")]

        events = asyncio.run(collect())
    return [e for e in events if e.status != "pending"]


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_two_calls_with_one_id_each_keep_their_own_event_row_and_message(
    make_host, mode: str
) -> None:
    host = make_host(Notes(), record_calls=True)
    toolset = host.toolset()
    note, echo = _offered(toolset, "note").name, _offered(toolset, "echo").name
    calls = toolset.parse_calls(
        "openai", openai_response(("c1", note, {}), ("c1", echo, {"value": "second"}))
    )

    events = _run(toolset, calls, mode)

    assert [(e.status, e.key, e.result) for e in events] == [
        ("completed", "m1:c1", "noted"),
        ("completed", "m1:c1#2", "second"),
    ]
    assert [host.ledger.get(e.key).status for e in events] == ["executed", "executed"]
    messages = toolset.result_messages("openai", calls, events)
    assert [m["content"] for m in messages] == ["noted", "second"]


def test_a_call_whose_tool_and_action_disagree_with_its_name_is_refused(make_host) -> None:
    host = make_host(Notes(), record_calls=True)
    toolset = host.toolset()
    note = _offered(toolset, "note")
    forged = ToolCall(
        call_id="c1",
        name=note.name,  # offered as the harmless note ...
        arguments={},
        instance_id=note.instance_id,
        tool="notes",
        action="wipe",  # ... but asks for wipe, which needs approval
    )

    (event,) = _run(toolset, [forged], "run")

    assert (event.status, event.error_type) == ("error", "InvalidCall")
    assert RAN == []
    assert host.ledger.get("m1:c1").status == "failed"


def test_a_call_to_a_name_this_turn_did_not_offer_is_refused(make_host) -> None:
    host = make_host(Notes(), record_calls=True)
    toolset = host.toolset()
    forged = ToolCall(
        call_id="c1",
        name="not_offered",
        arguments={},
        instance_id="notes",
        tool="notes",
        action="note",
    )
    (event,) = _run(toolset, [forged], "run")
    assert (event.status, event.error_type) == ("error", "ToolNotFound")
    assert RAN == []


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"v": value}
    return value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (_nested(10_000), "nest more than"),
        (math.nan, "not a JSON number"),
        ([1.0, math.inf], "not a JSON number"),
        (10**5000, "too long"),
    ],
    ids=["deep", "nan", "inf-in-list", "huge-int"],
)
@pytest.mark.parametrize("mode", ["run", "arun"])
def test_arguments_no_json_can_carry_are_an_argument_error_with_a_row(
    make_host, value: Any, expected: str, mode: str
) -> None:
    host = make_host(Notes(), record_calls=True)
    toolset = host.toolset()
    echo = _offered(toolset, "echo")
    calls = [
        ToolCall(
            call_id="c1",
            name=echo.name,
            arguments={"value": value},
            instance_id=echo.instance_id,
            tool="notes",
            action="echo",
        ),
        ToolCall(
            call_id="c2",
            name=echo.name,
            arguments={"value": "after"},
            instance_id=echo.instance_id,
            tool="notes",
            action="echo",
        ),
    ]

    first, second = _run(toolset, calls, mode)

    assert (first.status, first.error_type) == ("error", "ArgumentError")
    assert expected in (first.error or "")
    assert host.ledger.get("m1:c1").status == "failed"
    assert (second.status, second.result) == ("completed", "after")  # the turn went on


def test_an_overlong_call_id_and_name_are_bounded_in_the_key_and_the_error(make_host) -> None:
    host = make_host(Notes(), record_calls=True)
    toolset = host.toolset()
    call_id, name = "i" * 100_000, "n" * 1_000_000
    calls = toolset.parse_calls("openai", openai_response((call_id, name, {})))

    (event,) = _run(toolset, calls, "run")

    assert event.error_type == "ToolNotFound"
    assert len(event.key) < 200
    assert len(event.error or "") < 2_000
    found = host.ledger.get(event.key)
    assert found is not None
    assert found.status in FINAL_LEDGER_STATUSES


def test_keyboard_interrupt_stops_the_turn_after_the_running_row_is_finished(
    make_host,
) -> None:
    @expediter.tool
    def interrupted() -> str:
        """Stand for a user pressing Ctrl-C while the tool runs."""
        raise KeyboardInterrupt

    host = make_host(interrupted, record_calls=True)
    toolset = host.toolset()
    calls = toolset.parse_calls(
        "openai", openai_response(("c1", "interrupted", {}), ("c2", "interrupted", {}))
    )
    with pytest.raises(KeyboardInterrupt):
        list(toolset.run(calls, message_id="m1"))
    first = host.ledger.get("m1:c1")
    assert (first.status, first.error) == ("failed", "interrupted")
    assert host.ledger.get("m1:c2") is None  # never started


@pytest.mark.parametrize("mode", ["run", "arun"])
@pytest.mark.parametrize("odd", [{}, ["note"], 5, b"note"], ids=["dict", "list", "int", "bytes"])
def test_a_call_naming_things_with_values_that_are_not_text_is_refused_with_a_row(
    make_host, mode: str, odd: Any
) -> None:
    # An application's hand-built call: the ledger once could not bind a dict or a list, so
    # the call had no row (and a list as the name raised "unhashable type").
    host = make_host(Notes(), record_calls=True)
    toolset = host.toolset()
    note = _offered(toolset, "note")
    calls = [
        ToolCall(call_id="c1", name=odd, arguments={}, instance_id=note.instance_id,
                 tool="notes", action=odd),
        ToolCall(call_id="c2", name=note.name, arguments={}, instance_id=note.instance_id,
                 tool="notes", action="note"),
    ]  # fmt: skip

    first, second = _run(toolset, calls, mode)

    assert (first.status, first.error_type) == ("error", "InvalidCall")
    assert f"name ({type(odd).__name__})" in first.error
    assert (second.status, second.result) == ("completed", "noted")
    row = host.ledger.get("m1:c1")
    assert row is not None
    assert row.status == "failed"
    assert row.action == repr(odd)
    assert RAN == ["note"]


@pytest.mark.parametrize("odd", [{}, ["echo"], 5])
def test_host_call_with_an_action_that_is_not_text_gets_an_error_event_and_a_row(
    make_host, odd: Any
) -> None:
    host = make_host(Notes(), record_calls=True)
    event = host.call("notes", odd, {})
    assert (event.status, event.error_type) == ("error", "InvalidCall")
    (row,) = host.ledger.rows(limit=0)
    assert (row.status, row.action) == ("failed", repr(odd))
    with pytest.raises(expediter.IdentifierError):
        host.call(["notes"], "note", {})  # the caller's own mistake, said at once
