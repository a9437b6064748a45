"""Which addresses an outbound client may dial: an explicit deny table, IPv4 unwrapped from
IPv6, then ``is_global``; operator-allowed ranges override both for those ranges only.

The table is explicit because ``ipaddress``'s own flags differ between Python versions (3.11
calls 192.0.0.192, 192.88.99.1 and 6to4 or NAT64 forms of loopback global). Nothing here knows
about HTTP.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Final

__all__ = [
    "DENY_TABLE",
    "IPAddress",
    "IPNetwork",
    "address_problem",
    "address_text",
    "embedded_ipv4",
    "literal_address",
    "parse_networks",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _table(*rows: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(network), label) for network, label in rows)


#: Every range no outbound client dials unless an operator allows it, with why.
DENY_TABLE: Final = _table(
    ("0.0.0.0/8", "this network"),
    ("10.0.0.0/8", "private network"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("172.16.0.0/12", "private network"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation (TEST-NET-1)"),
    ("192.88.99.0/24", "6to4 relay anycast"),
    ("192.168.0.0/16", "private network"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation (TEST-NET-2)"),
    ("203.0.113.0/24", "documentation (TEST-NET-3)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("255.255.255.255/32", "broadcast"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::ffff:0:0/96", "IPv4-mapped"),
    ("::ffff:0:0:0/96", "IPv4-translated"),
    ("100::/64", "discard-only"),
    ("2001::/23", "IETF protocol assignments (Teredo, ORCHID, ...)"),
    ("2001:db8::/32", "documentation"),
    # Not in every Python's idea of "not global" (3.11 and 3.12 call them global, 3.13 does
    # not): listed, so the verdict is the same on every version. 6to4 is deprecated (RFC 7526)
    # and local-use NAT64 (RFC 8215) is never public; an operator may allow either.
    ("2002::/16", "6to4 (deprecated)"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "SRv6 segment identifiers"),
    ("fc00::/7", "unique local (private network)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local (deprecated)"),
    ("ff00::/8", "multicast"),
)

_COMPATIBLE: Final = ipaddress.ip_network("::/96")
_NAT64: Final = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries: mapped (``::ffff:a.b.c.d``), compatible
    (``::a.b.c.d``), 6to4 (``2002:AABB:CCDD::``), Teredo (server and client) and NAT64
    (``64:ff9b::/96`` and, with the address in its last 32 bits, ``64:ff9b:1::/48``)."""
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address in _COMPATIBLE and int(address) > 1:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if any(address in network for network in _NAT64):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return tuple(found)


def parse_networks(items: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDR ranges as networks (host bits allowed: ``10.1.2.3/8`` is ``10.0.0.0/8``);
    ValueError naming the one that is not a range."""
    networks: list[IPNetwork] = []
    for item in items:
        text = str(item).strip()
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(
                f"{text[:80]!r} is not an IP range: give CIDR notation such as 10.0.0.0/8, "
                "192.168.1.20/32 or fd00::/8"
            ) from None
    return tuple(networks)


def _compressed(address: ipaddress.IPv6Address) -> str:
    """RFC 5952's hexadecimal form: the longest run of two or more zero groups (the first of
    equals) becomes ``::``."""
    value = int(address)
    groups = [format(value >> shift & 0xFFFF, "x") for shift in range(112, -1, -16)]
    start, length, index = -1, 1, 0
    while index < 8:
        end = index
        while end < 8 and groups[end] == "0":
            end += 1
        if end - index > length:
            start, length = index, end - index
        index = max(end, index + 1)
    if start < 0:
        return ":".join(groups)
    return f"{':'.join(groups[:start])}::{':'.join(groups[start + length :])}"


def address_text(value: IPAddress | IPNetwork) -> str:
    """An address or range as reasons name it, the same on every Python: IPv6 in hexadecimal
    groups, IPv4-mapped ones included (3.13's ``str`` writes those as ``::ffff:127.0.0.1``,
    3.11's as ``::ffff:7f00:1``)."""
    if isinstance(value, ipaddress.IPv6Address):
        scope = f"%{value.scope_id}" if value.scope_id else ""
        return _compressed(value) + scope
    if isinstance(value, ipaddress.IPv6Network):
        return f"{_compressed(value.network_address)}/{value.prefixlen}"
    return str(value)


def _denied(address: IPAddress) -> str | None:
    for network, label in DENY_TABLE:
        if address.version == network.version and address in network:
            return f"{address_text(address)} is in {address_text(network)} ({label})"
    if not address.is_global:
        return f"{address_text(address)} is not a global address"
    return None


def address_problem(address: IPAddress, allowed: tuple[IPNetwork, ...] = ()) -> str | None:
    """Why ``address`` may not be dialed, or None when it may.

    An address in an allowed range may be dialed (for an IPv4-mapped address, its IPv4 form
    counts). Otherwise the address and every IPv4 address it embeds must be outside the deny
    table and global.
    """
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    for network in allowed:
        if address.version == network.version and address in network:
            return None
        if mapped is not None and network.version == 4 and mapped in network:
            return None
    problem = _denied(address)
    if isinstance(address, ipaddress.IPv6Address):
        for inner in embedded_ipv4(address):
            hidden = _denied(inner)
            if hidden is not None:
                # Both reasons: the wrapper's range, and what it wraps.
                shown = address_text(address)
                wrapper = problem.replace(f"{shown} ", "", 1) + " and " if problem else ""
                return f"{shown} {wrapper}embeds {inner}: {hidden}"
    return problem


def literal_address(host: str) -> IPAddress | None:
    """The address a host names without DNS, or None for a name: IPv4 in any form the C
    library accepts (``127.1``, ``2130706433``, ``0x7f.1``, ``0177.0.0.1``), IPv6 with or
    without brackets or a zone (``[fe80::1%eth0]``)."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            return None
    if not text or not all(char.isalnum() or char == "." for char in text):
        return None
    if not (text[0].isdigit() and text.rstrip(".").replace(".", "").isalnum()):
        return None
    try:
        # inet_aton reads the legacy forms (decimal, hex, octal, 1-3 parts), as resolvers do.
        return ipaddress.IPv4Address(socket.inet_aton(text.rstrip(".") or text))
    except (OSError, ValueError):
        return None
