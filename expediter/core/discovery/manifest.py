"""The manifest cache: the catalogue saved to disk, valid while no installed pack changed.

The key holds the interpreter, the distribution metadata on every ``sys.path`` entry (the
names and modification times of its ``*.dist-info``, ``*.egg-info``, ``*.egg-link`` and
``*.pth`` entries: installing, upgrading or removing a distribution changes them), every
tools-directory module with its modification time, and the plugin switches. Directories' own
modification times are left out on purpose: importing a module writes ``__pycache__`` beside
it, and a script's folder changes for reasons unrelated to tools. A warm
``expediter tools list`` reads the cache and imports no pack at all. Editing an installed
pack's code in place does not change the key: ``expediter --refresh`` rebuilds the cache.

Beside each manifest written for the environment's own configuration, a small *commands
index* (``cache/commands.json``) keeps the packs' subcommands, under the same key, for
``expediter --help`` (``read_commands``). Reading it imports nothing beyond ``json`` and
``os``: ``expediter --help`` must stay within 0.1x ``llm --help`` (DESIGN.md section 9), and
the configuration (attrs) or the catalogue (attrs, pluggy) would cost it ~30 ms, a third of
that budget.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from expediter.__about__ import __version__
from expediter.core.environment import expediter_home

if TYPE_CHECKING:
    from pathlib import Path

    from expediter.core.config import PluginSettings
    from expediter.core.discovery.catalogue import Catalogue, PackInfo

__all__ = [
    "FORMAT",
    "SWITCHES",
    "PackCommands",
    "cache_file",
    "cache_key",
    "commands_file",
    "read",
    "read_commands",
    "write",
    "write_commands",
]

logger = logging.getLogger(__name__)

#: Bump when the catalogue's JSON form or the way it is built changes.
FORMAT = 3

#: ``(pack name, pack id, ((command, one-line help), ...))`` for each pack adding commands.
PackCommands = tuple[str, str, tuple[tuple[str, str], ...]]


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


def _directory_state(directory: str | Path) -> list[Any]:
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
    import hashlib

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
    from expediter.core.discovery.catalogue import Catalogue

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
        return
    _write_commands(path.parent, key, catalogue.packs)


# -- the commands index (``expediter --help``) -----------------------------------------------

#: The variables that decide what discovery finds (``HostConfig.from_env`` reads them): an
#: index entry is kept under their raw values, so reading it needs no configuration.
SWITCHES = (
    "EXPEDITER_TOOLS_PATH",
    "EXPEDITER_DISABLE_PLUGINS",
    "EXPEDITER_LOAD_PLUGINS",
    "EXPEDITER_DISABLE_PLUGIN_AUTOLOAD",
)
#: Index entries kept (one per environment a command ran in), the oldest dropped first.
_MAX_ENTRIES = 16
_COMMANDS_NAME = "commands.json"


def commands_file(home: str | os.PathLike[str]) -> str:
    """The commands index of a home directory."""
    return os.path.join(home, "cache", _COMMANDS_NAME)


def _identity(environ: Mapping[str, str]) -> str | None:
    """The index entry's name: the interpreter and its ``sys.path`` (the console script's
    and a host application's entries then do not replace each other), and the raw switches
    (relative tools directories mean something else in another working directory)."""
    try:
        where = os.getcwd() if environ.get("EXPEDITER_TOOLS_PATH") else None
    except OSError:
        return None
    switches = [environ.get(name) for name in SWITCHES]
    return json.dumps([sys.executable, sys.path, where, switches])


def _current(key: Mapping[str, Any]) -> bool:
    """Whether a stored key still holds: same interpreter and expediter, same distributions,
    same tools-directory modules (its settings are the entry's name)."""
    if (key.get("format"), key.get("expediter")) != (FORMAT, __version__):
        return False
    if (key.get("executable"), key.get("python")) != (sys.executable, sys.version):
        return False
    directories = key.get("directories")
    if not isinstance(directories, list) or not all(
        isinstance(item, list) and item for item in directories
    ):
        return False
    sys_path = [state for entry in sys.path if (state := _distributions_state(entry))]
    return key.get("sys_path") == sys_path and directories == [
        _directory_state(item[0]) for item in directories
    ]


def read_commands(environ: Mapping[str, str] | None = None) -> list[PackCommands] | None:
    """The packs' subcommands as the last discovery in this environment found them, or None
    when unknown or out of date (then discovery must run). Imports no configuration."""
    env = os.environ if environ is None else environ
    identity = _identity(env)
    if identity is None:
        return None
    try:
        with open(commands_file(expediter_home(env)), encoding="utf-8") as handle:
            entry = json.load(handle)["entries"][identity]
        if not _current(entry["key"]):
            return None
        return [
            (pack, pack_id, tuple((name, text) for name, text in commands))
            for pack, pack_id, commands in entry["packs"]
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_commands(home: Path, settings: PluginSettings, packs: Sequence[PackInfo]) -> None:
    """Keep the packs' commands in the index, under the manifest key of these settings.

    ``write`` does this for every catalogue it caches; this is for a catalogue read from a warm
    manifest while the index had no entry for this environment (``expediter --help`` after the
    index was removed, or filled by other environments). Packs that failed to load are not
    kept, as the manifest keeps none.
    """
    from expediter.core.config import BUILTIN_DIR

    if not any(pack.error for pack in packs):
        _write_commands(home / "cache", cache_key(settings, BUILTIN_DIR), packs)


def _write_commands(directory: Path, key: dict[str, Any], packs: Sequence[PackInfo]) -> None:
    """Keep the packs' commands in the index, when the key is the environment's own
    configuration (a host with extra tools directories or other switches writes none)."""
    from expediter.core.config import HostConfig

    try:
        if HostConfig.from_env().plugin_settings.cache_key() != key.get("settings"):
            return
    except ValueError:  # an unusable environment: the command line reports it
        return
    identity = _identity(os.environ)
    if identity is None:
        return
    commands = [
        [pack.name, pack.id, [[command.name, command.help] for command in pack.commands]]
        for pack in packs
        if pack.commands
    ]
    path = directory / _COMMANDS_NAME
    try:
        with open(path, encoding="utf-8") as handle:
            entries = json.load(handle)["entries"]
        if not isinstance(entries, dict):
            entries = {}
    except (OSError, ValueError, KeyError, TypeError):
        entries = {}
    entries.pop(identity, None)
    entries[identity] = {"key": key, "packs": commands}
    while len(entries) > _MAX_ENTRIES:
        del entries[next(iter(entries))]
    try:
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump({"entries": entries}, handle)
        os.replace(temporary, path)
    except OSError as exc:
        # The manifest's own warning has said it: the cache directory is not writable.
        logger.debug("cannot write the commands index %s: %s", path, exc)
