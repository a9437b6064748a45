"""expediter-http: any HTTP API as an expediter tool, with OpenAPI import.

The entry point names this module: it registers the ``http`` tool and the ``expediter http``
commands. Importing it stays cheap (httpx and PyYAML are imported when a request or an import
runs).
"""

from __future__ import annotations

from typing import Any

import expediter

__all__ = ["register_commands", "register_tools"]


@expediter.hookimpl
def register_tools(register: Any) -> None:
    from expediter_http.tool import HttpTool

    register(HttpTool)


@expediter.hookimpl
def register_commands(cli: Any) -> None:
    from expediter_http.cli import http

    cli.add_command(http)
