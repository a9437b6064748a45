"""A server's tools as expediter actions: names every provider accepts, and the way back.

MCP tool names may hold dots and other characters and run to 128 characters; a function name
offered to a model may not (``^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$``). Each tool's action name is
its name made valid (``expediter.core.turns.naming.sanitize``) and cut to 64 characters; a name
that is still taken, or was cut, ends with a short hash of the whole MCP name, so the same
server always yields the same names. ``Listing.mcp_name`` maps an action name back.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

import expediter
from expediter.core.turns.naming import NAME_PATTERN, sanitize

__all__ = ["MAX_DESCRIPTION", "MAX_TOOLS", "Listing", "action_name"]

logger = logging.getLogger(__name__)

#: Characters of a tool's description offered to the model.
MAX_DESCRIPTION = 4000
#: Tools taken from one server (a server is untrusted: it could list millions).
MAX_TOOLS = 1000
_LIMIT = 64


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def action_name(mcp_name: str, taken: set[str]) -> str:
    """The action name for an MCP tool name, unique among ``taken`` (which it joins)."""
    name = sanitize(mcp_name)
    if len(name) > _LIMIT or name in taken:
        name = f"{name[: _LIMIT - 9]}_{_hash(mcp_name)}"
    counter = 1
    base = name
    while name in taken:
        counter += 1
        suffix = f"_{counter}"
        name = f"{base[: _LIMIT - len(suffix)]}{suffix}"
    taken.add(name)
    return name


def _schema(value: Any) -> dict[str, Any]:
    """A tool's input schema as an action's parameters: an object schema, always."""
    if not isinstance(value, Mapping) or value.get("type", "object") != "object":
        return {"type": "object", "properties": {}}
    schema = dict(value)
    schema["type"] = "object"
    if not isinstance(schema.get("properties", {}), Mapping):
        schema["properties"] = {}
    return schema


@attrs.frozen
class Listing:
    """One listing of a server's tools: the actions offered, and each one's MCP name."""

    actions: list[expediter.Action]
    names: Mapping[str, str]
    #: ``time.monotonic()`` when the server was asked.
    taken_at: float

    @classmethod
    def of(cls, tools: Iterable[Any], taken_at: float) -> Listing:
        """A listing from the server's ``list_tools`` answer (MCP ``Tool`` objects)."""
        actions: list[expediter.Action] = []
        names: dict[str, str] = {}
        taken: set[str] = set()
        for index, tool in enumerate(tools):
            if index >= MAX_TOOLS:
                logger.warning(
                    "an MCP server lists more than %d tools; the rest are left out", MAX_TOOLS
                )
                break
            mcp_name = getattr(tool, "name", None)
            if not isinstance(mcp_name, str) or not mcp_name:
                continue
            name = action_name(mcp_name, taken)
            assert NAME_PATTERN.match(name), name
            description = getattr(tool, "description", None) or getattr(tool, "title", None)
            text = str(description or mcp_name)
            if len(text) > MAX_DESCRIPTION:
                text = text[: MAX_DESCRIPTION - 3] + "..."
            try:
                action = expediter.Action(
                    name=name,
                    description=text,
                    parameters=_schema(getattr(tool, "input_schema", None)),
                )
            except (TypeError, ValueError) as exc:
                logger.warning("MCP tool %r is left out: %s", mcp_name[:128], exc)
                continue
            actions.append(action)
            names[name] = mcp_name
        return cls(actions, names, taken_at)

    def mcp_name(self, action: str) -> str | None:
        """The MCP tool an action calls, or None."""
        return self.names.get(action)
