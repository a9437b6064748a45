"""Which provider wrote a response, told from its shape (for a hint when the named provider
finds no calls in it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from expediter.core.turns.providers.base import as_list

__all__ = ["detect_provider"]

#: Block types of an Anthropic message's ``content``.
_ANTHROPIC_BLOCKS = frozenset(
    {"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use"}
)
#: Item types of an OpenAI Responses ``output``.
_RESPONSES_ITEMS = frozenset({"function_call", "message", "reasoning", "web_search_call"})


def _types(items: Any) -> set[str]:
    types = (item.get("type") for item in as_list(items) if isinstance(item, Mapping))
    return {kind for kind in types if type(kind) is str}


def _mistral(response: Mapping[str, Any], message: Any) -> bool:
    model = response.get("model")
    model = model.lower() if type(model) is str else ""
    # mistral, codestral, devstral, magistral, ministral, voxtral; mixtral, pixtral
    if "stral" in model or "xtral" in model:
        return True
    return isinstance(message, Mapping) and "prefix" in message


def detect_provider(response: Any) -> str | None:
    """The built-in provider whose response this looks like (``openai``, ``openai-responses``,
    ``anthropic``, ``gemini``, ``mistral``, ``ollama``), or None when the shape says nothing."""
    if not isinstance(response, Mapping):
        return None
    choices = as_list(response.get("choices"))
    if choices:
        first = choices[0]
        message = first.get("message") if isinstance(first, Mapping) else None
        return "mistral" if _mistral(response, message) else "openai"
    if response.get("object") == "response" or _types(response.get("output")) & _RESPONSES_ITEMS:
        return "openai-responses"
    if isinstance(response.get("candidates"), list):
        return "gemini"
    content = response.get("content")
    if isinstance(content, Mapping) and isinstance(content.get("parts"), list):
        return "gemini"
    if response.get("type") == "message" or _types(content) & _ANTHROPIC_BLOCKS:
        return "anthropic"
    if isinstance(response.get("message"), Mapping):
        return "ollama"
    if "tool_calls" in response:
        return "openai"
    return None
