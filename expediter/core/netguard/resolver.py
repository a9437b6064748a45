"""Name resolution for outbound clients: once per connection, with a deadline, cached for a
fixed time (``getaddrinfo`` gives no TTL).

The resolver returns addresses; it checks nothing (``EgressPolicy`` does, on every new
connection, cached or not). Tests inject ``lookup`` so no name ever reaches a real DNS server.
"""

from __future__ import annotations

import concurrent.futures
import socket
import threading
import time
from collections.abc import Callable, Iterable

from expediter.errors import EgressBlocked

__all__ = ["DEFAULT_TTL", "LOOKUP_THREADS", "Lookup", "Resolver", "system_lookup"]

#: Seconds a resolution is reused.
DEFAULT_TTL = 30.0
#: Threads lookups run on, shared by the process (a lookup past its deadline keeps its thread
#: until the system resolver gives up; see ``EgressPolicy``'s per-client limit).
LOOKUP_THREADS = 32
#: ``lookup(host, port) -> addresses``: the addresses a name resolves to, as text.
Lookup = Callable[[str, int], Iterable[str]]

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _resolver_threads() -> concurrent.futures.ThreadPoolExecutor:
    """The threads lookups run on (a lookup past its deadline keeps its thread, not the call)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=LOOKUP_THREADS, thread_name_prefix="expediter-resolve"
            )
        return _pool


def system_lookup(host: str, port: int) -> list[str]:
    """The system resolver's TCP addresses for ``host``, in its order, without repeats."""
    found: list[str] = []
    for _family, _type, _proto, _name, sockaddr in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM
    ):
        address = str(sockaddr[0])
        if address not in found:
            found.append(address)
    return found


class Resolver:
    """Resolves names with a deadline and keeps each answer for ``ttl`` seconds."""

    def __init__(
        self,
        lookup: Lookup | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lookup: Lookup = lookup or system_lookup
        self.ttl = ttl
        self._clock = clock
        self._cache: dict[str, tuple[float, tuple[str, ...]]] = {}
        #: Lookups under way, by name: callers asking for the same name share one.
        self._pending: dict[str, concurrent.futures.Future[Iterable[str]]] = {}
        self._lock = threading.Lock()

    def cached(self, host: str) -> tuple[str, ...] | None:
        """The fresh cached answer for ``host``, or None."""
        entry = self._cache.get(host.lower())
        if entry is None or entry[0] <= self._clock():
            return None
        return entry[1]

    def resolve(self, host: str, port: int, timeout: float | None = None) -> tuple[str, ...]:
        """The addresses of ``host`` (possibly none); EgressBlocked when the lookup fails or
        takes longer than ``timeout`` seconds."""
        key = host.lower()
        found = self.cached(key)
        if found is not None:
            return found
        started = False
        with self._lock:
            future = self._pending.get(key)
            if future is None or future.done():
                future = _resolver_threads().submit(self.lookup, key, port)
                self._pending[key] = future
                started = True
        if started:  # outside the lock: a finished lookup runs its callback right here
            future.add_done_callback(lambda done: self._forget(key, done))
        try:
            answer = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise EgressBlocked(f"resolving {host!r} took longer than {timeout:g} s") from None
        except (OSError, UnicodeError, ValueError) as exc:
            raise EgressBlocked(f"resolving {host!r} failed: {exc}") from None
        found = tuple(dict.fromkeys(str(address) for address in answer))
        if found:
            with self._lock:
                self._cache[key] = (self._clock() + self.ttl, found)
        return found

    def _forget(self, key: str, done: concurrent.futures.Future[Iterable[str]]) -> None:
        with self._lock:
            if self._pending.get(key) is done:
                del self._pending[key]

    def clear(self) -> None:
        """Forget every cached answer."""
        with self._lock:
            self._cache.clear()
