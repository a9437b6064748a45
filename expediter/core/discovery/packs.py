"""Find tool packs (entry points, tools directories, built-ins), import them, and describe them.

Finding reads metadata only; importing happens in ``load_pack``; describing a tool asks its
hooks for actions and configuration. One broken pack is recorded with its error and skipped.

A pack read back from the manifest cache is checked before it is imported: its entry points
must be ones its distribution lists now (``importlib.metadata``); its file was checked when
the cache was read (``manifest.read``). A tools module every user may change is imported with a
warning, or under ``EXPEDITER_STRICT_PLUGINS`` not at all.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import logging
import re
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from expediter.__about__ import __version__
from expediter.core.authoring.docstrings import parse_docstring
from expediter.core.authoring.tools import FunctionGroup, FunctionTool, Toolbox
from expediter.core.config import BUILTIN_DIR, PluginSettings
from expediter.core.discovery.catalogue import (
    Catalogue,
    CommandInfo,
    Conflict,
    PackInfo,
    PackLocation,
    Source,
    ToolInfo,
    withhold_conflicts,
)
from expediter.core.discovery.loading import ToolType, coerce_actions, make_relay
from expediter.core.discovery.manifest import open_to_everyone
from expediter.core.discovery.providers import HOOK as PROVIDERS_HOOK
from expediter.core.discovery.providers import (
    ProviderCheck,
    ProviderInfo,
    registered_providers,
    resolve_provider_conflicts,
)
from expediter.core.records.text import clean_text
from expediter.hookspecs import HOST_HOOKS, PROJECT_NAME, TOOL_HOOKS
from expediter.hookspecs import host as host_spec
from expediter.hookspecs import tool as tool_spec
from expediter.hookspecs.tool import CallContext, ConfigField

if TYPE_CHECKING:
    import click
    from pluggy import HookimplOpts

__all__ = [
    "BUILTIN_DIR",
    "ENTRY_POINT_GROUP",
    "LoadedPack",
    "PackRef",
    "describe_tool",
    "find_packs",
    "load_objects",
    "load_pack",
    "pack_commands",
    "resolve_conflicts",
    "scan_directory",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "expediter"
_BUILTIN_PACKAGE = "expediter.plugins"
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_COMMAND_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: A pack command's help as ``expediter --help`` lists it (and the manifest keeps it).
_COMMAND_HELP_CHARS = 120


@attrs.frozen
class PackRef:
    """A pack found but not yet imported."""

    name: str
    version: str | None
    source: Source
    location: PackLocation
    #: Every name the switches may use for this pack (distribution, entry point, module).
    aliases: tuple[str, ...] = ()
    #: ``EXPEDITER_STRICT_PLUGINS``: a module every user may change is not imported.
    strict: bool = False
    #: Found by discovery just now; else (read back from the manifest cache) its entry points
    #: are checked against the installed distributions before any is loaded.
    found: bool = False


@attrs.define
class LoadedPack:
    """A pack after import: its description, tool types and host plugin objects."""

    info: PackInfo
    types: list[ToolType] = attrs.Factory(list)
    infos: list[ToolInfo] = attrs.Factory(list)
    host_plugins: list[tuple[str, object]] = attrs.Factory(list)
    #: The providers the pack registers, as described at discovery (``describe=True``).
    providers: list[ProviderInfo] = attrs.Factory(list)
    #: The provider objects those descriptions were made from, by name.
    provider_objects: dict[str, object] = attrs.Factory(dict)


# -- finding --------------------------------------------------------------------------------------


def _module_entries(directory: Path) -> Iterator[tuple[str, Path, bool]]:
    try:
        children = sorted(directory.iterdir())
    except OSError as exc:
        logger.warning("tools directory %s cannot be read: %s", directory, exc)
        return
    for child in children:
        stem = child.stem if child.suffix == ".py" else child.name
        if stem.startswith(("_", ".")) or not stem.isidentifier():
            continue
        if child.is_file() and child.suffix == ".py":
            yield stem, child, False
        elif child.is_dir() and (child / "__init__.py").is_file():
            yield stem, child / "__init__.py", True


def scan_directory(directory: Path, *, source: Source = "directory") -> list[PackRef]:
    """Return one pack per module or package in a tools directory (module name = tool name)."""
    refs = []
    for stem, path, _ in _module_entries(directory):
        module = f"{_BUILTIN_PACKAGE}.{stem}" if source == "built-in" else None
        refs.append(
            PackRef(
                name=stem,
                version=__version__ if source == "built-in" else None,
                source=source,
                location=PackLocation(path=str(path), module=module),
                aliases=(stem,),
            )
        )
    return refs


def _entry_point_refs() -> list[PackRef]:
    from importlib.metadata import entry_points

    grouped: dict[str, PackRef] = {}
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        dist = entry_point.dist
        dist_name = dist.name if dist is not None else entry_point.name
        version = dist.version if dist is not None else None
        pair = (entry_point.name, entry_point.value)
        ref = grouped.get(dist_name)
        if ref is None:
            grouped[dist_name] = PackRef(
                name=dist_name,
                version=version,
                source="entry-point",
                location=PackLocation(entry_points=(pair,), distribution=dist_name),
                aliases=(dist_name, entry_point.name),
            )
        else:
            location = attrs.evolve(ref.location, entry_points=(*ref.location.entry_points, pair))
            grouped[dist_name] = attrs.evolve(
                ref, location=location, aliases=(*ref.aliases, entry_point.name)
            )
    return list(grouped.values())


def _identity(directory: Path) -> tuple[int, int]:
    status = directory.stat()
    return status.st_dev, status.st_ino


def find_packs(settings: PluginSettings) -> list[PackRef]:
    """Return every pack the settings allow, without importing any of them."""
    found = [
        ref
        for ref in scan_directory(BUILTIN_DIR, source="built-in")
        if settings.allows(ref.aliases, entry_point=False, built_in=True)
    ]
    # The built-in directory, and any directory reached twice under names resolve() keeps
    # apart (a bind mount), are one directory: scanning it twice would make every module in
    # it conflict with itself.
    scanned = {_identity(BUILTIN_DIR)}
    for directory in settings.tools_path:
        if not directory.is_dir():
            logger.warning("tools directory %s does not exist; skipping it", directory)
            continue
        identity = _identity(directory)
        if identity in scanned:
            continue
        scanned.add(identity)
        found.extend(
            ref
            for ref in scan_directory(directory)
            if settings.allows(ref.aliases, entry_point=False)
        )
    found.extend(
        ref for ref in _entry_point_refs() if settings.allows(ref.aliases, entry_point=True)
    )
    return [attrs.evolve(ref, strict=settings.strict, found=True) for ref in found]


# -- importing ------------------------------------------------------------------------------------


def _import_path(path: Path) -> types.ModuleType:
    package = path.name == "__init__.py"
    directory = path.parent.parent if package else path.parent
    stem = path.parent.name if package else path.stem
    digest = hashlib.sha1(str(directory).encode()).hexdigest()[:10]
    qualname = f"_expediter_tools_{digest}_{stem}"
    if qualname in sys.modules:
        return sys.modules[qualname]
    spec = importlib.util.spec_from_file_location(
        qualname, path, submodule_search_locations=[str(path.parent)] if package else None
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualname] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(qualname, None)
        raise
    return module


@functools.cache
def _markers() -> pluggy.PluginManager:
    """A manager with every spec added, asked only which hooks an object implements."""
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(tool_spec)
    manager.add_hookspecs(host_spec)
    return manager


def _marked(obj: object, name: str) -> HookimplOpts | None:
    """The ``@hookimpl`` options of ``obj.name``, found as pluggy's ``register`` finds them."""
    try:
        return _markers().parse_hookimpl_opts(obj, name)
    except Exception:  # pluggy < 1.6 reads the attribute, which may be missing or raise
        return None


