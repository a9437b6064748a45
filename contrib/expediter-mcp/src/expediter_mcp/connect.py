"""How a session reaches its server: the fastmcp transport and client for one instance.

HTTP and SSE transports dial through the egress guard (``sessions.guarded_factory``); their
credentials ride in headers (bearer, API key, basic, secret headers) or, for OAuth, in the
pack's OAuth auth flow. A stdio server starts only with a command the operator allows
(``EXPEDITER_MCP_STDIO_ALLOW``), with the scrubbed environment the MCP SDK gives children
(its safe list: PATH, HOME, USER, ...), never the host's secrets.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from expediter.core.netguard import EgressPolicy
from expediter.errors import ConfigError
from expediter_mcp.config import HEADER_NAME, STDIO_ALLOW, Settings, headers_of, stdio_allowed
from expediter_mcp.sessions import Session, guarded_factory

if TYPE_CHECKING:
    from fastmcp import Client

__all__ = ["Credentials", "auth_headers", "make_client"]

#: What a header value may not hold: control characters other than tab.
_UNSENDABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _checked(name: str, value: str) -> None:
    """ConfigError for a header no request can carry; a value is never repeated (it may be a
    credential)."""
    if not HEADER_NAME.fullmatch(name):
        raise ConfigError(f"mcp: {name[:60]!r} is not a valid HTTP header name")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise ConfigError(f"mcp: the value of header {name!r} is not Latin-1 text") from None
    if _UNSENDABLE.search(value):
        raise ConfigError(f"mcp: the value of header {name!r} holds control characters")


@attrs.frozen
class Credentials:
    """The headers every request of an instance carries, and the secret texts derived from
    its credentials (a basic token's base64), hidden in results as configured secrets are."""

    headers: Mapping[str, str]
    derived: frozenset[str] = frozenset()


def auth_headers(settings: Settings, secrets: Mapping[str, Any]) -> Credentials:
    """The headers every request of the instance carries: its headers, its secret headers,
    and the credential its auth mode asks for (ConfigError when that credential is missing)."""
    headers = dict(settings.headers)
    headers.update(headers_of(secrets, "secret_headers"))
    auth = settings.auth

    def needed(field: str) -> str:
        value = secrets.get(field)
        if not isinstance(value, str) or not value:
            raise ConfigError(
                f"mcp: auth {auth!r} needs the secret {field!r}: set it with "
                f"`expediter instances set ID --secret {field}=...`",
                parameter=field,
            )
        return value

    if auth == "bearer":
        headers["Authorization"] = f"Bearer {needed('token')}"
    elif auth == "api_key":
        headers[settings.header_name] = needed("api_key")
    derived: frozenset[str] = frozenset()
    if auth == "basic":
        pair = f"{settings.username or ''}:{needed('password')}"
        token = base64.b64encode(pair.encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
        derived = frozenset({token})
    for name, value in headers.items():
        _checked(name, value)
    return Credentials(headers, derived)


def make_client(
    settings: Settings,
    headers: Mapping[str, str],
    policy: EgressPolicy | None,
    network: Any,
    session: Session,
    handler: Any,
    auth: Any = None,
    init_timeout: float | None = None,
) -> Client[Any]:
    """A fastmcp client (not yet connected) for the instance, reporting to ``session``;
    ``init_timeout`` bounds the handshake (default: the instance's ``timeout``), which an
    interactive login stretches to cover the person's wait."""
    from fastmcp import Client

    transport: Any
    if settings.transport == "stdio":
        from expediter_mcp.stdio import StdioServer

        if not stdio_allowed(settings.command):
            raise ConfigError(
                f"mcp: the stdio command {settings.command[:200]!r} is not allowed: the "
                f"operator lists the commands stdio servers may start with in {STDIO_ALLOW} "
                "(comma-separated)",
                parameter="command",
            )
        # Started with the SDK's safe list of environment variables only; its stdout is read
        # within max_response_bytes a line.
        transport = StdioServer(
            settings.command,
            settings.args,
            max_bytes=settings.max_response_bytes,
            session=session,
        )
    else:
        assert policy is not None
        # An OAuth flow answers a 401 itself (a refresh); static credentials cannot.
        factory: Callable[..., Any] = guarded_factory(
            policy,
            session,
            network,
            watch_refusals=auth is None,
            max_bytes=settings.max_response_bytes,
        )
        if settings.transport == "sse":
            from expediter_mcp.wire import SSETransport

            transport = SSETransport(
                settings.url, headers=dict(headers), auth=auth, httpx_client_factory=factory
            )
        else:
            from expediter_mcp.wire import StreamableHttpTransport

            transport = StreamableHttpTransport(
                settings.url,
                headers=dict(headers),
                auth=auth,
                httpx_client_factory=factory,
                max_sse_event_size=settings.max_response_bytes,
            )
    return Client(
        transport,
        name="expediter",
        message_handler=handler,
        init_timeout=settings.timeout if init_timeout is None else init_timeout,
    )
