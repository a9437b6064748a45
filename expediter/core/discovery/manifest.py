"""The manifest cache: the catalogue saved to disk, valid while no installed pack changed.

The key holds the interpreter, the distribution metadata on every ``sys.path`` entry (the
names and modification times of its ``*.dist-info``, ``*.egg-info``, ``*.egg-link`` and
``*.pth`` entries: installing, upgrading or removing a distribution changes them), every
tools-directory module with its modification time, and the plugin switches. Directories' own
modification times are left out on purpose: importing a module writes ``__pycache__`` beside
it, and a script's folder changes for reasons unrelated to tools. A warm
``expediter tools list`` reads the cache and imports no pack at all. Editing an installed
pack's code in place does not change the key: ``expediter --refresh`` rebuilds the cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from expediter.__about__ import __version__
from expediter.core.config import PluginSettings
from expediter.core.discovery.catalogue import Catalogue

__all__ = ["FORMAT", "cache_file", "cache_key", "read", "write"]

logger = logging.getLogger(__name__)

#: Bump when the catalogue's JSON form or the way it is built changes.
FORMAT = 2


def _mtime(path: str | Path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg-link", ".pth")


def _sorted_entries(directory: str | Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError:
        return []


def _entry_mtime(entry: os.DirEntry[str]) -> int | None:
    try:
        return entry.stat().st_mtime_ns
    except OSError:
        return None


def _distributions_state(entry: str) -> list[Any]:
    """The distribution metadata one ``sys.path`` entry holds (a zip file: its own time)."""
    path = os.path.abspath(entry or os.curdir)
    if os.path.isfile(path):
        return [path, _mtime(path)]
    found = [
        [item.name, _entry_mtime(item)]
        for item in _sorted_entries(path)
        if item.name.endswith(_METADATA_SUFFIXES)
    ]
    return [path, found] if found else []


def _modules_state(directory: str | Path) -> list[Any]:
    """Each ``.py`` file below a directory with its time (``__pycache__`` and dot-files skipped)."""
    state: list[Any] = []
    for item in _sorted_entries(directory):
        if item.name == "__pycache__" or item.name.startswith("."):
            continue
        if item.is_dir():
            state.append([item.name, _modules_state(item.path)])
        elif item.name.endswith(".py"):
            state.append([item.name, _entry_mtime(item)])
    return state


def _directory_state(directory: Path) -> list[Any]:
    """Every module of a tools directory with its time (packages: every ``.py`` file in them)."""
    return [str(directory), *_modules_state(directory)]


def cache_key(settings: PluginSettings, builtin_dir: Path) -> dict[str, Any]:
    """Everything whose change may change what discovery finds."""
    return {
        "format": FORMAT,
        "expediter": __version__,
        "executable": sys.executable,
        "python": sys.version,
        "settings": settings.cache_key(),
        "sys_path": [state for entry in sys.path if (state := _distributions_state(entry))],
        "directories": [_directory_state(builtin_dir)]
        + [_directory_state(directory) for directory in settings.tools_path],
    }


def cache_file(home: Path, settings: PluginSettings) -> Path:
    """The cache file for this interpreter and these settings."""
    identity = json.dumps([sys.executable, settings.cache_key()], sort_keys=True)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return home / "cache" / f"manifest-{digest}.json"


def read(path: Path, key: dict[str, Any]) -> Catalogue | None:
    """Return the cached catalogue when its key matches, else None."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        logger.warning("manifest cache %s is unreadable (%s); rebuilding it", path, exc)
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    try:
        return Catalogue.from_dict(data["catalogue"])
    except (KeyError, TypeError, ValueError) as exc:
        logger.warning("manifest cache %s is malformed (%s); rebuilding it", path, exc)
        return None


def write(path: Path, key: dict[str, Any], catalogue: Catalogue) -> None:
    """Save the catalogue atomically; a cache that cannot be written is only logged."""
    payload = {"key": key, "catalogue": catalogue.to_dict()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(payload, handle)
        os.replace(temporary, path)
    except OSError as exc:
        logger.warning("cannot write the manifest cache %s: %s", path, exc)
