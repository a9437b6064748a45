"""What expediter emits checked against the providers' own SDK types (openai, anthropic,
google-genai, mistralai, ollama): every tool definition (strict and not), the saved responses we
parse, the result messages we send back, and the assistant message a stream accumulator builds.

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


# -- mistralai ---------------------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True])
def test_mistral_tools_build_the_mistralai_tool_unchanged(toolset: Toolset, strict: bool) -> None:
    from mistralai.client.models import ChatCompletionRequest, Tool

    tools = toolset.schemas("mistral", strict=strict)
    assert len(tools) == 17
    for tool in tools:
        assert Tool.model_validate(tool).model_dump(by_alias=True) == tool
    request = ChatCompletionRequest.model_validate(
        {"model": "mistral-large-latest", "messages": [{"role": "user", "content": "hi"}]}
        | {"tools": tools}
    )
    assert request.tools is not None
    assert [tool.model_dump(by_alias=True) for tool in request.tools] == tools


def test_saved_mistral_response_is_a_mistralai_response_and_its_dump_parses_the_same(
    host: Host,
) -> None:
    from mistralai.client.models import ChatCompletionResponse

    raw = load("mistral_chat.json")
    dumped = ChatCompletionResponse.model_validate(raw).model_dump(by_alias=True)
    toolset = host.toolset()
    calls = toolset.parse_calls("mistral", raw)
    assert len(calls) >= 2
    assert all(call.resolved and call.error is None for call in calls)
    assert toolset.parse_calls("mistral", dumped) == calls


def test_mistral_result_messages_build_the_tool_message_unchanged(
    host: Host, toolset: Toolset
) -> None:
    from mistralai.client.models import ChatCompletionRequestMessage, ToolMessage

    # Mistral's shape is OpenAI's: the OpenAI failures make the same calls.
    response = with_failures("openai", load("mistral_chat.json"))
    _, messages = turn(host, toolset, "mistral", response)
    assert len(messages) == len(response["choices"][0]["message"]["tool_calls"])
    for message in messages:
        assert ToolMessage.model_validate(message).model_dump(by_alias=True) == message
        checked = validated(ChatCompletionRequestMessage, message)
        assert isinstance(checked, ToolMessage)
        assert message["name"]  # Mistral's tool message names the function


# -- ollama ------------------------------------------------------------------------------------

#: JSON Schema keys ollama's ``Tool`` model has no field for: its client drops them from the
#: tool list it sends (the HTTP API itself takes them).
OLLAMA_UNMODELLED = {"additionalProperties", "default"}


def _dropped(emitted: Any, kept: Any, path: str = "") -> list[str]:
    """Where ``kept`` lacks a key of ``emitted``; any other difference fails."""
    if isinstance(emitted, dict):
        assert isinstance(kept, dict), path
        assert set(kept) <= set(emitted), path
        dropped = [f"{path}/{key}" for key in emitted if key not in kept]
        for key in kept:
            dropped += _dropped(emitted[key], kept[key], f"{path}/{key}")
        return dropped
    assert emitted == kept, path
    return []


@pytest.mark.parametrize("strict", [False, True])
def test_ollama_tools_validate_as_ollama_tools_keeping_every_key_it_models(
    toolset: Toolset, strict: bool
) -> None:
    import ollama

    tools = toolset.schemas("ollama", strict=strict)
    assert len(tools) == 17
    dropped = []
    for tool in tools:
        kept = ollama.Tool.model_validate(tool).model_dump(exclude_none=True, by_alias=True)
        dropped += _dropped(tool, kept)
    # What ollama's model leaves out is only ever keys it has no field for, never a name, a
    # description, a type, an enum, a required list or a $defs entry.
    assert dropped
    assert {path.rsplit("/", 1)[1] for path in dropped} <= OLLAMA_UNMODELLED


def test_saved_ollama_response_is_an_ollama_chat_response_and_its_dump_parses_the_same(
    host: Host,
) -> None:
    import ollama

    raw = load("ollama_chat.json")
    dumped = ollama.ChatResponse.model_validate(raw).model_dump()
    toolset = host.toolset()
    calls = toolset.parse_calls("ollama", raw)
    assert len(calls) == 2
    assert all(call.resolved and call.error is None for call in calls)
    assert [(c.name, c.arguments) for c in toolset.parse_calls("ollama", dumped)] == [
        (c.name, c.arguments) for c in calls
    ]


def test_ollama_result_messages_build_the_message_unchanged(host: Host, toolset: Toolset) -> None:
    import ollama

    response = load("ollama_chat.json")
    response["message"]["tool_calls"] += [
        {"function": {"name": "clock_now", "arguments": {}}},
        {"function": {"name": "now", "arguments": [1]}},
    ]
    calls, messages = turn(host, toolset, "ollama", response)
    assert len(messages) == 4
    assert [call.error is None for call in calls] == [True, True, False, False]
    for message in messages:
        assert ollama.Message.model_validate(message).model_dump(exclude_none=True) == message
        assert message["role"] == "tool"
        assert message["tool_name"]


# -- streamed assistant messages ---------------------------------------------------------------
# Each provider's stream of a turn with text (and reasoning, where the provider streams it) and
# two calls, the second's arguments in pieces; fed as parsed JSON and as the SDK's own objects.

THOUGHT = {"thought": "héllo 😀"}
THOUGHT_JSON = json.dumps(THOUGHT, ensure_ascii=False)


def _openai_chunks(model: str) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def call(index: int, **fields: Any) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "check."}),
        call(0, id="call_1", type="function", function={"name": "now", "arguments": ""}),
        call(1, id="call_2", type="function", function={"name": "think", "arguments": ""}),
        call(1, function={"arguments": THOUGHT_JSON[:13]}),
        call(0, function={"arguments": "{}"}),
        call(1, function={"arguments": THOUGHT_JSON[13:]}),
        chunk({}, "tool_calls"),
    ]


def _mistral_chunks() -> list[dict[str, Any]]:
    # Mistral streams each call whole, in one delta (its SDK refuses a call without a name).
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1}
    base["model"] = "mistral-large-latest"
    calls = [
        {"id": "a1b2c3d4e", "function": {"name": "now", "arguments": "{}"}, "index": 0},
        {"id": "f5g6h7i8j", "function": {"name": "think", "arguments": THOUGHT_JSON}, "index": 1},
    ]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    return [
        chunk({"role": "assistant", "content": "Let me "}),
        chunk({"content": "check."}),
        chunk({"tool_calls": calls}, "tool_calls"),
    ]


def _anthropic_events() -> list[dict[str, Any]]:
    def delta(index: int, **fields: Any) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": fields}

    def start(index: int, **block: Any) -> dict[str, Any]:
        return {"type": "content_block_start", "index": index, "content_block": block}

    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    return [
        {"type": "message_start", "message": message},
        start(0, type="thinking", thinking="", signature=""),
        delta(0, type="thinking_delta", thinking="The user wants "),
        delta(0, type="thinking_delta", thinking="the time."),
        delta(0, type="signature_delta", signature="RXVn"),
        {"type": "content_block_stop", "index": 0},
        start(1, type="text", text=""),
        delta(1, type="text_delta", text="Checking."),
        {"type": "content_block_stop", "index": 1},
        start(2, type="tool_use", id="toolu_1", name="now", input={}),
        delta(2, type="input_json_delta", partial_json=""),
        {"type": "content_block_stop", "index": 2},
        start(3, type="tool_use", id="toolu_2", name="think", input={}),
        delta(3, type="input_json_delta", partial_json=THOUGHT_JSON[:13]),
        delta(3, type="input_json_delta", partial_json=THOUGHT_JSON[13:]),
        {"type": "content_block_stop", "index": 3},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 40},
        },
        {"type": "message_stop"},
    ]


def _responses_events() -> list[dict[str, Any]]:
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": []}
    text = {"type": "output_text", "text": "Checking.", "annotations": []}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [text],
    }

    def call(index: int, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
        return {
            "id": f"fc_{index}",
            "type": "function_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
        }

    first, second = call(2, "call_1", "now", "{}", "completed"), None
    second = call(3, "call_2", "think", THOUGHT_JSON, "completed")
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-5",
        "status": "in_progress",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response},
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning},
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**message, "status": "in_progress", "content": []},
        },
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "part": {**text, "text": ""},
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "delta": "Checking.",
            "logprobs": [],
        },
        {"type": "response.output_item.done", "output_index": 1, "item": message},
        {
            "type": "response.output_item.added",
            "output_index": 2,
            "item": call(2, "call_1", "now", "", "in_progress"),
        },
        {
            "type": "response.output_item.added",
            "output_index": 3,
            "item": call(3, "call_2", "think", "", "in_progress"),
        },
    ]
    for index, piece in ((3, THOUGHT_JSON[:13]), (2, "{}"), (3, THOUGHT_JSON[13:])):
        events.append(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": f"fc_{index}",
                "output_index": index,
                "delta": piece,
            }
        )
    for index, item in ((2, first), (3, second)):
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": item["id"],
                "output_index": index,
                "arguments": item["arguments"],
            }
        )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    output = [reasoning, message, first, second]
    events.append(
        {
            "type": "response.completed",
            "response": {**response, "status": "completed", "output": output},
        }
    )
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def _gemini_chunks() -> list[dict[str, Any]]:
    def chunk(parts: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
        candidate = {"content": {"role": "model", "parts": parts}, "index": 0, **more}
        return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}

    return [
        chunk([{"text": "Checking."}]),
        chunk([{"functionCall": {"name": "now", "args": {}}, "thoughtSignature": "c2lnbmF0dXJl"}]),
        chunk([{"functionCall": {"name": "think", "args": THOUGHT}}], finishReason="STOP"),
    ]


def _ollama_chunks() -> list[dict[str, Any]]:
    base = {"model": "qwen3:8b", "created_at": "2025-06-01T10:00:00Z"}

    def chunk(done: bool = False, **message: Any) -> dict[str, Any]:
        return {**base, "message": {"role": "assistant", "content": "", **message}, "done": done}

    return [
        chunk(thinking="The user wants the time."),
        chunk(content="Checking."),
        chunk(tool_calls=[{"function": {"name": "now", "arguments": {}}}]),
        chunk(tool_calls=[{"function": {"name": "think", "arguments": THOUGHT}}]),
        {**chunk(done=True), "done_reason": "stop"},
    ]


def _sdk_chunks(provider: str, chunks: list[dict[str, Any]]) -> list[Any]:
    """The same chunks as the provider's SDK yields them."""
    if provider == "openai":
        from openai.types.chat import ChatCompletionChunk

        return [ChatCompletionChunk.model_validate(chunk) for chunk in chunks]
    if provider == "mistral":
        from mistralai.client.models import CompletionEvent

        return [CompletionEvent.model_validate({"data": chunk}) for chunk in chunks]
    if provider == "anthropic":
        from anthropic.types import RawMessageStreamEvent

        return [pydantic.TypeAdapter(RawMessageStreamEvent).validate_python(c) for c in chunks]
    if provider == "openai-responses":
        from openai.types.responses import ResponseStreamEvent

        return [pydantic.TypeAdapter(ResponseStreamEvent).validate_python(c) for c in chunks]
    if provider == "gemini":
        from google.genai import types

        return [types.GenerateContentResponse.model_validate(chunk) for chunk in chunks]
    import ollama

    return [ollama.ChatResponse.model_validate(chunk) for chunk in chunks]