def _host_hooks(obj: object) -> tuple[str, ...]:
    """The host hooks ``obj`` implements (``execute_action`` when it is a wrapper)."""
    found = [name for name in HOST_HOOKS if _marked(obj, name) is not None]
    opts = _marked(obj, "execute_action")
    if opts is not None and (opts.get("wrapper") or opts.get("hookwrapper")):
        found.append("execute_action")
    return tuple(found)


def _tool_hooks(obj: object) -> tuple[str, ...]:
    found = []
    for name in TOOL_HOOKS:
        opts = _marked(obj, name)
        if opts is not None and not (opts.get("wrapper") or opts.get("hookwrapper")):
            found.append(name)
    return tuple(found)


def _is_raw_tool(obj: object) -> bool:
    hooks = _tool_hooks(obj)
    return "get_actions_metadata" in hooks or "execute_action" in hooks


def _shared(obj: object) -> Callable[[Mapping[str, Any] | None], object]:
    return lambda config: obj


def _instantiate(cls: type) -> Callable[[Mapping[str, Any] | None], object]:
    try:
        takes_config = "config" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        takes_config = False

    def create(config: Mapping[str, Any] | None) -> object:
        return cls(config) if takes_config else cls()

    return create


def _summary(obj: object) -> str:
    return parse_docstring(getattr(obj, "__doc__", None)).summary


