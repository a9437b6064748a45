"""Tool ``mcp``: each instance is one MCP server, and its actions are the server's tools.

The server's tool list is kept per instance and subject for ``list_ttl`` seconds, and asked
again at once when the server says it changed (``notifications/tools/list_changed``). Calls
run on pooled sessions (``expediter_mcp.sessions``). A server's in-band failure
(``is_error``) is an error result through the pack's ``normalize_result`` hook; a timeout is
an error result and leaves the session open; the egress guard's refusal is ``EgressBlocked``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import expediter
from expediter.core.calls.eventloop import BackgroundLoop
from expediter.core.netguard import DEFAULT_RESOLVER, EgressPolicy, Resolver
from expediter.core.records.redaction import hide_values
from expediter.errors import ActionNotFound, ConfigError
from expediter_mcp.config import FIELDS, SECRET_FIELDS, Settings
from expediter_mcp.connect import auth_headers, make_client
from expediter_mcp.listing import Listing
from expediter_mcp.results import tool_result
from expediter_mcp.sessions import POOL, CredentialsRefused, Session, credential_hash

if TYPE_CHECKING:
    from fastmcp import Client

__all__ = ["McpTool"]

logger = logging.getLogger(__name__)

#: Where sync callers list a server's tools (``get_actions_metadata`` is a sync hook).
_LISTING_LOOP = BackgroundLoop()
#: The MCP error code of a request that timed out (the session stays usable).
TIMEOUT_CODE = -32001


class _Changes:
    """fastmcp message handler: a ``tools/list_changed`` notification marks a listing stale."""

    def __init__(self, stale: set[tuple[Any, ...]], key: tuple[Any, ...]) -> None:
        self.stale = stale
        self.key = key

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/tools/list_changed":
            self.stale.add(self.key)


class McpTool(expediter.Toolbox):
    """Call the tools of an MCP server."""

    name = "mcp"
    dynamic_actions = True
    config_fields = FIELDS
    #: The resolver names go through (tests inject one; None: the process's shared one).
    resolver: ClassVar[Resolver | None] = None
    #: The backend that dials checked addresses (tests inject one; None: the real one).
    network: ClassVar[Any] = None

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self._listings: dict[tuple[Any, ...], Listing] = {}
        self._stale: set[tuple[Any, ...]] = set()
        self._policies: dict[tuple[str, ...], EgressPolicy] = {}
        self._hashes: dict[int, tuple[Mapping[str, Any], str]] = {}
        #: Secret texts derived from a key's credentials (hidden in its results).
        self._derived: dict[tuple[Any, ...], frozenset[str]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close this instance's sessions (a stdio server's process ends with its session)."""
        instance_ids = {key[0] for key in self._listings}
        for instance_id in instance_ids:
            POOL.shutdown(instance_id)

    @functools.cached_property
    def settings(self) -> Settings:
        """The instance's settings (read once; ConfigError when malformed)."""
        return Settings.read(self.config)

    # -- keys and policies --------------------------------------------------------------------

    def _key(self, context: expediter.CallContext) -> tuple[Any, ...]:
        """The pool key of a call: instance, subject (the invoker for per-user OAuth tokens,
        else the owner, whose credentials the instance holds) and the credentials' hash."""
        settings = self.settings
        # Client credentials are one machine identity, whoever calls: the owner's.
        per_invoker = (
            settings.auth == "oauth"
            and settings.token_scope == "invoker"
            and settings.oauth_grant != "client_credentials"
        )
        subject = context.user_id if per_invoker else context.owner_id
        secrets = context.secrets
        cached = self._hashes.get(id(secrets))
        if cached is None or cached[0] is not secrets:
            values = {name: context.secret(name) for name in SECRET_FIELDS}
            digest = credential_hash({"config": dict(self.config), "secrets": values})
            if len(self._hashes) > 256:
                self._hashes.clear()
            cached = self._hashes[id(secrets)] = (secrets, digest)
        return (context.instance_id, "invoker" if per_invoker else "owner", subject, cached[1])

    def _policy(self, context: expediter.CallContext) -> EgressPolicy | None:
        if self.settings.transport == "stdio":
            return None
        networks = context.egress_allow + self.settings.allow_networks
        found = self._policies.get(networks)
        if found is None:
            try:
                found = EgressPolicy(
                    allow_networks=networks, resolver=self.resolver or DEFAULT_RESOLVER
                )
            except ValueError as exc:
                raise ConfigError(f"mcp: allow_networks: {exc}") from None
            self._policies[networks] = found
        return found

    def _maker(
        self,
        context: expediter.CallContext,
        key: tuple[Any, ...],
        auth: Any = None,
        init_timeout: float | None = None,
    ) -> Any:
        """What opens a session for this call's key (checked here, before any connection);
        ``auth``, an ``httpx2.Auth``, replaces the instance's own OAuth flow; ``init_timeout``
        is the handshake's time limit."""
        settings = self.settings
        policy = self._policy(context)
        if policy is not None:
            policy.check_url(settings.url)
        secrets = {name: context.secret(name) for name in SECRET_FIELDS}
        if auth is None and settings.auth == "oauth":
            from expediter_mcp.oauth import oauth_for

            auth = oauth_for(settings, secrets, context, key)
        credentials = auth_headers(settings, secrets)
        headers = credentials.headers
        if credentials.derived:
            self._derived[key] = credentials.derived
        handler = _Changes(self._stale, key)
        network = self.network

        def make(session: Session) -> Client[Any]:
            return make_client(
                settings, headers, policy, network, session, handler, auth, init_timeout
            )

        return make

    # -- actions ------------------------------------------------------------------------------

    def get_actions_metadata(self, context: expediter.CallContext) -> list[expediter.Action]:
        if not self.config:
            return []  # the tool itself, unconfigured: its actions come with an instance
        return self.listing(context).actions

    def listing(self, context: expediter.CallContext, *, fresh: bool = False) -> Listing:
        """The server's tools for this context: kept ones while fresh, else asked (from a
        sync caller, on the pack's own loop). When asking again fails, the last listing is
        kept (and the failure logged) unless ``fresh`` demands a new one."""
        key = self._key(context)
        found = self._listings.get(key)
        if found is not None and not fresh and not self._is_stale(key, found):
            return found
        try:
            return _LISTING_LOOP.run(self._list(context, key), self.settings.timeout + 5)
        except Exception as exc:
            if found is None or fresh:
                raise
            logger.warning(
                "listing an MCP server's tools again failed (%s); kept the last list",
                type(exc).__name__,
            )
            return found

    def list_now(
        self, context: expediter.CallContext, *, auth: Any = None, timeout: float | None = None
    ) -> Listing:
        """Connect afresh (a session of its own, closed after), list the server's tools and
        keep the listing; ``auth`` (an ``httpx2.Auth``, e.g. an interactive OAuth flow)
        replaces the instance's own. ``timeout`` bounds the whole (default: the instance's)."""
        limit = self.settings.timeout if timeout is None else timeout
        key = self._key(context)

        async def run() -> Listing:
            session = Session(("unpooled", *key), self._maker(context, key, auth, limit))
            try:
                client = await session.open(limit)
                tools = await asyncio.wait_for(client.list_tools(), limit)
            finally:
                await session.close()
            listing = Listing.of(tools, time.monotonic())
            self._listings[key] = listing
            self._stale.discard(key)
            return listing

        try:
            return _LISTING_LOOP.run(run(), limit + 5)
        except Exception as exc:
            from expediter_mcp.sessions import egress_cause

            cause = egress_cause(exc)
            if cause is None or cause is exc:
                raise
            raise cause from None

    def _is_stale(self, key: tuple[Any, ...], listing: Listing) -> bool:
        return key in self._stale or time.monotonic() - listing.taken_at > self.settings.list_ttl

    async def _list(self, context: expediter.CallContext, key: tuple[Any, ...]) -> Listing:
        """Ask the server for its tools (on this loop's session) and keep the listing."""
        self._stale.discard(key)

        async def use(client: Client[Any]) -> Any:
            return await client.list_tools()

        try:
            tools = await POOL.run(key, self._maker(context, key), use, self.settings.timeout)
        except CredentialsRefused as exc:
            raise self._refused(exc, context) from None
        listing = Listing.of(tools, time.monotonic())
        previous = self._listings.get(key)
        if (
            previous is not None
            and previous.names == listing.names
            and [a.to_dict() for a in previous.actions] == [a.to_dict() for a in listing.actions]
        ):
            # Unchanged: the same list object, so the host keeps what it built from it.
            listing = Listing(previous.actions, previous.names, listing.taken_at)
        with self._lock:
            if len(self._listings) > 1024:
                self._listings.clear()
            self._listings[key] = listing
        return listing

    # -- calls --------------------------------------------------------------------------------

    async def execute_action(
        self, action: str, arguments: dict[str, Any], context: expediter.CallContext
    ) -> Any:
        settings = self.settings
        key = self._key(context)
        left = context.time_left()
        timeout = settings.timeout if left is None else max(0.001, min(settings.timeout, left))
        from mcp.shared.exceptions import MCPError

        try:
            listing = self._listings.get(key)
            if listing is None or listing.mcp_name(action) is None:
                listing = await self._list(context, key)
            mcp_name = listing.mcp_name(action)
            if mcp_name is None:
                raise ActionNotFound(f"the MCP server has no tool {action!r} (any more)")

            async def use(client: Client[Any]) -> Any:
                return await client.call_tool_mcp(mcp_name, arguments, timeout=timeout)

            result = await POOL.run(key, self._maker(context, key), use, timeout)
        except CredentialsRefused as exc:
            raise self._refused(exc, context) from None
        except MCPError as exc:
            raise _tool_error(exc, timeout) from None
        except TimeoutError:
            raise expediter.ToolError(
                f"the MCP server did not answer within {timeout:g} s"
            ) from None
        value = tool_result(result, settings.max_image_bytes)
        derived = self._derived.get(key)
        # The host hides the configured secrets; what the pack derived from them it hides.
        return value if derived is None else hide_values(value, derived)

    def _refused(
        self, exc: CredentialsRefused, context: expediter.CallContext
    ) -> expediter.ToolError:
        """What to do about a 401, by auth mode."""
        auth = self.settings.auth
        if auth == "oauth":
            return expediter.ToolError(
                f"{exc.message}: re-authorize with `expediter mcp login {context.instance_id}`"
            )
        field = {"bearer": "token", "api_key": "api_key", "basic": "password"}.get(auth)
        if field is None:
            return expediter.ToolError(
                f"{exc.message}: the server wants credentials; configure the instance's auth "
                "(bearer, api_key, basic or oauth)"
            )
        return expediter.ToolError(
            f"{exc.message}: check the instance's {field} "
            f"(`expediter instances set {context.instance_id} --secret {field}=...`)"
        )


def _tool_error(exc: Any, timeout: float) -> expediter.ToolError:
    code = exc.error.code
    if code == TIMEOUT_CODE:
        return expediter.ToolError(f"the MCP server did not answer within {timeout:g} s")
    message = " ".join(str(exc.error.message).split())[:500]
    return expediter.ToolError(f"MCP error {code}: {message}")
