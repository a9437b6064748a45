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
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

import expediter
from expediter.core.calls.eventloop import BackgroundLoop
from expediter.core.netguard import DEFAULT_RESOLVER, EgressPolicy, Resolver
from expediter.core.records.redaction import hide_values
from expediter.errors import ActionNotFound, ConfigError, EgressBlocked
from expediter_mcp.config import FIELDS, SECRET_FIELDS, Settings
from expediter_mcp.connect import auth_headers, make_client
from expediter_mcp.listing import Listing, fetch_tools
from expediter_mcp.results import tool_result
from expediter_mcp.sessions import POOL, CredentialsRefused, Session, credential_hash

if TYPE_CHECKING:
    from fastmcp import Client

__all__ = ["RETRY_SECONDS", "McpTool"]

logger = logging.getLogger(__name__)

#: Where sync callers list a server's tools (``get_actions_metadata`` is a sync hook).
_LISTING_LOOP = BackgroundLoop()
#: The MCP error code of a request that timed out (the session stays usable).
TIMEOUT_CODE = -32001
#: Seconds a slow failed listing is remembered: a server that is down costs one wait per
#: this long, not one per turn.
RETRY_SECONDS = 30.0
#: A listing that failed after waiting this long is remembered; a quick failure (refused
#: credentials, "re-authorize") is not, so fixing its cause takes effect at once.
SLOW_FAILURE = 1.0


class _Changes:
    """fastmcp message handler: a ``tools/list_changed`` notification marks a listing stale."""

    def __init__(self, stale: set[tuple[Any, ...]], key: tuple[Any, ...]) -> None:
        self.stale = stale
        self.key = key

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/tools/list_changed":
            self.stale.add(self.key)


@attrs.frozen
class _Call:
    """Who a call is, for the pool: its key (instance, subject and a hash of every
    credential value it resolved) and the secret texts to hide in what it returns."""

    key: tuple[Any, ...]
    secrets: Mapping[str, Any]
    hidden: frozenset[str]


def _timed_out(timeout: float) -> expediter.ToolError:
    return expediter.ToolError(f"the MCP server did not answer within {timeout:g} s")


