"""Tool ``http``: each instance is one HTTP API (a base URL, headers, credentials and actions).

Every request dials through expediter's egress guard (``expediter.core.netguard``): public
addresses only, unless the operator allows ranges (``EXPEDITER_EGRESS_ALLOW`` for the host, or
the instance's ``allow_networks``, which only an operator may set). Each instance keeps one
pooled, keep-alive client.

Configured headers: a credential (a name ``is_secret_name`` calls secret: ``Authorization``,
``X-Api-Key``) belongs in ``secret_headers``, never in the plain ``headers``, which are stored,
listed and shown in clear; and no header field nor API key scheme may set a header the request
frames or routes itself (``request.FORBIDDEN_HEADERS``). The host refuses both when an instance
is stored (the fields' ``credential_keys_to`` and ``refused_keys``); the tool refuses them again
before its first request, for an instance stored before these rules or never stored at all.
"""

from __future__ import annotations

import base64
import functools
import http.cookiejar
import re
import ssl
import threading
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

import expediter
from expediter.core.netguard import DEFAULT_RESOLVER, EgressPolicy, Resolver
from expediter.core.records.redaction import hide_values, is_secret_name
from expediter.errors import ActionNotFound, ConfigError
from expediter_http.actions import HttpAction, load_actions
from expediter_http.request import FORBIDDEN_HEADERS, HEADER_NAME, PreparedRequest, build_request
from expediter_http.sending import Limits, header_pairs, hide_in_client_logs, send

if TYPE_CHECKING:
    import httpx

__all__ = ["MAX_RESPONSE_BYTES", "MAX_TIMEOUT", "HttpTool", "check_configured_headers"]

#: The most of a response body any instance keeps in memory, whatever its configuration says
#: (an instance's owner may be any user).
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: The longest any call may take, whatever an instance's configuration says.
MAX_TIMEOUT = 600.0

#: The header names no configured header may have, as the host checks them on storing.
_REFUSED_HEADERS = tuple(sorted(FORBIDDEN_HEADERS))

