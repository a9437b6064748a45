"""OpenAI Chat Completions and Responses, and the OpenAI-shaped Mistral and Ollama APIs: tool
definitions, reading saved responses, argument problems, and the messages carrying results."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from support.responses import load

import expediter
from expediter.core.host import Host
from expediter.core.instances.defaults import default_instance_id
from expediter.core.records.calls import ToolCall
from expediter.core.turns.toolset import Toolset

NINE_ALPHANUMERICS = re.compile(r"^[A-Za-z0-9]{9}$")


def chat(*tool_calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """A Chat Completions response whose assistant message makes these tool calls."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "gpt-4.1-2025-04-14",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": list(tool_calls),
                },
                "finish_reason": "tool_calls",
            }
        ],
    }


def function_call(name: str, call_id: str = "call_abc123", **function: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, **function}}


def run_all(toolset: Toolset, calls: list[ToolCall]) -> list[Any]:
    """Run a turn's calls the way a host application does (``toolset.run``)."""
    return list(toolset.run(calls))


# -- Chat Completions -------------------------------------------------------------------------


def test_chat_tools_are_function_objects_with_name_description_and_parameters(
    toolset: Toolset,
) -> None:
    tools = toolset.schemas("openai")
    assert [tool["function"]["name"] for tool in tools] == ["now", "convert", "think"]
    for tool in tools:
        assert set(tool) == {"type", "function"}
        assert tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        assert tool["function"]["parameters"]["type"] == "object"
    convert = tools[1]["function"]
    assert convert["description"] == "Convert a time from one time zone to another."
    assert convert["parameters"]["required"] == ["time", "from_timezone", "to_timezone"]


def test_strict_chat_tools_say_so_inside_the_function(toolset: Toolset) -> None:
    for tool in toolset.schemas("openai", strict=True):
        assert tool["function"]["strict"] is True
        assert "strict" not in tool


def test_parallel_chat_calls_parse_into_resolved_calls_in_order(toolset: Toolset) -> None:
    calls = toolset.parse_calls("openai", load("openai_chat.json"))
    assert [(c.call_id, c.name, c.tool, c.action) for c in calls] == [
        ("call_Xk2PqL9vT3mN8rB4wY6zA1cD", "now", "clock", "now"),
        ("call_7HfQ2wLmZp0sVx4KcN9tRb1E", "convert", "clock", "convert"),
        ("call_Qm3Rt8YvB2nL6pXw0sKd4Fj9", "think", "think", "think"),
    ]
    assert [c.arguments for c in calls] == [
        {"timezone": "Asia/Tokyo"},
        {"time": "09:30", "from_timezone": "Europe/Paris", "to_timezone": "America/New_York"},
        {"thought": 'Paris is 6 hours ahead of New York in winter, "usually".'},
    ]
    assert all(c.error is None and c.instance_id == default_instance_id(c.tool) for c in calls)


def test_a_chat_reply_without_tool_calls_has_no_calls(toolset: Toolset) -> None:
    response = load("openai_chat.json")
    message = response["choices"][0]["message"]
    del message["tool_calls"]
    response["choices"][0]["finish_reason"] = "stop"
    assert toolset.parse_calls("openai", response) == []
    message["tool_calls"] = None
    assert toolset.parse_calls("openai", response) == []


@pytest.mark.parametrize(
    "function",
    [{}, {"arguments": None}, {"arguments": ""}, {"arguments": "  \n\t "}, {"arguments": "{}"}],
    ids=["missing", "null", "empty", "whitespace", "empty-object"],
)
def test_absent_or_empty_arguments_are_an_empty_object(
    toolset: Toolset, function: dict[str, Any]
) -> None:
    (call,) = toolset.parse_calls("openai", chat(function_call("now", **function)))
    assert (call.arguments, call.error, call.action) == ({}, None, "now")


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"timezone": "Asia/Tokyo"', "not valid JSON"),
        ("{timezone: 'UTC'}", "not valid JSON"),
        ("{}{}", "more than one JSON value"),
        ('{"timezone": "UTC"}{"timezone": "Asia/Tokyo"}', "more than one JSON value"),
        ('["UTC"]', "not array"),
        ("42", "not number"),
        ('"UTC"', "not string"),
    ],
    ids=["truncated", "not-json", "two-empty-objects", "two-objects", "array", "number", "string"],
)
def test_malformed_arguments_keep_the_call_with_an_error_saying_what_was_wrong(
    toolset: Toolset, arguments: str, problem: str
) -> None:
    (call,) = toolset.parse_calls("openai", chat(function_call("now", arguments=arguments)))
    assert call.resolved
    assert (call.tool, call.action) == ("clock", "now")
    assert call.arguments == {}
    assert call.error is not None
    assert problem in call.error
    assert call.error.startswith("now")