STREAMS: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "openai": lambda: _openai_chunks("gpt-4.1"),
    "mistral": _mistral_chunks,
    "anthropic": _anthropic_events,
    "openai-responses": _responses_events,
    "gemini": _gemini_chunks,
    "ollama": _ollama_chunks,
}


def _plain(value: Any) -> Any:
    """A validated TypedDict with its lazily validated iterables read into lists."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    return [_plain(item) for item in value]


def deeply_validated(kind: Any, value: Any) -> Any:
    adapter = pydantic.TypeAdapter(kind)  # alive while its lazy iterables are read
    return _plain(adapter.validate_python(value))


def _kept(emitted: Any, dumped: Any, path: str = "") -> None:
    """Every key and value emitted is in what the SDK's model dumps (which may add defaults)."""
    if isinstance(emitted, dict):
        assert isinstance(dumped, dict), path
        for key, value in emitted.items():
            assert key in dumped, f"{path}/{key}"
            _kept(value, dumped[key], f"{path}/{key}")
    elif isinstance(emitted, list):
        assert isinstance(dumped, list), path
        assert len(emitted) == len(dumped), path
        for index, (one, other) in enumerate(zip(emitted, dumped, strict=True)):
            _kept(one, other, f"{path}/{index}")
    else:
        assert emitted == dumped, path


