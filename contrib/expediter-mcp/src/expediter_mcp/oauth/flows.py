"""The OAuth flow a call of an ``auth: oauth`` instance runs: the authorization-code grant
with stored tokens only (it refreshes them, and never waits for a person), or the
client-credentials grant for machine access.

Every request of either flow (metadata discovery, registration, token, refresh) is yielded
by the auth object and sent by the transport's own client, the guarded one
(``sessions.guarded_factory``), so the egress guard checks each. The only client ``OAuth``
makes itself (a pre-flight of the authorization URL, which these subclasses never run) comes
from ``httpx_client_factory``, which the transport sets to that same guarded factory.
"""

from __future__ import annotations

import shlex
import warnings
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import httpx2
from fastmcp.client.auth import ClientCredentialsOAuthProvider, OAuth
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult
from mcp.shared.exceptions import MCPDeprecationWarning

import expediter
from expediter.errors import ConfigError
from expediter_mcp.oauth.store import Slots, TokenStore, memory_slots

if TYPE_CHECKING:
    from expediter_mcp.config import Settings

__all__ = [
    "ReauthorizeNeeded",
    "StoredOAuth",
    "oauth_for",
    "oauth_options",
    "per_invoker",
    "reauthorize",
    "secret_texts",
    "subject_of",
]

#: The redirect URI's port of a flow that never redirects a person (nothing listens on it).
_NO_CALLBACK_PORT: Final = 1
#: The shortest token ``secret_texts`` names (shorter texts are not worth hiding in a result).
_MIN_SECRET: Final = 8


class ReauthorizeNeeded(expediter.ToolError):
    """The call needs a person to authorize it first (no tokens, or they no longer work)."""


def per_invoker(settings: Settings) -> bool:
    """Whether each invoker uses their own credentials: only OAuth's authorization-code grant
    with ``token_scope: invoker``. Client credentials are one machine identity whoever
    invokes, and every other auth mode uses the credentials the instance holds: the owner's."""
    return (
        settings.auth == "oauth"
        and settings.oauth_grant == "authorization_code"
        and settings.token_scope == "invoker"
    )


def subject_of(settings: Settings, context: expediter.CallContext) -> str | None:
    """Whose tokens (and credentials) a call uses: the invoker's own (``per_invoker``), else
    the instance owner's (client credentials, ``token_scope: owner``, other auth modes)."""
    return context.user_id if per_invoker(settings) else context.owner_id


def oauth_options(
    settings: Settings, client_secret: object, tokens: Slots, subject: str | None
) -> dict[str, Any]:
    """The arguments of fastmcp's authorization-code ``OAuth`` for an instance (a call's
    ``StoredOAuth`` and the login's ``LoginOAuth`` alike): its scopes, pre-registered client
    and issuer, and the subject's token slots as the token storage."""
    secret = client_secret if isinstance(client_secret, str) and client_secret else None
    return {
        "scopes": list(settings.scopes) or None,
        "client_name": "expediter",
        "token_storage": TokenStore(tokens, subject),
        "client_id": settings.client_id or None,
        "client_secret": secret,
        "issuer": settings.issuer,
    }


def secret_texts(auth: object) -> frozenset[str]:
    """The OAuth secrets an auth object holds now, to hide where a server echoes them: the
    current access and refresh tokens (and a registered client's secret) of an MCP SDK OAuth
    provider (``StoredOAuth``, ``LoginOAuth``, ``ClientCredentialsOAuthProvider``), those of
    at least 8 characters; empty for anything else (no tokens yet, another kind of auth)."""
    if not isinstance(auth, OAuthClientProvider):
        return frozenset()
    context = getattr(auth, "context", None)  # unset until the provider is bound to a URL
    if context is None:
        return frozenset()
    found: list[object] = []
    tokens = context.current_tokens
    if tokens is not None:
        found += [tokens.access_token, tokens.refresh_token]
    client = context.client_info
    if client is not None:
        found.append(client.client_secret)
    return frozenset(text for text in found if isinstance(text, str) and len(text) >= _MIN_SECRET)


