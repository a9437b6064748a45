"""``expediter plugins``, ``expediter tools list|show|schema``, ``expediter providers``, and the
``--provider`` option's choices."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from expediter.cli.app import CliState, pass_state
from expediter.cli.output import echo_json, echo_table, escape, shorten, warn
from expediter.cli.targets import TOOL_OR_INSTANCE, USER_ID, tool_target

if TYPE_CHECKING:
    from expediter.core.discovery.catalogue import ToolInfo
    from expediter.core.host import Host
    from expediter.core.instances.records import StoredInstance
    from expediter.hookspecs.tool import Action

__all__ = [
    "PROVIDER_NAMES",
    "instance_actions",
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
    instances = _instance_rows(state, host, infos, include_internal)
    if as_json:
        echo_json([info.summary() for info in infos] + instances)
    else:
        print_tools(infos)
        if instances:
            click.echo("")
            _print_instances(instances)
    _warn_problems(state)


def _has_database(state: CliState) -> bool:
    """Whether the ledger database may hold stored instances: a database URL is given, or the
    default SQLite file exists (a fresh data directory is not created, nor the ledger package
    imported, for a listing: the ``tools list`` budget of benchmarks/README.md)."""
    if state.config.database_url:
        return True
    # The file ``expediter.core.ledger.database.default_url`` names.
    return (state.config.home / "expediter.db").exists()


def instance_actions(
    host: Host, records: Iterable[StoredInstance]
) -> dict[str, tuple[list[Action], str | None]]:
    """Each enabled stored instance's actions as its owner's toolset offers them, or why it
    offers none: one toolset per owner, built as a turn's is (a remote tool's server is asked,
    within the tool's own time limits; a server that cannot be reached is that instance's
    error, never the command's)."""
    found: dict[str, tuple[list[Action], str | None]] = {}
    by_owner: dict[str | None, list[StoredInstance]] = {}
    for record in records:
        if record.enabled:
            by_owner.setdefault(record.owner_id, []).append(record)
        else:
            found[record.id] = ([], "disabled")
    for owner, owned in by_owner.items():
        try:
            toolset = host.toolset(user_id=owner)
        except Exception as exc:  # the stored instances cannot be read, say
            for record in owned:
                found[record.id] = ([], f"{type(exc).__name__}: {shorten(str(exc), 300)}")
            continue
        offered: dict[str, list[Action]] = {}
        for item in toolset.actions:
            offered.setdefault(item.instance_id, []).append(item.action)
        for record in owned:
            prefix = f"instance {record.id!r}: "
            errors = [error[len(prefix) :] for error in toolset.errors if error.startswith(prefix)]
            found[record.id] = (offered.get(record.id, []), errors[0] if errors else None)
    return found


def _instance_rows(
    state: CliState, host: Host, infos: Sequence[ToolInfo], include_internal: bool
) -> list[dict[str, Any]]:
    """``tools list``'s rows of the stored instances (every owner's), shaped as the tools'
    rows, with the instance's actions and id (none without a database)."""
    if not _has_database(state):
        return []
    from expediter.errors import ExpediterError

    try:
        stored = host.instances.list()
    except ExpediterError as exc:  # the tools are listed all the same
        warn(f"the stored instances cannot be listed: {exc}")
        return []
    tools = {info.name: info for info in host.catalogue(include_internal=True)}
    records = [
        record
        for record in stored
        if include_internal or record.tool not in tools or not tools[record.tool].internal
    ]
    listed = instance_actions(host, records)
    rows = []
    for record in records:
        info = tools.get(record.tool)
        actions, error = listed.get(record.id, ([], None))
        rows.append(
            {
                "name": record.name,
                "pack": None if info is None else info.pack,
                "source": "instance",
                "internal": False if info is None else info.internal,
                "actions": [action.name for action in actions if action.active],
                "version": None if info is None else info.version,
                "user_scoped": False if info is None else info.user_scoped,
                "headless_excluded": False if info is None else info.headless_excluded,
                "description": "" if info is None else info.description,
                "tool": record.tool,
                "instance_id": record.id,
                "owner_id": record.owner_id,
                "enabled": record.enabled,
                "error": error,
            }
        )
    return rows