@attrs.frozen
class _Candidate:
    name: str
    obj: object
    factory: Callable[[Mapping[str, Any] | None], object]
    internal: bool
    user_scoped: bool
    headless_excluded: bool
    description: str
    hooks: tuple[str, ...]


def _from_tool_object(obj: object, name: str | None) -> _Candidate | None:
    """Return the tool an object defines, or None when it is not a tool."""
    if isinstance(obj, FunctionTool | FunctionGroup):
        return _Candidate(
            name or obj.name,
            obj,
            _shared(obj),
            obj.internal,
            obj.user_scoped,
            obj.headless_excluded,
            obj.description,
            ("get_actions_metadata", "execute_action"),
        )
    if isinstance(obj, type) and issubclass(obj, Toolbox):
        return _Candidate(
            name or obj.name,
            obj,
            _instantiate(obj),
            obj.internal,
            obj.user_scoped,
            obj.headless_excluded,
            obj.description,
            TOOL_HOOKS,
        )
    if isinstance(obj, types.ModuleType) or not _is_raw_tool(obj):
        return None
    declared = getattr(obj, "name", None)
    tool_name = name or (declared if isinstance(declared, str) else None)
    if tool_name is None:
        raise TypeError(
            f"{obj!r} implements tool hooks but has no name; pass register(obj, name=...)"
        )
    factory = _instantiate(obj) if isinstance(obj, type) else _shared(obj)
    return _Candidate(
        tool_name,
        obj,
        factory,
        bool(getattr(obj, "internal", False)),
        bool(getattr(obj, "user_scoped", False)),
        bool(getattr(obj, "headless_excluded", False)),
        str(getattr(obj, "description", "") or _summary(obj)),
        _tool_hooks(obj),
    )


def _defined_in(owner: str, module: types.ModuleType) -> bool:
    """Whether an object defined in ``owner`` belongs to ``module`` (or, for a package, to it
    or one of its submodules): imported tools from elsewhere are not this module's tools."""
    if owner == module.__name__:
        return True
    return hasattr(module, "__path__") and owner.startswith(module.__name__ + ".")


def _label(module: types.ModuleType) -> str:
    """Name a module for a message: tools-directory modules by their file."""
    if module.__name__.startswith("_expediter_tools_"):
        return str(getattr(module, "__file__", module.__name__))
    return f"module {module.__name__}"


