"""What is installed: packs, the tools they offer, and tool-name conflicts (no pack imported)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from expediter.hookspecs.tool import Action, ConfigField

__all__ = ["Catalogue", "Conflict", "PackInfo", "PackLocation", "Source", "ToolInfo"]

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
        return {
            "entry_points": [list(pair) for pair in self.entry_points],
            "distribution": self.distribution,
            "path": self.path,
            "module": self.module,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PackLocation:
        """Build from the JSON form."""
        return cls(
            entry_points=tuple((str(a), str(b)) for a, b in data.get("entry_points", ())),
            distribution=data.get("distribution"),
            path=data.get("path"),
            module=data.get("module"),
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

    @property
    def id(self) -> str:
        """Unique within a catalogue: the source and where the pack lives (names may repeat)."""
        location = self.location
        where = location.distribution or location.path or location.module or self.name
        return f"{self.source}:{where}"

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form shown by ``expediter plugins --json``."""
        return {
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "source": self.source,
            "tools": list(self.tools),
            "hooks": list(self.hooks),
            "host_hooks": list(self.host_hooks),
            "error": self.error,
            "location": self.location.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PackInfo:
        """Build from the JSON form."""
        return cls(
            name=data["name"],
            version=data.get("version"),
            source=data["source"],
            location=PackLocation.from_dict(data.get("location") or {}),
            hooks=tuple(data.get("hooks", ())),
            host_hooks=tuple(data.get("host_hooks", ())),
            tools=tuple(data.get("tools", ())),
            error=data.get("error"),
        )


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
            "description": self.description,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return the full JSON form (``expediter tools show --json``, the manifest cache)."""
        return {
            "name": self.name,
            "pack": self.pack,
            "version": self.version,
            "source": self.source,
            "internal": self.internal,
            "user_scoped": self.user_scoped,
            "description": self.description,
            "actions": [action.to_dict() for action in self.actions],
            "config": [field.to_dict() for field in self.config],
            "pack_id": self.pack_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolInfo:
        """Build from the full JSON form."""
        return cls(
            name=data["name"],
            pack=data["pack"],
            version=data.get("version"),
            source=data["source"],
            internal=bool(data.get("internal", False)),
            user_scoped=bool(data.get("user_scoped", False)),
            description=data.get("description", ""),
            actions=tuple(Action.from_dict(item) for item in data.get("actions", ())),
            config=tuple(ConfigField.from_dict(item) for item in data.get("config", ())),
            pack_id=data.get("pack_id", ""),
        )


@attrs.frozen
class Conflict:
    """Several packs register one tool name; none of them is offered until one is disabled."""

    tool: str
    #: ``(pack name, version, source, pack id)`` for every registration of the name.
    packs: tuple[tuple[str, str | None, str, str], ...]

    @property
    def message(self) -> str:
        """Explain the conflict and how to resolve it."""
        described = []
        for name, version, source, pack_id in self.packs:
            where = pack_id.partition(":")[2] if source == "directory" else ""
            detail = f"{source}, {where}" if where else source
            described.append(f"pack {name!r} {version or '(no version)'} ({detail})")
        names = [name for name, *_ in self.packs]
        switchable = [name for name, _, source, _ in self.packs if source != "host"]
        if len(set(names)) < len(names) or not switchable:
            advice = "Rename or remove one of them."
        else:
            choices = " or ".join(f"EXPEDITER_DISABLE_PLUGINS={name}" for name in switchable)
            advice = f"Disable one with {choices}."
        return (
            f"tool {self.tool!r} is registered by {' and '.join(described)}; "
            f"neither is offered. {advice}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "tool": self.tool,
            "packs": [
                {"name": name, "version": version, "source": source, "id": pack_id}
                for name, version, source, pack_id in self.packs
            ],
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Conflict:
        """Build from the JSON form."""
        return cls(
            tool=data["tool"],
            packs=tuple(
                (p["name"], p.get("version"), p["source"], p.get("id", "")) for p in data["packs"]
            ),
        )


@attrs.frozen
class Catalogue:
    """Every pack, every offered tool, and every conflict found by discovery."""

    packs: tuple[PackInfo, ...] = ()
    tools: tuple[ToolInfo, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
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
        return found + [conflict.message for conflict in self.conflicts]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (the manifest cache's payload)."""
        return {
            "packs": [pack.to_dict() for pack in self.packs],
            "tools": [info.to_dict() for info in self.tools],
            "conflicts": [conflict.to_dict() for conflict in self.conflicts],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Catalogue:
        """Build from the JSON form."""
        return cls(
            packs=tuple(PackInfo.from_dict(item) for item in data.get("packs", ())),
            tools=tuple(ToolInfo.from_dict(item) for item in data.get("tools", ())),
            conflicts=tuple(Conflict.from_dict(item) for item in data.get("conflicts", ())),
        )
