"""The LLM providers packs register (``register_providers``): calling the hook, describing what
it registered for the manifest, and withholding names that several packs register.

Discovery keeps each provider's name and whether it streams, so ``expediter providers`` and the
``--provider`` choices import no pack; a pack is imported when its provider is used. What makes
an object a provider (``expediter.Provider``), and which names are the built-ins', is the turns
stage's: the host hands discovery that check (``ProviderCheck``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import pluggy

from expediter.core.discovery.catalogue import Catalogue, Conflict, Source, withhold_conflicts
from expediter.core.records.convert import structure, unstructure
from expediter.hookspecs import PROJECT_NAME
from expediter.hookspecs import host as host_spec

__all__ = [
    "HOOK",
    "ProviderCheck",
    "ProviderInfo",
    "offered_providers",
    "registered_providers",
    "resolve_provider_conflicts",
]

#: The hook a pack implements to add providers.
HOOK = "register_providers"

#: Reads one object a pack registered: returns its provider name and whether it streams, or
#: raises ``TypeError``/``ValueError`` saying why it cannot be offered (not a Provider, a bad
#: name, a built-in provider's name).
ProviderCheck = Callable[[object], tuple[str, bool]]


# Not in ``catalogue``: the manifest keeps a pack's providers as names in its ``PackInfo``, so
# a warm `expediter tools list` never builds this class (an attrs class costs about a
# millisecond to make: the budget is 10x `python -c pass`, benchmarks/README.md).
@attrs.frozen
class ProviderInfo:
    """An LLM provider as ``expediter providers`` lists it: its name, the pack that registers
    it (``expediter`` for the built-ins) and whether it reads streams."""

    name: str
    pack: str
    #: Whether the adapter has a stream accumulator (``toolset.stream(name)``).
    streaming: bool = False
    version: str | None = None
    source: Source = "entry-point"
    #: The ``PackInfo.id`` of the pack that registers it (empty for the built-ins).
    pack_id: str = ""

    def summary(self) -> dict[str, Any]:
        """Return the JSON form shown by ``expediter providers --json``."""
        return {"name": self.name, "pack": self.pack, "streaming": self.streaming}

    def to_dict(self) -> dict[str, Any]:
        """Return the full JSON form."""
        return unstructure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProviderInfo:
        """Build from the full JSON form."""
        return structure(data, cls)


def offered_providers(catalogue: Catalogue) -> dict[str, ProviderInfo]:
    """The providers the catalogue's packs register under a name no other pack takes, by
    name (none is imported)."""
    withheld = {conflict.tool for conflict in catalogue.provider_conflicts}
    offered = {}
    for pack in catalogue.packs:
        streaming = set(pack.streaming_providers)
        for name in pack.providers:
            if name not in withheld:
                offered[name] = ProviderInfo(
                    name, pack.name, name in streaming, pack.version, pack.source, pack.id
                )
    return offered


def registered_providers(plugins: Sequence[tuple[str, object]]) -> list[object]:
    """The objects the plugins' ``register_providers`` hooks pass to ``register``, in the order
    pluggy calls them (through a throwaway plugin manager, as every hook is called); what a
    hook raises propagates."""
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(host_spec)
    for name, obj in plugins:
        if manager.is_registered(obj):
            continue
        try:
            implements = manager.parse_hookimpl_opts(obj, HOOK) is not None
        except Exception:  # pluggy < 1.6 reads the attribute, which may be missing or raise
            implements = False
        if implements:
            manager.register(obj, name=name)
    found: list[object] = []

    def register(provider: Any) -> None:
        """Add one provider adapter (an ``expediter.Provider`` instance)."""
        found.append(provider)

    manager.hook.register_providers(register=register)
    return found


def resolve_provider_conflicts(
    providers: Sequence[ProviderInfo], previous: Sequence[Conflict] = ()
) -> tuple[list[ProviderInfo], list[Conflict]]:
    """Offer each provider name registered once; a name several packs register offers none
    (as with tools: ``packs.resolve_conflicts``)."""
    return withhold_conflicts(providers, previous, "provider")