def reauthorize(settings: Settings, context: expediter.CallContext) -> ReauthorizeNeeded:
    """The error telling the reader which login command makes the call work."""
    command = f"expediter mcp login {context.instance_id}"
    subject = subject_of(settings, context)
    # `login ID` logs in as the owner; anyone else's tokens need `--user`.
    if subject is not None and subject != context.owner_id:
        command += f" --user {shlex.quote(subject)}"
    return ReauthorizeNeeded(f"the MCP server needs authorization: re-authorize with `{command}`")


def _needs_person(response: httpx2.Response) -> bool:
    """Whether the server refused the request's token in a way only a new login fixes."""
    if response.status_code == 401:
        return True
    challenge = response.headers.get("www-authenticate", "")
    return response.status_code == 403 and "insufficient_scope" in challenge


class StoredOAuth(OAuth):
    """fastmcp's authorization-code ``OAuth`` that uses the stored tokens (refreshing them when
    they expired) and raises ``ReauthorizeNeeded`` at once where it would wait for a person."""

    def __init__(self, mcp_url: str, *, needed: Callable[[], ReauthorizeNeeded], **options: Any):
        self._needed = needed
        super().__init__(
            mcp_url, callback_host="127.0.0.1", callback_port=_NO_CALLBACK_PORT, **options
        )

    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        async with self.context.lock:
            if not self._initialized:
                await self._initialize()
            ready = self.context.current_tokens is not None and self.context.client_info is not None
        if not ready:
            # Nothing stored: fail before any request (no discovery, no client registration).
            raise self._needed()
        flow = super()._auth_flow(request)
        try:
            outgoing = await anext(flow)
            while True:
                response = yield outgoing
                if outgoing is request and _needs_person(response):
                    # The token (refreshed first when it had expired) was refused: the SDK's
                    # next step is the browser login, which only `expediter mcp login` runs.
                    raise self._needed()
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    async def redirect_handler(self, authorization_url: str) -> None:
        raise self._needed()

    async def callback_handler(self) -> AuthorizationCodeResult:
        raise self._needed()


def _client_credentials(
    settings: Settings,
    secrets: Mapping[str, Any],
    context: expediter.CallContext,
    key: tuple[Any, ...],
) -> httpx2.Auth:
    client_id = settings.client_id
    if not client_id:
        raise ConfigError(
            "mcp: oauth_grant 'client_credentials' needs the configuration field 'client_id'",
            parameter="client_id",
        )
    secret = secrets.get("client_secret")
    if not isinstance(secret, str) or not secret:
        raise ConfigError(
            "mcp: oauth_grant 'client_credentials' needs the secret 'client_secret': set it "
            "with `expediter instances set ID --secret client_secret=...`",
            parameter="client_secret",
        )
    # Without a stored instance the tokens live in this process, per pool key.
    slots = context.tokens if context.tokens is not None else memory_slots(key)
    with warnings.catch_warnings():
        if settings.issuer is None:
            # The SDK warns that the MCP server then names the authorization server: the
            # instance's `issuer` setting is how an operator pins it.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
        return ClientCredentialsOAuthProvider(
            settings.url,
            client_id=client_id,
            client_secret=secret,
            scopes=list(settings.scopes) or None,
            token_storage=TokenStore(slots, subject_of(settings, context)),
            issuer=settings.issuer,
        )


def oauth_for(
    settings: Settings,
    secrets: Mapping[str, Any],
    context: expediter.CallContext,
    key: tuple[Any, ...],
) -> httpx2.Auth:
    """The ``httpx2.Auth`` a call's session of an ``auth: oauth`` instance uses."""
    if settings.oauth_grant == "client_credentials":
        return _client_credentials(settings, secrets, context, key)
    if context.tokens is None:
        raise ReauthorizeNeeded(
            "the MCP server needs OAuth authorization, and OAuth tokens are kept only for a "
            "stored instance: add the server with `expediter mcp add URL --auth oauth`, then "
            "log in with `expediter mcp login ID`"
        )
    return StoredOAuth(
        settings.url,
        needed=lambda: reauthorize(settings, context),
        **oauth_options(
            settings, secrets.get("client_secret"), context.tokens, subject_of(settings, context)
        ),
    )
