"""``expediter instances ...`` and ``expediter keys ...``: stored tool instances and the master
keys their credentials are sealed with.

No secret value is ever printed: records show secret fields as ``"***"``, and an error about a
``--secret`` option names the field, never the value.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from expediter.cli.app import CliState, pass_state
from expediter.cli.output import dump_json, echo_json, echo_table, escape, warn
from expediter.cli.targets import INSTANCE_ID, INSTANCE_NAME, INSTANCE_OR_TOOL, USER_ID
from expediter.core.records.jsonread import read_json

if TYPE_CHECKING:
    from expediter.core.instances.records import StoredInstance
    from expediter.hookspecs.tool import ConfigField

__all__ = [
    "allow_network_option",
    "instances",
    "keys",
    "network_options",
    "print_instance",
    "secret_options",
    "store_instance",
    "warn_refused_url",
]

_SECRET_HELP = (
    "A configuration field, FIELD=VALUE; FIELD=- reads the value from standard input, "
    "FIELD=@PATH from a file (one trailing newline removed). The value of a field that is "
    "not a string (an object, an array, a number) is JSON. Repeatable."
)
#: The config field types whose ``--secret`` values are JSON, as an error names them.
_JSON_TYPES: Final = {
    "object": "an object",
    "array": "an array",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
}


def _chomp(text: str) -> str:
    """``text`` without one trailing newline (``\\n`` or ``\\r\\n``)."""
    if text.endswith("\r\n"):
        return text[:-2]
    return text.removesuffix("\n")


def _secret_text(field: str, value: str) -> tuple[str, str]:
    """The text of one ``--secret`` (given, from standard input for ``-`` or a file for
    ``@PATH``) and what an error calls where it came from."""
    if value == "-":
        return _chomp(sys.stdin.read()), "standard input"
    if not value.startswith("@"):
        return value, "the value"
    path = Path(value[1:]).expanduser()
    try:
        return _chomp(path.read_text(encoding="utf-8")), f"the file {escape(str(path))}"
    except UnicodeError:
        raise click.BadParameter(
            f"the file {escape(str(path))} for {escape(repr(field))} is not UTF-8 text",
            param_hint="--secret",
        ) from None
    except OSError as exc:
        raise click.BadParameter(
            f"cannot read the file {escape(str(path))} for {escape(repr(field))}: "
            f"{exc.strerror or type(exc).__name__}",
            param_hint="--secret",
        ) from None


def _json_type(value: Any) -> str:
    """What a decoded JSON value is, as an error names it (never the value itself)."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "an integer"
    names = {dict: "an object", list: "an array", str: "a string", float: "a number"}
    return names.get(type(value), "null")


def _fits(kind: str, value: Any) -> bool:
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return _json_type(value) == _JSON_TYPES[kind]


def _secret_value(field: str, value: str, kind: str) -> Any:
    """The value of one ``--secret`` for a field of config type ``kind``: its text, or for a
    type that is not a string (an object of credentials, an array) the JSON that text holds.
    Errors name the field and the file, and give a position only: the text is a secret."""
    text, source = _secret_text(field, value)
    wanted = _JSON_TYPES.get(kind)
    if wanted is None:
        return text
    named = f"{source} for {escape(repr(field))}"
    try:
        decoded = read_json(text)
    except ValueError as exc:  # "is not valid JSON: <reason>: line L column C (char N)"
        raise click.BadParameter(
            f"{named} {exc}; {escape(repr(field))} takes JSON ({wanted})", param_hint="--secret"
        ) from None
    if not _fits(kind, decoded):
        raise click.BadParameter(
            f"{named} holds {_json_type(decoded)}; {escape(repr(field))} takes {wanted}",
            param_hint="--secret",
        )
    return decoded


