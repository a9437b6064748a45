"""The host: the composition root. It reads a ``HostConfig`` once, discovers what is installed,
and wires the stages (discovery, ledger, turns, calls) by handing each its collaborators."""

from __future__ import annotations

import difflib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, final

import attrs

from expediter.__about__ import __version__
from expediter.core.config import BUILTIN_DIR, HostConfig
from expediter.core.discovery import manifest
from expediter.core.discovery.catalogue import Catalogue, Conflict, PackInfo, ToolInfo
from expediter.core.records.calls import CallEvent, ToolCall, new_run_id
from expediter.errors import (
    IdentifierError,
    LedgerError,
    PluginLoadError,
    ToolConflict,
    ToolNotFound,
    UnknownProvider,
)
from expediter.hookspecs.tool import CallContext

if TYPE_CHECKING:
    # The call path's modules import cattrs, asyncio and pluggy; a warm ``tools list``
    # needs none of them, so they are imported where they are first used.
    import pluggy

    from expediter.core.calls.approvals import Approvals
    from expediter.core.calls.eventloop import BackgroundLoop
    from expediter.core.calls.executor import Executor
    from expediter.core.calls.steps import Step
    from expediter.core.discovery.hooks import HostHooks
    from expediter.core.discovery.loading import LoadedTool, LoadedTools, ToolType
    from expediter.core.discovery.packs import LoadedPack
    from expediter.core.discovery.providers import ProviderInfo
    from expediter.core.instances.keys import Keyring
    from expediter.core.instances.manager import Instances
    from expediter.core.instances.storage import ToolStorage
    from expediter.core.instances.store import InstanceStore
    from expediter.core.instances.tokens import InstanceTokens
    from expediter.core.ledger import Ledger
    from expediter.core.turns.providers.base import Provider
    from expediter.core.turns.toolset import Offers, ToolInstance, Toolset

__all__ = ["Host", "strict_message"]

logger = logging.getLogger(__name__)

_HOST_PACK = "host"


class _Unset:
    """The default of ``Host(call_timeout=...)``: take the configuration's value."""

    def __repr__(self) -> str:
        return "<from HostConfig>"


_UNSET: Any = _Unset()


def _check_provider(obj: object) -> tuple[str, bool]:
    """The check discovery runs on each provider a pack registers (the turns stage's rules,
    imported only when a pack registers providers)."""
    from expediter.core.turns.providers import check_pack_provider

    return check_pack_provider(obj)


def _named(obj: object, name: str) -> bool:
    """Whether a registered object is the provider of that name (an object that cannot say
    is not)."""
    try:
        return type(obj.name) is str and obj.name == name  # type: ignore[attr-defined]
    except Exception:
        return False


def _exact_ids(instance: ToolInstance) -> ToolInstance:
    """An instance the application passes, its id and owner kept exactly (its records,
    tokens and delegation are keyed by them): ``IdentifierError`` for one that cannot be."""
    instance_id, owner_id = instance.instance_id, instance.owner_id
    if instance_id is not None:
        instance_id = IdentifierError.check(instance_id, "instance id")
    if owner_id is not None:
        owner_id = IdentifierError.check(owner_id, "owner id")
    if instance_id is instance.instance_id and owner_id is instance.owner_id:
        return instance
    return attrs.evolve(instance, instance_id=instance_id, owner_id=owner_id)


def strict_message(errors: Iterable[str]) -> str:
    """The error shown when ``EXPEDITER_STRICT_PLUGINS`` turns load problems into failures."""
    # One line (an error ends a command with one), each problem apart from the next.
    return "tool packs failed to load (EXPEDITER_STRICT_PLUGINS is set): " + "; ".join(errors)