def _check_message(provider: str, message: dict[str, Any]) -> None:
    if provider == "openai":
        from openai.types.chat import ChatCompletionAssistantMessageParam

        assert deeply_validated(ChatCompletionAssistantMessageParam, message) == message
    elif provider == "mistral":
        from mistralai.client.models import AssistantMessage

        _kept(message, AssistantMessage.model_validate(message).model_dump(by_alias=True))
    elif provider == "anthropic":
        from anthropic.types import (
            MessageParam,
            TextBlockParam,
            ThinkingBlockParam,
            ToolUseBlockParam,
        )

        assert deeply_validated(MessageParam, message) == message
        kinds = {"text": TextBlockParam, "thinking": ThinkingBlockParam}
        assert [block["type"] for block in message["content"]] == [
            "thinking",
            "text",
            "tool_use",
            "tool_use",
        ]
        for block in message["content"]:
            kind = kinds.get(block["type"], ToolUseBlockParam)
            assert deeply_validated(kind, block) == block
    elif provider == "openai-responses":
        from openai.types.responses import ResponseInputItemParam

        for item in message["output"]:
            assert deeply_validated(ResponseInputItemParam, item) == item
    elif provider == "gemini":
        from google.genai import types

        content = types.Content.model_validate(message)
        # A signature read from JSON is base64 text; from the SDK's objects, bytes.
        as_bytes = any(type(part.get("thoughtSignature")) is bytes for part in message["parts"])
        mode = "python" if as_bytes else "json"
        _kept(message, content.model_dump(mode=mode, by_alias=True, exclude_none=True))
    else:
        import ollama

        assert ollama.Message.model_validate(message).model_dump(exclude_none=True) == message


