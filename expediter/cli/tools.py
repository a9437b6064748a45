"""``expediter plugins``, ``expediter tools list`` and ``expediter tools show``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from expediter.cli.app import CliState, pass_state
from expediter.cli.output import echo_json, echo_table, escape, shorten, warn

if TYPE_CHECKING:
    from expediter.core.host import Host
    from expediter.core.instances.records import StoredInstance

__all__ = ["PROVIDER_NAMES", "plugins", "print_tools", "tools"]


def _warn_problems(state: CliState) -> None:
    host = state.host()
    for pack in host.packs:
        if pack.error:
            warn(f"pack {pack.name!r} failed to load: {shorten(pack.error, 200)}")
        elif (problem := _open_to_everyone(pack)) is not None:
            warn(f"pack {pack.name!r}: {problem}")
    for conflict in host.conflicts:
        warn(conflict.message)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def plugins(state: CliState, as_json: bool) -> None:
    """List tool packs: version, source, hooks, tools and load errors (or a warning: a tools
    module every user may change).

    Runs even with EXPEDITER_STRICT_PLUGINS set, so a broken pack can be diagnosed (and then
    exits 1 if there are load errors, conflicts or such warnings).
    """
    host = state.host(strict=False)
    _print_packs(host, as_json)
    from expediter.core.host import strict_message

    # What strict mode refuses to import is a load error there (a module anyone may change).
    problems = host.errors + [
        f"pack {pack.name!r}: {problem}"
        for pack in host.packs
        if not pack.error and (problem := _open_to_everyone(pack)) is not None
    ]
    if state.config.strict_plugins and problems:
        raise click.ClickException(strict_message(escape(problem) for problem in problems))


def _print_packs(host: Host, as_json: bool) -> None:
    packs = sorted(host.packs, key=lambda pack: (pack.source != "built-in", pack.name))
    conflicts = {conflict.tool: conflict for conflict in host.conflicts}
    if as_json:
        rows = []
        for pack in packs:
            row = pack.to_dict()
            row["warning"] = None if pack.error else _open_to_everyone(pack)
            row["conflicts"] = [
                conflicts[name].message
                for name in conflicts
                if any(entry[3] == pack.id for entry in conflicts[name].packs)
            ]
            rows.append(row)
        echo_json(rows)
        return
    echo_table(
        ["NAME", "VERSION", "SOURCE", "TOOLS", "HOOKS", "ERROR"],
        [
            [
                pack.name,
                pack.version or "-",
                pack.source,
                ", ".join(pack.tools) or "-",
                ", ".join(pack.hooks) or "-",
                _problem_text(pack),
            ]
            for pack in packs
        ],
    )
    for pack in packs:
        if not pack.error and (problem := _open_to_everyone(pack)) is not None:
            warn(f"pack {pack.name!r}: {problem}")
    for conflict in host.conflicts:
        warn(conflict.message)


def _open_to_everyone(pack: Any) -> str | None:
    """Why every user may change a tools-directory or built-in pack's code (its modes as they
    are now), or None. Strict mode refuses to import such a pack; it is otherwise a warning."""
    if pack.source not in ("directory", "built-in") or not pack.location.path:
        return None
    from expediter.core.discovery.manifest import open_to_everyone

    return open_to_everyone(pack.location.path)


def _problem_text(pack: Any) -> str:
    """The ERROR cell of ``plugins``: the pack's load error, else its warning."""
    if pack.error:
        return shorten(pack.error, 60)
    problem = _open_to_everyone(pack)
    return shorten(f"warning: {problem}", 60) if problem else ""


@click.group()
def tools() -> None:
    """See the tools the host offers."""


@tools.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--all", "include_internal", is_flag=True, help="Include internal tools.")
@pass_state
def list_tools(state: CliState, as_json: bool, include_internal: bool) -> None:
    """List the offered tools and their actions."""
    host = state.host()
    infos = host.catalogue(include_internal=include_internal)
    if as_json:
        echo_json([info.summary() for info in infos])
    else:
        print_tools(infos)
    _warn_problems(state)


def print_tools(infos: Iterable[Any]) -> None:
    """The table of ``tools list``: name, actions, pack, source, description."""
    echo_table(
        ["NAME", "ACTIONS", "PACK", "SOURCE", "DESCRIPTION"],
        [
            [
                info.name + (" (internal)" if info.internal else ""),
                ", ".join(info.summary()["actions"]),
                info.pack,
                info.source,
                shorten(info.description, 60),
            ]
            for info in infos
        ],
    )


