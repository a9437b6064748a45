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
``os``: ``expediter --help`` must stay within 0.1x ``llm --help`` (benchmarks/README.md), and
the configuration (attrs) or the catalogue (attrs, pluggy) would cost it ~30 ms, a third of
that budget.

A cached catalogue is checked before it is used (``read``): every pack must be where a
discovery source finds one (a module of a tools directory or of the built-ins, as the key lists
them, allowed by the plugin switches), and every tool must belong to a pack that registers
it.
A cache that names anything else was not written by discovery: it is ignored, with a warning,
and rebuilt. Entry points are checked against ``importlib.metadata`` just before their pack is
imported (``packs.load_pack``): listing them here would cost a warm ``tools list`` more than its
whole budget. The cache files are the owner's alone (0600 in a 0700 folder).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from expediter.__about__ import __version__
from expediter.core.environment import expediter_home, private_dir, private_opener

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
    "open_to_everyone",
    "read",
    "read_commands",
    "write",
    "write_commands",
]

logger = logging.getLogger(__name__)

#: Bump when the catalogue's JSON form or the way it is built changes (6: the providers
#: packs register; 7: config fields' ``refused_keys`` and ``credential_keys_to``).
FORMAT = 7

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


def _local_modules(state: list[Any]) -> dict[str, str]:
    """File -> tool name for each module discovery finds in a directory (``_directory_state``):
    ``NAME.py`` files and ``NAME/__init__.py`` packages, NAME an identifier not starting with
    ``_`` (the files ``packs.scan_directory`` names, spelled alike)."""
    directory, *entries = state
    found = {}
    for name, inner in entries:
        stem = name[:-3] if name.endswith(".py") else name
        if stem.startswith(("_", ".")) or not stem.isidentifier():
            continue
        if isinstance(inner, list):
            if any(entry[0] == "__init__.py" for entry in inner):
                found[os.path.join(directory, name, "__init__.py")] = stem
        elif name.endswith(".py"):
            found[os.path.join(directory, name)] = stem
    return found


def open_to_everyone(module: str | Path) -> str | None:
    """What makes a tools module changeable by every user, or None: the first of its file, its
    package's folder and its tools directory that every user may write (``o+w``, sticky bit
    or not), named in a sentence that says what to do."""
    path = os.path.abspath(module)
    parent = os.path.dirname(path)
    places = [path, parent]
    if os.path.basename(path) == "__init__.py":
        places.append(os.path.dirname(parent))
    for place in places:
        try:
            mode = os.stat(place).st_mode
        except OSError:
            continue
        if mode & stat.S_IWOTH:
            return (
                f"{place} is writable by every user: anyone on this machine can change what "
                f"the tool runs; run `chmod o-w {place}`"
            )
    return None


def cache_key(settings: PluginSettings, builtin_dir: Path) -> dict[str, Any]:
    """Everything whose change may change what discovery finds."""
    key: dict[str, Any] = {
        "format": FORMAT,
        "expediter": __version__,
        "executable": sys.executable,
        "python": sys.version,
        "settings": settings.cache_key(),
        "sys_path": [state for entry in sys.path if (state := _distributions_state(entry))],
        "directories": [_directory_state(builtin_dir)]
        + [_directory_state(directory) for directory in settings.tools_path],
    }
    open_modules = [
        f"{stem}: {problem}"
        for state in key["directories"]
        for module, stem in _local_modules(state).items()
        if (problem := open_to_everyone(module)) is not None
    ]
    if open_modules:
        # Such a module loads with a warning, or under EXPEDITER_STRICT_PLUGINS not at all:
        # a catalogue built one way must not be read back the other.
        key["open_to_everyone"] = open_modules
        key["strict"] = settings.strict
    return key


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
        catalogue = Catalogue.from_dict(data["catalogue"])
        mismatch = _mismatch(catalogue, key)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        logger.warning("manifest cache %s is malformed (%s); rebuilding it", path, exc)
        return None
    if mismatch is not None:
        logger.warning(
            "manifest cache %s names %s, which no discovery source finds; ignoring it and "
            "rebuilding it (nothing it names was imported)",
            path,
            mismatch,
        )
        return None
    return catalogue


def _switches(key: Mapping[str, Any]) -> PluginSettings | None:
    """The plugin switches a key was made with; None when they switch nothing off (or the
    key has none)."""
    saved = key.get("settings")
    if not isinstance(saved, dict):
        return None
    load_only = saved.get("load_only")
    disabled = saved.get("disabled") or ()
    autoload, builtins = bool(saved.get("autoload", True)), bool(saved.get("builtins", True))
    if not disabled and load_only is None and autoload and builtins:
        # Every pack is allowed: not asking saves a warm `tools list` with 500 packs ~1.5 ms
        # of its budget, 10x `python -c pass` (benchmarks/README.md).
        return None
    from expediter.core.config import PluginSettings

    return PluginSettings(
        disabled=frozenset(disabled),
        load_only=None if load_only is None else frozenset(load_only),
        autoload=autoload,
        builtins=builtins,
    )


def _mismatch(catalogue: Catalogue, key: Mapping[str, Any]) -> str | None:
    """What a cached catalogue names that discovery would not find with this key (a pack
    somewhere else, a switched-off pack, a tool no pack registers), or None."""
    directories = key.get("directories") or []
    built_in = _local_modules(directories[0]) if directories else {}
    local: dict[str, str] = {}
    for state in directories[1:]:
        local.update(_local_modules(state))
    switches = _switches(key)
    for pack in catalogue.packs:
        where = pack.location
        path = where.path if isinstance(where.path, str) else None
        if pack.source == "built-in":
            stem = built_in.get(path or "")
            found = stem == pack.name and where.module == f"expediter.plugins.{stem}"
        elif pack.source == "directory":
            found = local.get(path or "") == pack.name and where.module is None
        else:
            # Entry points are checked against what is installed before the pack is imported.
            found = pack.source == "entry-point" and where.path is None and where.module is None
        found = found and (pack.source == "entry-point" or not where.entry_points)
        if found and switches is not None:
            aliases = (pack.name, *(name for name, _ in where.entry_points))
            found = switches.allows(
                aliases,
                entry_point=pack.source == "entry-point",
                built_in=pack.source == "built-in",
            )
        if not found:
            return f"pack {pack.name!r} ({pack.source}, {path or where.module or 'no file'})"
    registered = {pack.id: pack.tools for pack in catalogue.packs}
    for tool in catalogue.tools:
        if tool.name not in registered.get(tool.pack_id, ()):
            return f"tool {tool.name!r}, which no pack registers"
    return None


def write(path: Path, key: dict[str, Any], catalogue: Catalogue) -> None:
    """Save the catalogue atomically, readable by its owner only; a cache that cannot be
    written is only logged."""
    payload = {"key": key, "catalogue": catalogue.to_dict()}
    try:
        private_dir(path.parent)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(temporary, "w", encoding="utf-8", opener=private_opener) as handle:
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
        with open(temporary, "w", encoding="utf-8", opener=private_opener) as handle:
            json.dump({"entries": entries}, handle)
        os.replace(temporary, path)
    except OSError as exc:
        # The manifest's own warning has said it: the cache directory is not writable.
        logger.debug("cannot write the commands index %s: %s", path, exc)
