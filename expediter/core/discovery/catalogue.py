"""What is installed: packs, the tools and providers they offer, and name conflicts (no pack
imported)."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

import attrs

from expediter.core.records.convert import json_form, structure, unstructure
from expediter.hookspecs.tool import Action, ConfigField

__all__ = [
    "Catalogue",
    "CommandInfo",
    "Conflict",
    "PackInfo",
    "PackLocation",
    "Source",
    "ToolInfo",
    "withhold_conflicts",
]

#: Where a pack comes from.
Source = Literal["entry-point", "directory", "built-in", "host"]


@attrs.frozen
class PackLocation:
    """How to import a pack again: its entry points, or the file of a directory module."""

    entry_points: tuple[tuple[str, str], ...] = ()
    distribution: str | None = None
    path: str | None = None
    module: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return unstructure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PackLocation:
        """Build from the JSON form."""
        return structure(data, cls)


@attrs.frozen
class CommandInfo:
    """A subcommand a pack adds to ``expediter`` (its ``register_commands`` hook)."""

    name: str
    #: The one-line help ``expediter --help`` shows.
    help: str = ""


def _location(data: Mapping[str, Any] | None) -> PackLocation:
    return structure(data or {}, PackLocation)


@json_form(
    keys=(
        "name",
        "id",
        "version",
        "source",
        "tools",
        "hooks",
        "host_hooks",
        "error",
        "location",
        "commands",
        "providers",
        "streaming_providers",
    ),
    computed={"id": operator.attrgetter("id")},
    load={"location": _location},
)
@attrs.frozen
class PackInfo:
    """A tool pack: an installed distribution, a tools-directory module, or a built-in."""

    name: str
    version: str | None
    source: Source
    location: PackLocation = PackLocation()
    #: Names of the hooks the pack's objects implement.
    hooks: tuple[str, ...] = ()
    #: Host hooks (and ``execute_action`` wrappers) that make the pack a host plugin.
    host_hooks: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    error: str | None = None
    #: The subcommands the pack adds to ``expediter``, found at discovery.
    commands: tuple[CommandInfo, ...] = ()
    #: The names of the LLM providers the pack registers (``register_providers``).
    providers: tuple[str, ...] = ()
    #: Those of ``providers`` that read streams (``toolset.stream(name)``).
    streaming_providers: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """Unique within a catalogue: the source and where the pack lives (names may repeat)."""
        location = self.location
        where = location.distribution or location.path or location.module or self.name
        return f"{self.source}:{where}"

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form shown by ``expediter plugins --json``."""
        return unstructure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PackInfo:
        """Build from the JSON form."""
        return structure(data, cls)


