"""Helpers of the ``expediter serve --mcp`` tests: small test tools, a served host over HTTP in
a thread, and ``expediter serve`` as a real process."""

from __future__ import annotations

import asyncio
import os
import queue
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

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


class HttpServer:
    """A fastmcp server's streamable-HTTP app, served by uvicorn in a thread on 127.0.0.1 (a
    free port, bound the way ``expediter serve`` binds it); ``url`` is its endpoint."""

    def __init__(self, server: Any, path: str = "/mcp") -> None:
        import uvicorn
        from expediter_mcp.serving.transport import listen, url_of

        self.sock = listen("127.0.0.1", 0)
        self.url = url_of("127.0.0.1", self.sock, path)
        config = uvicorn.Config(server.http_app(path=path), log_level="warning", lifespan="on")
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
    """``python -m expediter serve --mcp ...`` as a process; ``url`` is read from the line it
    prints on standard error (``serving MCP on URL ...``)."""

    def __init__(self, env: Mapping[str, str], *arguments: str, timeout: float = 60) -> None:
        command = [sys.executable, "-m", "expediter", "serve", "--mcp", *arguments]
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