def test_an_unknown_name_is_never_split_or_guessed(toolset: Toolset) -> None:
    response = chat(
        function_call("clock_now", "call_1", arguments='{"timezone": "UTC"}'),
        function_call("clock.now", "call_2", arguments="{}"),
        function_call("Now", "call_3", arguments="{}"),
    )
    calls = toolset.parse_calls("openai", response)
    assert [call.name for call in calls] == ["clock_now", "clock.now", "Now"]
    for call in calls:
        assert (call.resolved, call.instance_id, call.tool, call.action) == (
            False,
            None,
            None,
            None,
        )
        assert call.error is not None
        assert repr(call.name) in call.error
        # It names the unknown function and lists nothing that was offered.
        words = set(re.findall(r"[\w.]+", call.error.replace(repr(call.name), "")))
        assert not words & {"now", "convert", "think", "clock"}


def test_chat_results_are_tool_messages_with_json_for_non_string_results(
    host: Host, toolset: Toolset
) -> None:
    calls = toolset.parse_calls("openai", load("openai_chat.json"))
    events = run_all(toolset, calls)
    messages = toolset.result_messages("openai", calls, events)
    assert [(m["role"], m["tool_call_id"]) for m in messages] == [
        ("tool", call.call_id) for call in calls
    ]
    assert all(set(m) == {"role", "tool_call_id", "content"} for m in messages)
    now, converted, thought = (m["content"] for m in messages)
    assert json.loads(now)["timezone"] == "Asia/Tokyo"
    assert json.loads(converted)["to"]["timezone"] == "America/New_York"
    assert thought == 'Paris is 6 hours ahead of New York in winter, "usually".'


def test_chat_results_for_failed_calls_carry_the_error_text(host: Host, toolset: Toolset) -> None:
    calls = toolset.parse_calls(
        "openai",
        chat(
            function_call("now", "call_bad_zone", arguments='{"timezone": "Mars/Olympus_Mons"}'),
            function_call("now", "call_bad_json", arguments='{"timezone": '),
        ),
    )
    messages = toolset.result_messages("openai", calls, run_all(toolset, calls))
    assert [m["tool_call_id"] for m in messages] == ["call_bad_zone", "call_bad_json"]
    assert "unknown time zone 'Mars/Olympus_Mons'" in messages[0]["content"]
    assert "not valid JSON" in messages[1]["content"]


@attrs.frozen
class Place:
    """Somewhere on the map."""

    city: str
    country: str | None = None


@expediter.tool
def plan_trip(origin: Place, destination: Place | None = None) -> str:
    """Plan a trip.

    Args:
        origin: Where the trip starts.
        destination: Where it ends.
    """
    return origin.city


def ref_nodes(schema: Any) -> list[dict[str, Any]]:
    if isinstance(schema, dict):
        found = [schema] if "$ref" in schema else []
        return found + [node for value in schema.values() for node in ref_nodes(value)]
    if isinstance(schema, list):
        return [node for value in schema for node in ref_nodes(value)]
    return []


@pytest.mark.parametrize("provider", ["openai", "openai-responses"])
def test_strict_openai_schemas_have_no_keywords_beside_a_ref(
    make_host: Callable[..., Host], provider: str
) -> None:
    tools = make_host(plan_trip).toolset().schemas(provider, strict=True)
    (tool,) = tools
    parameters = tool["function"]["parameters"] if provider == "openai" else tool["parameters"]
    nodes = ref_nodes(parameters)
    assert nodes
    assert all(set(node) == {"$ref"} for node in nodes), nodes


# -- Responses --------------------------------------------------------------------------------


def test_responses_tools_are_flat_and_always_say_whether_they_are_strict(
    toolset: Toolset,
) -> None:
    for strict in (False, True):
        tools = toolset.schemas("openai-responses", strict=strict)
        assert [tool["name"] for tool in tools] == ["now", "convert", "think"]
        for tool in tools:
            assert set(tool) == {"type", "name", "description", "parameters", "strict"}
            assert (tool["type"], tool["strict"]) == ("function", strict)


def test_responses_function_calls_are_read_among_reasoning_and_message_items(
    toolset: Toolset,
) -> None:
    calls = toolset.parse_calls("openai-responses", load("openai_responses.json"))
    assert [(c.call_id, c.name, c.action) for c in calls] == [
        ("call_Lp4Wz8Qe2Rt6Ny0Vb3Xc7Mk1", "now", "now"),
        ("call_Hs9Kd2Fj5Ga8Pq1Wt4Ze6Yr3", "convert", "convert"),
    ]
    assert calls[1].arguments == {
        "time": "2026-03-02T15:00",
        "from_timezone": "Europe/Paris",
        "to_timezone": "Asia/Tokyo",
    }
    assert calls[0].extras["id"] == "fc_68a1f0c5d2e08190b4c6e8a0c2e4a6f80c6e8b1a3f5d7c9e"


def test_responses_results_answer_the_call_id_not_the_item_id(host: Host, toolset: Toolset) -> None:
    calls = toolset.parse_calls("openai-responses", load("openai_responses.json"))
    items = toolset.result_messages("openai-responses", calls, run_all(toolset, calls))
    assert [(item["type"], item["call_id"]) for item in items] == [
        ("function_call_output", "call_Lp4Wz8Qe2Rt6Ny0Vb3Xc7Mk1"),
        ("function_call_output", "call_Hs9Kd2Fj5Ga8Pq1Wt4Ze6Yr3"),
    ]
    assert json.loads(items[0]["output"])["timezone"] == "Europe/Paris"
    assert json.loads(items[1]["output"])["to"]["timezone"] == "Asia/Tokyo"