def _from_module(module: types.ModuleType, name: str) -> _Candidate | None:
    """Return the one tool a module defines (named ``name``), or None if it defines none."""
    if _is_raw_tool(module):
        return _Candidate(
            name,
            module,
            _shared(module),
            bool(getattr(module, "internal", False)),
            bool(getattr(module, "user_scoped", False)),
            bool(getattr(module, "headless_excluded", False)),
            str(getattr(module, "description", "") or _summary(module)),
            _tool_hooks(module),
        )
    own = [
        value
        for value in vars(module).values()
        if (isinstance(value, FunctionTool) and _defined_in(value.func.__module__, module))
        or (
            isinstance(value, type)
            and issubclass(value, Toolbox)
            and value is not Toolbox
            and _defined_in(value.__module__, module)
        )
    ]
    boxes = [value for value in own if isinstance(value, type)]
    # A base class subclassed in the same module is a building block, not a second tool.
    boxes = [box for box in boxes if not any(o is not box and issubclass(o, box) for o in boxes)]
    own = [value for value in own if not isinstance(value, type) or value in boxes]
    functions = [value for value in own if isinstance(value, FunctionTool)]
    if not own:
        return None
    if boxes and (functions or len(boxes) > 1):
        found = ", ".join(getattr(value, "__name__", repr(value)) for value in own)
        raise TypeError(
            f"{_label(module)} defines several tools ({found}); a module is one tool: "
            "keep one Toolbox, or only @tool functions, or register them with register_tools"
        )
    if boxes:
        return _from_tool_object(boxes[0], name)
    flags = {
        (function.internal, function.user_scoped, function.headless_excluded)
        for function in functions
    }
    if len(flags) > 1:
        raise TypeError(
            f"{_label(module)}: its @tool functions disagree on "
            "internal/user_scoped/headless_excluded; give them all the same values"
        )
    internal, user_scoped, headless_excluded = flags.pop()
    group = FunctionGroup(
        name,
        functions,
        description=_summary(module),
        internal=internal,
        user_scoped=user_scoped,
        headless_excluded=headless_excluded,
    )
    return _from_tool_object(group, name)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class _PackLoader:
    """Collects the tools and host plugins of one pack while it is imported."""

    def __init__(self, ref: PackRef) -> None:
        self.ref = ref
        self.candidates: list[_Candidate] = []
        self.host_plugins: list[tuple[str, object]] = []
        self.errors: list[str] = []
        self.hooks: set[str] = set()

    def failed(self, where: str, exc: BaseException, message: str, *args: object) -> None:
        """Record a load error (``where: Type: text``, or the text alone without ``where``)
        and log ``message % (*args, text)`` with the traceback."""
        text = _error_text(exc)
        self.errors.append(f"{where}: {text}" if where else text)
        logger.warning(message, *args, text, exc_info=True, extra={"pack": self.ref.name})

    def register(self, tool: object, name: str | None = None) -> None:
        """The ``register`` callback handed to ``register_tools``."""
        if isinstance(tool, types.ModuleType):
            candidate = _from_module(tool, name or tool.__name__.rpartition(".")[2])
        else:
            candidate = _from_tool_object(tool, name)
        if candidate is None:
            raise TypeError(f"register() got {tool!r}, which is not a tool")
        self.candidates.append(candidate)

    def add_object(self, obj: object, name: str, *, module_is_tool: bool) -> None:
        host_hooks = _host_hooks(obj)
        if host_hooks:
            self.hooks.update(host_hooks)
            self.host_plugins.append((f"{self.ref.name}:{name}", obj))
            if "register_tools" in host_hooks:
                self._call_register_tools(obj.register_tools)  # type: ignore[attr-defined]
        if isinstance(obj, types.ModuleType):
            # A module that registers tools itself is a pack, not also a tool of its own.
            is_tool = module_is_tool and "register_tools" not in host_hooks
            candidate = _from_module(obj, name) if is_tool or _is_raw_tool(obj) else None
            if candidate is None and not host_hooks and module_is_tool:
                raise TypeError(
                    f"{_label(obj)} defines no tool: add an @expediter.tool function, an "
                    "expediter.Toolbox subclass, or @expediter.hookimpl tool hooks"
                )
        else:
            candidate = _from_tool_object(obj, None if _declares_name(obj) else name)
            if candidate is None and not host_hooks:
                raise TypeError(
                    f"entry point {name!r} names {obj!r}, which is not a tool or plugin"
                )
        if candidate is not None:
            self.candidates.append(candidate)

    def _call_register_tools(self, registrar: Callable[..., Any]) -> None:
        parameters = inspect.signature(registrar).parameters
        if "register" in parameters:
            registrar(register=self.register)
        else:
            registrar()


