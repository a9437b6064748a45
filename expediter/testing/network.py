"""A loopback-only network for tests of outbound clients (the egress guard, HTTP and MCP packs).

``loopback_only()`` refuses, at the socket, any connection to an address outside 127.0.0.0/8
and ::1, and any name resolution other than of a literal address or ``localhost``, so a test of
a guard that is wrong fails here instead of reaching the world. ``StaticLookup`` is the resolver
such tests inject (``expediter.core.netguard.Resolver(lookup=...)``): names resolve only to the
addresses the test gives.

The pytest plugin offers it as the ``loopback_only`` fixture, which fails the test at teardown
when anything tried to leave the machine.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["LoopbackNet", "NonLoopbackDial", "StaticLookup", "loopback_only"]


class NonLoopbackDial(ConnectionRefusedError):
    """A test tried to reach something other than loopback; the test net refused."""


def _is_loopback(host: Any) -> bool:
    try:
        address = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


class LoopbackNet:
    """What the test net refused (``refused``: one line per attempt)."""

    def __init__(self) -> None:
        self.refused: list[str] = []
        self._lock = threading.Lock()

    def refuse(self, what: str) -> NonLoopbackDial:
        with self._lock:
            self.refused.append(what)
        return NonLoopbackDial(f"test net: refused {what}")


@contextlib.contextmanager
def loopback_only() -> Iterator[LoopbackNet]:
    """Refuse every non-loopback connection and every real DNS lookup while inside."""
    net = LoopbackNet()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0] if isinstance(address, tuple) else address
            if not _is_loopback(host):
                raise net.refuse(f"a connection to {address!r}")

    def connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return real_connect_ex(sock, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        text = host.decode() if isinstance(host, bytes) else host
        if text is not None and text != "localhost":
            try:
                ipaddress.ip_address(str(text).split("%", 1)[0])
            except ValueError:
                try:
                    socket.inet_aton(str(text))
                except OSError:
                    raise net.refuse(f"a DNS lookup of {text!r}") from None
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = getaddrinfo
    try:
        yield net
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = real_getaddrinfo


class StaticLookup:
    """A resolver lookup answering only the names it was given.

    Each name maps to its addresses, or to a sequence of answers given in turn (the last one
    repeats): ``{"rebind.test": [["127.0.0.2"], ["127.0.0.1"]]}`` answers 127.0.0.2 first and
    127.0.0.1 after, as a rebinding DNS server would. ``calls`` counts lookups per name.
    """

    def __init__(self, answers: Mapping[str, Sequence[str] | Sequence[Sequence[str]]]) -> None:
        self._answers: dict[str, list[tuple[str, ...]]] = {}
        for name, value in answers.items():
            items = list(value)
            if items and not isinstance(items[0], str):
                self._answers[name.lower()] = [tuple(answer) for answer in items]
            else:
                self._answers[name.lower()] = [tuple(items)]  # type: ignore[arg-type]
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, host: str, port: int) -> Iterable[str]:
        key = host.lower()
        answers = self._answers.get(key)
        if answers is None:
            raise socket.gaierror(socket.EAI_NONAME, f"test resolver: no answer for {host!r}")
        with self._lock:
            turn = self.calls.get(key, 0)
            self.calls[key] = turn + 1
        return answers[min(turn, len(answers) - 1)]
