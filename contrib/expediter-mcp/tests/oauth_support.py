"""OAuth servers and a scripted "browser" for the OAuth tests, all on 127.0.0.1.

``OAuthServer`` runs the test MCP server (``servers.build_server``) behind fastmcp's
``InMemoryOAuthProvider``: a real authorization server (discovery, dynamic registration,
authorize, token, refresh) whose authorize step approves at once, redirecting to the client's
callback. ``Browser`` is the person: it reads the URL ``expediter mcp login`` prints and
fetches it (following the redirect to the callback), or answers the callback with an error.
``CredentialsServer`` is the test MCP server for machine access: its own token endpoint
grants ``client_credentials`` and its verifier accepts only the tokens it issued.
"""

from __future__ import annotations

import base64
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import uvicorn
from fastmcp.server.auth import AccessToken, RemoteAuthProvider, TokenVerifier
from fastmcp.server.auth.providers.in_memory import InMemoryOAuthProvider
from mcp.server.auth.settings import ClientRegistrationOptions
from pydantic import AnyHttpUrl
from servers import build_server, free_port
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["Browser", "CredentialsServer", "OAuthServer"]


class _Running:
    """A FastMCP server's streamable HTTP app served by uvicorn in a thread on ``port``."""

    def __init__(self, server: Any, port: int) -> None:
        self.server = server
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.url = f"{self.base}/mcp"
        app = server.http_app(path="/mcp", transport="http")
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test OAuth server did not start")
            time.sleep(0.01)

    def close(self) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(10)


class OAuthServer(_Running):
    """The test MCP server, protected by an in-memory OAuth authorization server on the same
    origin (``provider`` holds its clients and tokens)."""

    def __init__(self) -> None:
        port = free_port()
        self.provider = InMemoryOAuthProvider(
            base_url=f"http://127.0.0.1:{port}",
            client_registration_options=ClientRegistrationOptions(enabled=True),
        )
        super().__init__(build_server(auth=self.provider), port)

    def revoke(self, access_token: str) -> None:
        """Forget an access token and its refresh token (a server-side revocation)."""
        self.provider._revoke_internal(access_token_str=access_token)

    def expire(self, access_token: str) -> None:
        """Make an access token expired on the server (its refresh token still works)."""
        found = self.provider.access_tokens[access_token]
        self.provider.access_tokens[access_token] = found.model_copy(
            update={"expires_at": int(time.time()) - 10}
        )


class _IssuedTokens(TokenVerifier):
    def __init__(self, issued: dict[str, str]) -> None:
        super().__init__()
        self.issued = issued

    async def verify_token(self, token: str) -> AccessToken | None:
        client = self.issued.get(token)
        if client is None:
            return None
        return AccessToken(token=token, client_id=client, scopes=[], expires_at=None)


class CredentialsServer(_Running):
    """The test MCP server for machine access: a resource server whose advertised
    authorization server (on the same origin) grants ``client_credentials`` to ``clients``."""

    def __init__(
        self, clients: dict[str, str], expires_in: int = 3600, token_endpoint: str | None = None
    ) -> None:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        #: Access token -> the client it was issued to.
        self.issued: dict[str, str] = {}
        #: The form of each token request.
        self.requests: list[dict[str, str]] = []
        auth = RemoteAuthProvider(
            token_verifier=_IssuedTokens(self.issued),
            authorization_servers=[AnyHttpUrl(base)],
            base_url=base,
        )
        server = build_server(auth=auth)

        @server.custom_route("/.well-known/oauth-authorization-server", methods=["GET"])
        async def metadata(request: Request) -> Response:
            return JSONResponse(
                {
                    "issuer": f"{base}/",
                    "authorization_endpoint": f"{base}/authorize",
                    "token_endpoint": token_endpoint or f"{base}/token",
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                    "response_types_supported": ["code"],
                }
            )

        @server.custom_route("/token", methods=["POST"])
        async def token(request: Request) -> Response:
            form = {key: str(value) for key, value in (await request.form()).items()}
            self.requests.append(form)
            client = _basic_client(request.headers.get("authorization", ""), clients)
            if client is None:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            if form.get("grant_type") != "client_credentials":
                return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
            value = f"cc_{secrets.token_hex(16)}"
            self.issued[value] = client
            body = {"access_token": value, "token_type": "Bearer", "expires_in": expires_in}
            return JSONResponse(body, headers={"Cache-Control": "no-store"})

        super().__init__(server, port)


def _basic_client(header: str, clients: dict[str, str]) -> str | None:
    if not header.startswith("Basic "):
        return None
    try:
        name, _, secret = base64.b64decode(header[6:]).decode().partition(":")
    except ValueError:
        return None
    known = clients.get(name)
    return name if known is not None and secrets.compare_digest(known, secret) else None


class Browser:
    """The person at the browser: ``show`` is what ``interactive_login`` prints through; on the
    authorization URL it acts in a thread of its own (the login's loop must keep running)."""

    def __init__(
        self,
        action: str = "approve",
        delay: float = 0.0,
        stray: Sequence[Callable[[str], dict[str, str]]] = (),
    ) -> None:
        #: ``approve`` (fetch the URL, follow the redirect), ``deny`` (send the callback an
        #: ``access_denied`` error) or ``ignore`` (never answer; ``stray`` is still sent).
        self.action = action
        self.delay = delay
        #: Callbacks someone else sends first (each makes the query from the login's state).
        self.stray = stray
        self.lines: list[str] = []
        self.responses: list[httpx2.Response] = []
        #: The answers to the ``stray`` callbacks.
        self.stray_responses: list[httpx2.Response] = []
        self.errors: list[Exception] = []
        self._threads: list[threading.Thread] = []

    def show(self, line: str) -> None:
        self.lines.append(line)
        if line.startswith(("http://", "https://")) and (self.action != "ignore" or self.stray):
            thread = threading.Thread(target=self._act, args=(line,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _act(self, url: str) -> None:
        time.sleep(self.delay)
        try:
            self._fetch(url)
        except httpx2.HTTPError as exc:  # the login gave up first
            self.errors.append(exc)

    def _fetch(self, url: str) -> None:
        with httpx2.Client(trust_env=False, timeout=10) as client:
            query = parse_qs(urlsplit(url).query)
            for make in self.stray:
                params = make(query["state"][0])
                self.stray_responses.append(client.get(query["redirect_uri"][0], params=params))
            if self.action == "ignore":
                return
            if self.action == "approve":
                self.responses.append(client.get(url, follow_redirects=True))
                return
            redirect = query["redirect_uri"][0]
            state = query["state"][0]
            self.responses.append(
                client.get(redirect, params={"error": "access_denied", "state": state})
            )

    def join(self) -> None:
        for thread in self._threads:
            thread.join(10)


def act_on(output: Callable[[], str], browser: Browser, timeout: float = 20.0) -> None:
    """Wait until ``output()`` holds an authorization URL line, then let ``browser`` act."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in output().splitlines():
            if line.startswith(("http://", "https://")):
                browser.show(line)
                return
        time.sleep(0.05)
    raise AssertionError(f"no authorization URL was printed: {output()!r}")
