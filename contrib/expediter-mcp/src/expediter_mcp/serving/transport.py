"""Running the server: streamable HTTP on a socket bound here (so ``--port 0`` can say which
port it got), or stdio.

Over HTTP, fastmcp's Host/Origin guard is always on (fastmcp leaves it off by default): a
request whose ``Host`` header names another machine is refused (421), and so is one from a
browser page of another origin (403). Without it, a web page the user visits could point its
own name at 127.0.0.1 (DNS rebinding) and list and call the user's tools on a loopback server
that wants no token.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastmcp import FastMCP

__all__ = ["http_app", "listen", "rebinding_guard", "run_http", "run_stdio", "url_of"]

#: The names of this machine's loopback interface a local client may put in ``Host``.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")

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


def _with_port(name: str, port: int) -> str:
    return f"[{name}]:{port}" if ":" in name else f"{name}:{port}"


def rebinding_guard(host: str, port: int) -> dict[str, Any]:
    """fastmcp's arguments (``http_app``, ``run_http_async``) that turn its Host/Origin guard
    on for a server bound to ``host`` and ``port``.

    ``Host`` may name the bound address, the address a request arrived on, or (bound to
    loopback) any loopback name; hosts in fastmcp's own ``FASTMCP_HTTP_ALLOWED_HOSTS`` setting
    are added (a proxy that forwards its public name, say). fastmcp compares the names, not
    the ports. ``Origin``, when sent, must be a loopback origin or the request's own (or in
    ``FASTMCP_HTTP_ALLOWED_ORIGINS``)."""
    import fastmcp

    from expediter_mcp.serving.auth import is_loopback

    names = [host.strip().strip("[]")]
    if is_loopback(host):
        names += LOOPBACK_NAMES
    allowed = [_with_port(name, port) for name in dict.fromkeys(names)]
    allowed += [item for item in fastmcp.settings.http_allowed_hosts or () if item not in allowed]
    return {"host_origin_protection": True, "allowed_hosts": allowed}


def http_app(server: FastMCP, host: str, sock: socket.socket, path: str) -> Any:
    """The streamable-HTTP app ``run_http`` serves, guarded the same way (for serving it some
    other way: the tests run it in a thread)."""
    return server.http_app(path=path, **rebinding_guard(host, sock.getsockname()[1]))


def run_http(server: FastMCP, host: str, sock: socket.socket, path: str) -> None:
    """Serve streamable HTTP on ``sock`` until interrupted (uvicorn handles SIGINT/SIGTERM)."""
    import anyio

    port = sock.getsockname()[1]
    run = functools.partial(
        server.run_http_async,
        show_banner=False,
        transport="http",
        host=host.strip("[]"),
        port=port,
        path=path,
        sockets=[sock],
        uvicorn_config={"log_level": "warning"},
        **rebinding_guard(host, port),
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
