"""Tool calls and call events as JSON: the shapes ``expediter parse`` and every event print."""

from __future__ import annotations

import json

from expediter.core.records.calls import DISPLAY_LIMIT, CallEvent, ToolCall


def test_an_event_json_form_has_the_documented_keys_in_order() -> None:
    event = CallEvent(
        status="completed",
        key="m1:c1",
        call_id="c1",
        name="search",
        tool="web",
        action="search",
        arguments={"q": "cats"},
        result={"hits": 3},
        duration_ms=1.5,
        instance_id="web",
        user_id="ann",
        owner_id="bob",
        content='{"hits": 3}',
    )
    assert list(event.to_dict().items()) == [
        ("status", "completed"),
        ("key", "m1:c1"),
        ("call_id", "c1"),
        ("name", "search"),
        ("tool", "web"),
        ("action", "search"),
        ("arguments", {"q": "cats"}),
        ("result", {"hits": 3}),
        ("error", None),
        ("error_type", None),
        ("duration_ms", 1.5),
        ("instance_id", "web"),
        ("user_id", "ann"),
        ("owner_id", "bob"),
        ("reason", None),
        ("note", None),
    ]


def test_an_event_owner_defaults_to_none_and_is_always_in_its_json_form() -> None:
    event = CallEvent(status="pending", key="k", call_id="c", name="n", tool=None, action=None)
    assert event.owner_id is None
    assert event.to_dict()["owner_id"] is None


def test_an_event_json_form_carries_the_display_copy_of_a_long_result() -> None:
    event = CallEvent(
        status="completed", key="k", call_id="c", name="n", tool="t", action="a", result="x" * 5000
    )
    shown = event.to_dict()["result"]
    assert len(shown) <= DISPLAY_LIMIT
    assert shown.endswith("more characters]")
    assert event.result == "x" * 5000


def test_an_event_json_form_copies_its_arguments() -> None:
    arguments = {"q": "cats"}
    event = CallEvent(
        status="error", key="k", call_id="c", name="n", tool=None, action=None, arguments=arguments
    )
    data = event.to_dict()
    assert data["arguments"] == arguments
    assert data["arguments"] is not arguments


def test_ok_means_completed() -> None:
    make = CallEvent
    assert make(status="completed", key="k", call_id="c", name="n", tool=None, action=None).ok
    assert not make(status="error", key="k", call_id="c", name="n", tool=None, action=None).ok


def test_a_tool_call_json_form_has_the_parse_keys_and_bytes_extras_as_base64() -> None:
    call = ToolCall("c1", "fn", {"a": 1}, "i", "t", "act", None, {"signature": b"\x00\x01abc"})
    assert list(call.to_dict().items()) == [
        ("call_id", "c1"),
        ("name", "fn"),
        ("instance_id", "i"),
        ("tool", "t"),
        ("action", "act"),
        ("arguments", {"a": 1}),
        ("error", None),
        ("extras", {"signature": "AAFhYmM="}),
    ]
    json.dumps(call.to_dict())
