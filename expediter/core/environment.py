"""Reading ``EXPEDITER_*`` values: the data directory, lists of names and of paths, flags.

Standard library only (no attrs): ``expediter --help`` reads the data directory through it.
``HostConfig`` (``expediter.core.config``) is where the host's configuration is read.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "BUILTIN_DIR",
    "expediter_home",
    "flag",
    "normalize_name",
    "private_dir",
    "private_opener",
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


def flag(value: str | None) -> bool:
    """Whether a switch is on (``1``, ``true``, ``yes``, ``on``)."""
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


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) usable by its owner only (0700); folders that
    already exist keep their mode (they may be the user's own). Returns ``path``.

    The ledger, the spool and the caches hold call records: never world-readable, whatever
    the umask (docs/ledger.md).
    """
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for created in missing:
        _narrow(created, 0o700)
    return path


def private_opener(path: str, flags: int) -> int:
    """An ``opener`` for ``open()`` that creates files 0600 (``open(p, "a", opener=...)``)."""
    fd = os.open(path, flags, 0o600)
    try:
        if os.name == "posix" and os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    except OSError:
        pass  # not ours to change (e.g. a file another user made): it stays as it is
    return fd


def _narrow(path: Path, mode: int) -> None:
    if os.name != "posix":
        return
    try:
        if path.stat().st_mode & 0o777 != mode:
            path.chmod(mode)
    except OSError:
        pass  # a folder someone else owns keeps its mode
