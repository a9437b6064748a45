"""Running the server: streamable HTTP on a socket bound here (so ``--port 0`` can say which
port it got), or stdio."""

from __future__ import annotations

import contextlib
import functools
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastmcp import FastMCP

__all__ = ["listen", "run_http", "run_stdio", "url_of"]

#: Connections the kernel queues before the server accepts them.
BACKLOG = 128


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host`` and ``port`` (0: a free port) and listening; OSError
    when it cannot be."""
    name = host.strip("[]")
    found = socket.getaddrinfo(
        name, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE
    )
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def url_of(host: str, sock: socket.socket, path: str) -> str:
    """The URL clients use for the server listening on ``sock``."""
    port = sock.getsockname()[1]
    name = host.strip("[]")
    shown = f"[{name}]" if ":" in name else name
    return f"http://{shown}:{port}{path}"


def run_http(server: FastMCP, host: str, sock: socket.socket, path: str) -> None:
    """Serve streamable HTTP on ``sock`` until interrupted (uvicorn handles SIGINT/SIGTERM)."""
    import anyio

    run = functools.partial(
        server.run_http_async,
        show_banner=False,
        transport="http",
        host=host.strip("[]"),
        port=sock.getsockname()[1],
        path=path,
        sockets=[sock],
        uvicorn_config={"log_level": "warning"},
    )
    with _sigterm_exits():
        anyio.run(run)


def run_stdio(server: FastMCP) -> None:
    """Serve MCP on standard input and output until the client closes them. While serving,
    the MCP SDK points file descriptor 1 at standard error, so a tool that prints cannot
    corrupt the protocol stream."""
    import anyio

    with _sigterm_exits():
        anyio.run(functools.partial(server.run_stdio_async, show_banner=False))


def _exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


@contextlib.contextmanager
def _sigterm_exits() -> Iterator[None]:
    """SIGTERM ends the command normally (exit status 0), so the host is closed on the way
    out. uvicorn shuts down gracefully on SIGTERM and then raises the signal again, which
    would otherwise kill the process before anything is closed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