def store_instance(
    state: CliState,
    tool: str,
    *,
    pack: str,
    name: str,
    config: dict[str, Any],
    user_id: str | None,
) -> Any:
    """Store an instance of a pack's tool as the operator (a pack's ``add``/``import``
    command): a tool that did not load, or a configuration the tool refuses, is a clear
    command-line error; a taken name names ``--name``."""
    from expediter.errors import ArgumentError, ToolNotFound

    try:
        return state.host().instances.add(
            tool, name=name, config=config, user_id=user_id, operator=True
        )
    except ToolNotFound as exc:
        raise click.ClickException(
            f"{escape(str(exc))} (the {tool} tool of {pack} did not load: run "
            "`expediter plugins` to see why)"
        ) from None
    except ArgumentError as exc:
        if exc.parameter == "name":
            raise click.BadParameter(escape(str(exc)), param_hint="--name") from None
        raise click.UsageError(escape(str(exc))) from None


#: The ``--allow-network CIDR`` option of a pack's command that stores an instance (parse the
#: values with ``network_options``).
allow_network_option = click.option(
    "--allow-network",
    "allow_networks",
    multiple=True,
    metavar="CIDR",
    help="A private network range the instance may reach (operator only). Repeatable.",
)


def network_options(values: Sequence[str]) -> list[str]:
    """The ``--allow-network CIDR`` options as networks (an address is its own /32 or
    /128); a value that is no network is a usage error naming the option."""
    import ipaddress

    networks: list[str] = []
    for value in values:
        try:
            networks.append(str(ipaddress.ip_network(value, strict=False)))
        except ValueError:
            raise click.BadParameter(
                f"{escape(value)} is not a network: give a CIDR range such as 10.0.0.0/8 or "
                "fd00::/8, or one address",
                param_hint="--allow-network",
            ) from None
    return networks


#: Names that resolve to the loopback addresses on every system (no lookup needed).
_LOOPBACK_NAMES = ("localhost", "localhost.")


def warn_refused_url(state: CliState, url: str, networks: Sequence[str], *, what: str) -> None:
    """Warn (on standard error) when the egress guard will refuse ``url``'s host: a literal
    loopback, private, link-local or other non-public address, or ``localhost``, that neither
    ``networks`` (the instance's ``--allow-network``) nor EXPEDITER_EGRESS_ALLOW allows. A
    host name is never resolved here; the guard judges it when a call dials it."""
    import ipaddress
    import urllib.parse

    from expediter.core.netguard import address_problem, literal_address, parse_networks
    from expediter.errors import EgressBlocked

    try:
        host = urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        return
    if host.lower() in _LOOPBACK_NAMES:
        addresses: list[Any] = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    else:
        found = literal_address(host)
        if found is None:
            return
        addresses = [found]
    allowed = parse_networks([*networks, *state.config.egress_allow])
    refused = [
        (address, problem)
        for address in addresses
        if (problem := address_problem(address, allowed)) is not None
    ]
    if not refused:
        return
    reasons = "; ".join(problem for _, problem in refused)
    hint = EgressBlocked.hint_for(str(address) for address, _ in refused)
    warn(
        f"{what} names {host!r} ({reasons}): the egress guard refuses it, so every call of "
        f"the instance would fail with {EgressBlocked.MESSAGE!r}; {hint}"
    )


def secret_options(options: Sequence[str], fields: Iterable[ConfigField] = ()) -> dict[str, Any]:
    """The ``--secret FIELD=VALUE`` options as fields; the values are never echoed. ``fields``
    are the tool's config fields: the value of one whose type is not ``string`` (e.g. an
    ``object`` of credentials read from ``@creds.json``) is decoded as JSON and must be of that
    type; any other value is text."""
    kinds = {field.name: field.type for field in fields}
    found: dict[str, Any] = {}
    from_stdin: str | None = None
    for option in options:
        field, equals, value = option.partition("=")
        if not equals or not field:
            # The option may be a bare secret: say what is wrong without repeating it.
            raise click.BadParameter(
                "expected FIELD=VALUE, FIELD=- or FIELD=@PATH", param_hint="--secret"
            )
        if field in found:
            raise click.BadParameter(
                f"field {escape(repr(field))} is given twice", param_hint="--secret"
            )
        if value == "-":
            if from_stdin is not None:
                raise click.BadParameter(
                    f"only one field may be read from standard input "
                    f"({escape(repr(from_stdin))} and {escape(repr(field))} ask for it); "
                    "read the other from a file (FIELD=@PATH)",
                    param_hint="--secret",
                )
            from_stdin = field
        found[field] = _secret_value(field, value, kinds.get(field, "string"))
    return found


