"""The egress guard every outbound client of every pack uses (docs/operations.md).

``EgressPolicy`` decides which URLs a client may request and which addresses it may dial
(http/https only; every resolved address checked against ``DENY_TABLE`` after unwrapping IPv4
from IPv6, then ``is_global``; operator-allowed ranges override both for those ranges only).
Name lookups count against the policy's ``owner`` (``EgressPolicy.owner_of(context)``) until
their threads end, so one owner's names that never answer hold up no one else's lookups.
The resolver and the check know nothing of HTTP; ``expediter.core.netguard.for_httpx`` and
``...for_httpx2`` hold the pinning network backends that dial the checked address while the
Host header, TLS SNI and certificate checks keep the name. A refusal is ``EgressBlocked``: its
text is the generic message the model sees, its ``reason`` is for the ledger and the logs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from expediter.core.netguard.addresses import (
        DENY_TABLE,
        address_problem,
        address_text,
        embedded_ipv4,
        literal_address,
        parse_networks,
    )
    from expediter.core.netguard.deadlines import within
    from expediter.core.netguard.policy import (
        DEFAULT_RESOLVER,
        SCHEMES,
        EgressPolicy,
        Target,
        same_origin,
    )
    from expediter.core.netguard.resolver import DEFAULT_TTL, Resolver, system_lookup
    from expediter.errors import EgressBlocked

# Exported lazily (PEP 562): the host's configuration reads ``parse_networks`` without paying
# for the policy and the resolver.
_HOMES = {
    "DENY_TABLE": "expediter.core.netguard.addresses",
    "address_problem": "expediter.core.netguard.addresses",
    "address_text": "expediter.core.netguard.addresses",
    "embedded_ipv4": "expediter.core.netguard.addresses",
    "literal_address": "expediter.core.netguard.addresses",
    "parse_networks": "expediter.core.netguard.addresses",
    "DEFAULT_RESOLVER": "expediter.core.netguard.policy",
    "SCHEMES": "expediter.core.netguard.policy",
    "EgressPolicy": "expediter.core.netguard.policy",
    "Target": "expediter.core.netguard.policy",
    "same_origin": "expediter.core.netguard.policy",
    "DEFAULT_TTL": "expediter.core.netguard.resolver",
    "Resolver": "expediter.core.netguard.resolver",
    "system_lookup": "expediter.core.netguard.resolver",
    "within": "expediter.core.netguard.deadlines",
    "EgressBlocked": "expediter.errors",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'expediter.core.netguard' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_RESOLVER",
    "DEFAULT_TTL",
    "DENY_TABLE",
    "SCHEMES",
    "EgressBlocked",
    "EgressPolicy",
    "Resolver",
    "Target",
    "address_problem",
    "address_text",
    "embedded_ipv4",
    "literal_address",
    "parse_networks",
    "same_origin",
    "system_lookup",
    "within",
]
