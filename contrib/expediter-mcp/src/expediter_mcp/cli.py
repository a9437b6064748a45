"""``expediter mcp ...``: store an MCP server as an ``mcp`` instance, list its tools, and log in.

``expediter mcp add URL --name N`` stores the instance as the operator (``--allow-network``
ranges are allowed here); secret values (``--secret token=...``) are sealed with the owner's
key and never printed. ``expediter mcp tools ID`` connects and lists the server's tools under
the names ``expediter call ID NAME`` takes. ``expediter mcp login ID`` runs the OAuth
authorization-code flow for an instance with ``--auth oauth``.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import click

from expediter.cli.app import CliState, pass_state

# The parsing `instances add` uses: `--secret FIELD=VALUE|FIELD=-|FIELD=@PATH` (one reading of
# standard input, values never echoed) and `--allow-network CIDR`.
from expediter.cli.instances import (
    allow_network_option,
    network_options,
    secret_options,
    store_instance,
    warn_refused_url,
)
from expediter.cli.output import echo_json, echo_table, escape
from expediter_mcp.config import AUTH_MODES, FIELDS, SECRET_FIELDS, TRANSPORTS

__all__ = ["mcp"]

_SECRET_HELP = (
    "A secret field: token=T (bearer), api_key=K, password=P (basic), client_secret=S "
    "(oauth), secret_headers=JSON; FIELD=- reads standard input, FIELD=@PATH a file. "
    "Repeatable."
)


@click.group()
def mcp() -> None:
    """Use MCP servers as tools: add one, list its tools, log in."""


def _extra(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {escape(str(exc))}", param_hint="--config") from None
    if not isinstance(value, dict):
        raise click.BadParameter("give a JSON object", param_hint="--config")
    return value


@mcp.command("add")
@click.argument("url", metavar="URL")
@click.option("--name", required=True, help="The instance's display name (unique per owner).")
@click.option("--transport", type=click.Choice(TRANSPORTS), default="http", show_default=True)
@click.option("--auth", type=click.Choice(AUTH_MODES), default="none", show_default=True)
@click.option("--secret", "secrets", multiple=True, metavar="FIELD=VALUE", help=_SECRET_HELP)
@allow_network_option
@click.option(
    "--config",
    "extra",
    default=None,
    metavar="JSON",
    help='More settings, e.g. \'{"timeout": 60, "header_name": "X-Key"}\'.',
)
@click.option("--user", "user_id", default=None, help="The owner (default: shared by everyone).")
@click.option("--json", "as_json", is_flag=True, help="Print the new record as JSON.")
@pass_state
def add_command(
    state: CliState,
    url: str,
    name: str,
    transport: str,
    auth: str,
    secrets: tuple[str, ...],
    allow_networks: tuple[str, ...],
    extra: str | None,
    user_id: str | None,
    as_json: bool,
) -> None:
    """Store the MCP server at URL as an mcp instance and print its id. With --transport
    stdio, URL is the command line that starts the server (the operator must allow its
    command in EXPEDITER_MCP_STDIO_ALLOW)."""

    config: dict[str, Any] = {**_extra(extra), "transport": transport, "auth": auth}
    if transport == "stdio":
        words = shlex.split(url)
        if not words:
            raise click.BadParameter("give the command that starts the server", param_hint="URL")
        config["command"], config["args"] = words[0], words[1:]
    else:
        if not url.lower().startswith(("http://", "https://")):
            raise click.BadParameter(
                f"{escape(url)} is not an http or https URL (e.g. https://host/mcp)",
                param_hint="URL",
            )
        config["url"] = url
    networks = network_options(allow_networks)
    if networks:
        config["allow_networks"] = networks
    # The secret fields' types: secret_headers=@FILE is read as a JSON object.
    values = secret_options(secrets, [field for field in FIELDS if field.secret])
    unknown = sorted(set(values) - set(SECRET_FIELDS))
    if unknown:
        raise click.BadParameter(
            f"no secret field {escape(', '.join(unknown))} (secret fields: "
            f"{', '.join(SECRET_FIELDS)})",
            param_hint="--secret",
        )
    config.update(values)
    record = store_instance(
        state, "mcp", pack="expediter-mcp", name=name, config=config, user_id=user_id
    )
    if transport != "stdio":
        warn_refused_url(state, url, networks, what="the server URL")
    if as_json:
        echo_json(record.to_dict())
    else:
        click.echo(record.id)


@mcp.command("tools")
@click.argument("instance_id", metavar="ID")
@click.option("--user", "user_id", default=None, help="List as this user (the invoker).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def tools_command(state: CliState, instance_id: str, user_id: str | None, as_json: bool) -> None:
    """Connect to the server of mcp instance ID and list its tools: the NAME to call them by
    (`expediter call ID NAME`), the server's own name, and the description."""
    from expediter_mcp.listing import Listing
    from expediter_mcp.operate import listing_of

    listing: Listing = listing_of(state.host(), instance_id, user_id)
    rows = [
        [action.name, listing.names[action.name], action.description.split("\n", 1)[0][:80]]
        for action in listing.actions
    ]
    if as_json:
        echo_json(
            [
                {
                    "name": action.name,
                    "mcp_name": listing.names[action.name],
                    "description": action.description,
                    "parameters": dict(action.parameters),
                }
                for action in listing.actions
            ]
        )
    else:
        echo_table(["NAME", "MCP NAME", "DESCRIPTION"], rows)


@mcp.command("login")
@click.argument("instance_id", metavar="ID")
@click.option("--user", "user_id", default=None, help="Log in as this user (the invoker).")
@click.option(
    "--timeout",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds to wait for the browser's callback.",
)
@click.option("--port", type=int, default=0, help="The loopback callback port (0: any free one).")
@pass_state
def login_command(
    state: CliState, instance_id: str, user_id: str | None, timeout: float, port: int
) -> None:
    """Authorize the mcp instance ID with OAuth: print the URL to open, wait for the
    authorization server's callback on loopback, and store the tokens encrypted."""
    from expediter_mcp.operate import login

    login(state.host(), instance_id, user_id, timeout=timeout, port=port, show=click.echo)
    click.echo("logged in", err=True)