def test_responses_malformed_arguments_are_an_error(toolset: Toolset) -> None:
    response = {
        "output": [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "think",
                "arguments": '{"thought": "a"}{"thought": "b"}',
            }
        ]
    }
    (call,) = toolset.parse_calls("openai-responses", response)
    assert call.action == "think"
    assert "more than one JSON value" in (call.error or "")


# -- Mistral ------------------------------------------------------------------------------------


def test_mistral_tools_have_the_openai_shape_and_no_strict_flag(toolset: Toolset) -> None:
    tools = toolset.schemas("mistral", strict=True)
    assert tools == toolset.schemas("openai")


def test_mistral_calls_keep_their_nine_character_ids(toolset: Toolset) -> None:
    calls = toolset.parse_calls("mistral", load("mistral_chat.json"))
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [
        ("D681PevKs", "now", {"timezone": "Europe/Paris"}),
        ("kT3mZ9qLp", "think", {"thought": "Paris is on CET."}),
    ]
    assert all(NINE_ALPHANUMERICS.match(c.call_id) for c in calls)


def test_mistral_calls_without_ids_get_nine_alphanumerics(toolset: Toolset) -> None:
    response = load("mistral_chat.json")
    for tool_call in response["choices"][0]["message"]["tool_calls"]:
        del tool_call["id"]
    first = toolset.parse_calls("mistral", response)
    assert all(NINE_ALPHANUMERICS.match(c.call_id) for c in first)
    assert len({c.call_id for c in first}) == 2
    assert [c.call_id for c in toolset.parse_calls("mistral", response)] == [
        c.call_id for c in first
    ]


def test_mistral_results_name_the_function_and_the_call(host: Host, toolset: Toolset) -> None:
    calls = toolset.parse_calls("mistral", load("mistral_chat.json"))
    messages = toolset.result_messages("mistral", calls, run_all(toolset, calls))
    assert [(m["role"], m["tool_call_id"], m["name"]) for m in messages] == [
        ("tool", "D681PevKs", "now"),
        ("tool", "kT3mZ9qLp", "think"),
    ]
    assert json.loads(messages[0]["content"])["timezone"] == "Europe/Paris"
    assert messages[1]["content"] == "Paris is on CET."


# -- Ollama -------------------------------------------------------------------------------------


def test_ollama_tools_have_the_openai_shape(toolset: Toolset) -> None:
    assert toolset.schemas("ollama") == toolset.schemas("openai")
    assert toolset.schemas("ollama", strict=True) == toolset.schemas("openai")


def test_ollama_calls_take_object_arguments_and_get_stable_distinct_ids(
    toolset: Toolset,
) -> None:
    response = load("ollama_chat.json")
    calls = toolset.parse_calls("ollama", response)
    assert [(c.name, c.action, c.arguments, c.error) for c in calls] == [
        ("now", "now", {"timezone": "Asia/Tokyo"}, None),
        ("now", "now", {"timezone": "America/Lima"}, None),
    ]
    assert all(NINE_ALPHANUMERICS.match(c.call_id) for c in calls)
    assert calls[0].call_id != calls[1].call_id
    assert toolset.parse_calls("ollama", load("ollama_chat.json")) == calls


@pytest.mark.parametrize(
    ("arguments", "error"),
    [(None, None), ({}, None), ("", None), ('{"timezone": "UTC"}', None), ([1, 2], "array")],
    ids=["null", "empty-object", "empty-string", "json-string", "array"],
)
def test_ollama_arguments_of_every_kind(
    toolset: Toolset, arguments: Any, error: str | None
) -> None:
    response = {"message": {"role": "assistant", "tool_calls": [{"function": {"name": "now"}}]}}
    if arguments is not None:
        response["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    (call,) = toolset.parse_calls("ollama", response)
    assert call.action == "now"
    if error is None:
        assert call.error is None
        assert call.arguments == ({"timezone": "UTC"} if arguments else {})
    else:
        assert error in (call.error or "")


def test_ollama_results_name_the_tool_in_call_order(host: Host, toolset: Toolset) -> None:
    calls = toolset.parse_calls("ollama", load("ollama_chat.json"))
    messages = toolset.result_messages("ollama", calls, run_all(toolset, calls))
    assert [(m["role"], m["tool_name"]) for m in messages] == [("tool", "now"), ("tool", "now")]
    assert [json.loads(m["content"])["timezone"] for m in messages] == [
        "Asia/Tokyo",
        "America/Lima",
    ]


def test_responses_hosted_tool_items_are_not_function_calls(toolset: Toolset) -> None:
    response = load("openai_responses.json")
    response["output"].insert(
        1,
        {
            "id": "ws_68a1f0c3b2c48190",
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": "time in Paris"},
        },
    )
    calls = toolset.parse_calls("openai-responses", response)
    assert [call.name for call in calls] == ["now", "convert"]
