"""The egress guard for httpx2 (over httpcore2): pinning backends, transports and clients.

Imported only by the packs that use httpx2 (the pins live in their distributions, never in core).
Every client here has ``trust_env=False`` and ``follow_redirects=False``; a pack that follows
redirects does so itself, checking each hop with ``EgressPolicy.redirect_problem``.
"""

from __future__ import annotations

from typing import Any

import httpcore2
import httpx2

from expediter.core.netguard.backends import (
    guarded_transports,
    pinning_backends,
)
from expediter.core.netguard.backends import (
    refuse_routes as _refuse_routes,
)
from expediter.core.netguard.policy import EgressPolicy

__all__ = [
    "AsyncGuardedTransport",
    "AsyncPinningBackend",
    "GuardedTransport",
    "PinningBackend",
    "async_client",
    "client",
]

PinningBackend, AsyncPinningBackend = pinning_backends(httpcore2)
GuardedTransport, AsyncGuardedTransport = guarded_transports(httpx2, httpcore2)


def client(
    policy: EgressPolicy,
    *,
    verify: Any = True,
    cert: Any = None,
    limits: httpx2.Limits | None = None,
    inner: Any = None,
    **options: Any,
) -> httpx2.Client:
    """A ``httpx2.Client`` that dials only what ``policy`` allows (``options`` go to the
    client: timeout, headers, ...)."""
    _refuse_routes(options)
    transport = GuardedTransport(policy, verify=verify, cert=cert, limits=limits, inner=inner)
    return httpx2.Client(transport=transport, trust_env=False, follow_redirects=False, **options)


def async_client(
    policy: EgressPolicy,
    *,
    verify: Any = True,
    cert: Any = None,
    limits: httpx2.Limits | None = None,
    inner: Any = None,
    **options: Any,
) -> httpx2.AsyncClient:
    """A ``httpx2.AsyncClient`` that dials only what ``policy`` allows."""
    transport = AsyncGuardedTransport(policy, verify=verify, cert=cert, limits=limits, inner=inner)
    return httpx2.AsyncClient(
        transport=transport, trust_env=False, follow_redirects=False, **options
    )