def _type_text(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(value) for value in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array":
        return f"array of {_type_text(schema.get('items') or {})}"
    if "$ref" in schema:
        return str(schema["$ref"]).rpartition("/")[2]
    if "anyOf" in schema:
        return " | ".join(_type_text(item) for item in schema["anyOf"])
    return str(kind or "any")


def _stored_instance(host: Host, text: str) -> StoredInstance | None:
    """The stored instance ``text`` names, or None; only an id-shaped name is looked up, so
    a mistyped tool name opens no database."""
    import uuid

    from expediter.errors import InstanceNotFound

    try:
        uuid.UUID(text)
    except ValueError:
        return None
    try:
        return host.instances.get(text)
    except InstanceNotFound:
        return None


@tools.command("show")
@click.argument("tool", metavar="TOOL_OR_INSTANCE_ID")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def show_tool(state: CliState, tool: str, as_json: bool) -> None:
    """Show a tool's (or an instance's tool's) actions, parameter schemas and config fields."""
    from expediter.errors import ToolNotFound

    host = state.host()
    instance = None
    try:
        info = host.tool_info(tool)
    except ToolNotFound as exc:
        instance = _stored_instance(host, tool)
        if instance is None:
            raise click.UsageError(escape(str(exc))) from exc
        try:
            info = host.tool_info(instance.tool)
        except ToolNotFound as missing:
            raise click.UsageError(
                escape(f"tool instance {instance.name!r} ({instance.id}): {missing}")
            ) from missing
    if as_json:
        data = info.to_dict()
        if instance is not None:
            data["instance"] = instance.to_dict()
        echo_json(data)
        return
    if instance is not None:
        owner = "shared" if instance.owner_id is None else f"owner {instance.owner_id}"
        state_text = "enabled" if instance.enabled else "disabled"
        click.echo(escape(f"instance {instance.name} ({instance.id}): {owner}, {state_text}"))
    flags = [
        flag
        for flag, on in (
            ("internal", info.internal),
            ("user-scoped", info.user_scoped),
            ("headless-excluded", info.headless_excluded),
        )
        if on
    ]
    click.echo(
        escape(
            f"{info.name}  (pack {info.pack} {info.version or ''}, {info.source}"
            + (", " + ", ".join(flags) if flags else "")
            + ")"
        )
    )
    if info.description:
        click.echo(f"  {escape(info.description)}")
    for action in info.actions:
        click.echo("")
        marks = [
            mark
            for mark, on in (
                ("needs approval", action.require_approval),
                ("inactive", not action.active),
            )
            if on
        ]
        suffix = f"  [{', '.join(marks)}]" if marks else ""
        click.echo(escape(f"  {action.name}{suffix}: {action.description}"))
        properties = action.parameters.get("properties", {})
        required = set(action.parameters.get("required", []))
        for name, schema in properties.items():
            need = "required" if name in required else "optional"
            if "default" in schema:
                need += f", default {json.dumps(schema['default'])}"
            text = schema.get("description", "")
            click.echo(escape(f"    {name}: {_type_text(schema)} ({need})  {text}".rstrip()))
        if not properties:
            click.echo("    (no parameters)")
    click.echo("")
    if info.config:
        click.echo("  config:")
        for field in info.config:
            bits = [field.type, "required" if field.required else "optional"]
            if field.secret:
                bits.append("secret")
            click.echo(escape(f"    {field.name}: {', '.join(bits)}  {field.description}".rstrip()))
    else:
        click.echo("  config: none")


#: The providers ``--provider`` accepts (kept here so ``--help`` imports no adapter).
PROVIDER_NAMES = ("anthropic", "gemini", "mistral", "ollama", "openai", "openai-responses")


@tools.command("schema")
@click.option(
    "--provider", required=True, type=click.Choice(PROVIDER_NAMES), help="The LLM provider."
)
@click.option("--strict", is_flag=True, help="Strict mode (OpenAI and Anthropic).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (the default).")
@click.option("--user", "user_id", default=None, help="Offer the tools of this user.")
@pass_state
def schema(
    state: CliState, provider: str, strict: bool, as_json: bool, user_id: str | None
) -> None:
    """Print the tool definitions for a provider's `tools` field."""
    toolset = state.host().toolset(user_id=user_id)
    echo_json(toolset.schemas(provider, strict=strict))
