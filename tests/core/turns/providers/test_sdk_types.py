"""What expediter emits checked against the providers' own SDK types: every tool definition
(strict and not), the saved responses we parse, and the result messages we send back.

TypedDict validation ignores unknown keys, so each validated value is also compared with what
was emitted: a key the SDK does not know would be dropped and the comparison would fail."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from typing import Any, Literal

import attrs
import pydantic
import pytest
from support.responses import RESPONSES, load

import expediter
from expediter.core.host import Host
from expediter.core.records.calls import CallEvent, ToolCall
from expediter.core.turns.toolset import Toolset


class Cabin(enum.Enum):
    ECONOMY = "economy"
    BUSINESS = "business"


@attrs.frozen
class Passenger:
    """Someone on the booking."""

    name: str
    age: int
    cabin: Cabin = Cabin.ECONOMY
    loyalty_number: str | None = None


@attrs.frozen
class Leg:
    """One flight of the trip."""

    origin: str
    destination: str
    date: str


@expediter.tool
def book_trip(
    legs: list[Leg],
    passengers: list[Passenger],
    purpose: Literal["business", "leisure"],
    notes: str | None = None,
    max_price: float = 1000.0,
    refundable: bool = False,
) -> dict[str, Any]:
    """Book a trip of one or more flights.

    Args:
        legs: The flights, in order.
        passengers: Who travels.
        purpose: Why they travel.
        notes: Anything the agent should know.
        max_price: The most to pay per person.
        refundable: Only refundable fares.
    """
    return {"legs": len(legs), "passengers": [p.name for p in passengers], "purpose": purpose}


@expediter.tool
def tally(counts: dict[str, int]) -> int:
    """Add up named counts."""
    return sum(counts.values())


CLIENT_TOOL = {
    "type": "function",
    "function": {
        "name": "show_seat_map",
        "description": "Show the seat map in the app.",
        "parameters": {
            "type": "object",
            "properties": {"flight": {"type": "string"}, "deck": {"enum": ["upper", "main"]}},
            "required": ["flight"],
        },
    },
}


@pytest.fixture
def host(make_host: Callable[..., Host]) -> Host:
    return make_host(book_trip, tally, builtins=True)


@pytest.fixture
def toolset(host: Host) -> Toolset:
    toolset = host.toolset(client_tools=[CLIENT_TOOL])
    assert len(toolset) == 17
    return toolset


def validated(kind: Any, value: Any) -> Any:
    return pydantic.TypeAdapter(kind).validate_python(value)


# -- tool definitions -------------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("provider", ["openai", "mistral", "ollama"])
def test_chat_tools_build_the_openai_tool_params_unchanged(
    toolset: Toolset, provider: str, strict: bool
) -> None:
    from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionToolParam
    from openai.types.shared_params import FunctionDefinition

    tools = toolset.schemas(provider, strict=strict)
    assert len(tools) == 17
    for tool in tools:
        assert validated(ChatCompletionFunctionToolParam, tool) == tool
        assert validated(ChatCompletionToolParam, tool) == tool
        assert validated(FunctionDefinition, tool["function"]) == tool["function"]


@pytest.mark.parametrize("strict", [False, True])
def test_responses_tools_build_the_function_tool_param_unchanged(
    toolset: Toolset, strict: bool
) -> None:
    from openai.types.responses import FunctionToolParam, ToolParam

    for tool in toolset.schemas("openai-responses", strict=strict):
        assert validated(FunctionToolParam, tool) == tool
        assert validated(ToolParam, tool) == tool


@pytest.mark.parametrize("strict", [False, True])
def test_anthropic_tools_build_the_tool_param_unchanged(toolset: Toolset, strict: bool) -> None:
    from anthropic.types import ToolParam, ToolUnionParam

    for tool in toolset.schemas("anthropic", strict=strict):
        assert validated(ToolParam, tool) == tool
        assert validated(ToolUnionParam, tool) == tool


def test_gemini_tools_build_function_declarations_with_parameters_json_schema(
    toolset: Toolset,
) -> None:
    from google.genai import types

    (tool,) = toolset.schemas("gemini")
    built = types.Tool.model_validate(tool)
    assert built.function_declarations is not None
    assert len(built.function_declarations) == 17
    for declaration, emitted in zip(
        built.function_declarations, tool["function_declarations"], strict=True
    ):
        assert declaration.parameters is None
        assert declaration.parameters_json_schema == emitted["parameters_json_schema"]
        assert declaration.name == emitted["name"]
    assert built.model_dump(exclude_none=True) == tool
    config = types.GenerateContentConfig(tools=[built])
    assert config.tools is not None


def test_strict_mode_really_applies_to_the_rich_tool(toolset: Toolset) -> None:
    strict = {t["function"]["name"]: t["function"] for t in toolset.schemas("openai", strict=True)}
    assert strict["book_trip"]["strict"] is True
    assert strict["show_seat_map"]["strict"] is True
    assert "strict" not in strict["tally"]


# -- saved responses ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "name", "model"),
    [
        ("openai", "openai_chat.json", "openai.types.chat:ChatCompletion"),
        ("mistral", "mistral_chat.json", "openai.types.chat:ChatCompletion"),
        ("openai-responses", "openai_responses.json", "openai.types.responses:Response"),
        ("anthropic", "anthropic_messages.json", "anthropic.types:Message"),
    ],
)
def test_saved_responses_are_valid_sdk_responses_and_their_dumps_parse_the_same(
    host: Host, provider: str, name: str, model: str
) -> None:
    import importlib

    module, _, attribute = model.partition(":")
    response_type = getattr(importlib.import_module(module), attribute)
    raw = load(name)
    dumped = response_type.model_validate(raw).model_dump()
    toolset = host.toolset()
    calls = toolset.parse_calls(provider, raw)
    assert calls
    assert all(call.resolved and call.error is None for call in calls)
    assert toolset.parse_calls(provider, dumped) == calls


@pytest.mark.parametrize("name", ["gemini.json", "gemini_with_ids.json"])
def test_saved_gemini_responses_are_valid_sdk_responses(host: Host, name: str) -> None:
    from google.genai import types

    response = types.GenerateContentResponse.model_validate_json(
        (RESPONSES / name).read_text(encoding="utf-8")
    )
    assert response.function_calls
    toolset = host.toolset()
    calls = toolset.parse_calls("gemini", response.model_dump())
    assert [(c.name, c.arguments) for c in calls] == [
        (f.name, f.args) for f in response.function_calls
    ]


# -- result messages ---------------------------------------------------------------------------


def turn(
    host: Host, toolset: Toolset, provider: str, response: dict[str, Any]
) -> tuple[list[ToolCall], list[dict[str, Any]]]:
    calls = toolset.parse_calls(provider, response)
    events: list[CallEvent] = list(toolset.run(calls))
    return calls, toolset.result_messages(provider, calls, events)


def with_failures(provider: str, response: dict[str, Any]) -> dict[str, Any]:
    """The saved response plus a call to an unknown name and one with broken arguments."""
    response = json.loads(json.dumps(response))
    if provider == "openai":
        response["choices"][0]["message"]["tool_calls"] += [
            {
                "id": "call_x1",
                "type": "function",
                "function": {"name": "clock_now", "arguments": "{}"},
            },
            {"id": "call_x2", "type": "function", "function": {"name": "now", "arguments": "{"}},
        ]
    elif provider == "openai-responses":
        response["output"] += [
            {
                "type": "function_call",
                "id": "fc_x1",
                "call_id": "call_x1",
                "name": "clock_now",
                "arguments": "{}",
            },
            {
                "type": "function_call",
                "id": "fc_x2",
                "call_id": "call_x2",
                "name": "now",
                "arguments": "[]",
            },
        ]
    elif provider == "anthropic":
        response["content"] += [
            {"type": "tool_use", "id": "toolu_x1", "name": "clock_now", "input": {}},
            {"type": "tool_use", "id": "toolu_x2", "name": "now", "input": [1]},
        ]
    return response


def test_chat_result_messages_build_the_tool_message_param_unchanged(
    host: Host, toolset: Toolset
) -> None:
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolMessageParam

    _, messages = turn(host, toolset, "openai", with_failures("openai", load("openai_chat.json")))
    assert len(messages) == 5
    for message in messages:
        assert validated(ChatCompletionToolMessageParam, message) == message
        assert validated(ChatCompletionMessageParam, message) == message


def test_responses_result_items_build_the_function_call_output_unchanged(
    host: Host, toolset: Toolset
) -> None:
    from openai.types.responses.response_input_param import FunctionCallOutput

    response = with_failures("openai-responses", load("openai_responses.json"))
    _, items = turn(host, toolset, "openai-responses", response)
    assert len(items) == 4
    for item in items:
        assert validated(FunctionCallOutput, item) == item


def test_anthropic_result_message_builds_the_message_param_unchanged(
    host: Host, toolset: Toolset
) -> None:
    from anthropic.types import MessageParam, ToolResultBlockParam

    response = with_failures("anthropic", load("anthropic_messages.json"))
    _, messages = turn(host, toolset, "anthropic", response)
    (message,) = messages
    checked = validated(MessageParam, message)
    assert checked["role"] == "user"
    # MessageParam validates its content lazily, so the blocks are checked one by one.
    assert len(message["content"]) == 5
    for block in message["content"]:
        assert validated(ToolResultBlockParam, block) == block


def test_gemini_result_message_builds_the_content_type(host: Host, toolset: Toolset) -> None:
    from google.genai import types

    for response in (load("gemini_with_ids.json"), load("gemini.json")):
        _, messages = turn(host, toolset, "gemini", response)
        (message,) = messages
        content = types.Content.model_validate(message)
        assert content.role == "user"
        assert content.parts is not None
        for part, emitted in zip(content.parts, message["parts"], strict=True):
            assert part.function_response is not None
            assert (
                part.function_response.model_dump(by_alias=True, exclude_none=True)
                == (emitted["functionResponse"])
            )
            assert (part.thought_signature is None) == ("thoughtSignature" not in emitted)


def test_gemini_result_message_from_an_sdk_response_round_trips_unchanged(
    host: Host, toolset: Toolset
) -> None:
    from google.genai import types

    text = (RESPONSES / "gemini.json").read_text(encoding="utf-8")
    dumped = types.GenerateContentResponse.model_validate_json(text).model_dump()
    _, messages = turn(host, toolset, "gemini", dumped)
    (message,) = messages
    content = types.Content.model_validate(message)
    assert content.model_dump(by_alias=True, exclude_none=True) == message
    assert content.parts is not None
    assert content.parts[0].thought_signature is not None
