"""Tools that misbehave (a str() that raises, sys.exit, unserialisable or non-finite results,
NUL and lone surrogates) never escape the turn: one event and one final ledger row per call,
through ``run``, ``arun`` and ``host.call``, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.hostile import EXPECTED, Hostile
from support.hosts import ledger_host
from support.responses import openai_response

from expediter.core.host import Host
from expediter.core.records.statuses import FINAL_LEDGER_STATUSES

ACTIONS = list(EXPECTED)


@pytest.fixture
def host(shared_url: str, tmp_path: Path) -> Any:
    made = ledger_host(shared_url, tmp_path / "home", Hostile(), call_timeout=5)
    yield made
    made.close()


async def _collect(events: Any) -> list[Any]:
    return [event async for event in events]


def _turn(host: Host, mode: str, message_id: str) -> list[Any]:
    toolset = host.toolset()
    names = {offered.action.name: offered.name for offered in toolset.actions}
    calls = toolset.parse_calls(
        "openai",
        openai_response(*[(f"c{i}", names[action], {}) for i, action in enumerate(ACTIONS)]),
    )
    if mode == "run":
        events = list(toolset.run(calls, message_id=message_id))
    else:
        events = asyncio.run(_collect(toolset.arun(calls, message_id=message_id)))
    # The model's messages can be built from every event (JSON, never a crash).
    json.dumps(toolset.result_messages("openai", calls, events))
    return events


def _check(host: Host, events: list[Any]) -> None:
    assert [event.action for event in events] == ACTIONS, "one event per call, in order"
    for event in events:
        assert (event.status, event.error_type) == EXPECTED[event.action], event
        json.dumps(event.to_dict())  # every event has a JSON form
        found = host.ledger.get(event.key)
        assert found is not None, f"no row for {event.action}"
        assert found.status in FINAL_LEDGER_STATUSES, (event.action, found.status)
        assert found.status == ("executed" if event.status == "completed" else "failed")


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_every_misbehaving_tool_gets_one_event_and_one_final_row_in_a_turn(
    host: Host, mode: str
) -> None:
    _check(host, _turn(host, mode, f"m-{mode}"))
    # The host still works afterwards, async tools included (the loop survived sys.exit).
    assert host.call("hostile", "fine_async").result == "fine async"


def test_every_misbehaving_tool_gets_one_event_and_one_final_row_called_directly(
    host: Host,
) -> None:
    _check(host, [host.call("hostile", action) for action in ACTIONS])
    assert host.call("hostile", "fine_async").result == "fine async"


def test_what_the_host_changed_in_a_result_is_noted(host: Host) -> None:
    event = host.call("hostile", "not_a_number")
    assert event.result == {"ratio": None, "limit": None}
    assert "nan" in (event.note or "")
    assert "null" in (event.note or "")
    surrogate = host.call("hostile", "surrogate")
    assert surrogate.result == "half \ufffd a pair"
    assert host.ledger.get(surrogate.key).result == "half \ufffd a pair"  # type: ignore[union-attr]


def test_error_messages_are_text_the_model_can_read(host: Host) -> None:
    unprintable = host.call("hostile", "unprintable")
    assert unprintable.error == "UnprintableError: (its message could not be read)"
    exits = host.call("hostile", "exits")
    assert "sys.exit(3)" in (exits.error or "")
    in_band = host.call("hostile", "in_band")
    assert in_band.error == '{"code": 7, "why": "refused"}'  # JSON, never a Python repr
