"""expediter-mcp: remote MCP servers as expediter tools, and the host served over MCP.

The entry point names this module: it registers the ``mcp`` tool, the ``expediter mcp`` and
``expediter serve`` commands, and the ``normalize_result`` hook that reads an MCP result's
``is_error``. Importing it stays cheap: fastmcp (about 1.5 s) is imported when a connection,
a login or a server first needs it, never here.
"""

from __future__ import annotations

from typing import Any

import expediter

__all__ = ["normalize_result", "register_commands", "register_tools"]


@expediter.hookimpl
def register_tools(register: Any) -> None:
    from expediter_mcp.tool import McpTool

    register(McpTool)


@expediter.hookimpl
def register_commands(cli: Any) -> None:
    from expediter_mcp.cli import mcp
    from expediter_mcp.serving.command import serve

    cli.add_command(mcp)
    cli.add_command(serve)


@expediter.hookimpl
def normalize_result(tool: str, action: str, result: Any) -> expediter.ToolResult | None:
    if tool != "mcp" or type(result) is not dict or result.get("is_error") is not True:
        return None
    from expediter_mcp.results import error_result

    return error_result(result)
