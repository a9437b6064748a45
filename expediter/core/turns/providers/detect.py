"""Which provider wrote a response or a stream, told from its shape: for ``parse`` and ``run``
without ``--provider``, and for a hint when the named provider finds no calls.

OpenAI Chat and Mistral share one shape (Mistral's API is OpenAI's), so both are ``openai``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from expediter.core.turns.providers.base import as_list

__all__ = ["RESPONSE_SHAPES", "STREAM_SHAPES", "detect_provider", "detect_stream_provider"]

#: What tells each provider's response apart, for a message when none fits.
RESPONSE_SHAPES = (
    "`choices` (openai, mistral), `output` (openai-responses), `content` with "
    "`type: message` (anthropic), `candidates` (gemini), `message` (ollama)"
)
#: What tells each provider's stream chunks apart, for a message when none fits.
STREAM_SHAPES = (
    "`choices[].delta` (openai, mistral), `type: response.*` (openai-responses), "
    "`type: message_start` / `content_block_*` (anthropic), `candidates` (gemini), "
    "`message` with `done` (ollama)"
)

#: Block types of an Anthropic message's ``content``.
_ANTHROPIC_BLOCKS = frozenset(
    {"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use"}
)
#: Item types of an OpenAI Responses ``output``.
_RESPONSES_ITEMS = frozenset({"function_call", "message", "reasoning", "web_search_call"})
#: Event types of an Anthropic Messages stream.
_ANTHROPIC_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)


def _types(items: Any) -> set[str]:
    types = (item.get("type") for item in as_list(items) if isinstance(item, Mapping))
    return {kind for kind in types if type(kind) is str}


def detect_provider(response: Any) -> str | None:
    """The built-in provider whose response this looks like (``openai`` for OpenAI Chat and
    Mistral alike, ``openai-responses``, ``anthropic``, ``gemini``, ``ollama``), or None when
    the shape says nothing."""
    if not isinstance(response, Mapping):
        return None
    if as_list(response.get("choices")):
        return "openai"
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


def _chunk_provider(chunk: Any) -> str | None:
    if type(chunk) is not dict and not isinstance(chunk, Mapping):
        return None
    kind = chunk.get("type")
    if type(kind) is str:
        if kind.startswith("response."):
            return "openai-responses"
        if kind in _ANTHROPIC_EVENTS:
            return "anthropic"
    choices = as_list(chunk.get("choices"))
    if choices or chunk.get("object") == "chat.completion.chunk":
        first = choices[0] if choices else None
        if not choices or (isinstance(first, Mapping) and "delta" in first):
            return "openai"
        return None
    if isinstance(chunk.get("candidates"), list):
        return "gemini"
    if isinstance(chunk.get("message"), Mapping) and "done" in chunk:
        return "ollama"
    return None


def detect_stream_provider(chunks: Iterable[Any]) -> str | None:
    """The built-in provider whose stream chunks these look like (``openai`` for OpenAI Chat and
    Mistral alike), told by the first chunk that says (pings, errors and usage-only chunks say
    nothing), or None."""
    for chunk in chunks:
        found = _chunk_provider(chunk)
        if found is not None:
            return found
    return None