def _declares_name(obj: object) -> bool:
    return isinstance(getattr(obj, "name", None), str)


def _installed_entry_points(distribution: str | None) -> set[tuple[str, str]]:
    """``(name, value)`` of each entry point in the group that ``distribution`` lists now."""
    from importlib.metadata import PackageNotFoundError, entry_points
    from importlib.metadata import distribution as find_distribution

    if not distribution:
        return set()
    try:
        listed = find_distribution(distribution).entry_points.select(group=ENTRY_POINT_GROUP)
    except (PackageNotFoundError, ValueError):
        # An entry point whose distribution has no name is grouped under its own name.
        listed = entry_points(group=ENTRY_POINT_GROUP).select(name=distribution)
    return {(entry_point.name, entry_point.value) for entry_point in listed}


def _load_entry_points(loader: _PackLoader) -> None:
    from importlib.metadata import EntryPoint

    installed = (
        None if loader.ref.found else _installed_entry_points(loader.ref.location.distribution)
    )
    for ep_name, value in loader.ref.location.entry_points:
        if installed is not None and (ep_name, value) not in installed:
            problem = (
                f"entry point {ep_name} = {value}: not installed (distribution "
                f"{loader.ref.location.distribution!r} does not list it); not imported. The "
                "tool cache does not match what is installed: run `expediter --refresh plugins`"
            )
            loader.errors.append(problem)
            logger.warning("tool pack %s: %s", loader.ref.name, problem)
            continue
        try:
            obj = EntryPoint(ep_name, value, ENTRY_POINT_GROUP).load()
            loader.add_object(obj, ep_name, module_is_tool=not _host_hooks(obj))
        except (Exception, SystemExit) as exc:
            loader.failed(
                f"entry point {ep_name} = {value}",
                exc,
                "tool pack %s failed to load entry point %s: %s",
                loader.ref.name,
                ep_name,
            )


def _load_module_file(loader: _PackLoader) -> None:
    location = loader.ref.location
    problem = open_to_everyone(location.path) if location.path else None
    if problem is not None:
        if loader.ref.strict:
            loader.errors.append(f"not imported (EXPEDITER_STRICT_PLUGINS is set): {problem}")
            logger.warning(
                "tool module %s not imported: %s",
                loader.ref.name,
                problem,
                extra={"pack": loader.ref.name},
            )
            return
        # Shown by `expediter plugins` too, which checks the modes as they are now.
        logger.warning("tool module %s: %s", loader.ref.name, problem)
    try:
        if location.module is not None:
            module = importlib.import_module(location.module)
        else:
            module = _import_path(Path(location.path or ""))
        loader.add_object(module, loader.ref.name, module_is_tool=True)
    except (Exception, SystemExit) as exc:
        loader.failed(
            "", exc, "tool module %s (%s) failed to load: %s", loader.ref.name, location.path
        )


def describe_tool(tool_type: ToolType) -> ToolInfo:
    """Ask a tool for its actions and configuration (creates a throwaway instance)."""
    instance = tool_type.factory(None)
    relay = make_relay(instance, tool_type.name)
    context = CallContext(tool=tool_type.name, instance_id=tool_type.name)
    actions = coerce_actions(relay.hook.get_actions_metadata(context=context) or [], tool_type.name)
    raw_config = relay.hook.config_requirements() or []
    config = tuple(ConfigField.coerce(item) for item in raw_config)
    return ToolInfo(
        name=tool_type.name,
        pack=tool_type.pack,
        version=tool_type.version,
        source=tool_type.source,
        internal=tool_type.internal,
        user_scoped=tool_type.user_scoped,
        headless_excluded=tool_type.headless_excluded,
        description=tool_type.description,
        actions=tuple(actions),
        config=config,
        pack_id=tool_type.pack_id,
    )


