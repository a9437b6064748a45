"""``detect_provider`` and ``detect_stream_provider``: which provider wrote a response or a
stream, told from its shape, for every provider's saved response and captured-shape chunks
(and their SDKs' objects dumped), and None when the shape says nothing. OpenAI Chat and
Mistral share a shape: both are ``openai``."""

from __future__ import annotations

from typing import Any

import pytest
from support.responses import SAVED, load

from expediter.core.turns.providers import PROVIDERS, detect_provider
from expediter.core.turns.providers.detect import detect_stream_provider

#: What detection names for each provider's shape.
DETECTED = {name: "openai" if name == "mistral" else name for name in SAVED}


@pytest.mark.parametrize("provider", sorted(SAVED))
def test_each_providers_saved_response_is_recognised(provider: str) -> None:
    assert detect_provider(load(SAVED[provider])) == DETECTED[provider]


def test_mistral_shares_openais_shape_whatever_the_model() -> None:
    response = load(SAVED["mistral"])
    assert response["model"].startswith("mistral")
    assert detect_provider(response) == "openai"
    assert detect_provider({**response, "model": "codestral-latest"}) == "openai"


def test_every_built_in_provider_has_a_saved_response() -> None:
    assert set(SAVED) == set(PROVIDERS)


def test_gemini_with_ids_is_gemini() -> None:
    assert detect_provider(load("gemini_with_ids.json")) == "gemini"


@pytest.mark.parametrize(
    ("response", "provider"),
    [
        # A bare Chat Completions assistant message.
        ({"role": "assistant", "content": None, "tool_calls": []}, "openai"),
        # An Anthropic message as the SDK dumps it, text only.
        ({"type": "message", "role": "assistant", "content": []}, "anthropic"),
        # Anthropic content blocks without the envelope.
        ({"role": "assistant", "content": [{"type": "text", "text": "hi"}]}, "anthropic"),
        # Gemini's SDK Content (no candidates).
        ({"role": "model", "content": {"parts": [{"text": "hi"}]}}, "gemini"),
        # A Responses API output list without the envelope.
        ({"output": [{"type": "function_call", "name": "now"}]}, "openai-responses"),
        # Mistral's shape is OpenAI's, whatever the model (a prefix message too).
        ({"model": "codestral-latest", "choices": [{"message": {"prefix": True}}]}, "openai"),
        ({"model": "gpt-4.1", "choices": [{"message": {}}]}, "openai"),
        # An Ollama reply.
        ({"model": "qwen3:8b", "message": {"role": "assistant"}, "done": True}, "ollama"),
    ],
)
def test_shapes_without_the_whole_envelope(response: dict[str, Any], provider: str) -> None:
    assert detect_provider(response) == provider


@pytest.mark.parametrize("response", [{}, {"text": "hi"}, [], "reply", None, {"choices": "x"}])
def test_a_shape_that_says_nothing_is_none(response: Any) -> None:
    assert detect_provider(response) is None


# -- streams -----------------------------------------------------------------------------------

OPENAI_CHUNK = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1750000000,
    "model": "gpt-4.1",
    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
}
MISTRAL_CHUNK = {
    "id": "5c6a",
    "object": "chat.completion.chunk",
    "model": "mistral-large-latest",
    "choices": [
        {
            "index": 0,
            "delta": {"tool_calls": [{"id": "a1", "function": {"name": "now", "arguments": "{}"}}]},
            "finish_reason": "tool_calls",
        }
    ],
}
RESPONSES_EVENT = {
    "type": "response.created",
    "sequence_number": 0,
    "response": {"id": "resp_1", "object": "response", "output": []},
}
ANTHROPIC_EVENT = {
    "type": "message_start",
    "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
}
GEMINI_CHUNK = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"functionCall": {"name": "now", "args": {}}}]}}
    ],
    "modelVersion": "gemini-2.5-flash",
}
OLLAMA_CHUNK = {
    "model": "qwen3:8b",
    "created_at": "2025-01-01T00:00:00Z",
    "message": {"role": "assistant", "content": "Hi"},
    "done": False,
}


@pytest.mark.parametrize(
    ("chunk", "provider"),
    [
        (OPENAI_CHUNK, "openai"),
        (MISTRAL_CHUNK, "openai"),
        # The usage chunk at the end of an OpenAI stream (stream_options.include_usage).
        ({"object": "chat.completion.chunk", "choices": [], "usage": {}}, "openai"),
        (RESPONSES_EVENT, "openai-responses"),
        ({"type": "response.function_call_arguments.delta", "delta": "{"}, "openai-responses"),
        (ANTHROPIC_EVENT, "anthropic"),
        ({"type": "content_block_delta", "index": 0, "delta": {}}, "anthropic"),
        (GEMINI_CHUNK, "gemini"),
        (OLLAMA_CHUNK, "ollama"),
        ({**OLLAMA_CHUNK, "done": True, "done_reason": "stop"}, "ollama"),
    ],
)
def test_each_providers_stream_chunk_is_recognised(chunk: dict[str, Any], provider: str) -> None:
    assert detect_stream_provider([chunk]) == provider


def test_chunks_that_say_nothing_are_passed_over() -> None:
    silent: list[Any] = [
        {"type": "ping"},
        {"type": "error", "error": {"type": "overloaded_error"}},
        {"usageMetadata": {"promptTokenCount": 3}},
        "not a chunk",
        None,
        [ANTHROPIC_EVENT],
        {"choices": [{"message": {}}]},  # a whole response, not a chunk
    ]
    assert detect_stream_provider(silent) is None
    assert detect_stream_provider([*silent, GEMINI_CHUNK, OPENAI_CHUNK]) == "gemini"


def test_the_first_chunk_that_says_decides() -> None:
    assert detect_stream_provider(iter([{"type": "ping"}, ANTHROPIC_EVENT, OPENAI_CHUNK])) == (
        "anthropic"
    )


def test_sdk_stream_objects_dumped_are_recognised() -> None:
    from anthropic.types import RawContentBlockDeltaEvent
    from openai.types.chat import ChatCompletionChunk
    from openai.types.responses import ResponseFunctionCallArgumentsDeltaEvent

    chunk = ChatCompletionChunk.model_validate(OPENAI_CHUNK)
    assert detect_stream_provider([chunk.model_dump()]) == "openai"
    event = RawContentBlockDeltaEvent.model_validate(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}
    )
    assert detect_stream_provider([event.model_dump()]) == "anthropic"
    delta = ResponseFunctionCallArgumentsDeltaEvent.model_validate(
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": "{",
            "sequence_number": 3,
        }
    )
    assert detect_stream_provider([delta.model_dump()]) == "openai-responses"


def test_sdk_stream_chunks_of_gemini_mistral_and_ollama_are_recognised() -> None:
    import ollama
    from google.genai import types
    from mistralai.client.models import CompletionChunk

    gemini = types.GenerateContentResponse.model_validate(GEMINI_CHUNK)
    assert detect_stream_provider([gemini.model_dump(exclude_none=True)]) == "gemini"
    mistral = CompletionChunk.model_validate(MISTRAL_CHUNK)
    assert detect_stream_provider([mistral.model_dump()]) == "openai"
    reply = ollama.ChatResponse.model_validate(OLLAMA_CHUNK)
    assert detect_stream_provider([reply.model_dump()]) == "ollama"
