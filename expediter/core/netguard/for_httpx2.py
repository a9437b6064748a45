"""The egress guard for httpx2 (over httpcore2): pinning backends, transports and clients.

Imported only by the packs that use httpx2 (the pins live in their distributions, never in core).
``client(policy, **options)`` and ``async_client(policy, **options)`` return a ``httpx2.Client`` /
``httpx2.AsyncClient`` with ``trust_env=False`` and ``follow_redirects=False`` that dials only
what ``policy`` allows (``verify``, ``cert``, ``limits`` and ``inner``, the backend that dials,
go to the transport; other options to the client). A pack that follows redirects does so itself,
checking each hop with ``EgressPolicy.redirect_problem``.
"""

from __future__ import annotations

import httpcore2
import httpx2

from expediter.core.netguard.backends import (
    guarded_clients,
    guarded_transports,
    pinning_backends,
)

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
client, async_client = guarded_clients(httpx2, httpcore2)
