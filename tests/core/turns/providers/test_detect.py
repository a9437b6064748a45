"""``detect_provider``: which provider wrote a response, told from its shape, for every
provider's saved response (and their SDKs' dumps), and None when the shape says nothing."""

from __future__ import annotations

from typing import Any

import pytest
from support.responses import SAVED, load

from expediter.core.turns.providers import PROVIDERS, detect_provider


@pytest.mark.parametrize("provider", sorted(SAVED))
def test_each_providers_saved_response_is_recognised(provider: str) -> None:
    assert detect_provider(load(SAVED[provider])) == provider


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
        # Mistral by its model name, with an OpenAI-looking envelope.
        ({"model": "codestral-latest", "choices": [{"message": {}}]}, "mistral"),
        ({"model": "gpt-4.1", "choices": [{"message": {}}]}, "openai"),
    ],
)
def test_shapes_without_the_whole_envelope(response: dict[str, Any], provider: str) -> None:
    assert detect_provider(response) == provider


@pytest.mark.parametrize("response", [{}, {"text": "hi"}, [], "reply", None, {"choices": "x"}])
def test_a_shape_that_says_nothing_is_none(response: Any) -> None:
    assert detect_provider(response) is None
