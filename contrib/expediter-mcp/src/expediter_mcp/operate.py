"""What the ``expediter mcp`` commands do with a stored instance, apart from the command line:
list its server's tools, and log in with OAuth."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

import expediter
from expediter.cli.output import escape
from expediter.errors import ConfigError, EgressBlocked, ExpediterError

if TYPE_CHECKING:
    from expediter_mcp.listing import Listing
    from expediter_mcp.tool import McpTool

__all__ = ["context_for", "listing_of", "login", "tool_for"]


def tool_for(host: expediter.Host, instance_id: str) -> tuple[Any, McpTool]:
    """The stored instance (secrets decrypted) and a tool made from its configuration."""
    from expediter_mcp.tool import McpTool

    record = host.instances.get(instance_id, decrypt=True)
    if record.tool != "mcp":
        raise click.UsageError(
            f"instance {escape(instance_id)} is a {escape(repr(record.tool))} instance, not an "
            "mcp one"
        )
    return record, McpTool({**record.config, **(record.secrets or {})})


def context_for(host: expediter.Host, record: Any, user_id: str | None) -> expediter.CallContext:
    """The context a call of ``user_id`` (default: the owner) would have."""
    return expediter.CallContext(
        user_id=user_id if user_id is not None else record.owner_id,
        owner_id=record.owner_id,
        instance_id=record.id,
        tool="mcp",
        secrets=dict(record.secrets or {}),
        egress_allow=host.config.egress_allow,
        # Only OAuth needs them (and they need the key, which other instances may not).
        tokens=host.instances.tokens(record.id) if record.config.get("auth") == "oauth" else None,
    )


def _failure(exc: BaseException) -> click.ClickException:
    if isinstance(exc, EgressBlocked):
        hint = exc.hint or (
            "a private or loopback server needs `--allow-network CIDR` on `expediter mcp add`"
        )
        return click.ClickException(
            escape(f"the egress guard refused the connection: {exc.reason}; {hint}")
        )
    if isinstance(exc, ConfigError | expediter.ToolError | ExpediterError):
        return click.ClickException(escape(str(exc)))
    return click.ClickException(
        f"could not list the server's tools: {type(exc).__name__}: {escape(str(exc)[:300])}"
    )


def listing_of(host: expediter.Host, instance_id: str, user_id: str | None) -> Listing:
    """The server's tools, asked now (a ClickException says why it failed)."""
    record, tool = tool_for(host, instance_id)
    try:
        return tool.listing(context_for(host, record, user_id), fresh=True)
    except Exception as exc:
        from expediter_mcp.sessions import egress_cause

        raise _failure(egress_cause(exc) or exc) from None


def login(
    host: expediter.Host,
    instance_id: str,
    user_id: str | None,
    *,
    timeout: float,
    port: int,
    show: Callable[[str], None],
) -> None:
    """Run the OAuth authorization-code flow for the instance and store its tokens."""
    from expediter_mcp.oauth import interactive_login

    record, tool = tool_for(host, instance_id)
    if tool.settings.auth != "oauth":
        raise click.UsageError(
            f"instance {escape(instance_id)} does not use OAuth (its auth is "
            f"{escape(tool.settings.auth)})"
        )
    try:
        interactive_login(
            tool, context_for(host, record, user_id), timeout=timeout, port=port, show=show
        )
    except Exception as exc:
        raise _failure(exc) from None
