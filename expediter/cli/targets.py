"""What ``call`` and ``tools show`` take as TOOL: a tool's name, or a stored instance by its id,
its name, or a unique beginning of its id (as ``instances ls`` shows it); and the ids and names
commands take (``--user``, instance ids), kept exactly as given."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from expediter.cli.output import escape

if TYPE_CHECKING:
    from expediter.core.host import Host
    from expediter.core.instances.records import StoredInstance

__all__ = [
    "INSTANCE_ID",
    "INSTANCE_NAME",
    "INSTANCE_OR_TOOL",
    "TOOL_OR_INSTANCE",
    "USER_ID",
    "Identifier",
    "check_configured",
    "tool_target",
]

#: How many matching instances an ambiguous name or prefix lists.
_LISTED = 5


class Identifier(click.ParamType[str]):
    """An id or name given on the command line, used exactly as given: one that cannot be
    stored exactly (NUL, a lone surrogate, as an undecodable byte of the command line becomes,
    more than 512 characters, empty) is a usage error naming the option, never changed into
    one that may be somebody else's (``expediter.errors.IdentifierError.check``)."""

    name = "text"

    def __init__(self, what: str, *, display: bool = False) -> None:
        self.what = what
        #: A display name: how long it may be (empty included) is the instance's own rule,
        #: said where it is stored; only what no database keeps exactly is refused here.
        self.display = display

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The id, or ``click.BadParameter`` (exit status 2) saying why it is refused."""
        from expediter.errors import IdentifierError

        if self.display and value == "":
            return ""
        try:
            return IdentifierError.check(
                value, self.what, limit=None if self.display else IdentifierError.LIMIT
            )
        except IdentifierError as exc:
            self.fail(escape(str(exc)), param, ctx)


#: ``--user``: a user id (the owner, or the invoker).
USER_ID = Identifier("user id")
#: A stored instance's id.
INSTANCE_ID = Identifier("instance id")
#: ``--name``: an instance's display name.
INSTANCE_NAME = Identifier("instance name", display=True)
#: ``enable``/``disable``'s ID_OR_TOOL and ``run --allow``.
INSTANCE_OR_TOOL = Identifier("instance id or tool")
#: TOOL of ``call`` and ``tools show``: a tool's name, an instance's id, name or id prefix.
TOOL_OR_INSTANCE = Identifier("tool or instance id")


def _is_tool(host: Host, name: str) -> bool:
    """Whether ``name`` is an installed tool's (one two packs claim counts: the call reports
    the conflict)."""
    from expediter.errors import ToolConflict, ToolNotFound

    try:
        host.tool_info(name)
    except ToolConflict:
        return True
    except ToolNotFound:
        return False
    return True


def _shown(instance: StoredInstance) -> str:
    owner = "shared" if instance.owner_id is None else f"owner {instance.owner_id}"
    return f"{instance.id} ({instance.name}, {instance.tool}, {owner})"


def tool_target(host: Host, text: str, user_id: str | None) -> str:
    """The tool name or instance id ``text`` names: a tool's name first, then an instance's
    id, its name, or the beginning of its id (among the instances ``user_id`` may use; any
    instance without ``--user``). A name or prefix naming several is a usage error listing
    them; one naming nothing is returned as it is (the call then says there is no such
    tool)."""
    if not text or _is_tool(host, text):
        return text
    from expediter.core.instances.manager import ANY_USER

    instances = host.instances.list(ANY_USER if user_id is None else user_id)
    if any(instance.id == text for instance in instances):
        return text
    named = [instance for instance in instances if instance.name == text]
    begun = [instance for instance in instances if instance.id.startswith(text)]
    for found, which in ((named, "are named"), (begun, "have ids beginning")):
        if len(found) == 1:
            return found[0].id
        if found:
            listed = "; ".join(_shown(instance) for instance in found[:_LISTED])
            more = "; ..." if len(found) > _LISTED else ""
            raise click.UsageError(
                escape(
                    f"{len(found)} tool instances {which} {text!r} ({listed}{more}): give "
                    "the instance's id"
                )
            )
    return text


def check_configured(host: Host, target: str) -> None:
    """A usage error when ``target`` is a tool (not an instance) that cannot run without
    configuration, naming the missing fields and how to store an instance of it."""
    from expediter.core.instances.defaults import required_fields
    from expediter.errors import ToolConflict, ToolNotFound

    try:
        info = host.tool_info(target)
    except (ToolConflict, ToolNotFound):
        return  # an instance, or a name the call itself refuses
    missing = required_fields(info.config)
    if not missing:
        return
    secret = {field.name for field in info.config if field.secret}
    fields = ", ".join(f"{name!r}" + (" (secret)" if name in secret else "") for name in missing)
    plain = [name for name in missing if name not in secret]
    options = [f"--secret {name}=-" for name in missing if name in secret]
    if plain:
        options.insert(0, "--config '{" + ", ".join(f'"{name}": ...' for name in plain) + "}'")
    raise click.UsageError(
        f"tool {target!r} needs configuration to run: {fields} must be set. Store an instance "
        f"of it, then call the instance by its id or name: expediter instances add {target} "
        f"--name NAME {' '.join(options)}"
    )