def _tool_fields(state: CliState, tool: str) -> Sequence[ConfigField]:
    """The config fields of ``tool``, which say how ``--secret`` values are read; none when
    it does not load (storing the instance then says why)."""
    from expediter.errors import ToolConflict, ToolNotFound

    try:
        return state.host().tool_info(tool).config
    except (ToolConflict, ToolNotFound):
        return ()


def _config(
    config_json: str | None, secrets: Sequence[str], fields: Iterable[ConfigField] = ()
) -> dict[str, Any] | None:
    """``--config`` and ``--secret`` as one configuration (None when neither is given);
    ``fields`` are the tool's (see ``secret_options``)."""
    if config_json is None and not secrets:
        return None
    config: dict[str, Any] = {}
    if config_json is not None:
        try:
            parsed = read_json(config_json)
        except ValueError as exc:
            # The message gives the position only: --config may hold secrets too.
            raise click.BadParameter(str(exc).removeprefix("is "), param_hint="--config") from None
        if not isinstance(parsed, dict):
            raise click.BadParameter(
                f"must be a JSON object, not {type(parsed).__name__}", param_hint="--config"
            )
        config = parsed
    for field, value in secret_options(secrets, fields).items():
        if field in config:
            raise click.UsageError(
                f"field {escape(repr(field))} is given both in --config and --secret; give it once"
            )
        config[field] = value
    return config


def print_instance(record: StoredInstance) -> None:
    """One instance, a field a line (secret fields as ``***``)."""
    for name, value in record.to_dict().items():
        if name == "owner_id" and value is None:
            text = "- (shared)"
        elif isinstance(value, str):
            text = value
        else:
            text = dump_json(value)
        click.echo(f"{name:>14}: {escape(text)}")


def _print_table(records: Sequence[StoredInstance]) -> None:
    echo_table(
        ["ID", "NAME", "TOOL", "OWNER", "ENABLED"],
        [
            [
                record.id,
                record.name,
                record.tool,
                "-" if record.owner_id is None else record.owner_id,
                "yes" if record.enabled else "no",
            ]
            for record in records
        ],
    )


def _tool_not_found(exc: Exception) -> click.UsageError:
    return click.UsageError(escape(str(exc)))


@click.group()
def instances() -> None:
    """Add, list, change and remove stored tool instances (credentials sealed per owner)."""


@instances.command("add")
@click.argument("tool")
@click.option(
    "--name",
    required=True,
    type=INSTANCE_NAME,
    help="The instance's display name (unique per owner).",
)
@click.option("--config", "config_json", metavar="JSON", help="Configuration as a JSON object.")
@click.option("--secret", "secrets", multiple=True, metavar="FIELD=VALUE", help=_SECRET_HELP)
@click.option(
    "--user",
    "user_id",
    type=USER_ID,
    default=None,
    help="The owner (default: shared by everyone).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the new record as JSON.")
@pass_state
def add(
    state: CliState,
    tool: str,
    name: str,
    config_json: str | None,
    secrets: tuple[str, ...],
    user_id: str | None,
    as_json: bool,
) -> None:
    """Store a configured instance of TOOL and print its id."""
    from expediter.errors import ToolNotFound

    config = _config(config_json, secrets, _tool_fields(state, tool) if secrets else ())
    try:
        record = state.host().instances.add(tool, name, config, user_id=user_id, operator=True)
    except ToolNotFound as exc:
        raise _tool_not_found(exc) from exc
    if as_json:
        echo_json(record.to_dict())
    else:
        click.echo(record.id)


