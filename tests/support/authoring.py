"""Authoring tests' helpers: a one-parameter probe tool, and running a ``@tool`` function
straight through its hooks (no host)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

import expediter
from expediter.core.authoring.tools import FunctionTool
from expediter.errors import ArgumentError
from expediter.hookspecs.tool import CallContext

#: The context the hooks are called with.
CTX = CallContext()


def tool_with(hint: Any, default: Any = inspect.Parameter.empty) -> FunctionTool:
    """A tool ``probe(value)`` that returns what it receives."""

    def probe(value):  # type: ignore[no-untyped-def]
        """Return the value."""
        return value

    probe.__annotations__ = {"value": hint}
    probe.__qualname__ = "probe"
    if default is not inspect.Parameter.empty:
        probe.__defaults__ = (default,)
    return expediter.tool(probe)


def parameters_of(func: Callable[..., Any]) -> dict[str, Any]:
    """The parameters schema ``@expediter.tool`` makes of ``func``."""
    [action] = expediter.tool(func).get_actions_metadata()
    return dict(action.parameters)


def run_function(func: Callable[..., Any], arguments: dict[str, Any]) -> Any:
    """Call ``func`` as a tool's only action."""
    tool = expediter.tool(func)
    return tool.execute_action(tool.name, arguments, CTX)


def function_error(func: Callable[..., Any], arguments: dict[str, Any]) -> str:
    """The ArgumentError message calling ``func`` with ``arguments`` gives."""
    with pytest.raises(ArgumentError) as caught:
        run_function(func, arguments)
    return caught.value.message
