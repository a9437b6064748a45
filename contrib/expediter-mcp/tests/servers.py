"""A fastmcp server on 127.0.0.1 for the tests: streamable HTTP or SSE, optionally with static
bearer tokens, and tools that report who called them and which session they are on."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from typing import Any

import uvicorn
from expediter_mcp.listing import action_name
from fastmcp import Context, FastMCP
from fastmcp.server.auth.providers.jwt import StaticTokenVerifier
from fastmcp.server.dependencies import get_access_token, get_http_request

__all__ = ["ADD", "McpServer", "build_server", "free_port"]


# The servers run in the tests' own process: their logs (a tool's traceback, "Auth error
# returned") would land in the output the tests read.
logging.getLogger("fastmcp").setLevel(logging.CRITICAL)
logging.getLogger("mcp").setLevel(logging.CRITICAL)


#: The action name of the server's ``math.add`` tool (a dotted name: made valid, with a hash).
ADD = action_name("math.add", set())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build_server(
    tokens: dict[str, str] | None = None, auth: Any = None, growing: bool = False
) -> Any:
    """The test server: ``tokens`` maps a bearer token to the identity it stands for; a
    ``growing`` one has a tool ``grow`` that adds a tool (and tells its clients so)."""
    if auth is None and tokens:
        auth = StaticTokenVerifier(
            {token: {"client_id": who, "scopes": []} for token, who in tokens.items()}
        )
    server = FastMCP("expediter-test", auth=auth)
    server.calls = []  # type: ignore[attr-defined]

    @server.tool
    def whoami(ctx: Context) -> dict[str, Any]:
        """Who is calling, and from which TCP port (one per pooled connection)."""
        token = get_access_token()
        request = get_http_request()
        port = request.client.port if request.client else None
        return {"client": token.client_id if token else None, "port": port}

    @server.tool
    def header(name: str) -> dict[str, Any]:
        """A request header's value, with a digest of it (so a test can tell what came)."""
        import hashlib

        value = get_http_request().headers.get(name)
        digest = None if value is None else hashlib.sha256(value.encode()).hexdigest()
        return {"present": value is not None, "sha256": digest, "value": value}

    @server.tool(name="math.add")
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool
    async def sleep(seconds: float) -> str:
        """Sleep, then answer."""
        server.calls.append(("sleep", seconds))  # type: ignore[attr-defined]
        await asyncio.sleep(seconds)
        return "slept"

    @server.tool
    def big(size: int) -> str:
        """A text of ``size`` characters."""
        return "x" * size

    @server.tool
    def fail(message: str) -> str:
        """Fail with the message."""
        raise ValueError(message)

    @server.tool
    def picture(size: int = 16) -> Any:
        """An image of ``size`` bytes."""
        from fastmcp.utilities.types import Image

        return Image(data=b"\x89PNG" + b"\0" * max(0, size - 4), format="png")

    if growing:

        @server.tool
        async def grow(name: str, ctx: Context) -> str:
            """Add a tool named ``name``."""

            def added() -> str:
                return "new"

            server.tool(added, name=name)
            import mcp.types

            await ctx.send_notification(mcp.types.ToolListChangedNotification())
            return "grown"

    return server


class McpServer:
    """A fastmcp server running in a thread on 127.0.0.1 (``url`` is its endpoint)."""

    def __init__(self, server: Any, transport: str = "http") -> None:
        self.server = server
        self.port = free_port()
        path = "/mcp" if transport == "http" else "/sse"
        app = server.http_app(path=path, transport=transport)
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=1,
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test MCP server did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(10)


#: The tools of ``build_schema_server`` and their input schemas (``{remote}``: a URL).
SCHEMAS: dict[str, Any] = {
    # A reference loop: validating recurses without end.
    "looped": {
        "type": "object",
        "$defs": {"node": {"$ref": "#/$defs/node"}},
        "properties": {"x": {"$ref": "#/$defs/node"}},
    },
    # A reference outside the schema: validating must not fetch it.
    "remote": {"type": "object", "properties": {"x": {"$ref": "{remote}"}}},
    # A pattern Python's re takes exponential time to refuse a near miss with.
    "backtracking": {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}},
        "required": ["x"],
    },
    "pattern_keys": {
        "type": "object",
        "patternProperties": {"^(a+)+$": {"type": "integer"}},
        "additionalProperties": False,
    },
}


def build_schema_server(remote: str) -> Any:
    """A server whose tools declare the input schemas of ``SCHEMAS`` as they stand (fastmcp
    checks no arguments of such tools) and answer with the arguments they were given."""
    import json

    from fastmcp.tools.base import Tool, ToolResult

    class Echo(Tool):
        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            server.calls.append((self.name, arguments))  # type: ignore[attr-defined]
            return ToolResult(content=json.dumps(arguments, sort_keys=True))

    # Listed as declared: fastmcp would otherwise inline (or drop) the references.
    server = FastMCP("schemas", dereference_schemas=False)
    server.calls = []  # type: ignore[attr-defined]
    for name, schema in SCHEMAS.items():
        text = json.dumps(schema).replace("{remote}", remote)
        server.add_tool(Echo(name=name, description=f"echo ({name})", parameters=json.loads(text)))
    return server
