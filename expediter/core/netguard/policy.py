"""The egress policy one outbound client follows: which URLs it may request and which
addresses it may dial. Independent of any HTTP library; the pinning network backends
(``netguard.for_httpx``, ``netguard.for_httpx2``) call ``addresses`` for every new connection.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import urllib.parse
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING

import attrs

from expediter.core.netguard.addresses import (
    IPAddress,
    IPNetwork,
    address_problem,
    address_text,
    literal_address,
    parse_networks,
)
from expediter.core.netguard.resolver import Resolver
from expediter.errors import EgressBlocked

if TYPE_CHECKING:
    from expediter.hookspecs.tool import CallContext

__all__ = ["DEFAULT_RESOLVER", "SCHEMES", "EgressPolicy", "Target", "same_origin"]

logger = logging.getLogger("expediter.netguard")

#: The schemes an outbound client may use.
SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}

#: The resolver policies share unless given their own (one cache per process).
DEFAULT_RESOLVER = Resolver()


#: Control characters (C0, DEL, C1) and whitespace of any script (``\s`` is Unicode's).
_UNPRINTABLE = re.compile(r"[\x00-\x20\x7f-\xa0\s]")
#: A URL's scheme and authority, up to where its path, query or fragment starts.
_ORIGIN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")


def _shown(url: object) -> str:
    """A URL as a refusal's reason names it: its scheme and authority only (a path or query
    may carry a credential, and reasons go to logs and the ledger)."""
    if not isinstance(url, str):
        return f"a {type(url).__name__} for a URL"
    found = _ORIGIN.match(url)
    if found is None:
        return "the URL (no scheme://host at its start)"
    scheme, _, authority = found.group().partition("://")
    # Without user information: a password is no part of a reason either.
    return f"the URL {scheme[:20] + '://' + authority.rpartition('@')[2][:100]!r}..."


@attrs.frozen
class Target:
    """Where a URL points: scheme, host (a name or an address, without brackets) and port."""

    scheme: str
    host: str
    port: int

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


def _networks(value: Iterable[str | IPNetwork]) -> tuple[IPNetwork, ...]:
    items = list(value)
    parsed = [item for item in items if not isinstance(item, str)]
    texts = [item for item in items if isinstance(item, str)]
    return (*parse_networks(texts), *parsed)


@attrs.frozen
class EgressPolicy:
    """What one outbound client may reach.

    ``allow_networks`` are the ranges an operator allows on top of the default (public
    addresses only); an allowed range overrides the deny table and ``is_global`` for that range
    only. ``EgressBlocked`` carries the reason; its text is the generic message for the model.
    """

    allow_networks: tuple[IPNetwork, ...] = attrs.field(default=(), converter=_networks)
    #: Whether URLs may carry ``user:password@``.
    allow_userinfo: bool = False
    #: Seconds a name may take to resolve.
    resolve_timeout: float = 5.0
    resolver: Resolver = attrs.field(default=DEFAULT_RESOLVER, eq=False, repr=False)
    #: Whose lookups this client's count against (``owner_of(context)``): the resolver runs a
    #: few lookups per owner at once, each until its thread ends, so one owner's names that
    #: never answer leave the others resolving. None: the client is its own owner.
    owner: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    #: The owner of a client given none: itself.
    _anonymous: object = attrs.field(factory=object, init=False, eq=False, repr=False)
    #: Verdicts on addresses already checked (an address's verdict never changes).
    _verdicts: dict[IPAddress, str | None] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )
    #: ``check_url``'s verdicts by scheme and authority (a Target, or the refusal).
    _origins: dict[str, Target | EgressBlocked] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )

    @staticmethod
    def owner_of(context: CallContext) -> str | None:
        """The owner a call's connections resolve names for: the user who owns the call's tool
        instance (whoever invokes it), or for a shared instance (no owner) the instance
        itself; None when the context names neither."""
        if context.owner_id is not None:
            return f"user:{context.owner_id}"
        if context.instance_id is not None:
            return f"instance:{context.instance_id}"
        return None

    @property
    def _lookup_owner(self) -> Hashable:
        return self._anonymous if self.owner is None else self.owner

    def with_networks(self, networks: Iterable[str | IPNetwork]) -> EgressPolicy:
        """This policy with more allowed ranges."""
        more = _networks(networks)
        if not more:
            return self
        return attrs.evolve(self, allow_networks=(*self.allow_networks, *more))

    def check_url(self, url: str) -> Target:
        """The URL's target, or EgressBlocked: http/https only, no userinfo unless allowed, a
        host present, and a host that is an address must be one the policy allows."""
        if not isinstance(url, str) or _UNPRINTABLE.search(url) or "\\" in url:
            raise self._blocked(f"{_shown(url)} has whitespace, control characters or a backslash")
        # The rest depends on the scheme and authority alone: one verdict per origin.
        prefix = _ORIGIN.match(url)
        if prefix is None:
            return self._target(url)
        key = prefix.group()
        found = self._origins.get(key)
        if found is None:
            try:
                found = self._target(url)
            except EgressBlocked as exc:
                self._remember(key, exc)
                raise
            self._remember(key, found)
        elif isinstance(found, EgressBlocked):
            raise self._blocked(found.reason, found.address)
        return found

    def _remember(self, key: str, verdict: Target | EgressBlocked) -> None:
        if len(self._origins) < 4096:
            self._origins[key] = verdict

    def _target(self, url: str) -> Target:
        try:
            parts = urllib.parse.urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise self._blocked(f"{_shown(url)} cannot be parsed: {exc}") from None
        scheme = parts.scheme.lower()
        if scheme not in SCHEMES:
            raise self._blocked(f"scheme {scheme or '(none)'!r} is not http or https")
        if (parts.username is not None or parts.password is not None) and not self.allow_userinfo:
            raise self._blocked("the URL carries user information (user:password@)")
        host = parts.hostname or ""
        if not host:
            raise self._blocked(f"{_shown(url)} names no host")
        target = Target(scheme, host, port or _DEFAULT_PORTS[scheme])
        address = literal_address(host)
        if address is not None:
            self.check_address(address, host)
        return target

    def check_address(self, address: IPAddress, host: str | None = None) -> None:
        """EgressBlocked unless ``address`` may be dialed."""
        verdicts = self._verdicts
        if address in verdicts:
            problem = verdicts[address]
        else:
            problem = address_problem(address, self.allow_networks)
            if len(verdicts) < 4096:
                verdicts[address] = problem
        if problem is not None:
            named = f"{host!r} -> " if host and host != address_text(address) else ""
            raise self._blocked(f"{named}{problem}", str(address))

    def addresses(self, host: str, port: int, timeout: float | None = None) -> tuple[str, ...]:
        """The addresses to dial for ``host``: resolved once (an address needs no resolving)
        and every one of them checked; EgressBlocked when any is refused or there are none."""
        literal = literal_address(host)
        if literal is not None:
            self.check_address(literal, host)
            return (str(literal),)
        try:
            found = self.resolver.resolve(
                host, port, self._deadline(timeout), owner=self._lookup_owner
            )
        except EgressBlocked as exc:
            raise self._blocked(exc.reason) from None
        return self.checked(host, found)

    async def aaddresses(
        self, host: str, port: int, timeout: float | None = None
    ) -> tuple[str, ...]:
        """``addresses`` for a coroutine: a name being resolved is waited for without holding
        a worker thread (on asyncio), an address or a cached answer at once."""
        literal = literal_address(host)
        if literal is not None:
            self.check_address(literal, host)
            return (str(literal),)
        try:
            found = await self.resolver.aresolve(
                host, port, self._deadline(timeout), owner=self._lookup_owner
            )
        except EgressBlocked as exc:
            raise self._blocked(exc.reason) from None
        return self.checked(host, found)

    def _deadline(self, timeout: float | None) -> float:
        return self.resolve_timeout if timeout is None else min(timeout, self.resolve_timeout)

    def checked(self, host: str, found: tuple[str, ...]) -> tuple[str, ...]:
        """``found`` (what ``host`` resolved to) when every address may be dialed, else
        EgressBlocked; an empty answer is refused."""
        if not found:
            raise self._blocked(f"{host!r} resolves to no address")
        for text in found:
            try:
                address = ipaddress.ip_address(text)
            except ValueError:
                raise self._blocked(f"{host!r} resolves to {text!r:.80}, not an address") from None
            self.check_address(address, host)
        return found

    def redirect_problem(self, current: str, location: str) -> str | None:
        """Why a redirect from ``current`` to ``location`` (absolute) may not be followed, or
        None; the new target's addresses are checked when it is dialed."""
        if urllib.parse.urlsplit(current).scheme.lower() == "https" and (
            urllib.parse.urlsplit(location).scheme.lower() == "http"
        ):
            return "a redirect from https to http is refused"
        try:
            self.check_url(location)
        except EgressBlocked as exc:
            return exc.reason
        return None

    def _blocked(self, reason: str, address: str | None = None) -> EgressBlocked:
        blocked = EgressBlocked(reason, address=address)
        # The operator's line says what to do about it; the model's text stays generic.
        hint = blocked.hint
        logger.warning("egress blocked: %s%s", reason, f"; {hint}" if hint else "")
        return blocked


def same_origin(first: str, second: str) -> bool:
    """Whether two absolute URLs share scheme, host and port (secret headers go no further)."""
    try:
        a, b = urllib.parse.urlsplit(first), urllib.parse.urlsplit(second)
        return (a.scheme.lower(), a.hostname, a.port or _DEFAULT_PORTS.get(a.scheme.lower())) == (
            b.scheme.lower(),
            b.hostname,
            b.port or _DEFAULT_PORTS.get(b.scheme.lower()),
        )
    except ValueError:
        return False