@attrs.frozen
class ToolInfo:
    """A tool as the catalogue knows it: where it comes from and what actions it offers."""

    name: str
    pack: str
    version: str | None
    source: Source
    internal: bool = False
    user_scoped: bool = False
    description: str = ""
    actions: tuple[Action, ...] = ()
    config: tuple[ConfigField, ...] = ()
    #: The ``PackInfo.id`` of the pack that registered the tool.
    pack_id: str = ""
    #: Never offered in headless runs (the tool declares ``headless_excluded``); last, so
    #: positional construction keeps its meaning.
    headless_excluded: bool = False

    def action(self, name: str) -> Action | None:
        """Return the named action, or None."""
        for candidate in self.actions:
            if candidate.name == name:
                return candidate
        return None

    def summary(self) -> dict[str, Any]:
        """Return the JSON form shown by ``expediter tools list --json``."""
        return {
            "name": self.name,
            "pack": self.pack,
            "source": self.source,
            "internal": self.internal,
            "actions": [action.name for action in self.actions if action.active],
            "version": self.version,
            "user_scoped": self.user_scoped,
            "headless_excluded": self.headless_excluded,
            "description": self.description,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return the full JSON form (``expediter tools show --json``, the manifest cache)."""
        return unstructure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolInfo:
        """Build from the full JSON form."""
        return structure(data, cls)


def _dump_packs(packs: tuple[tuple[str, str | None, str, str], ...]) -> list[dict[str, Any]]:
    return [
        {"name": name, "version": version, "source": source, "id": pack_id}
        for name, version, source, pack_id in packs
    ]


def _load_packs(packs: list[Mapping[str, Any]]) -> tuple[tuple[str, str | None, str, str], ...]:
    return tuple((p["name"], p.get("version"), p["source"], p.get("id", "")) for p in packs)


def _answers_to(name: str, source: str, tool: str) -> set[str]:
    """The names ``EXPEDITER_DISABLE_PLUGINS`` matches for a pack in a conflict over ``tool``:
    a module's name; a distribution's name and its entry points' (not recorded in a conflict,
    and usually named after the tool they make); none for ``Host(plugins=...)`` objects."""
    if source == "host":
        return set()
    return {name, tool} if source == "entry-point" else {name}


@json_form(
    computed={"message": operator.attrgetter("message")},
    dump={"packs": _dump_packs},
    load={"packs": _load_packs},
)
@attrs.frozen
class Conflict:
    """Several packs register one tool (or provider) name; none of them is offered until one
    is disabled."""

    #: The name registered more than once (a tool's, or for ``kind="provider"`` a provider's).
    tool: str
    #: ``(pack name, version, source, pack id)`` for every registration of the name.
    packs: tuple[tuple[str, str | None, str, str], ...]
    kind: Literal["tool", "provider"] = "tool"

    @property
    def message(self) -> str:
        """Explain the conflict and how to resolve it."""
        described = []
        for name, version, source, pack_id in self.packs:
            where = pack_id.partition(":")[2] if source == "directory" else ""
            detail = f"{source}, {where}" if where else source
            described.append(f"pack {name!r} {version or '(no version)'} ({detail})")
        return (
            f"{self.kind} {self.tool!r} is registered by {' and '.join(described)}; "
            f"neither is offered. {self._advice()}"
        )

    def _advice(self) -> str:
        """A switch that disables exactly one of the packs, else how to remove one."""
        from expediter.core.config import normalize_name

        names = [normalize_name(name) for name, *_ in self.packs]
        tool = normalize_name(self.tool)
        answers = [
            _answers_to(name, source, tool)
            for name, (_, _, source, _) in zip(names, self.packs, strict=True)
        ]
        distributions = [
            name
            for name, (_, _, source, _) in zip(names, self.packs, strict=True)
            if source == "entry-point"
        ]
        switches, removals = [], []
        for index, (name, _, source, pack_id) in enumerate(self.packs):
            others = set().union(*(aliases for j, aliases in enumerate(answers) if j != index))
            if source != "host" and names[index] not in others:
                switches.append(f"EXPEDITER_DISABLE_PLUGINS={name}")
            elif source == "directory":
                removals.append(f"rename or move {pack_id.partition(':')[2] or name}")
            elif source == "entry-point" and distributions.count(names[index]) > 1:
                removals.append(f"uninstall one of the distributions named {name!r}")
            elif source == "entry-point":
                removals.append(f"uninstall {name}")
        removals = list(dict.fromkeys(removals))
        if switches:
            alternatives = "".join(f", or {removal}" for removal in removals)
            return f"Disable one with {' or '.join(switches)}{alternatives}."
        if removals:
            return f"Resolve it: {', or '.join(removals)}."
        return "Rename or remove one of them."

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return unstructure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Conflict:
        """Build from the JSON form."""
        return structure(data, cls)


@attrs.frozen
class Catalogue:
    """Every pack, every offered tool, and every conflict found by discovery."""

    packs: tuple[PackInfo, ...] = ()
    tools: tuple[ToolInfo, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    #: Provider names several packs register (none of them is offered; the packs' providers
    #: are in ``PackInfo.providers``).
    provider_conflicts: tuple[Conflict, ...] = ()
    _by_name: Mapping[str, ToolInfo] = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(
            lambda self: {info.name: info for info in self.tools}, takes_self=True
        ),
    )

    def tool(self, name: str) -> ToolInfo | None:
        """Return the offered tool of that name, or None."""
        return self._by_name.get(name)

    def provider_conflict(self, name: str) -> Conflict | None:
        """Return the conflict that keeps a provider name from being offered, or None."""
        for conflict in self.provider_conflicts:
            if conflict.tool == name:
                return conflict
        return None

    def conflict(self, name: str) -> Conflict | None:
        """Return the conflict that keeps a tool name from being offered, or None."""
        for conflict in self.conflicts:
            if conflict.tool == name:
                return conflict
        return None

    def pack(self, pack_id: str) -> PackInfo | None:
        """Return the pack with that ``PackInfo.id``, or None."""
        for pack in self.packs:
            if pack.id == pack_id:
                return pack
        return None

    @property
    def errors(self) -> list[str]:
        """Every load error and conflict, as messages."""
        found = [f"pack {pack.name!r}: {pack.error}" for pack in self.packs if pack.error]
        conflicts = (*self.conflicts, *self.provider_conflicts)
        return found + [conflict.message for conflict in conflicts]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (the manifest cache's payload)."""
        return unstructure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Catalogue:
        """Build from the JSON form (what ``structure(data, Catalogue)`` builds, faster)."""
        return _read_catalogue(data)


# -- reading the manifest cache ---------------------------------------------------------------
# The one record form read without the converter. A warm `expediter tools list` reads the
# manifest cache through `Catalogue.from_dict`, and importing cattrs plus generating its
# functions costs that process ~20 ms: past its budget, the whole process <= 10x
# `python -c pass` (benchmarks/README.md; measured side by side: 12.1x through cattrs, 10.2x
# with these readers). They follow the records' JSON forms exactly; tests/core/discovery/
# test_catalogue.py checks they build what `structure` builds, from full and partial data.


