"""Helpers of the ``expediter serve --mcp`` tests: small test tools, MCP requests to a served
host, a served host over HTTP in a thread, and ``expediter serve`` as a real process."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import queue
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from click.testing import CliRunner
from expediter_mcp.serving.bridge import Bridge
from expediter_mcp.serving.command import serve
from expediter_mcp.serving.provider import make_server

T = TypeVar("T")

#: The user whose tools are served.
USER = "ann"
#: A bearer token for the tests (never to be printed).
TOKEN = "s3cret-Token_for.tests~1"

#: One tool module (tool ``loud``): each function is one of its actions.
TOOLS = '''
import time
from typing import Annotated

import expediter


@expediter.tool
def shout(text: str, times: int = 1) -> str:
    """Shout text.

    Args:
        text: What to shout.
        times: How many times.
    """
    return (text.upper() + " ") * times


@expediter.tool
def stats(values: list[int]) -> dict:
    """Count and add numbers."""
    return {"count": len(values), "total": sum(values)}


@expediter.tool
def crash(reason: str = "boom") -> str:
    """Raise an exception."""
    raise RuntimeError(reason)


@expediter.tool(require_approval=True)
def launch(target: str) -> dict:
    """Launch something (a human approves it first)."""
    return {"launched": target}


@expediter.tool
def login(user: str, password: Annotated[str, expediter.Secret]) -> str:
    """Log in."""
    return "welcome " + user


@expediter.tool
def nap(seconds: float) -> str:
    """Sleep (a sync tool)."""
    time.sleep(seconds)
    return "rested"
'''


def write_tools(directory: Path) -> Path:
    """A tools directory holding the ``loud`` test tool."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "loud.py").write_text(textwrap.dedent(TOOLS))
    return directory


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end on a new event loop."""
    return asyncio.run(coroutine)


def server_for(host: Any, *, approval_wait: float | None = None, auth: Any = None) -> Any:
    """The fastmcp server offering ``host``'s tools for ``USER``."""
    return make_server(Bridge(host, user_id=USER, approval_wait=approval_wait), auth=auth)


async def _tools(server: Any) -> dict[str, Any]:
    from fastmcp import Client

    async with Client(server) as client:
        return {tool.name: tool for tool in await client.list_tools()}


def listed(server: Any) -> dict[str, Any]:
    """The server's tools by name (one ``tools/list``)."""
    return run(_tools(server))


async def _call(server: Any, name: str, arguments: dict[str, Any]) -> Any:
    from fastmcp import Client

    async with Client(server) as client:
        return await client.call_tool(name, arguments, raise_on_error=False)


def call(server: Any, name: str, arguments: dict[str, Any]) -> Any:
    """One ``tools/call``; its result (errors included, never raised)."""
    return run(_call(server, name, arguments))


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content)


def row_of(host: Any, action: str) -> Any:
    """The newest ledger row of an action of the ``loud`` tool."""
    rows = [row for row in host.ledger.rows(tool="loud", limit=0) if row.action == action]
    assert rows, f"no ledger row for loud.{action}"
    return rows[0]


def post_initialize(
    url: str, authorization: str | None = None, headers: Mapping[str, str] | None = None
) -> int:
    """The HTTP status of an MCP ``initialize`` request sent with this Authorization header
    (and ``headers``: a ``Host`` given there replaces the one naming the URL's address)."""
    parts = urlsplit(url)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "0"},
        },
    }
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if authorization is not None:
        sent["Authorization"] = authorization
    sent.update(headers or {})
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request("POST", parts.path, body=json.dumps(body), headers=sent)
        return connection.getresponse().status
    finally:
        connection.close()


class HttpServer:
    """A fastmcp server's streamable-HTTP app, served by uvicorn in a thread on 127.0.0.1 (a
    free port, bound and guarded the way ``expediter serve`` does it); ``url`` is its
    endpoint."""

    def __init__(self, server: Any, path: str = "/mcp") -> None:
        import uvicorn
        from expediter_mcp.serving.transport import http_app, listen, url_of

        self.sock = listen("127.0.0.1", 0)
        self.url = url_of("127.0.0.1", self.sock, path)
        app = http_app(server, "127.0.0.1", self.sock, path)
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._uvicorn.serve(sockets=[self.sock])), daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the served host did not start")
            time.sleep(0.01)

    def close(self) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(10)
        self.sock.close()


def cli_env(home: Path, tools: Path, **extra: str) -> dict[str, str]:
    """The environment of an ``expediter`` process: its own home and tools directory, no
    other ``EXPEDITER_*`` setting."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("EXPEDITER_")}
    env["EXPEDITER_HOME"] = str(home)
    env["EXPEDITER_TOOLS_PATH"] = str(tools)
    env.update(extra)
    return env


class ServeProcess:
    """``python -m expediter [OPTIONS] serve --mcp ...`` as a process; ``url`` is read from the
    line it prints on standard error (``serving MCP on URL ...``)."""

    def __init__(
        self,
        env: Mapping[str, str],
        *arguments: str,
        timeout: float = 60,
        options: Sequence[str] = (),
    ) -> None:
        command = [sys.executable, "-m", "expediter", *options, "serve", "--mcp", *arguments]
        self.process = subprocess.Popen(
            command,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        found: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert self.process.stderr is not None
            for line in self.process.stderr:
                self.lines.append(line)
                match = re.search(r"serving MCP on (\S+)", line)
                if match:
                    found.put(match.group(1))
            found.put(None)

        threading.Thread(target=read, daemon=True).start()
        try:
            url = found.get(timeout=timeout)
        except queue.Empty:
            url = None
        if url is None:
            self.stop()
            raise RuntimeError("expediter serve did not start:\n" + "".join(self.lines))
        self.url = url

    def stop(self) -> int:
        """Stop the server (SIGTERM, as a service manager would) and return its exit status."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(20)


def invoke(*arguments: str) -> Any:
    """``expediter serve ARGUMENTS`` in process (the command as a pack registers it)."""
    from expediter.cli.app import CliState
    from expediter.core.config import HostConfig

    state = CliState(HostConfig.from_env(), refresh=False)
    try:
        return CliRunner().invoke(serve, list(arguments), obj=state, prog_name="expediter serve")
    finally:
        state.close()
