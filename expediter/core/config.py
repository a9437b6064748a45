"""The host's configuration, read from the environment in one place (``HostConfig.from_env``).

``Host()``, the CLI, the pytest fixtures and ``Ledger`` all take their settings from a
``HostConfig``, so a host application and ``expediter ...`` commands always agree on the ledger,
the data directory, the tools directories, the limits and the plugin switches.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from expediter.core.environment import (
    BUILTIN_DIR,
    expediter_home,
    flag,
    normalize_name,
    split_names,
    split_paths,
)
from expediter.core.records.redaction import mask_url

__all__ = [
    "BUILTIN_DIR",
    "HostConfig",
    "PluginSettings",
    "expediter_home",
    "normalize_name",
    "split_names",
    "split_paths",
]


@attrs.frozen
class PluginSettings:
    """Which packs discovery may import (``HostConfig.plugin_settings``)."""

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


def _seconds(
    env: Mapping[str, str], name: str, default: float, *, limitless: bool = True
) -> float | None:
    """A number of seconds from the environment (unset: ``default``); where ``limitless``,
    ``none``/``off``/``never`` mean no limit (None)."""
    text = (env.get(name) or "").strip()
    if not text:
        return default
    if limitless and text.lower() in ("none", "off", "never"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, not {text!r}")
    return value


def _path_tuple(value: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    # Absolute, so a relative directory means the same modules from any working directory;
    # resolved and kept once, so one directory reached by two spellings (relative, a trailing
    # slash, a symlink) is scanned once instead of conflicting with itself.
    return tuple(dict.fromkeys(Path(path).expanduser().resolve() for path in value))


def _tool_names(text: str | None) -> frozenset[str] | None:
    """``EXPEDITER_DEFAULT_TOOLS``: tool names separated by commas or spaces (unset: None; set
    but empty: no default tools)."""
    if text is None:
        return None
    return frozenset(name for name in text.replace(",", " ").split() if name)


def _networks(text: str | None) -> tuple[str, ...]:
    """``EXPEDITER_EGRESS_ALLOW``: CIDR ranges separated by commas or spaces, checked now (a
    typo stops the host here, not at the first request)."""
    if not text:
        return ()
    # Imported only when the variable is set: `expediter --help` reads this module.
    from expediter.core.netguard.addresses import address_text, parse_networks

    try:
        networks = parse_networks(item for item in text.replace(",", " ").split() if item)
    except ValueError as exc:
        raise ValueError(f"EXPEDITER_EGRESS_ALLOW: {exc}") from None
    return tuple(address_text(network) for network in networks)


def _masked_url(url: str | None) -> str:
    return repr(url if url is None else mask_url(url))


@attrs.frozen(kw_only=True)
class HostConfig:
    """Everything a host reads from its environment, read once (``HostConfig.from_env()``)."""

    #: ``EXPEDITER_DATABASE_URL``: the ledger (None: an SQLite file in ``home``). Its repr
    #: hides the password.
    database_url: str | None = attrs.field(default=None, repr=_masked_url)
    #: ``EXPEDITER_HOME``: the data directory (ledger file, spool, manifest cache).
    home: Path = attrs.field(factory=expediter_home, converter=Path)
    #: ``EXPEDITER_TOOLS_PATH``: directories of tool modules, each module one tool.
    tools_path: tuple[Path, ...] = attrs.field(default=(), converter=_path_tuple)
    #: ``EXPEDITER_LEASE_SECONDS``: how long a running call's lease lasts between renewals.
    lease_seconds: float = 60.0
    #: ``EXPEDITER_APPROVAL_SECONDS``: how long a call may wait for a decision before a sweep
    #: abandons it.
    approval_seconds: float = 86400.0
    #: ``EXPEDITER_CALL_TIMEOUT``: each call must finish within this many seconds (None: never).
    call_timeout: float | None = 60.0
    #: ``EXPEDITER_DISABLE_PLUGINS``: packs never imported.
    disable_plugins: frozenset[str] = frozenset()
    #: ``EXPEDITER_LOAD_PLUGINS``: when set, the only packs imported (built-ins still load).
    load_plugins: frozenset[str] | None = None
    #: False with ``EXPEDITER_DISABLE_PLUGIN_AUTOLOAD=1``: entry points load only when named.
    autoload: bool = True
    #: ``EXPEDITER_STRICT_PLUGINS``: a pack that fails to load is fatal.
    strict_plugins: bool = False
    #: Whether the built-in tools are offered.
    builtins: bool = True
    #: ``EXPEDITER_SECRET_KEYS``: the master keys of stored credentials, newest first (never
    #: shown in the repr; parsed when credentials are first used).
    secret_keys: str | None = attrs.field(default=None, repr=False)
    #: ``EXPEDITER_SECRET_KEYS_FILE``: a file of master keys, one per line, newest first.
    secret_keys_file: Path | None = attrs.field(
        default=None, converter=attrs.converters.optional(Path)
    )
    #: ``EXPEDITER_DEFAULT_TOOLS``: the tools every user gets without configuration (None:
    #: every installed tool with no required configuration field).
    default_tools: frozenset[str] | None = None
    #: ``EXPEDITER_EGRESS_ALLOW``: network ranges every outbound client of every pack may reach
    #: on top of public addresses (on-premise APIs); set only by the operator.
    egress_allow: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        tools_path: Iterable[str | os.PathLike[str]] = (),
        **overrides: object,
    ) -> HostConfig:
        """Read ``EXPEDITER_*``; ``tools_path`` adds to ``EXPEDITER_TOOLS_PATH``, and each
        keyword in ``overrides`` that is not None replaces the environment's value."""
        env = os.environ if environ is None else environ
        load = env.get("EXPEDITER_LOAD_PLUGINS")
        values: dict[str, object] = {
            "database_url": env.get("EXPEDITER_DATABASE_URL") or None,
            "home": expediter_home(env),
            "tools_path": (*split_paths(env.get("EXPEDITER_TOOLS_PATH")), *tools_path),
            "lease_seconds": _seconds(env, "EXPEDITER_LEASE_SECONDS", 60.0, limitless=False),
            "approval_seconds": _seconds(
                env, "EXPEDITER_APPROVAL_SECONDS", 86400.0, limitless=False
            ),
            "call_timeout": _seconds(env, "EXPEDITER_CALL_TIMEOUT", 60.0) or None,
            "disable_plugins": split_names(env.get("EXPEDITER_DISABLE_PLUGINS")),
            "load_plugins": split_names(load) if load is not None and load.strip() else None,
            "autoload": not flag(env.get("EXPEDITER_DISABLE_PLUGIN_AUTOLOAD")),
            "strict_plugins": flag(env.get("EXPEDITER_STRICT_PLUGINS")),
            "secret_keys": env.get("EXPEDITER_SECRET_KEYS") or None,
            "secret_keys_file": env.get("EXPEDITER_SECRET_KEYS_FILE") or None,
            "default_tools": _tool_names(env.get("EXPEDITER_DEFAULT_TOOLS")),
            "egress_allow": _networks(env.get("EXPEDITER_EGRESS_ALLOW")),
        }
        unknown = set(overrides) - {field.name for field in attrs.fields(cls)}
        if unknown:
            raise TypeError(f"HostConfig has no field {', '.join(sorted(unknown))}")
        values.update((name, value) for name, value in overrides.items() if value is not None)
        return cls(**values)  # type: ignore[arg-type]

    def replace(self, **changes: Any) -> HostConfig:
        """A copy with the given fields changed (None leaves a field as it is)."""
        changes = {name: value for name, value in changes.items() if value is not None}
        return attrs.evolve(self, **changes) if changes else self

    @property
    def plugin_settings(self) -> PluginSettings:
        """What discovery may import (the plugin switches, tools directories, built-ins)."""
        return PluginSettings(
            disabled=self.disable_plugins,
            load_only=self.load_plugins,
            autoload=self.autoload,
            strict=self.strict_plugins,
            tools_path=self.tools_path,
            builtins=self.builtins,
        )