@final
class Host:
    """Discovers tool packs, offers their tools, and runs calls.

    ``Host()`` reads its configuration from the environment (``HostConfig.from_env()``: the
    ledger, the data directory, the tools directories, the limits and the plugin switches), so
    a host application and the ``expediter`` command always agree. An explicit argument
    replaces the environment's value, except ``tools_path``, which adds to
    ``EXPEDITER_TOOLS_PATH``; ``config=`` gives the whole configuration instead (the
    environment is then not read). ``plugins`` adds in-process tools and host plugins;
    ``record_calls=False`` records nothing (no database at all).
    """

    def __init__(
        self,
        database_url: str | None = None,
        tools_path: Iterable[str | os.PathLike[str]] = (),
        autoload: bool = True,
        *,
        config: HostConfig | None = None,
        plugins: Iterable[object] = (),
        home: str | os.PathLike[str] | None = None,
        refresh: bool = False,
        builtins: bool | None = None,
        strict: bool | None = None,
        environ: Mapping[str, str] | None = None,
        record_calls: bool = True,
        fail_closed: bool = False,
        lease_seconds: float | None = None,
        call_timeout: float | None = _UNSET,
        model_result_tokens: int = 4000,
        approval_seconds: float | None = None,
    ) -> None:
        overrides: dict[str, Any] = {
            "database_url": database_url,
            "home": home,
            "lease_seconds": lease_seconds,
            "approval_seconds": approval_seconds,
            "builtins": builtins,
            "strict_plugins": strict,
            "autoload": None if autoload else False,
        }
        if config is None:
            config = HostConfig.from_env(environ, tools_path=tools_path, **overrides)
        else:
            extra = tuple(tools_path)
            config = config.replace(**overrides, tools_path=(*config.tools_path, *extra) or None)
        if call_timeout is not _UNSET:
            config = attrs.evolve(config, call_timeout=call_timeout)
        #: The configuration this host was built with (read once).
        self.config = config
        self.home = config.home
        self.database_url = config.database_url
        self.settings = config.plugin_settings
        self.call_timeout = config.call_timeout
        #: The model's copy of a result is cut to about this many tokens (4 characters each).
        self.model_result_chars = max(200, int(model_result_tokens) * 4)
        #: Whether calls are recorded in the ledger (False: no database at all).
        self.record_calls = record_calls
        self.fail_closed = fail_closed
        self._ledger: Ledger | None = None
        self._packs: dict[str, LoadedPack] = {}
        #: The packs' provider adapters used so far, by name.
        self._providers: dict[str, Provider] = {}
        self._plugin_errors: list[str] = []
        self._lock = threading.RLock()
        self._catalogue = self._discover(refresh=refresh)
        extra_plugins = list(plugins)
        if extra_plugins:
            from expediter.core.discovery.packs import load_objects

            self._add_host_pack(
                load_objects(_HOST_PACK, extra_plugins, provider_check=_check_provider)
            )
        if self.settings.strict and self.errors:
            raise PluginLoadError(strict_message(self.errors))
        self._hooks: HostHooks | None = None
        self._loaded_tools: LoadedTools | None = None
        self._executor: Executor | None = None
        self._approvals: Approvals | None = None
        self._offers: Offers | None = None
        self._loop: BackgroundLoop | None = None
        self._instances: Instances | None = None
        self._store: InstanceStore | None = None
        self._keyring: Keyring | None = None

    @classmethod
    def from_env(
        cls,
        *,
        tools_path: Iterable[str | os.PathLike[str]] = (),
        plugins: Iterable[object] = (),
        refresh: bool = False,
        strict: bool | None = None,
        environ: Mapping[str, str] | None = None,
        database_url: str | None = None,
    ) -> Host:
        """The same as ``Host(...)``: configured from ``EXPEDITER_*``, explicit arguments
        winning (``tools_path`` adds to ``EXPEDITER_TOOLS_PATH``)."""
        return cls(
            database_url=database_url,
            tools_path=tools_path,
            plugins=plugins,
            refresh=refresh,
            strict=strict,
            environ=environ,
        )

    # -- the stages, wired on first use --------------------------------------------------------

    @property
    def ledger(self) -> Ledger:
        """The call ledger (``database_url``, or an SQLite file in ``home``)."""
        if self._ledger is None:
            from expediter.core.ledger import Ledger

            with self._lock:
                if self._ledger is None:
                    ledger = Ledger.from_config(self.config, fail_closed=self.fail_closed)
                    ledger.open()
                    self._ledger = ledger
        return self._ledger

    @property
    def hooks(self) -> HostHooks:
        """The host plugins' hooks, as the pipeline asks them."""
        if self._hooks is None:
            from expediter.core.discovery.hooks import HostHooks

            with self._lock:
                if self._hooks is None:
                    self._hooks = HostHooks(self._build_plugin_manager)
        return self._hooks

    @property
    def plugin_manager(self) -> pluggy.PluginManager:
        """The host's plugin manager: packs implementing host hooks, and ``plugins=`` objects."""
        return self.hooks.manager

    @property
    def loaded_tools(self) -> LoadedTools:
        """The loaded tool instances and their dispatch relays."""
        if self._loaded_tools is None:
            from expediter.core.discovery.loading import LoadedTools

            with self._lock:
                if self._loaded_tools is None:
                    self._loaded_tools = LoadedTools(
                        self._resolve_type,
                        self.hooks.wrappers,
                        run_async=lambda awaitable: self._background_loop().run(awaitable),
                    )
        return self._loaded_tools

    @property
    def executor(self) -> Executor:
        """The one pipeline every call runs through."""
        if self._executor is None:
            from expediter.core.calls.executor import Executor

            with self._lock:
                if self._executor is None:
                    self._executor = Executor(
                        loaded_tools=self.loaded_tools,
                        hooks=self.hooks,
                        ledger=(lambda: self.ledger) if self.record_calls else None,
                        loop=self._background_loop,
                        call_timeout=self.call_timeout,
                        model_result_chars=self.model_result_chars,
                        storage=self._storage_for if self.record_calls else None,
                        egress_allow=self.config.egress_allow,
                        tokens=self._tokens_for if self.record_calls else None,
                        tool_info=self.tool_info,
                    )
        return self._executor

    @property
    def _decisions(self) -> Approvals:
        if self._approvals is None:
            from expediter.core.calls.approvals import Approvals

            with self._lock:
                if self._approvals is None:
                    self._approvals = Approvals(
                        self.executor,
                        self.loaded_tools,
                        lambda: self.ledger,
                        self.model_result_chars,
                        stored=lambda instance_id, user_id: self.instances.binding(
                            instance_id, user_id
                        ),
                    )
        return self._approvals

    # -- stored instances -------------------------------------------------------------------------

    @property
    def instances(self) -> Instances:
        """Stored tool instances: ``add``, ``get``, ``list``, ``update``, ``remove``,
        ``enable``/``disable`` (default tools too), ``tokens`` (OAuth), ``rotate``."""
        if self._instances is None:
            from expediter.core.instances.manager import Instances

            with self._lock:
                if self._instances is None:
                    self._instances = Instances(
                        store=self._instance_store,
                        keyring=self._keys,
                        tool_info=self.tool_info,
                        catalogue=self.catalogue,
                        default_names=self.config.default_tools,
                    )
        return self._instances

    def _instance_store(self) -> InstanceStore:
        if self._store is None:
            if not self.record_calls:
                raise LedgerError(
                    "stored tool instances need the host's database: this host was built "
                    "with record_calls=False"
                )
            from expediter.core.instances.store import InstanceStore

            with self._lock:
                if self._store is None:
                    # The ledger's open brings the schema to head (or says to upgrade it).
                    self._store = InstanceStore(self.ledger.database, lambda: self.ledger)
        return self._store

    def _keys(self) -> Keyring:
        """The master keys (``EXPEDITER_SECRET_KEYS``), read when credentials are first used."""
        if self._keyring is None:
            from expediter.core.instances.keys import Keyring

            keyring = Keyring.parse(self.config.secret_keys, self.config.secret_keys_file)
            keyring.require()
            self._keyring = keyring
        return self._keyring

    def _storage_for(self, step: Step) -> ToolStorage:
        """A call's ``CallContext.storage``: its instance's records for its invoker."""
        from expediter.core.instances.storage import ToolStorage

        loaded = step.loaded
        assert loaded is not None
        instance_id, tool = loaded.instance_id, loaded.type.name
        binding = step.turn.bindings.get(instance_id)
        if binding is not None and binding.stored:
            kind = "configured"
        elif self.instances.default_id(tool) == instance_id:
            kind = "default"
        else:
            kind = "inline"

        def anchor() -> None:
            if kind != "configured":
                self.instances.anchor(instance_id, tool, kind)

        return ToolStorage(
            self._instance_store(),
            instance_id=instance_id,
            user_id=step.turn.user_id,
            tool=tool,
            anchor=anchor,
        )

    def _listing_context(
        self, loaded: LoadedTool, user_id: str | None, owner_id: str | None, stored: bool
    ) -> CallContext:
        """The context a configured instance lists its actions with in a toolset: what a call
        of it would see of the instance (secrets, egress ranges, OAuth tokens), no call."""
        tokens = None
        if stored and self.record_calls:
            tokens = self.instances.call_tokens(loaded.instance_id, owner_id)
        return CallContext(
            user_id=user_id,
            owner_id=owner_id,
            instance_id=loaded.instance_id,
            tool=loaded.type.name,
            secret_resolver=self.hooks.secret,
            secrets=loaded.secrets,
            egress_allow=self.config.egress_allow,
            tokens=tokens,
        )

    def _tokens_for(self, step: Step) -> InstanceTokens | None:
        """A call's ``CallContext.tokens``: its stored instance's OAuth tokens (None for other
        instances, or without a key); no database read."""
        loaded = step.loaded
        assert loaded is not None
        binding = step.turn.bindings.get(loaded.instance_id)
        if binding is None or not binding.stored:
            return None
        return self.instances.call_tokens(loaded.instance_id, binding.owner_id)

    def _background_loop(self) -> BackgroundLoop:
        if self._loop is None:
            from expediter.core.calls.eventloop import BackgroundLoop

            with self._lock:
                if self._loop is None:
                    self._loop = BackgroundLoop()
        return self._loop

    # -- discovery ---------------------------------------------------------------------------

    def _discover(self, *, refresh: bool) -> Catalogue:
        key = manifest.cache_key(self.settings, BUILTIN_DIR)
        self._discovery_key = key
        path = manifest.cache_file(self.home, self.settings)
        if not refresh:
            cached = manifest.read(path, key)
            if cached is not None:
                return cached
        from expediter.core.discovery.packs import build_catalogue, find_packs, load_pack

        loaded = [
            load_pack(ref, provider_check=_check_provider) for ref in find_packs(self.settings)
        ]
        self._packs.update((pack.info.id, pack) for pack in loaded)
        catalogue = build_catalogue(loaded)
        if any(pack.error for pack in catalogue.packs):
            logger.debug("not caching the manifest: some packs failed to load")
        else:
            manifest.write(path, key, catalogue)
        return catalogue

    def _add_host_pack(self, pack: LoadedPack) -> None:
        from expediter.core.discovery.packs import resolve_conflicts
        from expediter.core.discovery.providers import (
            offered_providers,
            resolve_provider_conflicts,
        )

        self._packs[pack.info.id] = pack
        catalogue = self._catalogue
        offered, conflicts = resolve_conflicts([*catalogue.tools, *pack.infos], catalogue.conflicts)
        _, provider_conflicts = resolve_provider_conflicts(
            [*offered_providers(catalogue).values(), *pack.providers],
            catalogue.provider_conflicts,
        )
        self._catalogue = Catalogue(
            packs=(*catalogue.packs, pack.info),
            tools=tuple(offered),
            conflicts=tuple(conflicts),
            provider_conflicts=tuple(provider_conflicts),
        )

    def _pack(self, pack_id: str) -> LoadedPack:
        pack = self._packs.get(pack_id)
        if pack is None:
            info = self._catalogue.pack(pack_id)
            if info is None:
                raise ToolNotFound(f"no tool pack {pack_id!r}")
            from expediter.core.discovery.packs import PackRef, load_pack

            ref = PackRef(info.name, info.version, info.source, info.location)
            pack = load_pack(ref, describe=False)
            self._packs[pack_id] = pack
        return pack

    def _resolve_type(self, name: str) -> ToolType:
        info = self.tool_info(name)
        for tool_type in self._pack(info.pack_id).types:
            if tool_type.name == name:
                return tool_type
        raise ToolNotFound(
            f"pack {info.pack!r} no longer provides tool {name!r}; "
            "run `expediter --refresh tools list` to rebuild the tool cache"
        )

    def _build_plugin_manager(self) -> pluggy.PluginManager:
        import pluggy

        from expediter.hookspecs import PROJECT_NAME
        from expediter.hookspecs import host as host_spec
        from expediter.hookspecs import tool as tool_spec

        manager = pluggy.PluginManager(PROJECT_NAME)
        manager.add_hookspecs(tool_spec)
        manager.add_hookspecs(host_spec)
        for info in self._catalogue.packs:
            if not set(info.host_hooks) - {"register_tools"}:
                continue
            try:
                plugins = self._pack(info.id).host_plugins
            except Exception as exc:  # a pack that loaded at discovery but not now
                self._plugin_errors.append(f"pack {info.name!r}: {type(exc).__name__}: {exc}")
                logger.error("host plugin pack %s failed to load", info.name, exc_info=exc)
                continue
            for name, obj in plugins:
                if manager.is_registered(obj):
                    continue
                try:
                    manager.register(obj, name=name)
                except Exception as exc:
                    # One broken host plugin must not take every call down with it.
                    self._plugin_errors.append(f"plugin {name!r}: {type(exc).__name__}: {exc}")
                    logger.error("host plugin %s was not registered: %s", name, exc, exc_info=exc)
        if logging.getLogger("expediter.core.discovery.loading").isEnabledFor(logging.DEBUG):
            from expediter.core.discovery.loading import trace_hook_calls

            trace_hook_calls(manager, "host")
        return manager

    # -- what is installed ---------------------------------------------------------------------

    def discovery_changed(self) -> bool:
        """Whether what discovery read when this host was built has changed since: installed
        distributions, tools directories, plugin switches (about a millisecond: it reads file
        metadata). A long-running server builds a new host when it has, so packs installed or
        removed meanwhile are offered, or not, on its next listing."""
        return manifest.cache_key(self.settings, BUILTIN_DIR) != self._discovery_key

    def catalogue(self, include_internal: bool = False) -> list[ToolInfo]:
        """The offered tools, sorted by name (internal tools only when asked)."""
        tools = [info for info in self._catalogue.tools if include_internal or not info.internal]
        return sorted(tools, key=lambda info: info.name)

    @property
    def packs(self) -> list[PackInfo]:
        """Every pack discovery found, including those that failed to load."""
        return list(self._catalogue.packs)

    @property
    def errors(self) -> list[str]:
        """Every pack load error, tool-name conflict and rejected host plugin, as messages."""
        return self._catalogue.errors + self._plugin_errors

    @property
    def conflicts(self) -> list[Conflict]:
        """Tool names that several packs register (none of them is offered)."""
        return list(self._catalogue.conflicts)

    # -- providers ------------------------------------------------------------------------------

    def providers(self) -> list[ProviderInfo]:
        """Every provider a toolset speaks, sorted by name: the built-ins (pack ``expediter``)
        and those packs register (as discovery found them: no pack is imported)."""
        from expediter.core.discovery.providers import ProviderInfo, offered_providers
        from expediter.core.turns.providers import BUILTIN_PACK, PROVIDERS

        built_in = [
            ProviderInfo(name, BUILTIN_PACK, adapter.streaming, __version__, "built-in")
            for name, adapter in PROVIDERS.items()
        ]
        packs = offered_providers(self._catalogue).values()
        return sorted([*built_in, *packs], key=lambda info: info.name)

    @property
    def provider_conflicts(self) -> list[Conflict]:
        """Provider names that several packs register (none of them is offered)."""
        return list(self._catalogue.provider_conflicts)

    def provider(self, name: str) -> Provider:
        """The adapter for a provider name: a built-in, or a pack's (its pack imported on
        first use). ``UnknownProvider``, listing every name, for a name no pack registers
        alone; ``PluginLoadError`` when its pack no longer provides it."""
        from expediter.core.turns.providers import PROVIDERS

        adapter = PROVIDERS.get(name) if type(name) is str else None
        return adapter if adapter is not None else self._pack_provider(name)

    def _provider_lookup(self) -> Callable[[str], Provider]:
        """``provider`` for the toolsets: the built-ins found without an import statement
        (``toolset.schemas("openai")`` is measured: benchmarks/README.md)."""
        from expediter.core.turns.providers import PROVIDERS

        built_in = PROVIDERS
        from_pack = self._pack_provider

        def provider(name: str) -> Provider:
            adapter = built_in.get(name) if type(name) is str else None
            return adapter if adapter is not None else from_pack(name)

        return provider

    def _pack_provider(self, name: str) -> Provider:
        from expediter.core.turns.providers import PROVIDERS, unknown_provider

        key = name.strip().lower() if isinstance(name, str) else None
        adapter = None if key is None else PROVIDERS.get(key) or self._providers.get(key)
        if adapter is not None:
            return adapter
        from expediter.core.discovery.providers import offered_providers

        catalogue = self._catalogue
        offered = offered_providers(catalogue)
        info = None if key is None else offered.get(key)
        if info is None:
            conflict = None if key is None else catalogue.provider_conflict(key)
            if conflict is not None:
                raise UnknownProvider(conflict.message)
            raise unknown_provider(name, offered)
        with self._lock:
            adapter = self._providers.get(info.name)
            if adapter is None:
                adapter = self._providers[info.name] = self._load_provider(info)
        return adapter

    def _load_provider(self, info: ProviderInfo) -> Provider:
        """A pack's provider adapter: its pack imported (once) and its hook asked again."""
        from expediter.core.discovery.providers import registered_providers
        from expediter.core.turns.providers import checked_provider

        refresh = "run `expediter --refresh providers` to rebuild the tool cache"
        try:
            pack = self._pack(info.pack_id)
        except ToolNotFound as exc:
            raise PluginLoadError(f"pack {info.pack!r} is gone; {refresh}") from exc
        found = pack.provider_objects.get(info.name)
        if found is None:
            try:
                registered = registered_providers(pack.host_plugins)
            except (Exception, SystemExit) as exc:
                raise PluginLoadError(
                    f"pack {info.pack!r} failed to register its providers: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            found = next((obj for obj in registered if _named(obj, info.name)), None)
        if found is None:
            failed = f" (it failed to load: {pack.info.error})" if pack.info.error else ""
            raise PluginLoadError(
                f"pack {info.pack!r} no longer provides the provider {info.name!r}{failed}; "
                f"{refresh}"
            )
        try:
            return checked_provider(found)
        except (TypeError, ValueError) as exc:
            raise PluginLoadError(f"pack {info.pack!r}: {exc}") from exc

    def tool_info(self, name: str) -> ToolInfo:
        """Return an offered tool, or raise ToolNotFound (ToolConflict when packs collide)."""
        info = self._catalogue.tool(name)
        if info is not None:
            return info
        conflict = self._catalogue.conflict(name)
        if conflict is not None:
            raise ToolConflict(conflict.message)
        names = [tool.name for tool in self._catalogue.tools]
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        failed = [pack.name for pack in self._catalogue.packs if pack.error and name in pack.name]
        if failed:
            hint += f" (pack {failed[0]!r} failed to load: see `expediter plugins`)"
        raise ToolNotFound(f"no tool named {name!r}{hint}")

    # -- turns ----------------------------------------------------------------------------------

    # -- turns ----------------------------------------------------------------------------------

    def _offer(self) -> Offers:
        if self._offers is None:
            from expediter.core.turns.toolset import Offers

            with self._lock:
                if self._offers is None:
                    self._offers = Offers(
                        catalogue=self.catalogue,
                        tool_info=self.tool_info,
                        load=self.loaded_tools.load,
                        runner=self.executor,
                        listing_context=self._listing_context,
                        provider=self._provider_lookup(),
                    )
        return self._offers

    def toolset(
        self,
        user_id: str | None = None,
        instances: Iterable[ToolInstance | Mapping[str, Any] | str] | None = None,
        client_tools: Iterable[Mapping[str, Any]] = (),
        internal: Iterable[str] = (),
        headless: bool = False,
        allowlist: Iterable[str] = (),
    ) -> Toolset:
        """The tools to offer in one turn: the user's enabled stored instances (theirs and the
        shared ones), the default tools they have not switched off, plus ``instances``
        (configured ``ToolInstance``s, or ids of stored instances: an agent's tools, used with
        their owner's configuration), ``client_tools`` (OpenAI-style function definitions the
        application runs itself) and the ``internal`` tools named. A headless turn leaves out
        tools declared ``headless_excluded``.

        A host application acting for a user runs the model's calls with ``toolset.run``.
        A user id, instance id or owner id that cannot be stored exactly (NUL, a lone
        surrogate, more than 512 characters, empty) is refused with ``IdentifierError``: ids
        are compared exactly, never changed into one that may be somebody else's."""
        from expediter.core.instances.manager import Offered
        from expediter.core.turns.toolset import ToolInstance

        if user_id is not None:
            user_id = IdentifierError.check(user_id, "user id")
        registry = self.instances
        offered = Offered((), registry.defaults()[0])
        if self.record_calls:
            try:
                offered = registry.offered(user_id)
            except LedgerError as exc:
                # A database outage never stops a turn (docs/ledger.md): the default
                # tools are offered without the stored instances or the user's switches.
                logger.warning("stored tool instances are not offered: %s", exc)
                offered = attrs.evolve(
                    offered, errors=(f"stored tool instances could not be read: {exc}",)
                )
        explicit = [
            registry.binding(value)
            if isinstance(value, str)
            else _exact_ids(ToolInstance.coerce(value))
            for value in instances or ()
        ]
        return self._offer().toolset(
            user_id=user_id,
            instances=explicit,
            client_tools=client_tools,
            internal=internal,
            headless=headless,
            allowlist=allowlist,
            stored=offered.instances,
            defaults=offered.defaults,
            errors=offered.errors,
        )

    # -- the operator's calls -------------------------------------------------------------------

    def _direct(
        self,
        tool: str,
        action: str,
        arguments: Mapping[str, Any] | None,
        user_id: str | None,
        run_id: str | None,
        call_id: str | None,
    ) -> Any:
        from expediter.core.calls.steps import BareTurn

        if user_id is not None:
            user_id = IdentifierError.check(user_id, "user id")
        run_id = run_id or new_run_id()
        turn = BareTurn(user_id, operator=True)
        instance_id = tool
        # Not an installed tool's name: perhaps a stored instance's id, run with its owner's
        # configuration (InstanceNotFound when it is disabled; an unknown name stays the
        # executor's ToolNotFound). Neither can be text no database keeps exactly.
        binding = None
        if type(tool) is not str or self._catalogue.tool(tool) is None:
            IdentifierError.check(tool, "tool or instance id")
            binding = self.instances.lookup(tool) if self.record_calls else None
        if binding is not None:
            tool = binding.tool
            turn.bindings[instance_id] = binding
        else:
            instance_id = self.instances.default_id(tool) or tool
        call = ToolCall(
            # The run id is new for every call, so the ledger key (``run_id:call_id``) is
            # unique without a random call id: the run id's counter names the call.
            call_id=call_id or f"call_{run_id[-8:]}",
            name=action,
            arguments={} if arguments is None else arguments,
            instance_id=instance_id,
            tool=tool,
            action=action,
        )
        return self.executor.begin(turn, call, message_id=None, run_id=run_id)

    def call(
        self,
        tool: str,
        action: str,
        arguments: Mapping[str, Any] | None = None,
        user_id: str | None = None,
        *,
        run_id: str | None = None,
        call_id: str | None = None,
    ) -> CallEvent:
        """Run one action of one tool as the operator and return the final event; never raises
        for what the tool did.

        This is the operator's path (``expediter call``): an approval the action or a policy
        asks for counts as given by the operator (recorded as decision ``operator``), while a
        forced prompt or a denial still refuses the call. A host application acting for a user
        runs calls through ``toolset(...).run(...)`` instead. The call runs through the same
        pipeline as a turn: same checks, deadline, hooks, result copies and ledger rows.
        """
        executor = self.executor
        step = self._direct(tool, action, arguments, user_id, run_id, call_id)
        if step.final is not None:
            return executor.emit(step.final)
        return executor.execute(step)

    async def acall(
        self,
        tool: str,
        action: str,
        arguments: Mapping[str, Any] | None = None,
        user_id: str | None = None,
        *,
        run_id: str | None = None,
        call_id: str | None = None,
    ) -> CallEvent:
        """Async ``call``: async tools are awaited on the host's loop (as ``call`` does), sync
        tools run in a thread, both within the call timeout."""
        executor = self.executor
        step = self._direct(tool, action, arguments, user_id, run_id, call_id)
        if step.final is not None:
            return executor.emit(step.final)
        return await executor.aexecute(step)

    # -- calls decided elsewhere ----------------------------------------------------------------

    def resume(
        self,
        key: str,
        approved: bool,
        approver: str | None = None,
        reason: str | None = None,
        *,
        instances: Iterable[ToolInstance | Mapping[str, Any]] = (),
    ) -> CallEvent:
        """Approve (and run, here and now) or deny a call waiting for approval, from any
        process; the live decision is asked again, and a denial it gives wins.

        A configured instance is rebuilt from the configuration recorded with the call;
        when that configuration held secrets (never recorded) pass the instance again in
        ``instances``, as given to ``toolset()``.
        """
        return self._decisions.resume(key, approved, approver, reason, instances)

    def submit_client_result(self, key: str, result: Any) -> CallEvent:
        """Record the result of a client-side call (``requires_client_execution``)."""
        return self._decisions.submit(key, result)

    def outcome(self, key: str) -> CallEvent:
        """The call's current event rebuilt from the ledger (``awaiting_approval`` while it
        waits; the model's copy of the result once it completed). LedgerError for an unknown
        key."""
        return self._decisions.outcome(key)

    def wait(self, keys: Iterable[str], timeout: float | None = None) -> dict[str, CallEvent]:
        """Wait until every key's call is final, or the timeout passes; return the events of the
        calls final by then (never raises for a timeout)."""
        return self._decisions.wait(keys, timeout)

    def close(self) -> None:
        """Close the loaded tools' clients and sessions, stop the background loop used for
        async tools, and close the ledger."""
        if self._loaded_tools is not None:
            self._loaded_tools.close()
        if self._loop is not None:
            self._loop.close()
        if self._store is not None:
            self._store.close()
        if self._ledger is not None:
            self._ledger.close()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
