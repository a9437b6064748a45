"""Name resolution for outbound clients: once per connection, with a deadline, cached for a
fixed time (``getaddrinfo`` gives no TTL), and fair between the owners who ask.

The resolver returns addresses; it checks nothing (``EgressPolicy`` does, on every new
connection, cached or not). Tests inject ``lookup`` so no name ever reaches a real DNS server.

A lookup runs on a thread of its own, and ``getaddrinfo`` cannot be stopped: a name whose DNS
servers never answer holds its thread for as long as the system resolver keeps trying (about
40 s with glibc's defaults), whatever the caller's deadline. So each lookup counts against the
*owner* that asked (``EgressPolicy.owner``: the user whose tool instance connects, or a shared
instance itself) until its thread really ends. An owner runs at most ``OWNER_LOOKUP_THREADS``
lookups at once, the resolver at most ``LOOKUP_THREADS``; a lookup that cannot start yet waits
for a thread without holding one, the first thread freed going to the waiting owner that runs
the fewest. One owner's names that never answer thus fail that owner's calls (each at its own
deadline) and nobody else's.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Hashable, Iterable

from expediter.errors import EgressBlocked

__all__ = [
    "DEFAULT_TTL",
    "LOOKUP_THREADS",
    "OWNER_LOOKUPS_WAITING",
    "OWNER_LOOKUP_THREADS",
    "Lookup",
    "Resolver",
    "system_lookup",
]

logger = logging.getLogger("expediter.netguard")

#: Seconds a resolution is reused.
DEFAULT_TTL = 30.0
#: Lookups one owner may have running at once: a user whose instances name hosts that never
#: answer holds this many threads (for as long as the system resolver tries), no more.
OWNER_LOOKUP_THREADS = 4
#: Lookup threads one resolver (the process's shared one, ``DEFAULT_RESOLVER``) runs at once,
#: over every owner: 64 owners' worth of stuck lookups before a newcomer has to wait.
LOOKUP_THREADS = 256
#: Distinct names one owner may have waiting for a thread; a name past that is refused at once.
OWNER_LOOKUPS_WAITING = 64
#: ``lookup(host, port) -> addresses``: the addresses a name resolves to, as text.
Lookup = Callable[[str, int], Iterable[str]]

#: The lookup failures a refusal reports with their reason (anything else is a bug, raised).
_LOOKUP_ERRORS = (OSError, UnicodeError, ValueError)


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


class _Unwanted(Exception):
    """A waiting lookup taken out unstarted: its callers' deadlines have passed."""


class _Pending:
    """One name being resolved for one owner: waiting for a thread, then running on one."""

    __slots__ = ("future", "key", "owner", "port", "started", "wanted_until")

    def __init__(self, owner: Hashable, key: str, port: int, wanted_until: float) -> None:
        self.owner = owner
        self.key = key
        self.port = port
        #: ``time.monotonic()`` after which no caller waits for it (a waiting one is dropped).
        self.wanted_until = wanted_until
        self.started = False
        self.future: concurrent.futures.Future[tuple[str, ...]] = concurrent.futures.Future()


