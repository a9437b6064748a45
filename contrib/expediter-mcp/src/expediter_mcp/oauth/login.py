"""``expediter mcp login``: the authorization-code flow with a person. The authorization URL is
printed (no browser is opened), the authorization server's redirect is awaited on
``http://127.0.0.1:PORT/callback`` (loopback only), and the tokens are stored through the
instance's token store. Only a callback carrying this login's ``state`` ends the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from fastmcp.client.auth import OAuth
from mcp.shared.auth import AuthorizationCodeResult

import expediter
from expediter.cli.output import escape
from expediter.core.records.text import echo
from expediter_mcp.config import MAX_TIMEOUT
from expediter_mcp.oauth.flows import oauth_options, subject_of

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from uvicorn import Server

    from expediter_mcp.tool import McpTool

__all__ = ["LoginFailed", "LoginOAuth", "interactive_login"]

_PAGE = (
    "<!doctype html><meta charset=utf-8><title>expediter</title><p>{}</p>"
    "<p>You can close this tab.</p>"
)


class LoginFailed(expediter.ToolError):
    """The OAuth login did not complete (no callback in time, or the server refused it)."""


class LoginOAuth(OAuth):
    """fastmcp's ``OAuth`` that authorizes afresh: it shows the authorization URL and waits
    for the redirect on its own loopback listener (bound before the flow starts)."""

    def __init__(
        self,
        mcp_url: str,
        *,
        listener: socket.socket,
        show: Callable[[str], None],
        wait: float,
        **options: Any,
    ) -> None:
        self._listener = listener
        self._show = show
        self._wait = wait
        self._state: str | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None
        self._server: Server | None = None
        self._serving: asyncio.Task[None] | None = None
        #: The person authorized the client (the callback brought a code).
        self.authorized = False
        port = int(listener.getsockname()[1])
        self.callback_uri = f"http://127.0.0.1:{port}/callback"
        super().__init__(
            mcp_url, callback_host="127.0.0.1", callback_port=port, callback_timeout=wait, **options
        )

    async def _initialize(self) -> None:
        await super()._initialize()
        # A login authorizes again, whatever is stored; a registration made for another
        # redirect URI (an earlier login's port) is not reused.
        self.context.clear_tokens()
        info = self.context.client_info
        if info is not None and self._static_client_info is None:
            uris = [str(uri) for uri in info.redirect_uris or ()]
            if self.callback_uri not in uris:
                self.context.client_info = None

    async def redirect_handler(self, authorization_url: str) -> None:
        parts = urlsplit(authorization_url)
        if parts.scheme not in ("http", "https"):
            raise LoginFailed(
                "the MCP server's authorization endpoint is not an http or https URL: "
                f"{echo(authorization_url, 200)}"
            )
        states = parse_qs(parts.query).get("state")
        if not states or not states[0]:
            # Without a state no callback could be told from a forged one.
            raise LoginFailed("the authorization URL has no state: cannot check the callback")
        self._state = states[0]
        self._result = asyncio.get_running_loop().create_future()
        self._serving = asyncio.create_task(self._serve())
        self._show(
            f"Open this URL in a browser and authorize (waiting up to {self._wait:g} s for the "
            f"redirect to {self.callback_uri}):"
        )
        self._show(escape(authorization_url))

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self._result is not None
        try:
            result = await asyncio.wait_for(asyncio.shield(self._result), self._wait)
        except TimeoutError:
            raise LoginFailed(
                f"no callback within {self._wait:g} s: open the printed URL and authorize "
                "(`--timeout` sets how long to wait)"
            ) from None
        finally:
            await self.stop()
        self.authorized = True
        return result

    async def stop(self) -> None:
        """Stop listening for the callback (idempotent)."""
        server, serving = self._server, self._serving
        self._server = self._serving = None
        if server is not None:
            server.should_exit = True
        if serving is not None:
            try:
                await asyncio.wait_for(serving, 5.0)
            except (TimeoutError, Exception):
                serving.cancel()
        self._listener.close()

    async def _serve(self) -> None:
        from starlette.applications import Starlette
        from starlette.routing import Route
        from uvicorn import Config, Server

        app = Starlette(routes=[Route("/callback", self._callback)])
        config = Config(app, lifespan="off", log_level="warning", ws="none", access_log=False)
        self._server = Server(config)
        await self._server.serve(sockets=[self._listener])

    async def _callback(self, request: Request) -> Response:
        from starlette.responses import HTMLResponse

        params = request.query_params
        state = params.get("state")
        future = self._result
        if future is None or future.done():
            return HTMLResponse(_PAGE.format("This login has already ended."), status_code=409)
        # Only the authorization server's redirect knows the state: any other page that
        # finds the port (no state, or a wrong one) neither ends nor cancels the login.
        if not _same_state(state, self._state):
            return HTMLResponse(_PAGE.format("Not this login's callback."), status_code=400)
        error = params.get("error")
        if error is not None:
            described = params.get("error_description")
            detail = f" ({echo(described, 200)})" if described else ""
            future.set_exception(
                LoginFailed(
                    f"the authorization server refused the login: {echo(error, 100)}{detail}"
                )
            )
            return HTMLResponse(_PAGE.format("The authorization failed."), status_code=400)
        code = params.get("code")
        if not code:
            return HTMLResponse(_PAGE.format("The callback has no code."), status_code=400)
        future.set_result(AuthorizationCodeResult(code=code, state=state, iss=params.get("iss")))
        return HTMLResponse(_PAGE.format("Authorized."))


def _same_state(given: str | None, expected: str | None) -> bool:
    """Whether a callback's state is this login's (compared in constant time)."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def _listener(port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise LoginFailed(f"--port must be 0 (any free port) to 65535, not {port}")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(16)
    except OSError as exc:
        listener.close()
        raise LoginFailed(
            f"cannot listen for the callback on 127.0.0.1:{port}: {exc.strerror or exc}"
        ) from None
    return listener


def interactive_login(
    tool: McpTool,
    context: expediter.CallContext,
    *,
    timeout: float,
    port: int,
    show: Callable[[str], None],
) -> None:
    """Authorize the instance's server for the context's subject (the invoker, or the owner
    for owner-scoped tokens) and store the tokens; LoginFailed says why it did not."""
    settings = tool.settings
    if settings.auth != "oauth" or settings.oauth_grant != "authorization_code":
        raise LoginFailed(
            "this instance does not log in: only auth 'oauth' with oauth_grant "
            "'authorization_code' does (client_credentials fetches its own tokens)"
        )
    if context.tokens is None:
        raise LoginFailed(
            "OAuth tokens are kept only for a stored instance with a database and a key "
            "(EXPEDITER_SECRET_KEYS)"
        )
    if not 0 < timeout <= MAX_TIMEOUT:
        raise LoginFailed(f"--timeout must be more than 0 and at most {MAX_TIMEOUT:g} seconds")
    options = oauth_options(
        settings, context.secret("client_secret"), context.tokens, subject_of(settings, context)
    )
    listener = _listener(port)
    auth = LoginOAuth(settings.url, listener=listener, show=show, wait=timeout, **options)
    # The person's wait happens inside the session's handshake: it gets the login's time.
    try:
        tool.list_now(context, auth=auth, timeout=timeout + settings.timeout)
    except TimeoutError:
        if auth.authorized:
            raise
        raise LoginFailed(f"no callback within {timeout:g} s") from None
    finally:
        with contextlib.suppress(OSError):
            listener.close()
    if not auth.authorized:
        raise LoginFailed(
            "the MCP server did not ask for authorization, so no tokens were stored (does it "
            "use OAuth?)"
        )
