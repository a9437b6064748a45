"""Tiny real servers and a recording network backend for the egress guard's tests.

``EchoServer`` is a threaded HTTP/1.1 server bound to one loopback address (Linux routes all
of 127.0.0.0/8 to ``lo``); it answers every request with JSON saying the Host header, the
address it was reached on and, over TLS, the server name (SNI) the client asked for. Each
request is also kept in ``seen``; ``connections`` counts accepted connections, handshakes that
failed included. Used as a proxy it records the absolute-form or CONNECT requests it gets.
"""

from __future__ import annotations

import http.server
import json
import socket
import socketserver
import ssl
import threading
from typing import Any

import attrs

__all__ = ["AsyncRecordingBackend", "EchoServer", "RecordingBackend", "Seen", "pair_on_one_port"]


@attrs.frozen
class Seen:
    """One request as the server read it."""

    method: str
    target: str
    host: str | None
    #: The (address, port) the connection came in on.
    local: tuple[str, int]
    sni: str | None
    headers: dict[str, str]


class EchoServer:
    """An HTTP/1.1 echo server on ``host:port`` (port 0: any free one), optionally TLS."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, tls: ssl.SSLContext | None = None
    ) -> None:
        self.seen: list[Seen] = []
        self.connections = 0
        self.handshake_errors: list[str] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                seen = Seen(
                    method=self.command,
                    target=self.path,
                    host=self.headers.get("Host"),
                    local=tuple(self.connection.getsockname()[:2]),  # type: ignore[arg-type]
                    sni=getattr(self.connection, "_seen_sni", None),
                    headers=dict(self.headers.items()),
                )
                with owner._lock:
                    owner.seen.append(seen)
                body = json.dumps(
                    {"host": seen.host, "local": list(seen.local), "sni": seen.sni}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_POST = do_HEAD = do_CONNECT = _answer

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = False
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

            def finish_request(self, request: Any, client_address: Any) -> None:
                with owner._lock:
                    owner.connections += 1
                if tls is not None:
                    try:
                        request = tls.wrap_socket(request, server_side=True)
                    except (ssl.SSLError, OSError) as exc:
                        with owner._lock:
                            owner.handshake_errors.append(str(exc))
                        return
                try:
                    super().finish_request(request, client_address)
                except OSError:
                    pass

        if tls is not None:

            def remember(sock: Any, name: str | None, _context: Any) -> None:
                sock._seen_sni = name

            tls.sni_callback = remember
        self.httpd = Server((host, port), Handler)
        self.host = host
        self.port: int = self.httpd.server_address[1]
        self.tls = tls is not None
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (https with TLS)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def pair_on_one_port(first: str, second: str) -> tuple[EchoServer, EchoServer]:
    """Two echo servers on the same port, one on each loopback address (a rebinding name
    keeps its port while its address changes)."""
    for _ in range(20):
        one = EchoServer(first)
        try:
            return one, EchoServer(second, one.port)
        except OSError:
            one.close()
    raise RuntimeError(f"no port free on both {first} and {second}")


class RecordingBackend:
    """A network backend that records what it is asked to dial, then dials with ``real``
    (the httpcore module's own backend; the test net still applies)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.dialed: list[tuple[str, int]] = []

    def connect_tcp(self, host: str, port: int, **options: Any) -> Any:
        self.dialed.append((host, port))
        return self.real.connect_tcp(host, port, **options)

    def sleep(self, seconds: float) -> None:
        self.real.sleep(seconds)


class AsyncRecordingBackend(RecordingBackend):
    """The async twin of ``RecordingBackend``."""

    async def connect_tcp(self, host: str, port: int, **options: Any) -> Any:  # type: ignore[override]
        self.dialed.append((host, port))
        return await self.real.connect_tcp(host, port, **options)

    async def sleep(self, seconds: float) -> None:  # type: ignore[override]
        await self.real.sleep(seconds)
