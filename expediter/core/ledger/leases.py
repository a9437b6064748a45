"""Leases: the calls running in this process keep their rows' leases fresh, so the sweeper
never takes a slow call for a dead one. One keeper thread per process (a forked child starts
its own), renewing every attempt that has run for a third of the lease."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import final

from expediter.core.ledger.attempts import Attempt
from expediter.core.ledger.columns import forks

__all__ = ["LeaseKeeper"]

logger = logging.getLogger(__name__)


@final
class LeaseKeeper:
    """Holds the running attempts and renews their leases until they are released."""

    def __init__(self, lease_seconds: float, renew: Callable[[Attempt], bool]) -> None:
        self.lease_seconds = lease_seconds
        #: Renews one attempt's lease; False when its row is no longer this attempt's.
        self._renew = renew
        #: The attempts running in this process, by attempt id.
        self.running: dict[str, Attempt] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: ``forks()`` when the thread started (-1: not started).
        self._fork = -1
        self._closed = threading.Event()

    def hold(self, attempt: Attempt) -> None:
        """Keep ``attempt``'s lease fresh until it is released."""
        self.running[attempt.attempt_id] = attempt
        # The thread runs until close(); only a forked child needs its own (an int compare
        # per call instead of Thread.is_alive(): the per-call budgets).
        if self._fork != forks():
            with self._lock:
                if self._fork != forks():
                    self._thread = threading.Thread(
                        target=self._keep, name="expediter-lease", daemon=True
                    )
                    self._thread.start()
                    self._fork = forks()

    def release(self, attempt: Attempt) -> None:
        """Stop renewing ``attempt``'s lease (it finished)."""
        if self.running.get(attempt.attempt_id) is attempt:
            del self.running[attempt.attempt_id]

    @property
    def thread(self) -> threading.Thread | None:
        """The thread renewing leases (None until the first attempt is held)."""
        return self._thread

    def get(self, attempt_id: str) -> Attempt | None:
        """The running attempt of that id, or None."""
        return self.running.get(attempt_id)

    def close(self) -> None:
        """Stop the thread."""
        self._closed.set()

    def _keep(self) -> None:
        interval = max(0.05, self.lease_seconds / 3)
        while not self._closed.wait(interval):
            for attempt in list(self.running.values()):
                if time.monotonic() - attempt.started < interval:
                    continue
                try:
                    renewed = self._renew(attempt)
                    if not renewed and attempt.attempt_id in self.running:
                        logger.warning("could not renew the lease of ledger row %s", attempt.key)
                except Exception as exc:
                    logger.warning("renewing the lease of %s failed: %s", attempt.key, exc)
