"""A total time limit for the guarded clients' network operations.

An HTTP client's timeouts apply to each operation: a server that sends its body a byte at a
time, each within the read timeout, holds a request for as long as it likes. Inside
``within(seconds)``, every connect, read and write a pinning backend does in this context
(thread or task) is given at most the time left, so the whole exchange ends by then with the
client's own timeout error.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["clamp", "within"]

_DEADLINE: ContextVar[float | None] = ContextVar("expediter_egress_deadline", default=None)
#: The least time an operation is given: a timeout of 0 would make a socket non-blocking
#: (an error that is not a timeout) rather than time out.
_LEAST = 0.001


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Network operations of the guarded clients in this context end within ``seconds``."""
    at = time.monotonic() + max(0.0, seconds)
    outer = _DEADLINE.get()
    token = _DEADLINE.set(at if outer is None else min(at, outer))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def clamp(timeout: float | None) -> float | None:
    """``timeout`` cut to the time left in this context (unchanged outside ``within``)."""
    at = _DEADLINE.get()
    if at is None:
        return timeout
    left = max(_LEAST, at - time.monotonic())
    return left if timeout is None else min(timeout, left)