class McpTool(expediter.Toolbox):
    """Call the tools of an MCP server."""

    name = "mcp"
    dynamic_actions = True
    close_on_shutdown = True
    config_fields = FIELDS
    #: The resolver names go through (tests inject one; None: the process's shared one).
    resolver: ClassVar[Resolver | None] = None
    #: The backend that dials checked addresses (tests inject one; None: the real one).
    network: ClassVar[Any] = None

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self._listings: dict[tuple[Any, ...], Listing] = {}
        #: Listings that failed lately: when, and the error to give again until then.
        self._failures: dict[tuple[Any, ...], tuple[float, Exception]] = {}
        self._stale: set[tuple[Any, ...]] = set()
        self._policies: dict[tuple[str, ...], EgressPolicy] = {}
        #: The guard's refusal of the instance's URL, by policy (its verdict never changes).
        self._url_refusals: dict[int, EgressBlocked] = {}
        #: Each listed action's argument check, by listing and action name.
        self._checks: dict[tuple[int, str], tuple[Listing, expediter.ArgumentsCheck]] = {}
        #: The OAuth flow each key's open session runs (its tokens are hidden in results);
        #: an entry goes with its session.
        self._auths: weakref.WeakValueDictionary[tuple[Any, ...], Any] = (
            weakref.WeakValueDictionary()
        )
        #: The sessions this tool opened, by loop (``close`` retires them, no others).
        self._opened: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, weakref.WeakSet[Session]
        ] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def close(self) -> None:
        """Retire the sessions this tool opened (a stdio server's process ends with its
        session; a call still running finishes first)."""
        with self._lock:
            opened = {loop: list(found) for loop, found in self._opened.items()}
        POOL.shutdown(opened)

    @functools.cached_property
    def _config_digest(self) -> str:
        """A digest of the configuration (taken once: it is part of every call's key)."""
        return credential_hash(dict(self.config))

    @functools.cached_property
    def settings(self) -> Settings:
        """The instance's settings (read once; ConfigError when malformed)."""
        return Settings.read(self.config)

    # -- who calls, and how -------------------------------------------------------------------

    def _call(self, context: expediter.CallContext) -> _Call:
        """The call's pool key: the instance, the subject whose credentials it uses (see
        ``subject``) and a hash of every credential value as resolved for this call (a
        ``resolve_secret`` provider may answer each user differently)."""
        values = {name: context.secret(name) for name in SECRET_FIELDS}
        digest = credential_hash({"config": self._config_digest, "secrets": values})
        hidden = frozenset(
            text
            for value in values.values()
            for text in ([value] if isinstance(value, str) else [])
            if len(text) >= 4
        )
        return _Call((context.instance_id, self.subject(context), digest), values, hidden)

    def subject(self, context: expediter.CallContext) -> str | None:
        """Whose credentials a call uses: the invoker's own OAuth tokens, or the owner's
        (stored credentials, owner-scoped or client-credentials tokens)."""
        if self.settings.auth == "oauth":
            from expediter_mcp.oauth.flows import subject_of

            return subject_of(self.settings, context)
        return context.owner_id

    def _policy(self, context: expediter.CallContext) -> EgressPolicy | None:
        if self.settings.transport == "stdio":
            return None
        networks = context.egress_allow + self.settings.allow_networks
        found = self._policies.get(networks)
        if found is None:
            try:
                found = EgressPolicy(
                    allow_networks=networks,
                    resolver=self.resolver or DEFAULT_RESOLVER,
                    owner=EgressPolicy.owner_of(context),
                )
            except ValueError as exc:
                raise ConfigError(f"mcp: allow_networks: {exc}") from None
            self._policies[networks] = found
        return found

    def _check_url(self, policy: EgressPolicy) -> None:
        """EgressBlocked unless ``policy`` lets the instance's URL through. ``check_url``
        judges the URL alone (its scheme, a literal address; no DNS), so a refusal is kept
        and given again: the guard refuses (and logs) it once, not on every listing."""
        refused = self._url_refusals.get(id(policy))
        if refused is not None:
            raise EgressBlocked(refused.reason, address=refused.address)
        try:
            policy.check_url(self.settings.url)
        except EgressBlocked as exc:
            self._url_refusals[id(policy)] = exc
            raise

    def _maker(
        self,
        context: expediter.CallContext,
        call: _Call,
        auth: Any = None,
        init_timeout: float | None = None,
    ) -> Any:
        """What opens a session for this call (the URL is checked here, before any
        connection); ``auth``, an ``httpx2.Auth``, replaces the instance's own OAuth flow;
        ``init_timeout`` is the handshake's time limit."""
        settings = self.settings
        policy = self._policy(context)
        if policy is not None:
            self._check_url(policy)
        network = self.network

        def make(session: Session) -> Client[Any]:
            flow = auth
            if flow is None and settings.auth == "oauth":
                from expediter_mcp.oauth import oauth_for

                flow = oauth_for(settings, call.secrets, context, call.key)
            if flow is not None:
                self._auths[call.key] = flow
            credentials = auth_headers(settings, call.secrets)
            with self._lock:
                loop = asyncio.get_running_loop()
                self._opened.setdefault(loop, weakref.WeakSet()).add(session)
            handler = _Changes(self._stale, call.key)
            headers = credentials.headers
            return make_client(
                settings, headers, policy, network, session, handler, flow, init_timeout
            )

        return make

    def _hidden(self, call: _Call) -> frozenset[str]:
        """The secret texts a result of this call must not show: resolved credential values,
        what the pack derived from them, and the OAuth tokens of its session."""
        hidden = call.hidden
        if self.settings.auth == "basic":
            hidden |= auth_headers(self.settings, call.secrets).derived
        flow = self._auths.get(call.key)
        if flow is not None:
            from expediter_mcp.oauth.flows import secret_texts

            hidden |= secret_texts(flow)
        return hidden

    # -- actions ------------------------------------------------------------------------------

    def get_actions_metadata(self, context: expediter.CallContext) -> Any:
        if not self.config:
            return []  # the tool itself, unconfigured: its actions come with an instance
        call = self._call(context)
        found = self._listings.get(call.key)
        if found is not None and not self._is_stale(call.key, found):
            return found.actions
        # Asked of the server on the host's loop: the session its calls use.
        return self._actions(context, call)

    async def _actions(self, context: expediter.CallContext, call: _Call) -> Any:
        return (await self._refresh(context, call)).actions

    def listing(self, context: expediter.CallContext, *, fresh: bool = False) -> Listing:
        """The server's tools for this context, for a caller without a host (the command
        line): kept ones while fresh, else asked on the pack's own loop."""
        call = self._call(context)
        found = self._listings.get(call.key)
        if found is not None and not fresh and not self._is_stale(call.key, found):
            return found
        return _LISTING_LOOP.run(self._refresh(context, call, fresh), self.settings.timeout + 5)

    async def _refresh(
        self, context: expediter.CallContext, call: _Call, fresh: bool = False
    ) -> Listing:
        """Ask the server for its tools again. When that fails, the last listing is kept for
        ``RETRY_SECONDS`` more (and the failure logged) unless ``fresh`` demands a new one;
        a server that kept it waiting and never answered is not asked again before then
        either (its error is given again at once)."""
        key = call.key
        found = self._listings.get(key)
        failed = self._failures.get(key)
        if failed is not None and not fresh and time.monotonic() - failed[0] < RETRY_SECONDS:
            if found is not None:
                return found
            raise failed[1]
        started = time.monotonic()
        try:
            return await self._list(context, call)
        except Exception as exc:
            now = time.monotonic()
            if now - started >= SLOW_FAILURE:
                self._failures[key] = (now, exc)
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
        max_bytes = self.settings.max_response_bytes
        call = self._call(context)

        async def run() -> Listing:
            session = Session(("unpooled", *call.key), self._maker(context, call, auth, limit))
            try:
                client = await session.open(limit)
                tools = await asyncio.wait_for(fetch_tools(client, max_bytes), limit)
            except Exception:
                if session.failure is not None:  # what broke the session, not its symptom
                    raise session.failure from None
                raise
            finally:
                await session.close()
            return self._keep(call.key, Listing.of(tools, time.monotonic()))

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

    def _keep(self, key: tuple[Any, ...], listing: Listing) -> Listing:
        """Keep a new listing; an unchanged one keeps the previous list object, so the host
        keeps what it built from it."""
        self._stale.discard(key)
        self._failures.pop(key, None)
        previous = self._listings.get(key)
        if previous is not None and previous.same_as(listing):
            listing = attrs.evolve(previous, taken_at=listing.taken_at)
        with self._lock:
            if len(self._listings) > 1024:
                self._listings.clear()
            self._listings[key] = listing
        return listing

    async def _list(self, context: expediter.CallContext, call: _Call) -> Listing:
        """Ask the server for its tools (on this loop's session) and keep the listing."""
        timeout = self.settings.timeout
        max_bytes = self.settings.max_response_bytes
        self._stale.discard(call.key)

        async def use(client: Client[Any]) -> Any:
            return await asyncio.wait_for(fetch_tools(client, max_bytes), timeout)

        try:
            tools = await POOL.run(
                call.key, self._maker(context, call), use, timeout, repeatable=True
            )
        except CredentialsRefused as exc:
            raise self._refused(exc, context) from None
        except TimeoutError:
            raise _timed_out(timeout) from None
        return self._keep(call.key, Listing.of(tools, time.monotonic()))

    # -- calls --------------------------------------------------------------------------------

    async def execute_action(
        self, action: str, arguments: dict[str, Any], context: expediter.CallContext
    ) -> Any:
        settings = self.settings
        call = self._call(context)
        left = context.time_left()
        timeout = settings.timeout if left is None else max(0.001, min(settings.timeout, left))
        from mcp.shared.exceptions import MCPError

        try:
            listing = self._listings.get(call.key)
            if listing is None or listing.mcp_name(action) is None:
                listing = await self._list(context, call)
            mcp_name = listing.mcp_name(action)
            if mcp_name is None:
                raise ActionNotFound(f"the MCP server has no tool {action!r} (any more)")
            # Checked against the server's inputSchema here: nothing is sent for a bad one.
            self._check(listing, action, arguments)

            async def use(client: Client[Any]) -> Any:
                return await client.call_tool_mcp(mcp_name, arguments, timeout=timeout)

            result = await POOL.run(call.key, self._maker(context, call), use, timeout)
        except CredentialsRefused as exc:
            raise self._refused(exc, context) from None
        except MCPError as exc:
            raise _tool_error(exc, timeout) from None
        except TimeoutError:
            raise _timed_out(timeout) from None
        except (expediter.ToolError, EgressBlocked, ConfigError):
            raise
        except Exception as exc:
            raise expediter.ToolError(_unreachable(exc, settings)) from None
        value = tool_result(result, settings.max_image_bytes)
        # The host hides the configured secrets; the pack hides what it resolved or derived.
        return hide_values(value, self._hidden(call))

    def _check(self, listing: Listing, action: str, arguments: Mapping[str, Any]) -> None:
        """ArgumentError when the arguments do not fit the tool's input schema (one check per
        listed action, kept while its listing is)."""
        key = (id(listing), action)
        found = self._checks.get(key)
        if found is None or found[0] is not listing:
            schema = listing.parameters(action)
            if schema is None:
                return
            # The server's schema: its regular expressions are left to the server.
            check = expediter.ArgumentsCheck(action, schema, check_patterns=False)
            with self._lock:
                if len(self._checks) >= 4096:
                    self._checks.clear()
                self._checks[key] = found = (listing, check)
        found[1](arguments)

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


def _unreachable(exc: Exception, settings: Settings) -> str:
    """A connection failure as the model reads it: which server, and the error's kind (its
    text may quote a URL's path or query, so it stays out)."""
    where = "the stdio server" if settings.transport == "stdio" else "the MCP server"
    return f"{where} could not be reached or broke off: {type(exc).__name__}"


def _tool_error(exc: Any, timeout: float) -> expediter.ToolError:
    code = exc.error.code
    if code == TIMEOUT_CODE:
        return _timed_out(timeout)
    message = " ".join(str(exc.error.message).split())[:500]
    return expediter.ToolError(f"MCP error {code}: {message}")
