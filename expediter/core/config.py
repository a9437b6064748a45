"""Settings read from the environment: plugin switches, tools directories, the data directory."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

__all__ = [
    "BUILTIN_DIR",
    "PluginSettings",
    "expediter_home",
    "normalize_name",
    "split_names",
    "split_paths",
]

#: The built-in tools: scanned like a tools directory.
BUILTIN_DIR = Path(__file__).resolve().parent.parent / "plugins"

_TRUE = frozenset({"1", "true", "yes", "on"})


def normalize_name(name: str) -> str:
    """Compare pack names like PEP 503: case-insensitive, runs of ``-``, ``_``, ``.`` alike."""
    return re.sub(r"[-_.]+", "_", name.strip()).lower()


def split_names(value: str | None) -> frozenset[str]:
    """Parse a comma-separated list of pack names."""
    if not value:
        return frozenset()
    return frozenset(normalize_name(part) for part in value.split(",") if part.strip())


def split_paths(value: str | None) -> tuple[Path, ...]:
    """Parse an ``os.pathsep``-separated list of directories."""
    if not value:
        return ()
    return tuple(Path(part).expanduser() for part in value.split(os.pathsep) if part.strip())


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def expediter_home(environ: Mapping[str, str] | None = None) -> Path:
    """Return ``EXPEDITER_HOME``, or the platform's user data directory for expediter."""
    env = os.environ if environ is None else environ
    if env.get("EXPEDITER_HOME"):
        return Path(env["EXPEDITER_HOME"]).expanduser()
    if sys.platform == "win32":
        base = env.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "expediter"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "expediter"
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "expediter"


@attrs.frozen
class PluginSettings:
    """Which packs discovery may import, from the ``EXPEDITER_*_PLUGIN*`` switches."""

    #: ``EXPEDITER_DISABLE_PLUGINS``: never import these packs.
    disabled: frozenset[str] = frozenset()
    #: ``EXPEDITER_LOAD_PLUGINS``: when set, import only these (built-ins still load).
    load_only: frozenset[str] | None = None
    #: False with ``EXPEDITER_DISABLE_PLUGIN_AUTOLOAD=1``: no entry point loads unless named
    #: in ``load_only``.
    autoload: bool = True
    #: ``EXPEDITER_STRICT_PLUGINS``: a pack that fails to load is fatal.
    strict: bool = False
    tools_path: tuple[Path, ...] = ()
    #: Whether the built-in tools (``expediter/plugins``) are offered.
    builtins: bool = True

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        autoload: bool = True,
        tools_path: Iterable[str | os.PathLike[str]] = (),
        builtins: bool = True,
    ) -> PluginSettings:
        """Read the switches from the environment (operator switches always apply)."""
        env = os.environ if environ is None else environ
        load = env.get("EXPEDITER_LOAD_PLUGINS")
        return cls(
            disabled=split_names(env.get("EXPEDITER_DISABLE_PLUGINS")),
            load_only=split_names(load) if load is not None and load.strip() else None,
            autoload=autoload and not _flag(env.get("EXPEDITER_DISABLE_PLUGIN_AUTOLOAD")),
            strict=_flag(env.get("EXPEDITER_STRICT_PLUGINS")),
            # Absolute, so a relative directory means the same modules from any working dir.
            tools_path=tuple(Path(path).expanduser().resolve() for path in tools_path),
            builtins=builtins,
        )

    def allows(self, names: Iterable[str], *, entry_point: bool, built_in: bool = False) -> bool:
        """Whether a pack known by any of ``names`` may be imported."""
        normalized = {normalize_name(name) for name in names}
        if normalized & self.disabled:
            return False
        if built_in:
            return self.builtins
        named = self.load_only is not None and bool(normalized & self.load_only)
        if entry_point and not self.autoload:
            return named
        return self.load_only is None or named

    def cache_key(self) -> dict[str, object]:
        """The parts of the settings that change what discovery finds."""
        return {
            "disabled": sorted(self.disabled),
            "load_only": None if self.load_only is None else sorted(self.load_only),
            "autoload": self.autoload,
            "tools_path": [str(path) for path in self.tools_path],
            "builtins": self.builtins,
        }
