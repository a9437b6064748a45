"""Anthropic Messages: ``input_schema`` tools, ``tool_use`` blocks among text and thinking, and the
single ``user`` message of ``tool_result`` blocks that answers them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.responses import load

from expediter.core.host import Host
from expediter.core.records.calls import CallEvent, ToolCall
from expediter.core.turns.toolset import Toolset


def message(*content: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_01Test",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": list(content),
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def run_all(toolset: Toolset, calls: list[ToolCall]) -> list[CallEvent]:
    """Run a turn's calls the way a host application does (``toolset.run``)."""
    return list(toolset.run(calls))


def test_tools_carry_their_schema_as_input_schema(toolset: Toolset) -> None:
    tools = toolset.schemas("anthropic")
    assert [tool["name"] for tool in tools] == ["now", "convert", "think"]
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema"}
        assert tool["input_schema"]["type"] == "object"
    assert tools[1]["input_schema"]["required"] == ["time", "from_timezone", "to_timezone"]


def test_strict_tools_are_flagged_at_the_top_level(toolset: Toolset) -> None:
    for tool in toolset.schemas("anthropic", strict=True):
        assert tool["strict"] is True
        assert tool["input_schema"]["additionalProperties"] is False


def test_tool_use_blocks_are_read_among_thinking_and_text_blocks(toolset: Toolset) -> None:
    calls = toolset.parse_calls("anthropic", load("anthropic_messages.json"))
    assert [(c.call_id, c.name, c.tool, c.action, c.arguments) for c in calls] == [
        ("toolu_01A09q90qw90lq917835lq9", "now", "clock", "now", {"timezone": "Asia/Tokyo"}),
        (
            "toolu_01BKvnB5EdyrYaY5t8ZzCW9r",
            "convert",
            "clock",
            "convert",
            {"time": "14:00", "from_timezone": "Asia/Tokyo", "to_timezone": "Europe/London"},
        ),
        (
            "toolu_01Dn7rYkGfLqS2xP4bWm8vTc",
            "think",
            "think",
            "think",
            {"thought": "Tokyo has no daylight saving time; London does."},
        ),
    ]
    assert all(c.error is None for c in calls)


def test_a_reply_with_only_text_has_no_calls(toolset: Toolset) -> None:
    response = message({"type": "text", "text": "It is 9am in Tokyo."})
    response["stop_reason"] = "end_turn"
    assert toolset.parse_calls("anthropic", response) == []


@pytest.mark.parametrize(
    ("block", "arguments", "problem"),
    [
        ({}, {}, None),
        ({"input": None}, {}, None),
        ({"input": {}}, {}, None),
        ({"input": {"timezone": "UTC"}}, {"timezone": "UTC"}, None),
        ({"input": ["UTC"]}, {}, "array"),
        ({"input": '{"timezone": "UTC"'}, {}, "not valid JSON"),
    ],
    ids=["missing", "null", "empty", "object", "array", "truncated-string"],
)
def test_tool_use_input_of_every_kind(
    toolset: Toolset, block: dict[str, Any], arguments: dict[str, Any], problem: str | None
) -> None:
    response = message({"type": "tool_use", "id": "toolu_01X", "name": "now", **block})
    (call,) = toolset.parse_calls("anthropic", response)
    assert (call.call_id, call.action, call.arguments) == ("toolu_01X", "now", arguments)
    if problem is None:
        assert call.error is None
    else:
        assert problem in (call.error or "")


def test_an_unknown_tool_name_is_unresolved(toolset: Toolset) -> None:
    response = message({"type": "tool_use", "id": "toolu_01X", "name": "clock_now", "input": {}})
    (call,) = toolset.parse_calls("anthropic", response)
    assert (call.resolved, call.tool, call.action) == (False, None, None)
    assert "'clock_now'" in (call.error or "")


def test_results_are_one_user_message_of_tool_result_blocks_one_per_tool_use(
    host: Host, toolset: Toolset
) -> None:
    calls = toolset.parse_calls("anthropic", load("anthropic_messages.json"))
    messages = toolset.result_messages("anthropic", calls, run_all(toolset, calls))
    (reply,) = messages
    assert reply["role"] == "user"
    blocks = reply["content"]
    assert [block["type"] for block in blocks] == ["tool_result"] * 3
    assert [block["tool_use_id"] for block in blocks] == [call.call_id for call in calls]
    assert [block["is_error"] for block in blocks] == [False, False, False]
    assert json.loads(blocks[0]["content"])["timezone"] == "Asia/Tokyo"
    assert json.loads(blocks[1]["content"])["to"]["timezone"] == "Europe/London"
    assert blocks[2]["content"] == "Tokyo has no daylight saving time; London does."


def test_failed_and_unrunnable_calls_are_flagged_is_error(host: Host, toolset: Toolset) -> None:
    response = message(
        {"type": "text", "text": "Trying three things."},
        {"type": "tool_use", "id": "toolu_ok", "name": "think", "input": {"thought": "ok"}},
        {"type": "tool_use", "id": "toolu_zone", "name": "now", "input": {"timezone": "Nowhere"}},
        {"type": "tool_use", "id": "toolu_name", "name": "clock_now", "input": {}},
        {"type": "tool_use", "id": "toolu_args", "name": "now", "input": [1]},
    )
    calls = toolset.parse_calls("anthropic", response)
    (reply,) = toolset.result_messages("anthropic", calls, run_all(toolset, calls))
    flags = {block["tool_use_id"]: block["is_error"] for block in reply["content"]}
    assert flags == {
        "toolu_ok": False,
        "toolu_zone": True,
        "toolu_name": True,
        "toolu_args": True,
    }
    texts = {block["tool_use_id"]: block["content"] for block in reply["content"]}
    assert "unknown time zone 'Nowhere'" in texts["toolu_zone"]
    assert "clock_now" in texts["toolu_name"]
    assert "array" in texts["toolu_args"]


def test_a_call_left_without_a_result_is_answered_as_an_error(host: Host, toolset: Toolset) -> None:
    calls = toolset.parse_calls("anthropic", load("anthropic_messages.json"))
    events = run_all(toolset, calls)[:1]
    (reply,) = toolset.result_messages("anthropic", calls, events)
    assert [block["tool_use_id"] for block in reply["content"]] == [c.call_id for c in calls]
    assert [block["is_error"] for block in reply["content"]] == [False, True, True]


def test_no_calls_need_no_result_message(toolset: Toolset) -> None:
    assert toolset.result_messages("anthropic", [], []) == []


def test_server_tool_blocks_are_not_client_calls(toolset: Toolset) -> None:
    response = message(
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "name": "web_search",
            "input": {"query": "time in Tokyo"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "content": [],
        },
        {"type": "tool_use", "id": "toolu_01X", "name": "now", "input": {"timezone": "UTC"}},
    )
    (call,) = toolset.parse_calls("anthropic", response)
    assert (call.call_id, call.action) == ("toolu_01X", "now")
