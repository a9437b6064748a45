"""Real local HTTP(S) servers for the pack's tests: threaded, HTTP/1.1 keep-alive, bound to a
loopback address, recording every request they receive.

A server answers each request with its route's handler (``server.route(method, path,
handler)``; ``handler(request) -> Reply``), else with the echo route: a JSON document
describing the request (method, raw path, query, headers, body as text or base64).
"""

from __future__ import annotations

import base64
import http.server
import json
import socketserver
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import attrs

__all__ = ["Received", "Reply", "TestServer", "echo"]


@attrs.frozen
class Received:
    """One request as the server read it."""

    method: str
    #: The request target exactly as sent (path and query, still percent-encoded).
    target: str
    headers: dict[str, str]
    body: bytes
    #: The TLS server name the client asked for (None without TLS or SNI).
    sni: str | None = None
    #: The address the connection came in on (host, port).
    local: tuple[str, int] | None = None

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> str:
        return self.target.split("?", 1)[1] if "?" in self.target else ""

    def header(self, name: str) -> str | None:
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


@attrs.frozen
class Reply:
    status: int = 200
    headers: dict[str, str] = attrs.field(factory=dict)
    body: bytes | str | Any = b""
    #: Send the body in chunks of this size with Transfer-Encoding: chunked (None: one piece).
    chunked: int | None = None
    #: Seconds to wait before answering.
    delay: float = 0.0

    def encoded(self) -> tuple[bytes, dict[str, str]]:
        headers = dict(self.headers)
        body = self.body
        if isinstance(body, bytes):
            return body, headers
        if isinstance(body, str):
            headers.setdefault("Content-Type", "text/plain; charset=utf-8")
            return body.encode(), headers
        headers.setdefault("Content-Type", "application/json")
        return json.dumps(body).encode(), headers


def echo(request: Received) -> Reply:
    """The default route: the request as JSON."""
    try:
        text: Any = request.body.decode()
        encoding = "text"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(request.body).decode(), "base64"
    return Reply(
        body={
            "method": request.method,
            "target": request.target,
            "path": request.path,
            "query": urllib.parse.parse_qs(request.query, keep_blank_values=True),
            "headers": request.headers,
            "body": text,
            "body_encoding": encoding,
        }
    )


Handler = Callable[[Received], Reply]


class TestServer:
    """A threaded HTTP/1.1 server on ``host`` (a loopback address), optionally TLS."""

    __test__ = False

    def __init__(self, host: str = "127.0.0.1", *, tls: ssl.SSLContext | None = None) -> None:
        self.received: list[Received] = []
        self.routes: dict[tuple[str, str], Handler] = {}
        self.connections = 0
        self._lock = threading.Lock()
        server = self
        sni_seen: dict[int, str | None] = {}

        class RequestHandler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    body = self._chunked()
                else:
                    body = self.rfile.read(length) if length else b""
                sni = None
                if isinstance(self.connection, ssl.SSLSocket):
                    sni = sni_seen.get(id(self.connection))
                received = Received(
                    method=self.command,
                    target=self.path,
                    headers=dict(self.headers.items()),
                    body=body,
                    sni=sni,
                    local=self.connection.getsockname()[:2],
                )
                with server._lock:
                    server.received.append(received)
                handler = server.routes.get((self.command, received.path)) or server.routes.get(
                    ("*", received.path), echo
                )
                reply = handler(received)
                if reply.delay:
                    threading.Event().wait(reply.delay)
                data, headers = reply.encoded()
                self.send_response(reply.status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if reply.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    try:
                        for start in range(0, len(data), reply.chunked):
                            piece = data[start : start + reply.chunked]
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:
                        self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    try:
                        self.wfile.write(data)
                    except OSError:
                        self.close_connection = True

            def _chunked(self) -> bytes:
                parts = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True
            address_family = (
                __import__("socket").AF_INET6 if ":" in host else __import__("socket").AF_INET
            )

            def get_request(self) -> Any:
                sock, address = self.socket.accept()
                if tls is not None:
                    sock = tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                    # The handshake runs on the accepting thread: a client that never sends
                    # its hello must not stop the server (or its shutdown) for good.
                    sock.settimeout(5)
                    try:
                        sock.do_handshake()
                    except (ssl.SSLError, OSError):
                        sock.close()
                        raise
                    sock.settimeout(None)
                    sni_seen[id(sock)] = getattr(sock, "_expediter_sni", None)
                return sock, address

        if tls is not None:

            def remember(sock: ssl.SSLSocket, name: str | None, _context: Any) -> None:
                sock._expediter_sni = name  # type: ignore[attr-defined]

            tls.sni_callback = remember
        self.tls = tls is not None
        self.httpd = Server((host, 0), RequestHandler)
        self.host = host
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (https with TLS; IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def route(self, method: str, path: str, handler: Handler | Reply) -> None:
        """Answer ``method path`` (``*`` for any method) with ``handler`` (or a fixed reply)."""
        self.routes[(method, path)] = handler if callable(handler) else (lambda _r: handler)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __iter__(self) -> Iterator[Received]:
        return iter(list(self.received))
