"""A stdio MCP server whose tool ``die`` ends the process in the middle of a call."""

import os

from fastmcp import FastMCP

server = FastMCP("exiting")


@server.tool
def ok() -> str:
    "fine"
    return "fine"


@server.tool
def die() -> str:
    "exit the process mid-call"
    os._exit(3)


server.run(transport="stdio", show_banner=False)
