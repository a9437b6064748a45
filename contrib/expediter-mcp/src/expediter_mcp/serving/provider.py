"""The fastmcp side of the server: a ``Provider`` over the host's toolset, and the server.

fastmcp costs about 1.5 s to import, so its classes are subclassed inside ``make_provider``
(run once, when the server starts), never at this module's import. The provider holds no
tools of its own: each ``tools/list`` and each call asks the bridge for the user's toolset
as it is now (in a worker thread, since that reads the database), so each call runs in the
toolset that resolved its name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from expediter_mcp.serving.bridge import Bridge, Offer

if TYPE_CHECKING:
    from fastmcp import FastMCP
    from fastmcp.server.providers import Provider

__all__ = ["SERVER_NAME", "make_provider", "make_server", "mcp_block"]

#: The name the server gives itself in the MCP handshake.
SERVER_NAME = "expediter"


def make_provider(bridge: Bridge) -> Provider:
    """A fastmcp provider whose tools are the bridge's offers, listed afresh every time."""
    import anyio.to_thread
    from fastmcp.server.providers import Provider
    from fastmcp.tools.base import Tool, ToolResult
    from fastmcp.utilities.versions import VersionSpec

    class HostTool(Tool):
        """One offered action; a call runs through the host's pipeline."""

        _offer: Any = None

        @classmethod
        def of(cls, offer: Offer) -> HostTool:
            tool = cls(
                name=offer.name,
                description=offer.description or None,
                parameters=offer.parameters,
            )
            tool._offer = offer
            return tool

        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            reply = await bridge.call(self._offer, arguments)
            content: Any = reply.text
            if reply.blocks is not None:
                content = [mcp_block(block) for block in reply.blocks]
            return ToolResult(
                content=content, structured_content=reply.structured, is_error=reply.is_error
            )

    class HostToolset(Provider):
        """The host's toolset for the served user."""

        def __repr__(self) -> str:
            return f"HostToolset(user={bridge.user_id!r})"

        async def _list_tools(self) -> Sequence[Tool]:
            offers = await anyio.to_thread.run_sync(bridge.offers)
            return [HostTool.of(offer) for offer in offers]

        async def _get_tool(self, name: str, version: VersionSpec | None = None) -> Tool | None:
            # The toolset's tools are unversioned, and unversioned tools match any version. A
            # name the toolset does not offer still gets a tool: its call is refused by the
            # host's pipeline (a ledger row, and a message listing what is offered).
            return HostTool.of(await anyio.to_thread.run_sync(bridge.offer, name))

    return HostToolset()


def mcp_block(block: Mapping[str, Any]) -> Any:
    """One content block of a proxied result (``expediter_mcp.results``' JSON form) as an MCP
    content block again; what does not convert is passed on as its JSON text."""
    from mcp import types

    kind = block.get("type")
    try:
        if kind == "text":
            return types.TextContent(type="text", text=str(block.get("text", "")))
        data_url = block.get("data_url")
        if kind in ("image", "audio") and isinstance(data_url, str):
            head, _, data = data_url.partition(",")
            mime = head.removeprefix("data:").removesuffix(";base64")
            if kind == "image":
                return types.ImageContent(type="image", data=data, mime_type=mime)
            return types.AudioContent(type="audio", data=data, mime_type=mime)
        if kind == "resource_link":
            uri = str(block["uri"])
            return types.ResourceLink(
                type="resource_link",
                uri=uri,
                name=str(block.get("name") or uri),
                title=block.get("title"),
                description=block.get("description"),
                mime_type=block.get("mime_type"),
            )
        if kind == "resource" and isinstance(block.get("text"), str):
            resource = types.TextResourceContents(
                uri=str(block["uri"]), text=block["text"], mime_type=block.get("mime_type")
            )
            return types.EmbeddedResource(type="resource", resource=resource)
    except (KeyError, TypeError, ValueError):
        pass  # a URI MCP does not take, say: the block as JSON text below
    return types.TextContent(type="text", text=json.dumps(dict(block), ensure_ascii=False))


def make_server(bridge: Bridge, *, auth: Any = None) -> FastMCP:
    """The fastmcp server offering the bridge's toolset (``auth``: a token verifier)."""
    from fastmcp import FastMCP

    import expediter

    return FastMCP(
        SERVER_NAME,
        instructions="The tools of an expediter host; every call is recorded in its ledger.",
        version=expediter.__version__,
        providers=[make_provider(bridge)],
        auth=auth,
        # Schemas go out as the host offers them ($defs and $ref included), as to any model.
        dereference_schemas=False,
        # Calls never raise (a tool's failure is an error result); anything else is internal.
        mask_error_details=True,
    )
