"""expediter: offer tools to LLMs and run the model's tool calls safely.

The public names are imported lazily (PEP 562), so ``import expediter`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from expediter.__about__ import __version__

if TYPE_CHECKING:
    from expediter import errors, providers
    from expediter.core.authoring.schema import Secret
    from expediter.core.authoring.tools import Toolbox, action, tool
    from expediter.core.calls.arguments import ArgumentsCheck
    from expediter.core.config import HostConfig
    from expediter.core.discovery.catalogue import PackInfo, ToolInfo
    from expediter.core.discovery.providers import ProviderInfo
    from expediter.core.host import Host
    from expediter.core.records.calls import CallEvent, ToolCall
    from expediter.core.turns.naming import NameMap
    from expediter.core.turns.providers.base import Provider
    from expediter.core.turns.toolset import ToolInstance, Toolset
    from expediter.errors import IdentifierError
    from expediter.hookspecs import hookimpl, hookspec
    from expediter.hookspecs.tool import (
        Action,
        CallContext,
        ConfigField,
        Decision,
        ToolError,
        ToolResult,
    )

_EXPORTS = {
    "hookimpl": "expediter.hookspecs",
    "hookspec": "expediter.hookspecs",
    "tool": "expediter.core.authoring.tools",
    "action": "expediter.core.authoring.tools",
    "Toolbox": "expediter.core.authoring.tools",
    "ArgumentsCheck": "expediter.core.calls.arguments",
    "Secret": "expediter.core.authoring.schema",
    "Action": "expediter.hookspecs.tool",
    "CallContext": "expediter.hookspecs.tool",
    "ConfigField": "expediter.hookspecs.tool",
    "Decision": "expediter.hookspecs.tool",
    "ToolError": "expediter.hookspecs.tool",
    "ToolResult": "expediter.hookspecs.tool",
    "ToolCall": "expediter.core.records.calls",
    "CallEvent": "expediter.core.records.calls",
    "ToolInfo": "expediter.core.discovery.catalogue",
    "PackInfo": "expediter.core.discovery.catalogue",
    "Host": "expediter.core.host",
    "HostConfig": "expediter.core.config",
    "Toolset": "expediter.core.turns.toolset",
    "ToolInstance": "expediter.core.turns.toolset",
    "NameMap": "expediter.core.turns.naming",
    "Provider": "expediter.core.turns.providers.base",
    "ProviderInfo": "expediter.core.discovery.providers",
    "IdentifierError": "expediter.errors",
}

__all__ = [
    "Action",
    "ArgumentsCheck",
    "CallContext",
    "CallEvent",
    "ConfigField",
    "Decision",
    "Host",
    "HostConfig",
    "IdentifierError",
    "NameMap",
    "PackInfo",
    "Provider",
    "ProviderInfo",
    "Secret",
    "ToolCall",
    "ToolError",
    "ToolInfo",
    "ToolInstance",
    "ToolResult",
    "Toolbox",
    "Toolset",
    "__version__",
    "action",
    "errors",
    "hookimpl",
    "hookspec",
    "providers",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name in ("errors", "providers"):
        return importlib.import_module(f"expediter.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'expediter' has no attribute {name!r}")
    # Not cached in globals(): the defining module stays the single source of truth.
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
