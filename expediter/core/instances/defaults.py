"""Default tools: the tools every user gets without configuring anything.

``EXPEDITER_DEFAULT_TOOLS`` names them; unset, every installed tool that needs no configuration
is one. Each default has a stable instance id, ``uuid5(DEFAULT_NAMESPACE, tool)``, the same in
every process, so its calls and the data it keeps always point to the same instance.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from expediter.core.instances.validation import relevant

if TYPE_CHECKING:
    from expediter.core.discovery.catalogue import ToolInfo
    from expediter.hookspecs.tool import ConfigField

__all__ = ["DEFAULT_NAMESPACE", "default_instance_id", "default_tools", "required_fields"]

#: The namespace of default tools' instance ids (fixed forever: changing it orphans their data).
DEFAULT_NAMESPACE = uuid.UUID("6f1d2c4e-8b0a-5e37-9c41-2a7d5be0f813")


def default_instance_id(tool: str) -> str:
    """The instance id of a default tool: the same in every process."""
    return str(uuid.uuid5(DEFAULT_NAMESPACE, tool))


def required_fields(fields: Sequence[ConfigField]) -> list[str]:
    """The fields an instance must be given (required, no default, applicable when nothing
    else is configured)."""
    return [
        field.name
        for field in fields
        if field.required and field.default is None and relevant(field, {}, fields)
    ]


def default_tools(
    catalogue: Sequence[ToolInfo],
    listed: Iterable[str] | None,
    tool_info: Callable[[str], ToolInfo],
) -> tuple[list[ToolInfo], list[str]]:
    """The default tools, and why any listed name cannot be one.

    ``listed`` is ``EXPEDITER_DEFAULT_TOOLS`` (None when unset: every offered tool with no
    required configuration field)."""
    if listed is None:
        return [info for info in catalogue if not required_fields(info.config)], []
    found: list[ToolInfo] = []
    problems: list[str] = []
    # In catalogue order (then the names it lacks, sorted): the same offer in every process,
    # whatever order a set of names iterates in.
    order = {info.name: index for index, info in enumerate(catalogue)}
    for name in sorted(set(listed), key=lambda name: (order.get(name, len(order)), name)):
        try:
            info = tool_info(name)
        except LookupError as exc:
            problems.append(f"EXPEDITER_DEFAULT_TOOLS names {name!r}: {exc}")
            continue
        needed = required_fields(info.config)
        if needed:
            problems.append(
                f"tool {name!r} cannot be a default tool: it needs configuration "
                f"({', '.join(needed)}); add an instance of it instead "
                f"(`expediter instances add {name} --name N --config ...`)"
            )
            continue
        found.append(info)
    return found, problems
