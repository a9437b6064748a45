"""Deadlines: a call's deadline starts when its tool starts, and a call reported failed never
finishes its side effect unrecorded.

A sync tool in a worker thread (``arun``) is bounded from the moment a thread picks it up; a
call cancelled before that never starts. An async tool is bounded from the moment it starts on
its loop, and cancelled at the deadline without waiting for it (a tool may ignore
cancellation). Either way the call is reported failed at once, and whatever the tool still
returns or raises is handed to ``on_late`` once that failure is recorded (``settle``).

A tool left running is held until it ends: an event loop holds its tasks only weakly, so a task
whose tool ignored its cancellation and waits on something nothing else holds would otherwise
be collected mid-flight ("Task was destroyed but it is pending!"), its side effect cut short and
its late result never recorded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, final

import attrs

from expediter.core.calls.results import ToolExit
from expediter.core.calls.steps import Step

__all__ = ["Deadlines"]

#: Guards the hand-over of a result that arrives after its call was reported failed.
_LATE = threading.Lock()


@final
class Deadlines:
    """Runs tools within the call timeout, and hands late results to ``on_late``."""

    def __init__(
        self,
        timeout: float | None,
        on_late: Callable[[Step, Any, BaseException | None], None],
    ) -> None:
        #: Each call must finish within this many seconds (None: no deadline).
        self.timeout = timeout
        self._on_late = on_late
        #: The work of abandoned calls still running, held until it ends (see the module's
        #: docstring); each removes itself when done, on its own loop.
        self._adrift: set[asyncio.Future[Any] | concurrent.futures.Future[Any]] = set()

    async def in_thread(
        self, step: Step, invoke: Callable[[Step], Any], threads: Executor | None = None
    ) -> Any:
        """Run ``invoke(step)`` (a sync tool) on a worker thread of ``threads`` (the host's;
        None: the loop's default executor), bounded from the moment the thread starts it."""
        loop = asyncio.get_running_loop()
        started = loop.create_future()
        timeout = self.timeout

        def run() -> Any:
            with _LATE:
                if step.unsettled:  # cancelled while it waited for a thread
                    return None
                step.running = True
            if timeout is not None:  # the deadline counts from now, when the tool starts
                step.deadline = time.time() + timeout
                if step.context is not None:
                    step.context = attrs.evolve(step.context, deadline=step.deadline)
            loop.call_soon_threadsafe(_settle, started)
            try:
                return invoke(step)
            except (SystemExit, KeyboardInterrupt) as exc:
                raise ToolExit(exc) from None

        late: asyncio.Future[Any] | concurrent.futures.Future[Any]
        if threads is None:
            work = late = loop.run_in_executor(None, run)
        else:
            # What the thread still returns is watched on the thread's own future: the
            # caller's loop may be closed by then (its asyncio.run ended at the deadline).
            # The caller's context variables, as an async tool sees them.
            late = threads.submit(contextvars.copy_context().run, run)
            work = asyncio.wrap_future(late)
        try:
            await asyncio.wait((started, work), return_when=asyncio.FIRST_COMPLETED)
            done, _ = await asyncio.wait((work,), timeout=timeout)
        except BaseException:
            self.abandon(step, late)
            raise
        if work not in done:
            self.abandon(step, late)
            raise TimeoutError(
                f"the tool did not finish within {timeout} s; it cannot be stopped, "
                "so a result it still returns is recorded as late"
            )
        return work.result()

    async def bounded(self, step: Step, awaitable: Any) -> Any:
        """Await a tool's awaitable within the call's deadline, counted from now (when it
        starts on this loop). ``SystemExit``/``KeyboardInterrupt`` from the tool never reach
        the loop (they would stop it): they come back as ``ToolExit``."""
        step.started = time.perf_counter()
        step.running = True
        timeout = self.timeout
        if timeout is not None:
            step.deadline = time.time() + timeout
        task = asyncio.ensure_future(_guarded(awaitable))
        try:
            done, _ = await asyncio.wait((task,), timeout=timeout)
        except BaseException:
            task.cancel()
            self.abandon(step, task)
            raise
        finally:
            step.ended = time.perf_counter()
        if task not in done:
            task.cancel()
            self.abandon(step, task)
            raise TimeoutError(f"the tool did not finish within {timeout} s and was cancelled")
        return task.result()

    def abandon(
        self, step: Step, work: asyncio.Future[Any] | concurrent.futures.Future[Any] | None = None
    ) -> None:
        """The call is reported failed while its tool may still run (or, in a thread's queue,
        has not started: then it never will). What ``work`` still returns or raises goes to
        ``on_late`` once the failure is recorded."""
        with _LATE:
            step.unsettled = True
        if work is not None:
            if not work.done():
                self._adrift.add(work)
                work.add_done_callback(self._adrift.discard)
            work.add_done_callback(functools.partial(self._late, step))

    def settle(self, step: Step) -> None:
        """The failure of an abandoned call is recorded: a late result may follow it now
        (one that already came is handed on here)."""
        with _LATE:
            step.settled = True
            late, step.late = step.late, None
        if late is not None:
            self._on_late(step, *late)

    def _late(self, step: Step, work: asyncio.Future[Any] | concurrent.futures.Future[Any]) -> None:
        if work.cancelled() or not step.running:
            return  # it stopped when asked, or never started: nothing ran on
        exc = work.exception()
        if isinstance(exc, asyncio.CancelledError):
            return
        late = (None if exc is not None else work.result(), exc)
        with _LATE:
            if not step.settled:
                step.late = late  # settle() hands it on once the failure is recorded
                return
        self._on_late(step, *late)

    def overrun(self, step: Step) -> TimeoutError | None:
        """A tool that finished after its deadline (a sync tool could only be asked to stop;
        an async one may have blocked its loop)."""
        timeout, started = self.timeout, step.started
        if timeout is None or started is None:
            return None
        ended = step.ended
        took = (time.perf_counter() if ended is None else ended) - started
        if took < timeout * 0.5:
            # Far from its deadline (which counted from when the call was prepared, just
            # before): no more clocks to read (the turn budget).
            return None
        now = time.perf_counter()
        if ended is None:
            ended = now
        deadline = step.deadline
        if took <= timeout and (deadline is None or time.time() - (now - ended) <= deadline):
            return None
        return TimeoutError(
            f"the tool overran its deadline of {timeout} s (it took {took:.1f} s); "
            "its result was recorded but not used"
        )

    def explain(self, exc: BaseException) -> BaseException:
        """A bare ``TimeoutError`` from a tool, given the deadline it missed."""
        if isinstance(exc, TimeoutError) and not str(exc):
            return TimeoutError(
                f"the tool did not finish within {self.timeout} s and was cancelled"
            )
        return exc


async def _guarded(awaitable: Any) -> Any:
    """Await a tool's awaitable; its ``SystemExit``/``KeyboardInterrupt`` would stop the event
    loop it runs on, so they come back as ``ToolExit``."""
    try:
        return await awaitable
    except (SystemExit, KeyboardInterrupt) as exc:
        raise ToolExit(exc) from None


def _settle(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(None)
