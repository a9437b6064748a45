"""An ``mcp`` instance's configuration: the fields it declares and the settings read from them.

``Settings.read(config)`` checks a configuration once (when the instance is loaded) and
raises ``ConfigError`` naming the field; nothing else reads the raw mapping. Secret fields
(tokens, keys, passwords, secret headers) are not part of ``Settings``: they come from the
call's context (``CallContext.secret``), decrypted with the owner's key.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Mapping
from typing import Any, Literal

import attrs

import expediter
from expediter.errors import ConfigError

__all__ = [
    "AUTH_MODES",
    "FIELDS",
    "FRAMING_HEADERS",
    "HEADER_NAME",
    "MAX_RESPONSE_BYTES",
    "MAX_TIMEOUT",
    "SECRET_FIELDS",
    "STDIO_ALLOW",
    "TRANSPORTS",
    "Settings",
    "headers_of",
    "stdio_allowed",
]

TRANSPORTS = ("http", "sse", "stdio")
AUTH_MODES = ("none", "bearer", "api_key", "basic", "oauth")
#: The longest a call may take, whatever an instance's configuration says.
MAX_TIMEOUT = 600.0
#: The most of one answer any instance reads, whatever its configuration says.
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
#: The environment variable naming the commands stdio servers may be started with.
STDIO_ALLOW = "EXPEDITER_MCP_STDIO_ALLOW"
#: The configuration fields whose values are secrets.
SECRET_FIELDS = ("token", "api_key", "password", "client_secret", "secret_headers")

#: An HTTP field name (RFC 9110 token), matched whole.
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


#: Headers the client frames, routes or proxies each request with itself: a configuration that
#: sets one is refused (when stored, and when a stored one is loaded), never sent.
FRAMING_HEADERS = (
    "Connection", "Content-Length", "Expect", "Host", "Keep-Alive", "Proxy-Authorization",
    "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
)  # fmt: skip
_FRAMING = frozenset(name.lower() for name in FRAMING_HEADERS)


def _field(name: str, description: str, **options: Any) -> expediter.ConfigField:
    return expediter.ConfigField(name, description=description, **options)


FIELDS = (
    _field("url", "The server's MCP endpoint (http or https), e.g. https://host/mcp."),
    _field("transport", "How to reach the server.", default="http", enum=TRANSPORTS),
    _field("auth", "How the client proves who it is.", default="none", enum=AUTH_MODES),
    _field("token", "The bearer token.", secret=True, depends_on={"auth": "bearer"}),
    _field("api_key", "The API key.", secret=True, depends_on={"auth": "api_key"}),
    _field(
        "header_name",
        "The header that carries the API key.",
        default="X-API-Key",
        depends_on={"auth": "api_key"},
    ),
    _field("username", "The user name for basic auth.", depends_on={"auth": "basic"}),
    _field("password", "The password for basic auth.", secret=True, depends_on={"auth": "basic"}),
    _field(
        "oauth_grant",
        "authorization_code (a person logs in with `expediter mcp login`) or "
        "client_credentials (machine access).",
        default="authorization_code",
        enum=("authorization_code", "client_credentials"),
        depends_on={"auth": "oauth"},
    ),
    _field(
        "token_scope",
        "Whose OAuth tokens a call uses: each invoker's own, or the owner's for everyone.",
        default="invoker",
        enum=("invoker", "owner"),
        depends_on={"auth": "oauth"},
    ),
    _field("client_id", "A pre-registered OAuth client id.", depends_on={"auth": "oauth"}),
    _field(
        "client_secret", "The OAuth client's secret.", secret=True, depends_on={"auth": "oauth"}
    ),
    _field("scopes", "OAuth scopes to ask for.", type="array", depends_on={"auth": "oauth"}),
    _field(
        "issuer",
        "The authorization server's issuer URL: tokens are asked only of a server that says "
        "it is this issuer (without it, the MCP server names the authorization server).",
        depends_on={"auth": "oauth"},
    ),
    _field(
        "headers",
        "Headers sent with every request, stored and listed in clear: a credential "
        "(Authorization, X-Api-Key...) goes in secret_headers. Headers the client frames the "
        "request with (Host, Content-Length, Transfer-Encoding, Connection...) are refused.",
        type="object",
        refused_keys=FRAMING_HEADERS,
        credential_keys_to="secret_headers",
    ),
    _field(
        "secret_headers",
        "Headers with credentials, stored encrypted (the framing headers are refused, as in "
        "headers).",
        type="object",
        secret=True,
        refused_keys=FRAMING_HEADERS,
    ),
    _field("timeout", "Seconds a call may take (at most 600).", type="number", default=30.0),
    _field(
        "list_ttl",
        "Seconds the server's tool list is kept before it is asked again (it is asked again "
        "at once when the server says the list changed).",
        type="number",
        default=300.0,
    ),
    _field(
        "max_response_bytes",
        "Largest answer (a server-sent event, a line of a stdio server) read from the server "
        "(at most 64 MiB); a larger one is an error and ends the session. A tool list reads "
        "at most this much in all its pages.",
        type="integer",
        default=10_000_000,
    ),
    _field(
        "max_image_bytes",
        "Largest image kept in a result (as a data URL); larger ones are described instead.",
        type="integer",
        default=1_000_000,
    ),
    _field(
        "command",
        "stdio: the command that starts the server; operator only, and only a command "
        "listed in EXPEDITER_MCP_STDIO_ALLOW runs.",
        operator_only=True,
    ),
    _field(
        "args", "stdio: the command's arguments; operator only.", type="array", operator_only=True
    ),
    _field(
        "allow_networks",
        "Private network ranges (CIDR) this instance may reach; operator only.",
        type="array",
        operator_only=True,
    ),
)


def _number(config: Mapping[str, Any], name: str, default: float, low: float) -> float:
    value = config.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= low:
        raise ConfigError(f"mcp: configuration field {name!r} must be a number >= {low:g}")
    return float(value)


def _choice(config: Mapping[str, Any], name: str, choices: tuple[str, ...], default: str) -> str:
    value = config.get(name, default)
    if value is None:
        return default
    if value not in choices:
        raise ConfigError(
            f"mcp: configuration field {name!r} must be one of {', '.join(choices)}",
            parameter=name,
        )
    return str(value)


def _texts(config: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = config.get(name) or ()
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"mcp: configuration field {name!r} must be a list of strings")
    return tuple(value)


def headers_of(config: Mapping[str, Any], name: str) -> dict[str, str]:
    """The headers of the object field ``name`` (``headers`` or ``secret_headers``): text names
    and values, none of the framing headers (ConfigError naming the field, never a value)."""
    value = config.get(name) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"mcp: configuration field {name!r} must be an object of headers")
    for key, text in value.items():
        if not isinstance(key, str) or not HEADER_NAME.fullmatch(key) or not isinstance(text, str):
            raise ConfigError(
                f"mcp: {name}: {str(key)[:60]!r} is not a header name with a text value"
            )
        if key.lower() in _FRAMING:  # stored before the field refused it
            raise ConfigError(
                f"mcp: {name}: {key!r} is a header the client frames the request with "
                f"({', '.join(FRAMING_HEADERS)} are refused): remove it",
                parameter=name,
            )
    return {str(key): str(text) for key, text in value.items()}


@functools.cache
def _allowed_commands(text: str) -> frozenset[str]:
    return frozenset(item.strip() for item in text.split(",") if item.strip())


def stdio_allowed(command: str) -> bool:
    """Whether the operator lets stdio servers start with ``command``: it is listed, as given
    or as the path it resolves to, in ``EXPEDITER_MCP_STDIO_ALLOW`` (comma-separated)."""
    allowed = _allowed_commands(os.environ.get(STDIO_ALLOW, ""))
    if not allowed or not command:
        return False
    if command in allowed:
        return True
    found = shutil.which(command)
    return found is not None and found in allowed


@attrs.frozen
class Settings:
    """What an ``mcp`` instance's configuration says, checked."""

    transport: Literal["http", "sse", "stdio"]
    url: str
    auth: str
    header_name: str
    username: str | None
    headers: Mapping[str, str]
    timeout: float
    list_ttl: float
    max_response_bytes: int
    max_image_bytes: int
    command: str
    args: tuple[str, ...]
    allow_networks: tuple[str, ...]
    oauth_grant: str
    token_scope: str
    client_id: str | None
    scopes: tuple[str, ...]
    issuer: str | None

    @classmethod
    def read(cls, config: Mapping[str, Any]) -> Settings:
        """The settings of a configuration, or ConfigError naming the first bad field."""
        transport = _choice(config, "transport", TRANSPORTS, "http")
        url = config.get("url") or ""
        command = config.get("command") or ""
        if not isinstance(url, str) or not isinstance(command, str):
            raise ConfigError("mcp: 'url' and 'command' are text")
        if transport == "stdio":
            if not command:
                raise ConfigError("mcp: a stdio instance needs 'command'", parameter="command")
        elif not re.match(r"(?i)https?://[^/?#\s]", url):
            raise ConfigError(
                "mcp: 'url' must be the server's http or https MCP endpoint "
                "(e.g. https://host/mcp)",
                parameter="url",
            )
        username = config.get("username")
        client_id = config.get("client_id")
        issuer = config.get("issuer")
        return cls(
            transport=transport,  # type: ignore[arg-type]
            url=url,
            auth=_choice(config, "auth", AUTH_MODES, "none"),
            header_name=str(config.get("header_name") or "X-API-Key"),
            username=None if username is None else str(username),
            headers=headers_of(config, "headers"),
            timeout=min(_number(config, "timeout", 30.0, 0.001), MAX_TIMEOUT),
            list_ttl=_number(config, "list_ttl", 300.0, 0),
            max_response_bytes=min(
                int(_number(config, "max_response_bytes", 10_000_000, 1024)), MAX_RESPONSE_BYTES
            ),
            max_image_bytes=int(_number(config, "max_image_bytes", 1_000_000, 0)),
            command=command,
            args=_texts(config, "args"),
            allow_networks=_texts(config, "allow_networks"),
            oauth_grant=_choice(
                config,
                "oauth_grant",
                ("authorization_code", "client_credentials"),
                "authorization_code",
            ),
            token_scope=_choice(config, "token_scope", ("invoker", "owner"), "invoker"),
            client_id=None if client_id is None else str(client_id),
            scopes=_texts(config, "scopes"),
            issuer=None if not issuer else str(issuer),
        )