@instances.command("ls")
@click.option(
    "--user", "user_id", type=USER_ID, default=None, help="Only this user's and the shared ones."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def list_instances(state: CliState, user_id: str | None, as_json: bool) -> None:
    """List stored instances (every owner's unless --user), oldest first."""
    registry = state.host().instances
    records = registry.list() if user_id is None else registry.list(user_id)
    if as_json:
        echo_json([record.to_dict() for record in records])
    else:
        _print_table(records)


@instances.command("show")
@click.argument("instance_id", metavar="ID", type=INSTANCE_ID)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def show(state: CliState, instance_id: str, as_json: bool) -> None:
    """Show one stored instance (secret fields as ***)."""
    record = state.host().instances.get(instance_id)
    if as_json:
        echo_json(record.to_dict())
    else:
        print_instance(record)


@instances.command("rm")
@click.argument("instance_id", metavar="ID", type=INSTANCE_ID)
@pass_state
def remove(state: CliState, instance_id: str) -> None:
    """Delete a stored instance, with its credentials and the records its tool kept."""
    state.host().instances.remove(instance_id)
    click.echo(f"removed tool instance {escape(instance_id)}", err=True)


@instances.command("set")
@click.argument("instance_id", metavar="ID", type=INSTANCE_ID)
@click.option("--name", type=INSTANCE_NAME, default=None, help="A new display name.")
@click.option(
    "--config",
    "config_json",
    metavar="JSON",
    help="Fields to change, as a JSON object (null removes one).",
)
@click.option("--secret", "secrets", multiple=True, metavar="FIELD=VALUE", help=_SECRET_HELP)
@click.option("--enable/--disable", "enabled", default=None, help="Switch it on or off.")
@click.option("--json", "as_json", is_flag=True, help="Print the changed record as JSON.")
@pass_state
def change(
    state: CliState,
    instance_id: str,
    name: str | None,
    config_json: str | None,
    secrets: tuple[str, ...],
    enabled: bool | None,
    as_json: bool,
) -> None:
    """Change a stored instance; secret fields left out keep their stored values."""
    if name is None and config_json is None and not secrets and enabled is None:
        raise click.UsageError(
            "nothing to change: give --name, --config, --secret, --enable or --disable"
        )
    fields = _tool_fields(state, state.host().instances.get(instance_id).tool) if secrets else ()
    config = _config(config_json, secrets, fields)
    record = state.host().instances.update(
        instance_id, name=name, config=config, enabled=enabled, operator=True
    )
    if as_json:
        echo_json(record.to_dict())
    else:
        click.echo(f"updated tool instance {escape(record.id)}", err=True)


def _switch(state: CliState, id_or_tool: str, user_id: str | None, *, enabled: bool) -> None:
    registry = state.host().instances
    switch = registry.enable if enabled else registry.disable
    click.echo(escape(switch(id_or_tool, user_id=user_id)))


@instances.command("enable")
@click.argument("id_or_tool", metavar="ID_OR_TOOL", type=INSTANCE_OR_TOOL)
@click.option(
    "--user", "user_id", type=USER_ID, default=None, help="Only for this user (an opt-in)."
)
@pass_state
def enable(state: CliState, id_or_tool: str, user_id: str | None) -> None:
    """Switch an instance or a default tool on (for one user with --user); prints its id."""
    _switch(state, id_or_tool, user_id, enabled=True)


@instances.command("disable")
@click.argument("id_or_tool", metavar="ID_OR_TOOL", type=INSTANCE_OR_TOOL)
@click.option(
    "--user", "user_id", type=USER_ID, default=None, help="Only for this user (an opt-out)."
)
@pass_state
def disable(state: CliState, id_or_tool: str, user_id: str | None) -> None:
    """Switch an instance or a default tool off (for one user with --user); prints its id."""
    _switch(state, id_or_tool, user_id, enabled=False)


@click.group()
def keys() -> None:
    """Generate master keys (EXPEDITER_SECRET_KEYS) and reseal credentials with the newest."""


@keys.command("generate")
def generate() -> None:
    """Print a new random master key (nothing is stored)."""
    from expediter.core.instances.keys import generate_key

    click.echo(generate_key())


@keys.command("rotate")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_state
def rotate(state: CliState, as_json: bool) -> None:
    """Reseal every stored credential with the newest key (exit 1 if any cannot be opened)."""
    done = state.host().instances.rotate()
    if as_json:
        failed = [{"id": instance_id, "error": reason} for instance_id, reason in done.failed]
        echo_json({"resealed": done.resealed, "current": done.current, "failed": failed})
    else:
        click.echo(
            f"resealed {done.resealed}, already current {done.current}, failed {len(done.failed)}"
        )
        for instance_id, reason in done.failed:
            click.echo(escape(f"instance {instance_id}: {reason}"), err=True)
    if done.failed:
        sys.exit(1)
