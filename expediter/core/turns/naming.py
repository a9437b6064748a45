"""Function names offered to a model: valid for every provider, unique, deterministic, reversible.

Each action keeps its own (sanitized) name when no other action in the turn shares it. Names
shared by several instances are prefixed with the *instance's* display name; a prefixed name
that is still taken gets a short suffix derived from the instance id and action, so the same
toolset always yields the same names. The reverse map travels with the turn (``to_dict``) so
another process can map the model's calls back hours later.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from expediter.core.records.convert import json_form, structure, unstructure

__all__ = ["NAME_PATTERN", "NameEntry", "NameMap", "assign_names", "sanitize"]

#: What every provider accepts as a function name.
NAME_PATTERN = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$")
_LIMIT = 64
_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")


def sanitize(text: str) -> str:
    """Map a name into ``[a-zA-Z0-9_-]``, starting with a letter or ``_`` (not cut to length)."""
    cleaned = _OUTSIDE.sub("_", text)
    if not cleaned or not (cleaned[0].isascii() and (cleaned[0].isalpha() or cleaned[0] == "_")):
        cleaned = "_" + cleaned
    return cleaned


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def _fit(name: str) -> str:
    """Cut a long name to 64 characters, keeping it unique with a hash of the whole name."""
    if len(name) <= _LIMIT:
        return name
    return f"{name[: _LIMIT - 9]}_{_digest(name)[:8]}"


def _with_suffix(name: str, suffix: str) -> str:
    room = _LIMIT - len(suffix) - 1
    return f"{name[:room]}_{suffix}"


@json_form(keys=("instance_id", "tool", "action", "client"))
@attrs.frozen
class NameEntry:
    """One offered name and what it calls."""

    name: str
    instance_id: str
    tool: str
    action: str
    #: A client-side tool, executed by the application rather than the host.
    client: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return unstructure(self)


def _dump_entries(entries: tuple[NameEntry, ...]) -> dict[str, Any]:
    return {entry.name: unstructure(entry) for entry in entries}


def _load_entries(names: Mapping[str, Mapping[str, Any]]) -> tuple[NameEntry, ...]:
    return tuple(structure({**item, "name": name}, NameEntry) for name, item in names.items())


@json_form(
    keys=("version", "names"),
    computed={"version": lambda _: 1},
    rename={"entries": "names"},
    dump={"entries": _dump_entries},
    load={"entries": _load_entries},
)
@attrs.frozen
class NameMap:
    """The reverse map ``offered name -> (instance id, action)`` of one turn."""

    entries: tuple[NameEntry, ...] = ()
    _by_name: Mapping[str, NameEntry] = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(lambda self: {e.name: e for e in self.entries}, takes_self=True),
    )
    _by_target: Mapping[tuple[str, str], NameEntry] = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(
            lambda self: {(e.instance_id, e.action): e for e in self.entries}, takes_self=True
        ),
    )

    def resolve(self, name: str) -> NameEntry | None:
        """Return what an offered name calls, or None for a name this turn never offered."""
        return self._by_name.get(name)

    def name_for(self, instance_id: str, action: str) -> str | None:
        """Return the name offered for an instance's action, or None. A tool's name stands for
        its instance when the turn offers that action of that tool once (a default tool)."""
        entry = self._by_target.get((instance_id, action))
        if entry is None:
            found = [e for e in self.entries if e.tool == instance_id and e.action == action]
            entry = found[0] if len(found) == 1 else None
        return None if entry is None else entry.name

    @property
    def names(self) -> list[str]:
        """Every offered name, in offer order."""
        return [entry.name for entry in self.entries]

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form, to store with a turn."""
        return unstructure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NameMap:
        """Rebuild a map stored with ``to_dict``."""
        return structure(data, cls)


Target = tuple[str, str, str, str, bool]


def assign_names(
    targets: Iterable[tuple[str, str, str, str] | tuple[str, str, str, str, bool]],
) -> NameMap:
    """Name ``(instance_id, display_name, tool, action[, client])`` targets for one turn.

    The result depends only on the set of targets, not on their order.
    """
    normalized = {
        (*target[:4], bool(target[4]) if len(target) > 4 else False) for target in targets
    }
    return _assign(tuple(sorted(normalized, key=lambda t: (t[0], t[3], t[1], t[2], t[4]))))


@functools.lru_cache(maxsize=256)
def _assign(items: tuple[Target, ...]) -> NameMap:
    """Names for sorted targets (cached: most turns offer the same toolset again)."""
    bases = [sanitize(action) for _, _, _, action, _ in items]
    counts = Counter(bases)
    taken: set[str] = set()
    chosen: list[str] = [""] * len(items)

    def claim(index: int, name: str) -> None:
        candidate = name
        if candidate in taken:
            instance_id, _, _, action, _ = items[index]
            digest = _digest(instance_id, action)
            length = 6
            while candidate in taken:
                suffix = digest[:length] if length <= len(digest) else f"{digest[:8]}{length}"
                candidate = _with_suffix(name, suffix)
                length += 2
        taken.add(candidate)
        chosen[index] = candidate

    # Unique actions first, so a generated (prefixed) name can never take their bare name.
    for index, base in enumerate(bases):
        if counts[base] == 1:
            claim(index, _fit(base))
    for index, base in enumerate(bases):
        if counts[base] > 1:
            claim(index, _fit(f"{sanitize(items[index][1])}_{base}"))

    return NameMap(
        tuple(
            NameEntry(chosen[index], instance_id, tool, action, client)
            for index, (instance_id, _, tool, action, client) in enumerate(items)
        )
    )