class Resolver:
    """Resolves names with a deadline, fairly between owners, and keeps each answer for
    ``ttl`` seconds; ``threads`` and ``threads_per_owner`` cap its lookup threads."""

    def __init__(
        self,
        lookup: Lookup | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
        threads: int = LOOKUP_THREADS,
        threads_per_owner: int = OWNER_LOOKUP_THREADS,
        waiting_per_owner: int = OWNER_LOOKUPS_WAITING,
    ) -> None:
        if not 1 <= threads_per_owner <= threads or waiting_per_owner < 0:
            raise ValueError(
                "a resolver needs 1 <= threads_per_owner <= threads and waiting_per_owner >= 0"
            )
        self.lookup: Lookup = lookup or system_lookup
        self.ttl = ttl
        self.max_threads = threads
        self.threads_per_owner = threads_per_owner
        self.waiting_per_owner = waiting_per_owner
        self._clock = clock
        self._cache: dict[str, tuple[float, tuple[str, ...]]] = {}
        #: Lookups under way (waiting or running), by owner and name: an owner's callers
        #: asking for one name share one.
        self._pending: dict[tuple[Hashable, str], _Pending] = {}
        #: Threads running lookups, in all and by owner (an owner with none has no entry).
        self._threads = 0
        self._running: dict[Hashable, int] = {}
        #: Lookups waiting for a thread, by owner, in the order the owners began waiting.
        self._waiting: dict[Hashable, collections.deque[_Pending]] = {}
        self._lock = threading.Lock()

    # -- the answers -----------------------------------------------------------------------

    def cached(self, host: str) -> tuple[str, ...] | None:
        """The fresh cached answer for ``host``, or None."""
        entry = self._cache.get(host.lower())
        if entry is None or entry[0] <= self._clock():
            return None
        return entry[1]

    def resolve(
        self, host: str, port: int, timeout: float | None = None, *, owner: Hashable = None
    ) -> tuple[str, ...]:
        """The addresses of ``host`` (possibly none); EgressBlocked when the lookup fails or
        takes longer than ``timeout`` seconds. The lookup counts against ``owner`` until its
        thread ends."""
        key = host.lower()
        found = self.cached(key)
        if found is not None:
            return found
        pending = self._join(host, key, port, owner, timeout)
        try:
            pending.future.exception(timeout=timeout)  # waits; the outcome raises it
        except concurrent.futures.TimeoutError:
            raise self._late(host, pending, timeout) from None
        return self._outcome(host, pending, timeout)

    async def aresolve(
        self, host: str, port: int, timeout: float | None = None, *, owner: Hashable = None
    ) -> tuple[str, ...]:
        """``resolve`` for a coroutine: on asyncio, the caller waits for the lookup's thread
        without holding a worker thread of its own (the host's loop and its 40 AnyIO workers
        are shared by every user); on another event loop, it waits on a worker thread."""
        key = host.lower()
        found = self.cached(key)
        if found is not None:
            return found
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # trio, under AnyIO
            import anyio.to_thread

            call = functools.partial(self.resolve, host, port, timeout, owner=owner)
            return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        pending = self._join(host, key, port, owner, timeout)
        if not pending.future.done():
            woken: asyncio.Future[None] = loop.create_future()

            def settle() -> None:
                if not woken.done():
                    woken.set_result(None)

            def wake(_: object) -> None:
                try:
                    loop.call_soon_threadsafe(settle)
                except RuntimeError:
                    pass  # the loop has closed: nobody awaits this lookup any more

            pending.future.add_done_callback(wake)
            try:
                await asyncio.wait_for(woken, timeout)
            except TimeoutError:
                raise self._late(host, pending, timeout) from None
        return self._outcome(host, pending, timeout)

    def clear(self) -> None:
        """Forget every cached answer."""
        with self._lock:
            self._cache.clear()

    # -- what runs ---------------------------------------------------------------------------

    @property
    def threads(self) -> int:
        """Lookup threads running now."""
        return self._threads

    def running(self, owner: Hashable) -> int:
        """Lookups of ``owner``'s running now (each on its thread, deadline passed or not)."""
        return self._running.get(owner, 0)

    def waiting(self, owner: Hashable) -> int:
        """Names of ``owner``'s waiting for a thread now."""
        return len(self._waiting.get(owner, ()))

    def _join(
        self, host: str, key: str, port: int, owner: Hashable, timeout: float | None
    ) -> _Pending:
        """The owner's lookup of ``key``: the one under way, or a new one, started when the
        owner and the resolver have a thread for it, else waiting for one."""
        now = time.monotonic()
        until = math.inf if timeout is None else now + max(0.0, timeout)
        dropped: list[_Pending] = []
        with self._lock:
            pending = self._pending.get((owner, key))
            if pending is not None:
                pending.wanted_until = max(pending.wanted_until, until)
                return pending
            pending = _Pending(owner, key, port, until)
            if (
                self._running.get(owner, 0) < self.threads_per_owner
                and self._threads < self.max_threads
            ):
                self._pending[(owner, key)] = pending
                self._start(pending)
                return pending
            queue = self._waiting.setdefault(owner, collections.deque())
            dropped = self._drop_unwanted(queue, now)
            if len(queue) < self.waiting_per_owner:
                self._pending[(owner, key)] = pending
                queue.append(pending)
            else:
                if not queue:
                    del self._waiting[owner]
                pending.future.set_exception(
                    EgressBlocked(
                        f"resolving {host!r}: this client's owner already has "
                        f"{self.running(owner)} lookups that have not answered and "
                        f"{len(queue)} names waiting for them (a lookup keeps its slot until "
                        "the system resolver gives up)"
                    )
                )
        self._settle_dropped(dropped)
        return pending

    def _start(self, pending: _Pending) -> None:
        """Run ``pending`` on a thread of its own (under the lock; counted until it ends)."""
        pending.started = True
        self._threads += 1
        self._running[pending.owner] = self._running.get(pending.owner, 0) + 1
        thread = threading.Thread(
            target=self._run, args=(pending,), name="expediter-resolve", daemon=True
        )
        try:
            thread.start()
        except RuntimeError as exc:  # the system gives no more threads
            self._forget(pending)
            pending.future.set_exception(
                EgressBlocked(f"resolving {pending.key!r}: no thread to resolve it on: {exc}")
            )

    def _run(self, pending: _Pending) -> None:
        """The lookup thread: resolve, cache an answer, give the thread's slot up (starting
        the next waiting lookup), then tell the callers: whoever sees the answer sees the
        slot free."""
        error: BaseException | None = None
        found: tuple[str, ...] = ()
        try:
            answer = self.lookup(pending.key, pending.port)
            found = tuple(dict.fromkeys(str(address) for address in answer))
        except BaseException as exc:  # handed to the callers, who raise it
            error = exc
            if not isinstance(exc, _LOOKUP_ERRORS):
                logger.error("resolving %r raised %r", pending.key, exc, exc_info=exc)
        with self._lock:
            if error is None and found:
                self._cache[pending.key] = (self._clock() + self.ttl, found)
            self._forget(pending)
            dropped = self._start_waiting()
        self._settle_dropped(dropped)
        if error is None:
            pending.future.set_result(found)
        else:
            pending.future.set_exception(error)

    def _forget(self, pending: _Pending) -> None:
        """Give up a started lookup's thread and entry (under the lock)."""
        if self._pending.get((pending.owner, pending.key)) is pending:
            del self._pending[(pending.owner, pending.key)]
        self._threads -= 1
        left = self._running[pending.owner] - 1
        if left:
            self._running[pending.owner] = left
        else:
            del self._running[pending.owner]

    def _start_waiting(self) -> list[_Pending]:
        """Start waiting lookups while threads are free (under the lock), each time for the
        owner under its cap that runs the fewest (ties: the one waiting longest); returns
        the waiting ones nobody wants any more, taken out unstarted."""
        now = time.monotonic()
        dropped: list[_Pending] = []
        for owner, queue in list(self._waiting.items()):
            dropped.extend(self._drop_unwanted(queue, now))
            if not queue:
                del self._waiting[owner]
        while self._threads < self.max_threads and self._waiting:
            chosen: Hashable = None
            fewest = self.threads_per_owner
            for owner in self._waiting:
                running = self._running.get(owner, 0)
                if running < fewest:
                    chosen, fewest = owner, running
            if fewest == self.threads_per_owner:
                break  # every owner still waiting runs its share already
            queue = self._waiting.pop(chosen)
            pending = queue.popleft()
            if queue:
                self._waiting[chosen] = queue  # to the back: it has had its turn
            self._start(pending)
        return dropped

    def _drop_unwanted(self, queue: collections.deque[_Pending], now: float) -> list[_Pending]:
        """Take the waiting lookups past every caller's deadline out of ``queue`` (under the
        lock): they are never started."""
        unwanted = [pending for pending in queue if pending.wanted_until <= now]
        for pending in unwanted:
            queue.remove(pending)
            if self._pending.get((pending.owner, pending.key)) is pending:
                del self._pending[(pending.owner, pending.key)]
        return unwanted

    @staticmethod
    def _settle_dropped(dropped: list[_Pending]) -> None:
        """Settle lookups dropped unstarted (outside the lock: settling runs callbacks)."""
        for pending in dropped:
            pending.future.set_exception(_Unwanted(pending.key))

    # -- what the caller is told -------------------------------------------------------------

    def _late(self, host: str, pending: _Pending, timeout: float | None) -> EgressBlocked:
        """The refusal of a caller whose deadline passed before ``pending`` answered."""
        reason = f"resolving {host!r} took longer than {timeout:g} s"
        if not pending.started:
            running = self.running(pending.owner)
            if running >= self.threads_per_owner:
                reason += (
                    f": this client's owner already has {running} lookups that have not "
                    "answered (a lookup keeps its slot until the system resolver gives up)"
                )
            else:
                reason += f": all {self.max_threads} lookup threads were busy"
        return EgressBlocked(reason)

    def _outcome(self, host: str, pending: _Pending, timeout: float | None) -> tuple[str, ...]:
        """The answer of a finished lookup, or its refusal."""
        try:
            return pending.future.result(timeout=0)
        except _Unwanted:
            # Dropped as its deadline came, a moment before its caller saw it come.
            raise self._late(host, pending, timeout) from None
        except EgressBlocked:
            raise
        except _LOOKUP_ERRORS as exc:
            raise EgressBlocked(f"resolving {host!r} failed: {exc}") from None