def _describe_providers(loader: _PackLoader, pack: LoadedPack, check: ProviderCheck) -> None:
    """Run the pack's ``register_providers`` hooks and describe each provider they register;
    a hook that raises, or an object ``check`` refuses, is a load error of the pack."""
    ref = loader.ref
    try:
        objects = registered_providers(pack.host_plugins)
    except (Exception, SystemExit) as exc:
        loader.failed(
            "register_providers", exc, "tool pack %s failed to register its providers: %s", ref.name
        )
        return
    for obj in objects:
        try:
            name, streaming = check(obj)
            if name in pack.provider_objects:
                raise ValueError(f"provider {name!r} is registered twice")
        except Exception as exc:
            problem = f"register_providers: {exc}"
            loader.errors.append(problem)
            logger.warning("tool pack %s: %s", ref.name, problem, extra={"pack": ref.name})
            continue
        info = ProviderInfo(name, ref.name, streaming, ref.version, ref.source, pack.info.id)
        pack.providers.append(info)
        pack.provider_objects[name] = obj


def _finish(
    loader: _PackLoader, *, describe: bool, provider_check: ProviderCheck | None = None
) -> LoadedPack:
    ref = loader.ref
    pack = LoadedPack(info=PackInfo(ref.name, ref.version, ref.source, ref.location))
    for candidate in loader.candidates:
        if not _TOOL_NAME.match(candidate.name):
            loader.errors.append(
                f"tool name {candidate.name!r} is not valid (letters, digits, _ . -, at most 64)"
            )
            continue
        tool_type = ToolType(
            name=candidate.name,
            pack=ref.name,
            version=ref.version,
            source=ref.source,
            pack_id=pack.info.id,
            obj=candidate.obj,
            factory=candidate.factory,
            internal=candidate.internal,
            user_scoped=candidate.user_scoped,
            headless_excluded=candidate.headless_excluded,
            description=candidate.description,
            hooks=candidate.hooks,
        )
        loader.hooks.update(candidate.hooks)
        if describe:
            try:
                pack.infos.append(describe_tool(tool_type))
            except Exception as exc:
                loader.failed(
                    f"tool {candidate.name!r}",
                    exc,
                    "tool %s from pack %s cannot describe itself: %s",
                    candidate.name,
                    ref.name,
                )
                continue
        pack.types.append(tool_type)
    pack.host_plugins = loader.host_plugins
    commands: tuple[CommandInfo, ...] = ()
    # Commands are described at discovery, so `expediter --help` lists them from the manifest;
    # in-process plugins (``Host(plugins=...)``) add none: the command line never sees them.
    if describe and ref.source != "host" and "register_commands" in loader.hooks:
        try:
            commands = _describe_commands(pack)
        except (Exception, SystemExit) as exc:
            loader.failed(
                "register_commands",
                exc,
                "tool pack %s failed to register its commands: %s",
                ref.name,
            )
    # Providers are described at discovery (the manifest keeps their names), so listing them
    # and the `--provider` choices import no pack.
    if describe and provider_check is not None and PROVIDERS_HOOK in loader.hooks:
        _describe_providers(loader, pack, provider_check)
    pack.info = attrs.evolve(
        pack.info,
        hooks=tuple(sorted(loader.hooks)),
        # `register_commands` is the command line's hook (``commands``) and
        # `register_providers` the turns' (``providers``), not the call pipeline's: a pack
        # adding only tools, commands and providers is imported to use one of them, never to
        # build the host's plugin manager.
        host_hooks=tuple(
            sorted(
                {
                    hook
                    for _, obj in loader.host_plugins
                    for hook in _host_hooks(obj)
                    if hook not in ("register_commands", PROVIDERS_HOOK)
                }
            )
        ),
        tools=tuple(tool_type.name for tool_type in pack.types),
        commands=commands,
        providers=tuple(info.name for info in pack.providers),
        streaming_providers=tuple(info.name for info in pack.providers if info.streaming),
        error="; ".join(loader.errors) or None,
    )
    return pack


