"""The MCP session every transport of the pack opens (``StreamableHttpTransport`` and
``SSETransport`` here are fastmcp's, opening it; ``expediter_mcp.stdio`` opens it too): one
unusable tool in a server's list is left out alone.

The MCP SDK checks a ``tools/list`` answer as a whole: a single tool whose input schema is not
a JSON object (or, for the protocol versions of 2025, not ``"type": "object"``) fails the whole
page, and so every tool of that server. ``CheckedSession`` reads the answers to its own
``tools/list`` requests before the SDK does and takes out each tool that would fail it, or
that nests deeper than ``MAX_NESTING`` levels (a schema that deep exhausts the recursion of
the validators that read it later), with a warning naming the tool and why.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio.abc
import mcp_types
import pydantic
from fastmcp.client.transports import SSETransport as _SSETransport
from fastmcp.client.transports import StreamableHttpTransport as _HttpTransport
from fastmcp.client.transports.base import TransportOptions, VersionAwareClientSession
from mcp.shared.message import SessionMessage
from mcp_types import methods

from expediter_mcp.listing import MAX_NESTING, deeper_than

__all__ = ["CheckedSession", "SSETransport", "StreamableHttpTransport", "usable_tools"]

logger = logging.getLogger("expediter_mcp.listing")

#: The version the SDK reads answers by before one is negotiated (its fallback too).
_FALLBACK_VERSION = "2025-11-25"


def _fault(tool: Any, rest: Mapping[str, Any], version: str) -> str | None:
    """Why the SDK could not read ``tool`` in a listing (``rest``: the answer's other fields),
    or None."""
    if not isinstance(tool, Mapping):
        return "it is not a JSON object"
    schema = tool.get("inputSchema")
    if not isinstance(schema, Mapping):
        return "its input schema is not a JSON object"
    if deeper_than(schema, MAX_NESTING):
        return f"its input schema nests deeper than {MAX_NESTING} levels"
    if deeper_than(tool, MAX_NESTING + 1):
        return f"it nests deeper than {MAX_NESTING} levels"
    try:
        methods.validate_server_result("tools/list", version, {**rest, "tools": [tool]})
    except pydantic.ValidationError as exc:
        return f"it is not a valid MCP tool: {_first(exc, skip=2)}"
    except (KeyError, ValueError):
        # A version the SDK has no surface for: its own model of a tool is the check.
        try:
            mcp_types.Tool.model_validate(tool, by_name=False)
        except pydantic.ValidationError as exc:
            return f"it is not a valid MCP tool: {_first(exc, skip=0)}"
    return None


def _first(error: pydantic.ValidationError, skip: int) -> str:
    """The first problem of a ValidationError (its place less ``skip`` leading parts), on one
    line and short."""
    found = error.errors()[0]
    where = ".".join(str(part) for part in found.get("loc", ())[skip:]) or "the tool"
    return " ".join(f"{where}: {found.get('msg', '')}".split())[:200]


def usable_tools(result: dict[str, Any], version: str | None) -> None:
    """Take out of a ``tools/list`` answer (in place) each tool the SDK could not read, with a
    warning naming it. An answer that is wrong beyond its tools is left to the SDK, which
    fails it."""
    tools = result.get("tools")
    if not isinstance(tools, list):
        return
    rest = {key: value for key, value in result.items() if key != "tools"}
    version = version or _FALLBACK_VERSION
    try:
        methods.validate_server_result("tools/list", version, {**rest, "tools": []})
    except pydantic.ValidationError:
        return  # the answer itself is wrong: the SDK says so
    except (KeyError, ValueError):
        pass  # a version without a surface: each tool is checked by the SDK's model
    kept = []
    for index, tool in enumerate(tools):
        why = _fault(tool, rest, version)
        if why is None:
            kept.append(tool)
            continue
        name = tool.get("name") if isinstance(tool, Mapping) else None
        label = repr(name[:128]) if isinstance(name, str) else f"number {index + 1}"
        logger.warning("MCP tool %s is left out: %s", label, why)
    result["tools"] = kept


class _Requests(anyio.abc.ObjectSendStream[SessionMessage]):
    """The session's way out: notes the ids of its ``tools/list`` requests."""

    def __init__(self, inner: Any, listings: set[Any]) -> None:
        self.inner = inner
        self.listings = listings

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, mcp_types.JSONRPCRequest) and message.method == "tools/list":
            self.listings.add(_key(message.id))
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Answers(anyio.abc.ObjectReceiveStream[SessionMessage | Exception]):
    """The session's way in: the answer to one of its ``tools/list`` requests comes without
    the tools the SDK could not read."""

    def __init__(self, inner: Any, listings: set[Any], version: Callable[[], str | None]) -> None:
        self.inner = inner
        self.listings = listings
        self.version = version

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message (the SDK reads it when there is one)."""
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        item: SessionMessage | Exception = await self.inner.receive()
        if isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
                key = _key(message.id)
                if key in self.listings:
                    self.listings.discard(key)
                    if isinstance(message, mcp_types.JSONRPCResponse):
                        usable_tools(message.result, self.version())
        return item

    async def aclose(self) -> None:
        await self.inner.aclose()


def _key(ident: Any) -> str:
    """A request id as the SDK correlates it ("7" and 7 are one)."""
    return str(ident)


class CheckedSession(VersionAwareClientSession):
    """fastmcp's client session, reading its tool listings tool by tool (see the module)."""

    def __init__(self, read_stream: Any = None, write_stream: Any = None, *args: Any, **kw: Any):
        if read_stream is not None and write_stream is not None:
            listings: set[Any] = set()
            read_stream = _Answers(read_stream, listings, lambda: self.protocol_version)
            write_stream = _Requests(write_stream, listings)
        super().__init__(read_stream, write_stream, *args, **kw)


def _checked(options: TransportOptions | None) -> TransportOptions:
    return dataclasses.replace(options or TransportOptions(), session_class=CheckedSession)


class StreamableHttpTransport(_HttpTransport):
    """fastmcp's streamable HTTP transport, opening a ``CheckedSession``."""

    def connect_session(self, *, transport_options: Any = None, **session_kwargs: Any) -> Any:
        options = _checked(transport_options)
        return super().connect_session(transport_options=options, **session_kwargs)


class SSETransport(_SSETransport):
    """fastmcp's SSE transport, opening a ``CheckedSession``."""

    def connect_session(self, *, transport_options: Any = None, **session_kwargs: Any) -> Any:
        options = _checked(transport_options)
        return super().connect_session(transport_options=options, **session_kwargs)