def _print_instances(rows: Sequence[Mapping[str, Any]]) -> None:
    echo_table(
        ["INSTANCE", "TOOL", "ACTIONS", "OWNER", "ID", "DESCRIPTION"],
        [
            [
                row["name"],
                row["tool"],
                ", ".join(row["actions"]),
                "-" if row["owner_id"] is None else row["owner_id"],
                row["instance_id"],
                shorten(f"error: {row['error']}" if row["error"] else row["description"], 60),
            ]
            for row in rows
        ],
    )


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


def _type_text(schema: Any, depth: int = 0) -> str:
    """A parameter's type in a few words (a schema from a remote server may be anything)."""
    if not isinstance(schema, Mapping) or depth > 5:
        return "any"
    if isinstance(schema.get("enum"), list):
        return shorten(" | ".join(json.dumps(value) for value in schema["enum"]), 200)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(item) for item in kind)
    if kind == "array":
        return f"array of {_type_text(schema.get('items') or {}, depth + 1)}"
    if "$ref" in schema:
        return str(schema["$ref"]).rpartition("/")[2]
    if isinstance(schema.get("anyOf"), list):
        return " | ".join(_type_text(item, depth + 1) for item in schema["anyOf"])
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
@click.argument("tool", metavar="TOOL_OR_INSTANCE_ID", type=TOOL_OR_INSTANCE)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def show_tool(state: CliState, tool: str, as_json: bool) -> None:
    """Show a tool's (or an instance's tool's) actions, parameter schemas and config fields."""
    from expediter.errors import ToolNotFound

    host = state.host()
    tool = tool_target(host, tool, None)
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
    actions: Sequence[Action] = info.actions
    problem = None
    if instance is not None:
        # The instance's own actions (an http or mcp instance's come from its configuration
        # or its server), as its owner's toolset offers them.
        actions, problem = instance_actions(host, [instance])[instance.id]
    if as_json:
        data = info.to_dict()
        if instance is not None:
            data["actions"] = [action.to_dict() for action in actions]
            data["instance"] = instance.to_dict()
            data["instance_error"] = problem
        echo_json(data)
        return
    if instance is not None:
        owner = "shared" if instance.owner_id is None else f"owner {instance.owner_id}"
        state_text = "enabled" if instance.enabled else "disabled"
        click.echo(escape(f"instance {instance.name} ({instance.id}): {owner}, {state_text}"))
        if problem is not None:
            click.echo(escape(f"  its actions cannot be listed: {problem}"))
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
    _print_actions(actions)
    click.echo("")
    if info.config:
        click.echo("  config:")
        for field in info.config:
            bits = [field.type, "required" if field.required else "optional"]
            if field.secret:
                bits.append("secret")
            if field.operator_only:
                bits.append("operator only")
            if field.enum is not None:
                bits.append(
                    "one of " + ", ".join(json.dumps(value, default=repr) for value in field.enum)
                )
            if field.default is not None:
                bits.append(f"default {json.dumps(field.default, default=repr)}")
            if field.depends_on:
                bits.append(
                    "when "
                    + ", ".join(
                        f"{name}={json.dumps(value, default=repr)}"
                        for name, value in field.depends_on.items()
                    )
                )
            click.echo(escape(f"    {field.name}: {', '.join(bits)}  {field.description}".rstrip()))
    else:
        click.echo("  config: none")


def _print_actions(actions: Iterable[Action]) -> None:
    """Each action with its parameters: name, type, required or optional, description."""
    for action in actions:
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
        # On one line: a description's line breaks would show as \n escapes.
        description = " ".join(action.description.split())
        click.echo(escape(f"  {action.name}{suffix}: {description}"))
        properties = action.parameters.get("properties")
        if not isinstance(properties, Mapping):
            properties = {}
        required = action.parameters.get("required")
        if not isinstance(required, list):
            required = []
        for name, schema in properties.items():
            need = "required" if name in required else "optional"
            details = schema if isinstance(schema, Mapping) else {}
            if "default" in details:
                need += f", default {shorten(json.dumps(details['default']), 80)}"
            text = shorten(str(details.get("description") or ""), 300)
            click.echo(escape(f"    {name}: {_type_text(schema)} ({need})  {text}".rstrip()))
        if not properties:
            click.echo("    (no parameters)")


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
@click.option("--user", "user_id", type=USER_ID, default=None, help="Offer the tools of this user.")
@pass_state
def schema(
    state: CliState, provider: str, strict: bool, as_json: bool, user_id: str | None
) -> None:
    """Print the tool definitions for a provider's `tools` field."""
    toolset = state.host().toolset(user_id=user_id)
    echo_json(toolset.schemas(provider, strict=strict))
