"""The hook markers and the two hook specifications: the tool contract and the host hooks."""

from __future__ import annotations

import pluggy

PROJECT_NAME = "expediter"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

#: Hooks a tool implements (see ``expediter.hookspecs.tool``).
TOOL_HOOKS = ("get_actions_metadata", "execute_action", "preview_decision", "config_requirements")
#: Hooks a host app or tool pack implements (see ``expediter.hookspecs.host``).
HOST_HOOKS = (
    "register_tools",
    "tool_call_policy",
    "authorize_decision",
    "on_call_event",
    "normalize_result",
    "resolve_secret",
    "register_commands",
    "register_providers",
)

__all__ = ["HOST_HOOKS", "PROJECT_NAME", "TOOL_HOOKS", "hookimpl", "hookspec"]
