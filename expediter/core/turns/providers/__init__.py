"""Provider adapters, by the names users pass.

The six built-ins (``openai``, ``openai-responses``, ``anthropic``, ``gemini``, ``mistral``,
``ollama``) register through the ``register_providers`` hook as a pack's providers do, and are
reported with the pack ``expediter``. ``get_provider`` knows the built-ins (the module-level
path a toolset without a host takes); a host's lookup (``Host.provider``) knows the packs' too.
``check_pack_provider`` is what a pack's provider must pass at discovery.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from expediter.core.discovery.providers import registered_providers
from expediter.core.records.text import echo
from expediter.core.turns.providers.anthropic import Anthropic
from expediter.core.turns.providers.base import Provider
from expediter.core.turns.providers.detect import detect_provider
from expediter.core.turns.providers.gemini import Gemini
from expediter.core.turns.providers.openai import Mistral, Ollama, OpenAIChat, OpenAIResponses
from expediter.errors import UnknownProvider
from expediter.hookspecs import hookimpl
from expediter.hookspecs.host import RegisterProvider

__all__ = [
    "BUILTIN_PACK",
    "PROVIDERS",
    "Provider",
    "check_pack_provider",
    "checked_provider",
    "detect_provider",
    "get_provider",
    "name_rule",
    "unknown_provider",
]

#: The pack name the built-in providers are reported with.
BUILTIN_PACK = "expediter"
#: A provider's name: lower-case letters, digits and ``. _ -``, at most 64 characters.
_PROVIDER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


class _BuiltIns:
    """The built-in adapters, registered through the hook every pack implements."""

    @hookimpl
    def register_providers(self, register: RegisterProvider) -> None:
        """Register the six built-in adapters."""
        for adapter in (
            OpenAIChat(),
            OpenAIResponses(),
            Anthropic(),
            Gemini(),
            Mistral(),
            Ollama(),
        ):
            register(adapter)


def _kind(obj: object) -> str:
    return f"a {type(obj).__module__}.{type(obj).__qualname__} object"


def _read(adapter: Provider, attribute: str, who: str) -> Any:
    """An attribute of a pack's adapter; ``ValueError`` saying which raised, and what."""
    try:
        return getattr(adapter, attribute)
    except Exception as exc:
        raised = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise ValueError(f"{who}: reading its {attribute} raised {raised[:200]}") from None


def checked_provider(obj: object) -> Provider:
    """``obj`` when it is a usable provider adapter: an ``expediter.Provider`` instance with a
    valid name and name rules; else ``TypeError`` or ``ValueError`` saying what to change."""
    if not isinstance(obj, Provider):
        if isinstance(obj, type) and issubclass(obj, Provider):
            raise TypeError(
                f"register() got the class {obj.__qualname__}, not an instance: "
                f"call register({obj.__qualname__}())"
            )
        raise TypeError(
            f"register() got {_kind(obj)}, which is not an expediter.Provider: "
            "subclass expediter.Provider and register an instance"
        )
    name = _read(obj, "name", f"provider {_kind(obj)}")
    if type(name) is not str or not _PROVIDER_NAME.fullmatch(name):
        raise ValueError(
            f"provider name {echo(name) if isinstance(name, str) else repr(name)} is not valid "
            "(lower-case letters, digits and . _ -, starting with a letter or digit, at most 64)"
        )
    limit = _read(obj, "max_name_length", f"provider {name!r}")
    if type(limit) is not int or limit < 1:
        raise ValueError(f"provider {name!r}: max_name_length must be a positive integer")
    pattern = _read(obj, "name_pattern", f"provider {name!r}")
    try:
        re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise ValueError(
            f"provider {name!r}: name_pattern is not a regular expression ({exc})"
        ) from None
    return obj


def _built_ins() -> dict[str, Provider]:
    found: dict[str, Provider] = {}
    for obj in registered_providers([(BUILTIN_PACK, _BuiltIns())]):
        adapter = checked_provider(obj)
        found[adapter.name] = adapter
    return dict(sorted(found.items()))


#: The built-in adapters by name.
PROVIDERS: dict[str, Provider] = _built_ins()


def check_pack_provider(obj: object) -> tuple[str, bool]:
    """What discovery keeps of a provider a pack registers: its name and whether it streams.
    ``TypeError``/``ValueError`` when it cannot be offered, and for a built-in provider's name:
    a pack cannot replace a built-in (the built-in stays)."""
    adapter = checked_provider(obj)
    name = adapter.name
    if name in PROVIDERS:
        raise ValueError(
            f"provider {name!r} is a built-in provider's name; a pack cannot replace it, so "
            "the built-in stays: give the pack's provider another name"
        )
    try:
        streaming = bool(adapter.streaming)
    except Exception as exc:
        raise ValueError(
            f"provider {name!r}: its streaming property raised {type(exc).__name__}"
        ) from None
    return name, streaming


def unknown_provider(name: Any, known: Iterable[str] = ()) -> UnknownProvider:
    """The error for a provider name nobody registered: it lists every known name (the
    built-ins and ``known``)."""
    names = sorted({*PROVIDERS, *known})
    shown = echo(name) if isinstance(name, str) else repr(name)
    return UnknownProvider(f"unknown provider {shown}; use one of: {', '.join(names)}")


def get_provider(name: str) -> Provider:
    """Return the built-in adapter for a provider name, or raise UnknownProvider listing the
    names (a pack's provider is found through the host: ``Host.provider``)."""
    adapter = PROVIDERS.get(name) if type(name) is str else None
    if adapter is None:
        if isinstance(name, str):
            adapter = PROVIDERS.get(name.strip().lower())
        if adapter is None:
            raise unknown_provider(name)
    return adapter


#: Name rules by ``(max_name_length, name_pattern)``, compiled once.
_RULES: dict[tuple[int, str], Callable[[str], bool]] = {}


def name_rule(adapter: Provider) -> Callable[[str], bool] | None:
    """Whether a function name fits the adapter's ``max_name_length`` and ``name_pattern``;
    None when the adapter accepts every name a toolset offers (the built-ins do)."""
    limit, pattern = adapter.max_name_length, adapter.name_pattern
    if limit >= 64 and pattern == Provider.name_pattern:
        return None  # naming's own rule: `[a-zA-Z_][a-zA-Z0-9_-]{0,63}`
    key = (limit, pattern)
    rule = _RULES.get(key)
    if rule is None:
        match = re.compile(pattern).fullmatch

        def rule(name: str) -> bool:
            return len(name) <= limit and match(name) is not None

        if len(_RULES) >= 256:
            _RULES.clear()
        _RULES[key] = rule
    return rule