def _read_catalogue(data: Mapping[str, Any]) -> Catalogue:
    return Catalogue(
        packs=tuple(_read_pack(item) for item in data.get("packs", ())),
        tools=tuple(_read_tool(item) for item in data.get("tools", ())),
        conflicts=tuple(_read_conflict(item) for item in data.get("conflicts", ())),
        provider_conflicts=tuple(
            _read_conflict(item) for item in data.get("provider_conflicts", ())
        ),
    )


def _read_conflict(data: Mapping[str, Any]) -> Conflict:
    return Conflict(
        tool=data["tool"], packs=_load_packs(data["packs"]), kind=data.get("kind", "tool")
    )


def _read_pack(data: Mapping[str, Any]) -> PackInfo:
    location = data.get("location") or {}
    return PackInfo(
        name=data["name"],
        version=data.get("version"),
        source=data["source"],
        location=PackLocation(
            entry_points=tuple(
                (group, target) for group, target in location.get("entry_points", ())
            ),
            distribution=location.get("distribution"),
            path=location.get("path"),
            module=location.get("module"),
        ),
        hooks=tuple(data.get("hooks", ())),
        host_hooks=tuple(data.get("host_hooks", ())),
        tools=tuple(data.get("tools", ())),
        error=data.get("error"),
        commands=tuple(
            CommandInfo(name=item["name"], help=item.get("help", ""))
            for item in data.get("commands", ())
        ),
        providers=tuple(data.get("providers", ())),
        streaming_providers=tuple(data.get("streaming_providers", ())),
    )


def _read_tool(data: Mapping[str, Any]) -> ToolInfo:
    return ToolInfo(
        name=data["name"],
        pack=data["pack"],
        version=data.get("version"),
        source=data["source"],
        internal=bool(data.get("internal", False)),
        user_scoped=bool(data.get("user_scoped", False)),
        description=data.get("description", ""),
        actions=tuple(_read_action(item) for item in data.get("actions", ())),
        config=tuple(_read_field(item) for item in data.get("config", ())),
        pack_id=data.get("pack_id", ""),
        headless_excluded=bool(data.get("headless_excluded", False)),
    )


def _read_action(data: Mapping[str, Any]) -> Action:
    return Action(
        name=data["name"],
        description=data.get("description", ""),
        # A null or empty schema means no parameters (``Action.from_dict``'s rule).
        parameters=data.get("parameters") or {"type": "object", "properties": {}},
        fixed=data.get("fixed") or {},
        require_approval=bool(data.get("require_approval", False)),
        active=bool(data.get("active", True)),
    )


def _read_field(data: Mapping[str, Any]) -> ConfigField:
    return ConfigField(
        name=data["name"],
        type=data.get("type", "string"),
        label=data.get("label"),
        description=data.get("description", ""),
        required=bool(data.get("required", False)),
        secret=bool(data.get("secret", False)),
        default=data.get("default"),
        enum=data.get("enum"),
        depends_on=None if data.get("depends_on") is None else dict(data["depends_on"]),
        operator_only=bool(data.get("operator_only", False)),
        refused_keys=tuple(data.get("refused_keys") or ()),
        credential_keys_to=data.get("credential_keys_to"),
    )


class _Registration(Protocol):
    """What a pack registers under a name: a tool (``ToolInfo``) or a provider."""

    @property
    def name(self) -> str: ...
    @property
    def pack(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def source(self) -> Source: ...
    @property
    def pack_id(self) -> str: ...


_Registered = TypeVar("_Registered", bound=_Registration)


def withhold_conflicts(
    infos: Sequence[_Registered],
    previous: Sequence[Conflict] = (),
    kind: Literal["tool", "provider"] = "tool",
) -> tuple[list[_Registered], list[Conflict]]:
    """Offer each name registered once; a name several packs register (now, or in
    ``previous`` conflicts) offers none, and is reported as a ``Conflict`` of ``kind``."""
    by_name: dict[str, list[_Registered]] = {}
    for info in infos:
        by_name.setdefault(info.name, []).append(info)
    known = {conflict.tool: conflict for conflict in previous}
    offered: list[_Registered] = []
    conflicts: list[Conflict] = []
    for name, group in by_name.items():
        if len(group) == 1 and name not in known:
            offered.append(group[0])
            continue
        earlier = known.pop(name, None)
        packs = (earlier.packs if earlier else ()) + tuple(
            (info.pack, info.version, info.source, info.pack_id) for info in group
        )
        conflicts.append(Conflict(tool=name, packs=packs, kind=kind))
    conflicts.extend(known.values())
    return offered, conflicts