@pytest.mark.parametrize("provider", STREAMS)
def test_a_streamed_assistant_message_is_the_sdks_message_type(host: Host, provider: str) -> None:
    toolset = host.toolset()
    chunks = STREAMS[provider]()
    stream = toolset.stream(provider).feed_all(chunks)
    assert stream.finished()
    calls = stream.calls()
    assert [(c.name, c.arguments, c.error) for c in calls] == [
        ("now", {}, None),
        ("think", THOUGHT, None),
    ]
    assert stream.text() == ("Let me check." if provider in ("openai", "mistral") else "Checking.")
    message = stream.message()
    _check_message(provider, message)

    from_sdk = toolset.stream(provider).feed_all(_sdk_chunks(provider, chunks))
    if provider == "gemini":
        # The SDK holds a thought signature as bytes (its JSON as base64 text): the part, and
        # so the made-up id that follows from the parts, differs as the input does.
        assert [(c.name, c.arguments, c.error) for c in from_sdk.calls()] == [
            (c.name, c.arguments, c.error) for c in calls
        ]
        sdk_message = from_sdk.message()
        _check_message(provider, sdk_message)
        assert sdk_message["parts"][1]["thoughtSignature"] == b"signature"
    else:
        assert from_sdk.calls() == calls
        assert from_sdk.message() == message


@pytest.mark.parametrize("provider", STREAMS)
def test_the_streamed_message_then_the_results_make_a_valid_next_request(
    host: Host, provider: str
) -> None:
    """The assistant message and the result messages, in order, as the next request's
    conversation (where the SDK has a type for the whole list)."""
    toolset = host.toolset()
    stream = toolset.stream(provider).feed_all(STREAMS[provider]())
    calls = stream.calls()
    results = toolset.result_messages(provider, calls, list(toolset.run(calls)))
    assistant = stream.message()
    if provider == "openai":
        from openai.types.chat import ChatCompletionMessageParam

        conversation = [assistant, *results]
        kind: Any = list[ChatCompletionMessageParam]
        assert deeply_validated(kind, conversation) == conversation
        assert {m["tool_call_id"] for m in results} == {c["id"] for c in assistant["tool_calls"]}
    elif provider == "mistral":
        from mistralai.client.models import ChatCompletionRequest

        request = ChatCompletionRequest.model_validate(
            {"model": "mistral-large-latest", "messages": [assistant, *results]}
        )
        assert len(request.messages) == 3
    elif provider == "anthropic":
        from anthropic.types import MessageParam

        conversation = [assistant, *results]
        assert deeply_validated(list[MessageParam], conversation) == conversation
        assert [m["role"] for m in conversation] == ["assistant", "user"]
        used = {b["id"] for b in assistant["content"] if b["type"] == "tool_use"}
        assert {b["tool_use_id"] for b in results[0]["content"]} == used
    elif provider == "openai-responses":
        from openai.types.responses import ResponseInputParam

        items = [*assistant["output"], *results]
        assert deeply_validated(ResponseInputParam, items) == items
    elif provider == "gemini":
        from google.genai import types

        contents = [types.Content.model_validate(m) for m in (assistant, *results)]
        assert [c.role for c in contents] == ["model", "user"]
    else:
        import ollama

        messages = [ollama.Message.model_validate(m) for m in (assistant, *results)]
        assert [m.role for m in messages] == ["assistant", "tool", "tool"]
