"""``toolset.parse_calls`` takes the provider SDK's response object itself, as ``stream.feed``
takes its chunks: the same calls as the response's JSON."""

from __future__ import annotations

import base64
import importlib
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from support.responses import RESPONSES, load

from expediter.core.host import Host
from expediter.core.records.calls import ToolCall
from expediter.errors import ArgumentError

SDK_RESPONSES = [
    ("openai", "openai_chat.json", "openai.types.chat:ChatCompletion"),
    ("openai-responses", "openai_responses.json", "openai.types.responses:Response"),
    ("anthropic", "anthropic_messages.json", "anthropic.types:Message"),
    ("gemini", "gemini.json", "google.genai.types:GenerateContentResponse"),
    ("gemini", "gemini_with_ids.json", "google.genai.types:GenerateContentResponse"),
    ("mistral", "mistral_chat.json", "mistralai.client.models:ChatCompletionResponse"),
    ("ollama", "ollama_chat.json", "ollama:ChatResponse"),
]


@pytest.fixture
def host(make_host: Callable[..., Host]) -> Host:
    return make_host(builtins=True)


def sdk_object(name: str, model: str) -> Any:
    module, _, attribute = model.partition(":")
    response_type = getattr(importlib.import_module(module), attribute)
    return response_type.model_validate_json((RESPONSES / name).read_text(encoding="utf-8"))


def signatures_as_json(calls: list[ToolCall]) -> list[ToolCall]:
    """The calls with a thought signature given as bytes (an SDK object's) as JSON has it."""
    out = []
    for call in calls:
        signature = call.extras.get("thought_signature")
        if isinstance(signature, bytes):
            extras = {**call.extras, "thought_signature": base64.b64encode(signature).decode()}
            call = attrs.evolve(call, extras=extras)
        out.append(call)
    return out


@pytest.mark.parametrize(("provider", "name", "model"), SDK_RESPONSES)
def test_an_sdk_response_object_gives_the_calls_of_its_json(
    host: Host, provider: str, name: str, model: str
) -> None:
    toolset = host.toolset()
    response = sdk_object(name, model)
    calls = toolset.parse_calls(provider, response)
    assert calls
    assert all(call.resolved and call.error is None for call in calls)
    # The same calls as the saved JSON the object was made from, made-up ids included,
    # except where the SDK keeps less than the JSON had (ollama's call "index").
    saved = toolset.parse_calls(provider, load(name))
    if provider == "ollama":
        assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in saved]
    else:
        assert signatures_as_json(calls) == saved


def test_a_gemini_thought_signature_goes_back_as_the_sdk_takes_it(host: Host) -> None:
    from google.genai import types

    toolset = host.toolset()
    response = sdk_object("gemini_with_ids.json", "google.genai.types:GenerateContentResponse")
    calls = toolset.parse_calls("gemini", response)
    events = list(toolset.run(calls))
    (message,) = toolset.result_messages("gemini", calls, events)
    content = types.Content.model_validate(message)
    assert content.parts is not None
    sent = [part.thought_signature for part in content.parts if part.thought_signature]
    given = [
        part.thought_signature
        for candidate in response.candidates or []
        for part in (candidate.content.parts if candidate.content else None) or []
        if part.function_call is not None and part.thought_signature
    ]
    assert sent == given
    assert given


class Unwritable:
    """An SDK-like object whose model_dump raises."""

    __pydantic_fields__: dict[str, Any] = {}

    def model_dump(self, **_: Any) -> dict[str, Any]:
        raise RuntimeError("cannot dump")


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (
            [1, 2],
            "the openai response must be a JSON object or the SDK's response object, not array",
        ),
        ("text", "must be a JSON object or the SDK's response object, not string"),
        (object(), "must be a JSON object or the SDK's response object, not object"),
        (Unwritable(), "the openai response cannot be read: Unwritable.model_dump() failed"),
    ],
)
def test_what_is_neither_json_nor_an_sdk_object_is_an_argument_error(
    host: Host, response: Any, message: str
) -> None:
    with pytest.raises(ArgumentError) as caught:
        host.toolset().parse_calls("openai", response)
    assert message in str(caught.value)