_FIELDS = (
    expediter.ConfigField(
        "base_url",
        required=True,
        description="The API's base URL (http or https); action paths are appended to it.",
    ),
    expediter.ConfigField(
        "headers",
        type="object",
        description="Headers sent with every request, stored and listed in clear: a credential "
        "(Authorization, X-Api-Key...) goes in secret_headers. Headers the request frames "
        "itself (Host, Content-Length, Transfer-Encoding, Connection, Cookie...) are refused; "
        "a cookie credential is a security scheme with in: cookie.",
        refused_keys=_REFUSED_HEADERS,
        credential_keys_to="secret_headers",
    ),
    expediter.ConfigField(
        "secret_headers",
        type="object",
        secret=True,
        description="Headers with credentials, sent with every request and stored encrypted "
        "(the headers the request frames itself are refused, as in headers).",
        refused_keys=_REFUSED_HEADERS,
    ),
    expediter.ConfigField(
        "credentials",
        type="object",
        secret=True,
        description="The secret of each security scheme, by scheme name (api key or token "
        "text; 'user:password' for basic), stored encrypted.",
    ),
    expediter.ConfigField(
        "security",
        type="array",
        description="The API's security schemes: {name, type: api_key|bearer|basic, in, "
        "parameter}.",
    ),
    expediter.ConfigField(
        "allow_networks",
        type="array",
        operator_only=True,
        description="Private network ranges (CIDR) this instance may reach; operator only.",
    ),
    expediter.ConfigField(
        "follow_redirects",
        type="boolean",
        default=False,
        description="Follow redirects (each hop re-checked; https->http refused).",
    ),
    expediter.ConfigField("max_redirects", type="integer", default=5),
    expediter.ConfigField(
        "timeout",
        type="number",
        default=30.0,
        description="Seconds for a whole call (at most 600).",
    ),
    expediter.ConfigField(
        "max_response_bytes",
        type="integer",
        default=1_000_000,
        description="Largest response body kept (at most 16 MiB); a larger one is an error.",
    ),
    expediter.ConfigField(
        "ca_file",
        operator_only=True,
        description="A PEM file of extra certificate authorities to trust; operator only.",
    ),
    expediter.ConfigField(
        "actions",
        type="array",
        required=True,
        description="The operations: {name, method, path, parameters, body, fixed, ...}.",
    ),
)


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """Keep no cookie: an instance's client is shared by every user of the instance, so a
    cookie one call's server set must never ride along with another call."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


#: What a field value may not hold: control characters other than tab.
_UNSENDABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _check_header(name: str, value: str) -> None:
    """ConfigError for a configured header a request cannot carry; the value is never
    repeated (it may be a credential)."""
    if not HEADER_NAME.fullmatch(name):
        raise ConfigError(
            f"http: header name {name[:60]!r} is not a valid HTTP field name; fix the instance's "
            "headers, secret_headers or security"
        )
    _check_header_name(name, "the instance's headers, secret_headers or security")
    if _UNSENDABLE.search(value) or (not value.isascii() and not _latin1(value)):
        raise ConfigError(
            f"http: the value of header {name!r} holds control characters or text outside "
            "Latin-1, which no request can carry; fix the instance's configuration"
        )


def _check_header_name(name: str, where: str) -> None:
    """ConfigError when ``name`` is a header the request frames or routes itself."""
    if name.lower() not in FORBIDDEN_HEADERS:
        return
    advice = "remove it"
    if name.lower() == "cookie":
        advice = (
            'send a cookie through a security scheme {"type": "api_key", "in": "cookie", '
            '"parameter": NAME} with its value in credentials'
        )
    raise ConfigError(
        f"http: header {name[:60]!r} in {where} is one the request frames or routes itself "
        f"({', '.join(_REFUSED_HEADERS)}), so it is never sent; {advice}"
    )


def check_configured_headers(config: Mapping[str, Any]) -> None:
    """ConfigError for a configured header the instance may not send: a credential in the
    plain ``headers``, or a header the request frames itself in ``headers``, ``secret_headers``
    or an API key scheme. Names only: no value is repeated."""
    for field in ("headers", "secret_headers"):
        headers = config.get(field)
        if headers is None:
            continue
        if not isinstance(headers, Mapping):
            raise ConfigError(f"http: configuration field {field!r} must be an object of headers")
        for name in map(str, headers):
            _check_header_name(name, f"{field!r}")
            if field == "headers" and is_secret_name(name):
                raise ConfigError(
                    f"http: header {name[:60]!r} in the plain field 'headers' names a "
                    "credential, which would be stored, listed and shown in clear; move it to "
                    "the secret field 'secret_headers'"
                )
    for scheme in config.get("security") or ():
        if not isinstance(scheme, Mapping) or scheme.get("type") != "api_key":
            continue
        if scheme.get("in", "header") == "header":
            where = f"security scheme {str(scheme.get('name'))[:60]!r} (its 'parameter')"
            _check_header_name(str(scheme.get("parameter") or ""), where)


def _latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def _number(config: Mapping[str, Any], name: str, default: float, low: float) -> float:
    value = config.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= low:
        raise ConfigError(f"http: configuration field {name!r} must be a number >= {low:g}")
    return float(value)


class HttpTool(expediter.Toolbox):
    """Call an HTTP API: each action is one operation of it."""

    name = "http"
    close_on_shutdown = True
    config_fields = _FIELDS
    #: The resolver names go through (tests inject one; None: the process's shared one).
    resolver: ClassVar[Resolver | None] = None
    #: The backend that dials checked addresses (tests inject a recording one; None: real).
    network: ClassVar[Any] = None

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self._actions: dict[str, HttpAction] | None = None
        self._checks: dict[str, expediter.ArgumentsCheck] = {}
        self._clients: dict[tuple[str, ...], tuple[EgressPolicy, httpx.Client]] = {}
        self._lock = threading.Lock()

    # -- configuration ------------------------------------------------------------------------

    @property
    def actions(self) -> dict[str, HttpAction]:
        """The instance's actions by name (read once, with the configured headers; ConfigError
        when either is malformed)."""
        if self._actions is None:
            check_configured_headers(self.config)
            self._actions = load_actions(self.config.get("actions"))
        return self._actions

    @functools.cached_property
    def limits(self) -> Limits:
        """The call's caps from the configuration (read once)."""
        config = self.config
        return Limits(
            timeout=min(_number(config, "timeout", 30.0, 0.001), MAX_TIMEOUT),
            max_response_bytes=min(
                int(_number(config, "max_response_bytes", 1_000_000, 0)), MAX_RESPONSE_BYTES
            ),
            follow_redirects=bool(config.get("follow_redirects", False)),
            max_redirects=int(_number(config, "max_redirects", 5, 0)),
        )

    @functools.cached_property
    def own_networks(self) -> tuple[str, ...]:
        """The instance's ``allow_networks`` (read once)."""
        return tuple(str(item) for item in self.config.get("allow_networks") or ())

    def _client(self, context: expediter.CallContext) -> tuple[EgressPolicy, httpx.Client]:
        """The instance's pooled client for the operator's ranges of this host."""
        networks = context.egress_allow + self.own_networks
        found = self._clients.get(networks)
        if found is not None:
            return found
        with self._lock:
            found = self._clients.get(networks)
            if found is None:
                from expediter.core.netguard import for_httpx

                try:
                    policy = EgressPolicy(
                        allow_networks=networks,
                        resolver=self.resolver or DEFAULT_RESOLVER,
                        owner=EgressPolicy.owner_of(context),
                    )
                except ValueError as exc:
                    raise ConfigError(f"http: allow_networks: {exc}") from None
                ca_file = self.config.get("ca_file")
                verify: Any = True
                if ca_file:
                    # Extra authorities: the usual roots stay trusted.
                    import certifi

                    verify = ssl.create_default_context(cafile=certifi.where())
                    try:
                        verify.load_verify_locations(cafile=str(ca_file))
                    except (OSError, ssl.SSLError) as exc:
                        raise ConfigError(f"http: ca_file {str(ca_file)!r}: {exc}") from None
                client = for_httpx.client(
                    policy,
                    verify=verify,
                    inner=self.network,
                    cookies=http.cookiejar.CookieJar(policy=_NoCookies()),
                    # Only the codings the pack reads (under its size cap) are offered.
                    headers={"Accept-Encoding": "gzip, deflate"},
                )
                found = self._clients[networks] = (policy, client)
        return found

    def close(self) -> None:
        """Close the instance's connections."""
        with self._lock:
            clients, self._clients = self._clients, {}
        for _, client in clients.values():
            client.close()

    # -- hooks --------------------------------------------------------------------------------

    def get_actions_metadata(self, context: expediter.CallContext) -> list[expediter.Action]:
        return [action.to_action() for action in self.actions.values()]

    def execute_action(
        self, action: str, arguments: dict[str, Any], context: expediter.CallContext
    ) -> Any:
        spec = self.actions.get(action)
        if spec is None:
            raise ActionNotFound(f"tool 'http' has no action {action!r}")
        base_url = self.config.get("base_url")
        if not isinstance(base_url, str) or not base_url:
            raise ConfigError("http: the instance has no base_url")
        self._check(spec, arguments)
        prepared = build_request(spec, arguments, base_url=base_url)
        headers, url, secret, derived = self._authorized(spec, prepared, context)
        policy, client = self._client(context)
        result = send(
            client,
            policy,
            method=prepared.method,
            url=url,
            headers=headers,
            content=prepared.content,
            secret_headers=secret,
            limits=self.limits,
            deadline=context.deadline,
        )
        if not derived:
            return result
        # The host hides the configured secret values; what the pack derived from them (a basic
        # token in base64, an encoded cookie) it hides itself, should a server echo them.
        if isinstance(result, expediter.ToolResult):
            hidden = frozenset(derived)
            return attrs.evolve(
                result,
                value=hide_values(result.value, hidden),
                error=hide_values(result.error, hidden),
            )
        return hide_values(result, frozenset(derived))

    def _check(self, spec: HttpAction, arguments: Mapping[str, Any]) -> None:
        """ArgumentError when the arguments do not match the action's schema (the host checks
        the names; the values are checked here, before anything is sent)."""
        check = self._checks.get(spec.name)
        if check is None:
            check = self._checks[spec.name] = expediter.ArgumentsCheck(
                spec.name, spec.arguments_schema
            )
        check(arguments)

    def _authorized(
        self, spec: HttpAction, prepared: PreparedRequest, context: expediter.CallContext
    ) -> tuple[list[tuple[str, str]], str, set[str], set[str]]:
        """The request's headers and URL with the configured headers and the credentials of
        the action's security schemes; the names of the headers that carry secrets; and the
        secret texts derived from the credentials (hidden in the result)."""
        derived: set[str] = set()
        secret_headers = context.secret("secret_headers") or {}
        secret = {str(name) for name in secret_headers}
        pairs = header_pairs(self.config.get("headers"), secret_headers)
        from_schemes: set[str] = set()

        def scheme_header(name: str, value: str) -> None:
            # One value per header: the first scheme that applies replaces a configured one.
            key = name.lower()
            if key in from_schemes:
                return
            from_schemes.add(key)
            pairs[:] = [(n, v) for n, v in pairs if n.lower() != key]
            pairs.append((name, value))
            secret.add(key)

        url = prepared.url
        cookies = list(prepared.cookies)
        credentials = context.secret("credentials") or {}
        wanted = None if spec.security is None else set(spec.security)
        for scheme in self.config.get("security") or ():
            if not isinstance(scheme, Mapping):
                continue
            name = scheme.get("name")
            value = credentials.get(name) if isinstance(credentials, Mapping) else None
            if value is None or (wanted is not None and name not in wanted):
                continue
            kind = scheme.get("type")
            where = scheme.get("in", "header")
            parameter = str(scheme.get("parameter") or "")
            if kind == "bearer":
                scheme_header("Authorization", f"Bearer {value}")
            elif kind == "basic":
                if isinstance(value, Mapping):
                    value = f"{value.get('username', '')}:{value.get('password', '')}"
                token = base64.b64encode(str(value).encode()).decode("ascii")
                scheme_header("Authorization", f"Basic {token}")
                derived.add(token)
            elif kind == "api_key" and parameter and where == "header":
                scheme_header(parameter, str(value))
            elif kind == "api_key" and parameter and where == "query":
                joiner = "&" if urllib.parse.urlsplit(url).query else "?"
                encoded = urllib.parse.urlencode({parameter: str(value)})
                url += joiner + encoded
                derived.add(encoded.partition("=")[2])
                hide_in_client_logs(parameter)
            elif kind == "api_key" and parameter and where == "cookie":
                quoted = urllib.parse.quote(str(value), safe="")
                cookies.append((parameter, quoted))
                derived.add(quoted)
        for name, value in pairs:
            _check_header(name, value)
        # The configured headers win over header parameters of the same name.
        taken = {name.lower() for name, _ in pairs}
        request = attrs.evolve(prepared, cookies=cookies)
        headers = pairs + [(n, v) for n, v in request.header_items() if n.lower() not in taken]
        derived = {text for text in derived if len(text) >= 4}
        return headers, url, secret, derived
