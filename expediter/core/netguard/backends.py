"""Pinning network backends: for each new connection, resolve the name once, check every
address with the policy, and dial the checked address itself.

httpcore (httpx's engine) and httpcore2 (httpx2's, which fastmcp 4 uses) have the same backend
interface in two module namespaces; ``pinning_backends(module)`` builds the pair of classes for
one of them. The connection keeps the *name* for everything else: httpcore sends the Host header
from the URL and starts TLS with ``server_hostname`` set to the name, so SNI and certificate
verification are the name's while the socket goes to the checked address.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from expediter.core.netguard.deadlines import clamp
from expediter.core.netguard.policy import EgressPolicy

__all__ = ["guarded_clients", "guarded_transports", "pinning_backends", "refuse_routes"]

#: Client options that would send requests another way than the guarded transport.
_ROUTES = ("proxy", "proxies", "mounts", "transport", "app", "trust_env", "follow_redirects")


def refuse_routes(options: dict[str, Any]) -> None:
    """TypeError for a client option that would route around the guard (a proxy, another
    transport, environment settings, redirects followed by the client)."""
    given = [name for name in _ROUTES if name in options]
    if given:
        raise TypeError(
            f"a guarded client takes no {', '.join(given)}: requests go only through the "
            "egress guard's transport (follow redirects yourself, checking each hop with "
            "EgressPolicy.redirect_problem)"
        )


@functools.cache
def pinning_backends(core: ModuleType) -> tuple[type[Any], type[Any]]:
    """``(SyncBackend, AsyncBackend)`` for an httpcore-like module (``httpcore``,
    ``httpcore2``): each takes ``(policy, inner=None)``, ``inner`` being the backend that
    dials (default: the module's own), e.g. a test's loopback-only net."""

    class GuardedStream(core.NetworkStream):  # type: ignore[misc,name-defined]
        """A connection whose operations end by the context's deadline (``within``)."""

        def __init__(self, stream: Any) -> None:
            self.stream = stream

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self.stream.read(max_bytes, clamp(timeout))  # type: ignore[no-any-return]

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self.stream.write(buffer, clamp(timeout))

        def close(self) -> None:
            self.stream.close()

        def start_tls(
            self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
        ) -> Any:
            return GuardedStream(
                self.stream.start_tls(ssl_context, server_hostname, clamp(timeout))
            )

        def get_extra_info(self, info: str) -> Any:
            return self.stream.get_extra_info(info)

    class AsyncGuardedStream(core.AsyncNetworkStream):  # type: ignore[misc,name-defined]
        """The async twin of ``GuardedStream``."""

        def __init__(self, stream: Any) -> None:
            self.stream = stream

        async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return await self.stream.read(max_bytes, clamp(timeout))  # type: ignore[no-any-return]

        async def write(self, buffer: bytes, timeout: float | None = None) -> None:
            await self.stream.write(buffer, clamp(timeout))

        async def aclose(self) -> None:
            await self.stream.aclose()

        async def start_tls(
            self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
        ) -> Any:
            return AsyncGuardedStream(
                await self.stream.start_tls(ssl_context, server_hostname, clamp(timeout))
            )

        def get_extra_info(self, info: str) -> Any:
            return self.stream.get_extra_info(info)

    class PinningBackend(core.NetworkBackend):  # type: ignore[misc,name-defined]
        """Dials only addresses the egress policy allows, and only the one it checked."""

        def __init__(self, policy: EgressPolicy, inner: Any = None) -> None:
            self.policy = policy
            self.inner = inner if inner is not None else core.SyncBackend()

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> Any:
            timeout = clamp(timeout)
            addresses = self.policy.addresses(host, port, timeout)
            last: Exception | None = None
            for address in addresses:
                try:
                    return GuardedStream(
                        self.inner.connect_tcp(
                            address,
                            port,
                            timeout=clamp(timeout),
                            local_address=local_address,
                            socket_options=socket_options,
                        )
                    )
                except core.ConnectError as exc:
                    last = exc
            raise last or core.ConnectError(f"no address to dial for {host!r}")

        def connect_unix_socket(self, path: str, timeout: float | None = None, **_: Any) -> Any:
            raise core.ConnectError("the egress policy allows no unix sockets")

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    class AsyncPinningBackend(core.AsyncNetworkBackend):  # type: ignore[misc,name-defined]
        """The async twin: the event loop waits for a name's lookup thread, holding none."""

        def __init__(self, policy: EgressPolicy, inner: Any = None) -> None:
            self.policy = policy
            # AnyIO runs on asyncio and on trio (httpcore keeps its AutoBackend private).
            self.inner = inner if inner is not None else core.AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> Any:
            timeout = clamp(timeout)
            # An address or a cached answer at once; a name being resolved is awaited without
            # a worker thread, so one owner's names that never answer hold none of the loop's.
            addresses = await self.policy.aaddresses(host, port, timeout)
            last: Exception | None = None
            for address in addresses:
                try:
                    return AsyncGuardedStream(
                        await self.inner.connect_tcp(
                            address,
                            port,
                            timeout=clamp(timeout),
                            local_address=local_address,
                            socket_options=socket_options,
                        )
                    )
                except core.ConnectError as exc:
                    last = exc
            raise last or core.ConnectError(f"no address to dial for {host!r}")

        async def connect_unix_socket(
            self, path: str, timeout: float | None = None, **_: Any
        ) -> Any:
            raise core.ConnectError("the egress policy allows no unix sockets")

        async def sleep(self, seconds: float) -> None:
            await self.inner.sleep(seconds)

    PinningBackend.__qualname__ = PinningBackend.__name__ = f"PinningBackend[{core.__name__}]"
    AsyncPinningBackend.__qualname__ = AsyncPinningBackend.__name__ = (
        f"AsyncPinningBackend[{core.__name__}]"
    )
    return PinningBackend, AsyncPinningBackend


#: What the guarded transports take besides the policy (anything else is a TypeError).
_TRANSPORT_DEFAULTS: dict[str, Any] = {"verify": True, "cert": None, "limits": None, "inner": None}


@functools.cache
def guarded_clients(client: ModuleType, core: ModuleType) -> tuple[Any, Any]:
    """``(client, async_client)`` for an httpx-like module: functions taking ``(policy, *,
    verify=True, cert=None, limits=None, inner=None, **options)`` that return the module's
    ``Client``/``AsyncClient`` over the guarded transport, with ``trust_env=False`` and
    ``follow_redirects=False`` (``options`` go to the client: timeout, headers, cookies, ...;
    any that would route around the guard are a TypeError)."""
    transport, async_transport = guarded_transports(client, core)

    def make(kind: type[Any], over: type[Any], policy: EgressPolicy, options: Any) -> Any:
        refuse_routes(options)
        settings = {name: options.pop(name) for name in _TRANSPORT_DEFAULTS if name in options}
        return kind(
            transport=over(policy, **settings),
            trust_env=False,
            follow_redirects=False,
            **options,
        )

    def guarded_client(policy: EgressPolicy, **options: Any) -> Any:
        """A client that dials only what ``policy`` allows."""
        return make(client.Client, transport, policy, options)

    def guarded_async_client(policy: EgressPolicy, **options: Any) -> Any:
        """An async client that dials only what ``policy`` allows."""
        return make(client.AsyncClient, async_transport, policy, options)

    return guarded_client, guarded_async_client


@functools.cache
def guarded_transports(client: ModuleType, core: ModuleType) -> tuple[type[Any], type[Any]]:
    """``(Transport, AsyncTransport)`` for an httpx-like module over its httpcore-like engine:
    the module's own transports with ``trust_env=False`` (no proxy, no netrc, no
    ``SSL_CERT_FILE``), HTTP/1.1 only, dialing through the pinning backends. Each takes
    ``(policy, *, verify=True, cert=None, limits=None, inner=None)``; ``verify`` is True, False
    or an ``ssl.SSLContext``."""
    sync_backend, async_backend = pinning_backends(core)

    def install(
        transport: Any,
        base: type[Any],
        pool: type[Any],
        backend: type[Any],
        policy: EgressPolicy,
        options: dict[str, Any],
    ) -> None:
        """Set up ``transport`` as its ``base`` would, then give it a pool that dials through
        ``backend``: one TLS context, HTTP/1.1 only, nothing from the environment."""
        unknown = sorted(set(options) - set(_TRANSPORT_DEFAULTS))
        if unknown:
            raise TypeError(f"a guarded transport takes no {', '.join(unknown)}")
        verify, cert, limits = options["verify"], options["cert"], options["limits"]
        context = client.create_ssl_context(verify=verify, cert=cert, trust_env=False)
        limits = limits if limits is not None else client.Limits()
        base.__init__(transport, verify=context, trust_env=False, http2=False, limits=limits)
        transport.policy = policy
        transport._pool = pool(
            network_backend=backend(policy, options["inner"]),
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
        )

    class GuardedTransport(client.HTTPTransport):  # type: ignore[misc,name-defined]
        """The module's transport, dialing only what the egress policy allows."""

        def __init__(self, policy: EgressPolicy, **options: Any) -> None:
            settings = {**_TRANSPORT_DEFAULTS, **options}
            install(self, client.HTTPTransport, core.ConnectionPool, sync_backend, policy, settings)

    class AsyncGuardedTransport(client.AsyncHTTPTransport):  # type: ignore[misc,name-defined]
        """The module's async transport, dialing only what the egress policy allows."""

        def __init__(self, policy: EgressPolicy, **options: Any) -> None:
            settings = {**_TRANSPORT_DEFAULTS, **options}
            install(
                self,
                client.AsyncHTTPTransport,
                core.AsyncConnectionPool,
                async_backend,
                policy,
                settings,
            )

    return GuardedTransport, AsyncGuardedTransport
