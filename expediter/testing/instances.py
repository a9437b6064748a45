"""The tool under test as a configured instance, made the way an operator makes one.

``make_host(tool, config=..., secrets=...)``, ``call_tool(..., config=..., secrets=...)`` and
``ToolContract.config``/``secrets`` store the tool's instance with ``host.instances.add`` (as
``expediter instances add`` does): the configuration is checked against the tool's
``config_requirements``, its secret fields are sealed with the test's throwaway master key, and
a call decrypts them and loads the tool with them, hidden wherever the call is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from expediter.core.instances.validation import validate_config
from expediter.core.records.text import echo
from expediter.errors import ConfigError

if TYPE_CHECKING:
    from expediter.core.discovery.catalogue import ToolInfo
    from expediter.core.host import Host
    from expediter.core.instances.records import StoredInstance

__all__ = [
    "KEY_VARIABLES",
    "add_instance",
    "check_unconfigured",
    "configuration",
    "offered_as",
    "only_tool",
    "with_hint",
]

#: Where a host finds its master keys; when neither is set, a configured test host gets a
#: throwaway key of its own.
KEY_VARIABLES = ("EXPEDITER_SECRET_KEYS", "EXPEDITER_SECRET_KEYS_FILE")


def only_tool(host: Host, what: object) -> ToolInfo:
    """The one tool ``host`` offers (``what`` built it), or AssertionError saying why not."""
    offered = host.catalogue(include_internal=True)
    if len(offered) == 1:
        return offered[0]
    problems = [conflict.message for conflict in host.conflicts]
    problems += [pack.error for pack in host.packs if pack.error]
    names = ", ".join(info.name for info in offered) or "none"
    detail = f": {'; '.join(problems)}" if problems else ""
    raise AssertionError(
        f"expected one tool from {what!r}, got {len(offered)} ({names}){detail}; a configuration "
        "configures one tool, so build the host with only the tool under test"
    )


def configuration(
    info: ToolInfo, config: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``config`` and ``secrets`` as one configuration, as ``instances add --config ...
    --secret ...`` makes it: ConfigError for a field given in both, or a ``secrets`` key that
    names a field the tool does not declare secret (its value would be shown)."""
    owner = f"tool {echo(info.name)}"
    for given, label in ((config, "config"), (secrets, "secrets")):
        if given is not None and not isinstance(given, Mapping):
            raise ConfigError(
                f"{owner}: {label} must be a mapping of field names to values, "
                f"not {type(given).__name__}"
            )
    plain = dict(config or {})
    hidden = dict(secrets or {})
    declared = {field.name: field for field in info.config}
    for name in hidden:
        field = declared.get(name) if isinstance(name, str) else None
        if field is not None and not field.secret:
            raise ConfigError(
                f"{owner}: configuration field {name!r} is not secret, so its value would be "
                "stored and shown in plain; give it in config, not in secrets",
                parameter=name,
            )
        if name in plain:
            raise ConfigError(
                f"{owner}: configuration field {echo(name)} is given both in config and in "
                "secrets; give it once",
                parameter=str(name),
            )
    return {**plain, **hidden}


def add_instance(
    host: Host, what: object, config: Mapping[str, Any] | None, secrets: Mapping[str, Any] | None
) -> StoredInstance:
    """Store the instance of the one tool ``host`` offers, shared and added by the operator
    (``host.instances.add(..., operator=True)``); ConfigError as that gives it."""
    info = only_tool(host, what)
    merged = configuration(info, config, secrets)
    return host.instances.add(info.name, name=info.name, config=merged, operator=True)


def with_hint(error: ConfigError, hint: str) -> ConfigError:
    """The error with what to do next added to its message."""
    return ConfigError(f"{str(error).rstrip('.')}. {hint}", parameter=error.parameter)


def check_unconfigured(info: ToolInfo, hint: str) -> None:
    """ConfigError, ending with ``hint``, when the tool needs configuration that no
    configuration was given for (the message ``instances add`` gives without it)."""
    try:
        validate_config(info.name, info.config, {})
    except ConfigError as exc:
        raise with_hint(exc, hint) from None


def offered_as(host: Host, instance: StoredInstance, info: ToolInfo) -> ToolInfo:
    """The tool as its stored instance offers it in a toolset: the actions it lists with its
    configuration (a dynamic tool's come from it), overrides applied, active ones only."""
    toolset = host.toolset(instances=[instance.id])
    assert not toolset.errors, f"the instance of {info.name!r} cannot be offered: {toolset.errors}"
    actions = tuple(
        offered.action for offered in toolset.actions if offered.instance_id == instance.id
    )
    return attrs.evolve(info, actions=actions)
