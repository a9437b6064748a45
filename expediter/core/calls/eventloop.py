"""The host's own places to run tools: an event loop on a background thread, where every async
tool runs for synchronous callers (``run``, ``call``) and asynchronous ones (``arun``,
``acall``) alike, and the worker threads sync tools run in under ``arun``/``acall``. Neither is
the caller's: a tool that ignores its cancellation, blocks its loop or sleeps past its deadline
never holds the caller's event loop, nor its ``asyncio.run`` at shutdown (which waits for every
task left on its loop and every thread of its default executor)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, final

__all__ = ["TOOL_THREADS", "BackgroundLoop"]

#: How many sync tools one host runs at once under ``arun``/``acall`` (asyncio's default
#: executor's number); a call waiting for a thread has not started its deadline.
TOOL_THREADS = min(32, (os.cpu_count() or 1) + 4)

T = TypeVar("T")


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


_CLOSED = "the host was closed while the call was running"

#: How long a closing host's loop gives the tasks it cancelled to end.
_WIND_DOWN_SECONDS = 0.05


def _wind_down(loop: asyncio.AbstractEventLoop) -> None:
    """On the loop, as the host closes: cancel what still runs (tools past their deadlines),
    give it a moment to end, and stop."""
    running = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in running:
        task.cancel()
    if running:
        loop.call_later(_WIND_DOWN_SECONDS, loop.stop)
    else:
        loop.stop()


@final
class BackgroundLoop:
    """One long-lived loop per host: async tools keep their clients across calls."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._threads: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        #: What callers wait for on the loop: told the host closed, should it close first.
        self._waiting: set[concurrent.futures.Future[Any]] = set()
        self._closed = False

    @property
    def threads(self) -> ThreadPoolExecutor:
        """The worker threads sync tools run in under ``arun``/``acall`` (``TOOL_THREADS``: a
        turn's calls wait for a free one, outside their deadlines)."""
        threads = self._threads
        if threads is None:
            with self._lock:
                if self._threads is None:
                    self._threads = ThreadPoolExecutor(
                        TOOL_THREADS, thread_name_prefix="expediter-tool"
                    )
                threads = self._threads
        return threads

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="expediter-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                self._closed = False
            return self._loop

    def run(self, awaitable: Awaitable[T], timeout: float | None = None) -> T:
        """Run an awaitable on the loop and wait for its result (RuntimeError on the loop's
        own thread, where waiting would never end)."""
        loop = self._start()
        if threading.current_thread() is self._thread:
            close = getattr(awaitable, "close", None)
            if close is not None:
                close()  # never awaited: say so quietly rather than warn
            raise RuntimeError("cannot wait for the host's loop from a task running on it")
        future = self._submit(awaitable, loop)
        try:
            return future.result(timeout)
        except concurrent.futures.CancelledError:
            if self._closed:
                raise RuntimeError(_CLOSED) from None
            raise
        except BaseException:
            future.cancel()
            raise

    async def arun(self, awaitable: Awaitable[T]) -> T:
        """Await an awaitable on the loop from another loop. Cancelling the caller cancels it
        there; the caller's context variables are the ones it sees."""
        loop = self._start()
        if asyncio.get_running_loop() is loop:
            return await awaitable
        try:
            return await asyncio.wrap_future(self._submit(awaitable, loop))
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._closed and not (current is not None and current.cancelling()):
                raise RuntimeError(_CLOSED) from None  # not the caller's own cancellation
            raise

    def _submit(
        self, awaitable: Awaitable[T], loop: asyncio.AbstractEventLoop
    ) -> concurrent.futures.Future[T]:
        future = asyncio.run_coroutine_threadsafe(_await(awaitable), loop)
        self._waiting.add(future)
        future.add_done_callback(self._waiting.discard)
        return future

    def close(self) -> None:
        """Stop the loop and its thread; the worker threads end once their tools return
        (Python cannot stop a thread), and calls not started by then never start."""
        with self._lock:
            loop, thread, threads = self._loop, self._thread, self._threads
            self._loop = self._thread = self._threads = None
            self._closed = loop is not None  # a call the close cut short says so
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(_wind_down, loop)
        thread.join(timeout=5)
        if not thread.is_alive():
            # The loop will never finish what it still ran (a tool that ignored its
            # cancellation): whoever waits for it is told now rather than never.
            for future in list(self._waiting):
                if not future.done():
                    future.set_exception(RuntimeError(_CLOSED))
        loop.close()

    def __del__(self) -> None:
        loop: Any = getattr(self, "_loop", None)
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
