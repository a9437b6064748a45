"""The manifest cache: the catalogue saved to disk, valid while nothing on ``sys.path`` changed.

The key holds the interpreter, every ``sys.path`` entry with its modification time (installing
or removing a distribution touches its site directory), every tools-directory module with its
modification time, and the plugin switches. A warm ``expediter tools list`` reads the cache and
imports no pack at all. Editing an installed pack's code in place does not change the key:
``expediter --refresh`` rebuilds the cache.
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
from expediter.core.catalogue import Catalogue
from expediter.core.settings import PluginSettings

__all__ = ["FORMAT", "cache_file", "cache_key", "read", "write"]

logger = logging.getLogger(__name__)

#: Bump when the catalogue's JSON form or the way it is built changes.
FORMAT = 1


def _mtime(path: str | Path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _directory_state(directory: Path) -> list[Any]:
    state: list[Any] = [str(directory), _mtime(directory)]
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return state
    for entry in entries:
        if entry.name.startswith((".", "__pycache__")):
            continue
        target = Path(entry.path)
        if entry.is_dir():
            target = target / "__init__.py"
        state.append([entry.name, _mtime(target)])
    return state


def cache_key(settings: PluginSettings, builtin_dir: Path) -> dict[str, Any]:
    """Everything whose change may change what discovery finds."""
    return {
        "format": FORMAT,
        "expediter": __version__,
        "executable": sys.executable,
        "python": sys.version,
        "settings": settings.cache_key(),
        "sys_path": [
            [os.path.abspath(entry or os.curdir), _mtime(entry or os.curdir)] for entry in sys.path
        ],
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