def pack_commands(pack: LoadedPack) -> dict[str, click.Command]:
    """The commands a loaded pack's ``register_commands`` hooks add, by name.

    The hooks run against a throwaway click group (through pluggy, as every hook is called);
    what they raise propagates.
    """
    import click

    group = click.Group("expediter")
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(host_spec)
    for name, obj in pack.host_plugins:
        if _marked(obj, "register_commands") is not None and not manager.is_registered(obj):
            manager.register(obj, name=name)
    manager.hook.register_commands(cli=group)
    return dict(group.commands)


def _describe_commands(pack: LoadedPack) -> tuple[CommandInfo, ...]:
    """Name and one-line help of each command the pack adds (both kept in the manifest)."""
    described = []
    for name, command in sorted(pack_commands(pack).items()):
        if not _COMMAND_NAME.match(name):
            raise ValueError(
                f"command name {name!r} is not valid (letters, digits, _ . -, at most 64)"
            )
        summary = clean_text(command.get_short_help_str(limit=_COMMAND_HELP_CHARS))
        described.append(CommandInfo(name=name, help=" ".join(summary.split())))
    return tuple(described)


def load_pack(
    ref: PackRef, *, describe: bool = True, provider_check: ProviderCheck | None = None
) -> LoadedPack:
    """Import a pack and collect its tools; errors are recorded in ``info.error``, never raised.

    With ``describe``, the pack's tools, commands and (given ``provider_check``, which the host
    hands in) providers are described for the catalogue.
    """
    loader = _PackLoader(ref)
    if ref.source == "entry-point":
        _load_entry_points(loader)
    else:
        _load_module_file(loader)
    return _finish(loader, describe=describe, provider_check=provider_check)


def load_objects(
    name: str,
    objects: Iterable[object],
    *,
    describe: bool = True,
    provider_check: ProviderCheck | None = None,
) -> LoadedPack:
    """Load in-process objects (``Host(plugins=[...])``) as one pack named ``name``."""
    ref = PackRef(name=name, version=None, source="host", location=PackLocation())
    loader = _PackLoader(ref)
    for index, obj in enumerate(objects):
        label = getattr(obj, "name", None) or getattr(obj, "__name__", None) or f"plugin{index}"
        label = str(label).rpartition(".")[2]
        try:
            loader.add_object(obj, label, module_is_tool=_is_raw_tool(obj) or not _host_hooks(obj))
        except Exception as exc:
            loader.errors.append(f"{label}: {_error_text(exc)}")
    return _finish(loader, describe=describe, provider_check=provider_check)


def resolve_conflicts(
    infos: Sequence[ToolInfo], previous: Sequence[Conflict] = ()
) -> tuple[list[ToolInfo], list[Conflict]]:
    """Offer each tool name registered once; names registered by several packs offer none."""
    return withhold_conflicts(infos, previous)


def build_catalogue(packs: Sequence[LoadedPack]) -> Catalogue:
    """Combine loaded packs into a catalogue, withholding tool and provider names that
    conflict."""
    infos = [info for pack in packs for info in pack.infos]
    offered, conflicts = resolve_conflicts(infos)
    _, provider_conflicts = resolve_provider_conflicts(
        [info for pack in packs for info in pack.providers]
    )
    return Catalogue(
        packs=tuple(pack.info for pack in packs),
        tools=tuple(offered),
        conflicts=tuple(conflicts),
        provider_conflicts=tuple(provider_conflicts),
    )
