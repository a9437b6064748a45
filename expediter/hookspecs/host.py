"""Hooks for host applications and tool packs: registration, policy, observation, results.

``execute_action`` wrappers (``@hookimpl(wrapper=True)`` on ``execute_action``) registered on the
host wrap every tool's ``execute_action``, sync or async: around an async action, ``yield``
returns the awaited result (or raises what was raised while awaiting it). The hook itself is
specified in ``expediter.hookspecs.tool``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from expediter.hookspecs import hookspec

if TYPE_CHECKING:
    from expediter.hookspecs.tool import Action, CallContext, Decision, ToolResult

__all__ = [
    "Register",
    "RegisterProvider",
    "normalize_result",
    "on_call_event",
    "register_commands",
    "register_providers",
    "register_tools",
    "resolve_secret",
    "tool_call_policy",
]

#: ``register(tool, name=None)``: the callback ``register_tools`` receives.
Register = Callable[..., None]
#: ``register(provider)``: the callback ``register_providers`` receives (an
#: ``expediter.Provider`` instance).
RegisterProvider = Callable[[Any], None]


@hookspec
def register_tools(register: Register) -> None:
    """Register this pack's tools by calling ``register(tool, name=None)`` for each one."""


@hookspec
def tool_call_policy(call: Any, action: Action, context: CallContext) -> Decision | None:
    """Answer allow, ask or deny for a call; deny beats ask beats allow across all plugins."""


@hookspec
def on_call_event(event: Any) -> None:
    """Observe a call event (metrics, logs, sinks); an exception here is logged and ignored."""


@hookspec
def authorize_decision(key: str, call: Any, approver: str | None, approved: bool) -> bool | None:
    """May ``approver`` approve (or deny) the paused call ``key``? Any False refuses."""


@hookspec(firstresult=True)
def normalize_result(tool: str, action: str, result: Any) -> ToolResult | None:
    """Map a tool's in-band status to a ToolResult, or return None to leave the result as is."""


@hookspec(firstresult=True)
def resolve_secret(name: str, context: CallContext) -> str | None:
    """Return the value of a named secret for this call's tool instance, or None if unknown."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add subcommands to the ``expediter`` command line (``cli`` is a click group)."""


@hookspec
def register_providers(register: RegisterProvider) -> None:
    """Register this pack's LLM provider adapters by calling ``register(provider)`` for each."""
