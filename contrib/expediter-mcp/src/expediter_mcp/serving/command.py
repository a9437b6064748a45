"""``expediter serve --mcp``: serve the host's tools for one user to MCP clients.

Importing this module is cheap (``expediter serve --help`` imports no fastmcp): the server is
built only once the options are checked. Every ``tools/list`` offers the user's toolset as it
is then, and every call runs through the host's pipeline with its own ledger row.
"""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from expediter.cli.app import CliState, pass_state
from expediter.cli.output import escape, warn

__all__ = ["serve"]

_TOKEN_HELP = (
    "The bearer token HTTP clients must send (Authorization: Bearer TOKEN). A command line is "
    "visible to other local users: prefer --token-file or EXPEDITER_SERVE_TOKEN."
)
_EPILOG = (
    "The token comes from --token-file, else --token, else the environment variable "
    "EXPEDITER_SERVE_TOKEN. Without a token the server listens only on a loopback address. "
    "A call that needs approval is refused, telling the client that an operator decides; the "
    "server logs its key (expediter approve KEY, expediter deny KEY; expediter approvals ls "
    "lists it too), and --approval-wait gives the seconds to wait for that decision. A stored "
    "instance that cannot be offered is logged once, with the reason (`expediter -v serve "
    "--mcp` adds the traceback)."
)
#: Options that mean something only for the HTTP transport.
_HTTP_ONLY = ("bind_host", "port", "path", "token", "token_file")


def _http_only_given(ctx: click.Context) -> list[str]:
    given = []
    for param in ctx.command.params:
        if param.name in _HTTP_ONLY and ctx.get_parameter_source(param.name) in (
            ParameterSource.COMMANDLINE,
            ParameterSource.ENVIRONMENT,
        ):
            given.append(param.opts[0])
    return given


@click.command("serve", epilog=_EPILOG)
@click.option(
    "--mcp", "mcp", is_flag=True, help="Serve over the Model Context Protocol (required)."
)
@click.option(
    "--transport",
    type=click.Choice(["http", "stdio"]),
    default="http",
    show_default=True,
    help="Streamable HTTP, or standard input and output (one client, no token).",
)
@click.option(
    "--host",
    "bind_host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on; anything but loopback needs a token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="The port (0: any free port; the URL is printed on standard error).",
)
@click.option("--path", default="/mcp", show_default=True, help="The URL path of the endpoint.")
@click.option(
    "--user", "user_id", default=None, help="Whose tools to offer (default: the shared ones)."
)
@click.option("--token", default=None, metavar="TOKEN", help=_TOKEN_HELP)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Read the bearer token from FILE (surrounding whitespace ignored).",
)
@click.option(
    "--approval-wait",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Wait this long for a decision on a call that needs approval, then answer with "
    "its outcome (default: refuse it at once).",
)
@pass_state
@click.pass_context
def serve(
    ctx: click.Context,
    state: CliState,
    mcp: bool,
    transport: str,
    bind_host: str,
    port: int,
    path: str,
    user_id: str | None,
    token: str | None,
    token_file: Path | None,
    approval_wait: float | None,
) -> None:
    """Serve the host's tools to MCP clients (streamable HTTP or stdio)."""
    from expediter_mcp.serving.auth import TokenProblem, is_loopback, read_token

    if not mcp:
        raise click.UsageError("say what to serve: --mcp (the only server today)")
    if user_id is not None:
        user_id = _user(user_id)
    if transport == "stdio":
        extra = _http_only_given(ctx)
        if extra:
            raise click.UsageError(f"{', '.join(extra)}: for --transport http only")
        secret = None
    else:
        if not path.startswith("/") or any(char.isspace() for char in path):
            raise click.BadParameter(
                f"{escape(path)!r} is not a URL path: give one such as /mcp", param_hint="--path"
            )
        try:
            secret = read_token(token, token_file)
        except TokenProblem as exc:
            raise click.BadParameter(escape(str(exc)), param_hint=exc.option) from None
        if not is_loopback(bind_host):
            if secret is None:
                raise click.UsageError(
                    f"--host {escape(bind_host)} is not a loopback address: give a token "
                    "(--token-file FILE or EXPEDITER_SERVE_TOKEN) that clients must send, or "
                    "listen on 127.0.0.1"
                )
            warn(
                "this is plain HTTP: the token and every call cross the network unencrypted; "
                "put a TLS-terminating proxy in front of it"
            )
    _serve(state, transport, bind_host, port, path, user_id, secret, approval_wait)


def _user(user_id: str) -> str:
    """The ``--user`` id exactly as given: one the host would refuse (NUL, an undecodable
    byte, more than 512 characters, empty) is a usage error now, before anything listens."""
    from expediter.errors import IdentifierError

    try:
        return IdentifierError.check(user_id, "user id")
    except IdentifierError as exc:
        raise click.BadParameter(escape(str(exc)), param_hint="--user") from None


def _serve(
    state: CliState,
    transport: str,
    bind_host: str,
    port: int,
    path: str,
    user_id: str | None,
    secret: str | None,
    approval_wait: float | None,
) -> None:
    from expediter_mcp.serving.bridge import Bridge
    from expediter_mcp.serving.transport import listen, url_of

    bridge = Bridge(state.host(), user_id=user_id, approval_wait=approval_wait)
    # The first listing now: a host that cannot offer its tools fails here, not per request.
    count = len(bridge.offers())
    sock = None
    if transport == "http":
        try:
            sock = listen(bind_host, port)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise click.ClickException(
                f"cannot listen on {escape(bind_host)} port {port}: {escape(reason)}"
            ) from None
    try:
        from expediter_mcp.serving.auth import make_verifier
        from expediter_mcp.serving.provider import make_server
        from expediter_mcp.serving.transport import run_http, run_stdio

        server = make_server(bridge, auth=None if secret is None else make_verifier(secret))
        where = "stdio" if sock is None else url_of(bind_host, sock, path)
        waits = "refused" if approval_wait is None else f"waited for up to {approval_wait:g} s"
        whose = "the shared tools" if user_id is None else f"user {escape(repr(user_id))}"
        click.echo(
            f"serving MCP on {where} ({count} tools, {whose}; calls needing approval are {waits})",
            err=True,
        )
        if sock is None:
            run_stdio(server)
        else:
            run_http(server, bind_host, sock, path)
    finally:
        bridge.close()
        if sock is not None:
            sock.close()
