"""Provider adapters, by the names users pass: ``openai``, ``openai-responses``, ``anthropic``,
``gemini``, ``mistral``, ``ollama``."""

from __future__ import annotations

from expediter.core.records.text import echo
from expediter.core.turns.providers.anthropic import Anthropic
from expediter.core.turns.providers.base import Provider
from expediter.core.turns.providers.detect import detect_provider
from expediter.core.turns.providers.gemini import Gemini
from expediter.core.turns.providers.openai import Mistral, Ollama, OpenAIChat, OpenAIResponses
from expediter.errors import UnknownProvider

__all__ = ["PROVIDERS", "Provider", "detect_provider", "get_provider"]

PROVIDERS: dict[str, Provider] = {
    adapter.name: adapter
    for adapter in (OpenAIChat(), OpenAIResponses(), Anthropic(), Gemini(), Mistral(), Ollama())
}


def get_provider(name: str) -> Provider:
    """Return the adapter for a provider name, or raise UnknownProvider listing the names."""
    adapter = PROVIDERS.get(name) if type(name) is str else None
    if adapter is None:
        if isinstance(name, str):
            adapter = PROVIDERS.get(name.strip().lower())
        if adapter is None:
            raise UnknownProvider(
                f"unknown provider {echo(name)}; use one of: {', '.join(sorted(PROVIDERS))}"
            )
    return adapter
