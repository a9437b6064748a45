"""A server's tools as expediter actions: names every provider accepts, and the way back.

MCP tool names may hold dots and other characters and run to 128 characters; a function name
offered to a model may not (``^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$``). A tool whose name is already
valid keeps it. Any other name is made valid (``expediter.core.turns.naming.sanitize``), cut,
and ends with a short hash of the whole MCP name: ``math.add`` is ``math_add_<hash>``. So an
action name depends on its MCP name alone, never on which other tools the server lists or in
which order, and a name offered in one turn calls the same tool in a later one.
``Listing.mcp_name`` maps an action name back.

A server is untrusted: ``fetch_tools`` stops asking for pages as soon as ``MAX_TOOLS`` tools,
``MAX_PAGES`` pages or the instance's ``max_response_bytes`` (all pages together) are reached,
and keeps what came until then.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

import expediter
from expediter.core.turns.naming import NAME_PATTERN, sanitize

__all__ = [
    "MAX_DESCRIPTION",
    "MAX_NESTING",
    "MAX_PAGES",
    "MAX_SCHEMA_CHARS",
    "MAX_TOOLS",
    "Listing",
    "action_name",
    "deeper_than",
    "fetch_tools",
]

logger = logging.getLogger(__name__)

#: Characters of a tool's description offered to the model.
MAX_DESCRIPTION = 4000
#: Tools taken from one server (a server is untrusted: it could list millions).
MAX_TOOLS = 1000
#: Pages of a server's tool list asked for (a page of 4 tools still reaches ``MAX_TOOLS``).
MAX_PAGES = 250
#: Characters of one tool's input schema (as JSON); a larger one leaves the tool out.
MAX_SCHEMA_CHARS = 100_000
#: Levels of objects and arrays one tool's input schema may nest (a level of ``properties``
#: is two: that object and the property's schema); a deeper one leaves the tool out, before
#: it exhausts the recursion of a validator that reads it.
MAX_NESTING = 64
_LIMIT = 64


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def action_name(mcp_name: str, taken: set[str]) -> str:
    """The action name for an MCP tool name (joining ``taken``): the name itself when it is
    valid, else the name made valid with a hash of it; a clash (one in billions) gets a
    counter."""
    if NAME_PATTERN.match(mcp_name):
        name = mcp_name
    else:
        name = f"{sanitize(mcp_name)[: _LIMIT - 9]}_{_hash(mcp_name)}"
    base, counter = name, 1
    while name in taken:
        counter += 1
        suffix = f"_{counter}"
        name = f"{base[: _LIMIT - len(suffix)]}{suffix}"
    taken.add(name)
    return name


def deeper_than(value: Any, limit: int) -> bool:
    """Whether objects and arrays nest deeper than ``limit`` levels in ``value`` (measured
    without recursion: the value may be deeper than Python's stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _schema(value: Any) -> dict[str, Any]:
    """A tool's input schema as an action's parameters: an object schema, always
    (ValueError when it is not JSON, not a valid JSON Schema, larger than
    ``MAX_SCHEMA_CHARS`` or nested deeper than ``MAX_NESTING``)."""
    if not isinstance(value, Mapping) or value.get("type", "object") != "object":
        return {"type": "object", "properties": {}}
    if deeper_than(value, MAX_NESTING):
        raise ValueError(f"its input schema nests deeper than {MAX_NESTING} levels")
    try:
        size = len(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"its input schema is not JSON ({type(exc).__name__})") from None
    if size > MAX_SCHEMA_CHARS:
        raise ValueError(f"its input schema is {size} characters, over {MAX_SCHEMA_CHARS}")
    from jsonschema import exceptions, validators

    try:
        validators.validator_for(value).check_schema(dict(value))
    except exceptions.SchemaError as exc:
        raise ValueError(f"its input schema is not a valid JSON Schema: {exc.message}") from None
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
        """A listing from the server's ``list_tools`` answer (MCP ``Tool`` objects): valid
        names first, each group in name order, so clashes resolve the same way every time."""
        found: dict[str, Any] = {}
        for index, tool in enumerate(tools):
            if index >= MAX_TOOLS:
                _more_than_tools()
                break
            mcp_name = getattr(tool, "name", None)
            if isinstance(mcp_name, str) and mcp_name and mcp_name not in found:
                found[mcp_name] = tool
        ordered = sorted(found, key=lambda name: (not NAME_PATTERN.match(name), name))
        named: dict[str, tuple[str, Any]] = {}
        taken: set[str] = set()
        for mcp_name in ordered:
            named[mcp_name] = (action_name(mcp_name, taken), found[mcp_name])
        actions: list[expediter.Action] = []
        names: dict[str, str] = {}
        for mcp_name, (name, tool) in named.items():
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
            except (TypeError, ValueError, RecursionError) as exc:
                why = "it nests too deep" if isinstance(exc, RecursionError) else exc
                logger.warning("MCP tool %r is left out: %s", mcp_name[:128], why)
                continue
            actions.append(action)
            names[name] = mcp_name
        return cls(actions, names, taken_at)

    def mcp_name(self, action: str) -> str | None:
        """The MCP tool an action calls, or None."""
        return self.names.get(action)

    def parameters(self, action: str) -> Mapping[str, Any] | None:
        """The input schema of an action, or None."""
        for offered in self.actions:
            if offered.name == action:
                return offered.parameters
        return None

    def same_as(self, other: Listing) -> bool:
        """Whether another listing offers the very same actions."""
        return self.names == other.names and [a.to_dict() for a in self.actions] == [
            a.to_dict() for a in other.actions
        ]


def _more_than_tools() -> None:
    logger.warning("an MCP server lists more than %d tools; the rest are left out", MAX_TOOLS)


async def fetch_tools(client: Any, max_bytes: int) -> list[Any]:
    """A server's tools (MCP ``Tool`` objects), page by page from a connected fastmcp client,
    stopping as soon as ``MAX_TOOLS`` tools, ``MAX_PAGES`` pages or ``max_bytes`` of tools (as
    JSON, all pages together) are reached: what came until then is kept, and a warning says
    the rest are left out. A cursor the server gave before ends the list too."""
    tools: list[Any] = []
    size = 0
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await client.list_tools_mcp(cursor=cursor)
        for tool in page.tools:
            if len(tools) >= MAX_TOOLS:
                _more_than_tools()
                return tools
            size += len(tool.model_dump_json(by_alias=True, exclude_none=True))
            if size > max_bytes:
                logger.warning(
                    "an MCP server's tool list is over %d bytes (the instance's "
                    "max_response_bytes); the rest are left out",
                    max_bytes,
                )
                return tools
            tools.append(tool)
        cursor = page.next_cursor
        if cursor is None:
            return tools
        if len(tools) >= MAX_TOOLS:
            _more_than_tools()
            return tools
        if cursor in seen:
            logger.warning("an MCP server's tool list repeats a page; the rest are left out")
            return tools
        seen.add(cursor)
    logger.warning(
        "an MCP server's tool list runs to more than %d pages; the rest are left out", MAX_PAGES
    )
    return tools
