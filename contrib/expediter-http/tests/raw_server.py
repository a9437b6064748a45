"""A bare socket server on 127.0.0.1 for what ``servers.TestServer`` cannot do: send a body
slowly, or show a request's header lines exactly as they came (repeated names included)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

__all__ = ["RawServer"]


class RawServer:
    """A socket server on 127.0.0.1 that records each request's raw head and answers with
    ``respond(connection)`` (for what ``TestServer`` cannot do: trickle, show raw headers)."""

    def __init__(self, respond: Callable[[socket.socket], None]) -> None:
        self.heads: list[bytes] = []
        self._respond = respond
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            with connection:
                head = b""
                while b"\r\n\r\n" not in head:
                    data = connection.recv(65536)
                    if not data:
                        break
                    head += data
                self.heads.append(head)
                try:
                    self._respond(connection)
                except OSError:
                    pass

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._socket.close()
