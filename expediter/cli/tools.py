"""``expediter plugins``, ``expediter tools list|show|schema``, ``expediter providers``, and the
``--provider`` option's choices."""

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

__all__ = [
    "PROVIDER_NAMES",
    "plugins",
    "print_tools",
    "provider_choice",
    "provider_names",
    "providers",
    "tools",
]


def _warn_problems(state: CliState) -> None:
    host = state.host()
    for pack in host.packs:
        if pack.error:
            warn(f"pack {pack.name!r} failed to load: {shorten(pack.error, 200)}")
        elif (problem := _open_to_everyone(pack)) is not None:
            warn(f"pack {pack.name!r}: {problem}")
    for conflict in (*host.conflicts, *host.provider_conflicts):
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
                conflict.message
                for conflict in (*conflicts.values(), *host.provider_conflicts)
                if any(entry[3] == pack.id for entry in conflict.packs)
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
    for conflict in (*host.conflicts, *host.provider_conflicts):
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


#: The built-in providers (kept here so ``--help`` imports no adapter); ``--provider`` takes
#: these and the providers packs register (``provider_choice``).
PROVIDER_NAMES = ("anthropic", "gemini", "mistral", "ollama", "openai", "openai-responses")


def _command_line_host() -> Host | None:
    """The running command's host; None outside the ``expediter`` command line, or when its
    configuration is unusable (the command then says why)."""
    ctx = click.get_current_context(silent=True)
    state = ctx.find_object(CliState) if ctx is not None else None
    if state is None:
        return None
    try:
        return state.host()
    except Exception:
        return None


def provider_names() -> tuple[str, ...]:
    """The names ``--provider`` accepts, sorted: the built-ins and the providers packs register,
    as the manifest keeps them (no pack imported); the built-ins alone outside the command
    line."""
    host = _command_line_host()
    if host is None:
        return PROVIDER_NAMES
    return tuple(info.name for info in host.providers())


class _ProviderChoice(click.Choice[str]):
    """``--provider``'s choices (``provider_names``), read when first needed: ``--help`` and a
    pack's provider name read the manifest, a built-in name is accepted without it."""

    name = "provider"

    def __init__(self) -> None:
        super().__init__(PROVIDER_NAMES)

    @property
    def choices(self) -> tuple[str, ...]:
        """Every provider name, from the manifest."""
        return provider_names()

    @choices.setter
    def choices(self, value: Iterable[str]) -> None:
        """Ignored: the choices are always the manifest's."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """A provider name; a built-in's is taken as it is (the manifest is not read)."""
        if value in PROVIDER_NAMES:
            return str(value)
        host = _command_line_host()
        if host is not None and isinstance(value, str):
            for conflict in host.provider_conflicts:
                if conflict.tool == value:
                    self.fail(escape(conflict.message), param, ctx)
        return super().convert(value, param, ctx)


def provider_choice() -> click.Choice[str]:
    """The type of a ``--provider`` option: the built-ins and the providers packs register."""
    return _ProviderChoice()


@click.command("providers")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def providers(state: CliState, as_json: bool) -> None:
    """List the LLM providers --provider accepts: name, pack and whether it reads streams.

    The built-ins come with the pack `expediter`; packs add more with the register_providers
    hook (listed from the tool cache: no pack is imported).
    """
    rows = state.host().providers()
    if as_json:
        echo_json([row.summary() for row in rows])
    else:
        echo_table(
            ["NAME", "PACK", "STREAMING"],
            [[row.name, row.pack, "yes" if row.streaming else "no"] for row in rows],
        )
    _warn_problems(state)


@tools.command("schema")
@click.option("--provider", required=True, type=provider_choice(), help="The LLM provider.")
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
