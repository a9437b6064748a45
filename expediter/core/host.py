"""The host: what is installed, the tool instances, and running one call end to end."""

from __future__ import annotations

import difflib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import attrs

from expediter.core.config import BUILTIN_DIR, PluginSettings, expediter_home, split_paths
from expediter.core.discovery import manifest
from expediter.core.discovery.catalogue import Catalogue, Conflict, PackInfo, ToolInfo
from expediter.core.records.calls import CallEvent, new_run_id
from expediter.errors import (
    ActionNotFound,
    ArgumentError,
    LedgerError,
    PluginLoadError,
    ToolConflict,
    ToolNotFound,
)
from expediter.hookspecs.tool import Action, CallContext

if TYPE_CHECKING:
    # The call path's modules import cattrs, asyncio and pluggy; a warm ``tools list``
    # needs none of them, so they are imported where they are first used.
    import pluggy

    from expediter.core.calls.eventloop import BackgroundLoop
    from expediter.core.calls.results import Outcome
    from expediter.core.discovery.loading import LoadedTool, Registry, ToolType
    from expediter.core.discovery.packs import LoadedPack
    from expediter.core.ledger import Attempt, Ledger
    from expediter.core.turns.toolset import ToolInstance, Toolset, _Composition

__all__ = ["Host", "strict_message"]

logger = logging.getLogger(__name__)

_HOST_PACK = "host"


class _Call:
    """One direct call in flight (a plain slotted class: it is made on every call)."""

    __slots__ = (
        "action",
        "arguments",
        "attempt",
        "call_id",
        "instance_id",
        "owner_id",
        "run_id",
        "started",
        "tool",
        "user_id",
    )

    def __init__(
        self,
        tool: str,
        action: str,
        arguments: Mapping[str, Any] | None,
        user_id: str | None,
        run_id: str,
        call_id: str,
    ) -> None:
        self.tool = tool
        self.action = action
        self.arguments = arguments
        self.user_id = user_id
        self.run_id = run_id
        self.call_id = call_id
        self.started = time.perf_counter()
        self.instance_id: str | None = None
        self.owner_id: str | None = None
        #: The ledger record of this call, once proposed.
        self.attempt: Attempt | None = None

    @property
    def key(self) -> str:
        """The ledger key: ``run_id:call_id`` (direct calls have no message)."""
        return f"{self.run_id}:{self.call_id}"


def _is_mapping(value: object) -> bool:
    return type(value) is dict or isinstance(value, Mapping)


def _is_awaitable(value: object) -> bool:
    return hasattr(value, "__await__")


def strict_message(errors: Iterable[str]) -> str:
    """The error shown when ``EXPEDITER_STRICT_PLUGINS`` turns load problems into failures."""
    return "tool packs failed to load (EXPEDITER_STRICT_PLUGINS is set):\n  " + "\n  ".join(errors)


@functools.cache
def _outcome_of() -> Callable[..., Outcome]:
    from expediter.core.calls.results import outcome_of

    return outcome_of


@final
class Host:
    """Discovers tool packs, offers their tools, and runs calls.

    ``Host()`` offers installed packs and the built-ins; ``Host.from_env()`` also reads
    ``EXPEDITER_TOOLS_PATH`` and ``EXPEDITER_DATABASE_URL``. The plugin switches
    (``EXPEDITER_DISABLE_PLUGINS`` and friends) are operator controls and always apply.
    ``plugins`` adds in-process tools and host plugins; ``builtins=False`` hides the built-ins;
    ``strict`` overrides ``EXPEDITER_STRICT_PLUGINS``; ``environ`` replaces ``os.environ``.
    """

    def __init__(
        self,
        database_url: str | None = None,
        tools_path: Iterable[str | os.PathLike[str]] = (),
        autoload: bool = True,
        *,
        plugins: Iterable[object] = (),
        home: str | os.PathLike[str] | None = None,
        refresh: bool = False,
        builtins: bool = True,
        strict: bool | None = None,
        environ: Mapping[str, str] | None = None,
        record_calls: bool = True,
        fail_closed: bool = False,
        lease_seconds: float | None = None,
        call_timeout: float | None = 60.0,
        model_result_tokens: int = 4000,
        approval_seconds: float | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        #: Each call of a turn must finish within this many seconds (None: no deadline).
        self.call_timeout = call_timeout
        #: The model's copy of a result is cut to about this many tokens (4 characters each).
        self.model_result_chars = max(200, int(model_result_tokens) * 4)
        self.approval_seconds = (
            float(approval_seconds)
            if approval_seconds is not None
            else float(env.get("EXPEDITER_APPROVAL_SECONDS") or 86400)
        )
        self._hooks_present: dict[str, bool] = {}
        self.database_url = database_url
        #: Whether ``call`` records every call in the ledger (False: no database at all).
        self.record_calls = record_calls
        self.fail_closed = fail_closed
        self.lease_seconds = (
            float(lease_seconds)
            if lease_seconds is not None
            else float(env.get("EXPEDITER_LEASE_SECONDS") or 60)
        )
        self._ledger: Ledger | None = None
        self.home = Path(home) if home is not None else expediter_home(environ)
        self.settings = PluginSettings.from_env(
            environ, autoload=autoload, tools_path=tools_path, builtins=builtins
        )
        if strict is not None:
            self.settings = attrs.evolve(self.settings, strict=strict)
        self._packs: dict[str, LoadedPack] = {}
        self._plugin_errors: list[str] = []
        self._lock = threading.RLock()
        self._catalogue = self._discover(refresh=refresh)
        extra = list(plugins)
        if extra:
            from expediter.core.discovery.packs import load_objects

            self._add_host_pack(load_objects(_HOST_PACK, extra))
        if self.settings.strict and self.errors:
            raise PluginLoadError(strict_message(self.errors))
        self._plugin_manager: pluggy.PluginManager | None = None
        self._wrappers: list[object] | None = None
        self._registry: Registry | None = None
        self._loop: BackgroundLoop | None = None
        #: Provider schemas per action version: ``(id(action), provider, strict)`` -> schema.
        self._schema_cache: dict[tuple[int, str, bool], tuple[Action, dict[str, Any], bool]] = {}
        #: Toolset compositions by the identity of their sources (see ``toolset._compose``).
        self._toolset_cache: dict[tuple[int, ...], _Composition] = {}
        self._installed_sources: tuple[Any, ...] | None = None

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
        """Configure from ``EXPEDITER_*``; ``tools_path`` adds to ``EXPEDITER_TOOLS_PATH``;
        ``database_url`` (the CLI's ``--database``) wins over ``EXPEDITER_DATABASE_URL``."""
        env = os.environ if environ is None else environ
        return cls(
            database_url=database_url or env.get("EXPEDITER_DATABASE_URL") or None,
            tools_path=[*split_paths(env.get("EXPEDITER_TOOLS_PATH")), *tools_path],
            plugins=plugins,
            refresh=refresh,
            strict=strict,
            environ=env,
        )

    # -- discovery ---------------------------------------------------------------------------

    @property
    def ledger(self) -> Ledger:
        """The call ledger (``database_url``, or an SQLite file in ``EXPEDITER_HOME``)."""
        if self._ledger is None:
            from expediter.core.ledger import Ledger

            with self._lock:
                if self._ledger is None:
                    ledger = Ledger(
                        self.database_url,
                        home=self.home,
                        lease_seconds=self.lease_seconds,
                        fail_closed=self.fail_closed,
                        approval_seconds=self.approval_seconds,
                    )
                    ledger.open()
                    self._ledger = ledger
        return self._ledger

    def _open_ledger(self) -> None:
        """Open the ledger before a call's clock starts; its errors are reported by the call."""
        if self.record_calls and self._ledger is None:
            try:
                self.ledger  # noqa: B018 - opening is the point
            except LedgerError:
                pass

    @property
    def registry(self) -> Registry:
        """The loaded tool instances and their dispatch relays."""
        if self._registry is None:
            from expediter.core.discovery.loading import Registry

            with self._lock:
                if self._registry is None:
                    self._registry = Registry(self._resolve_type, self._host_wrappers)
        return self._registry

    def _discover(self, *, refresh: bool) -> Catalogue:
        key = manifest.cache_key(self.settings, BUILTIN_DIR)
        path = manifest.cache_file(self.home, self.settings)
        if not refresh:
            cached = manifest.read(path, key)
            if cached is not None:
                return cached
        from expediter.core.discovery.packs import build_catalogue, find_packs, load_pack

        loaded = [load_pack(ref) for ref in find_packs(self.settings)]
        self._packs.update((pack.info.id, pack) for pack in loaded)
        catalogue = build_catalogue(loaded)
        if any(pack.error for pack in catalogue.packs):
            logger.debug("not caching the manifest: some packs failed to load")
        else:
            manifest.write(path, key, catalogue)
        return catalogue

    def _add_host_pack(self, pack: LoadedPack) -> None:
        from expediter.core.discovery.packs import resolve_conflicts

        self._packs[pack.info.id] = pack
        offered, conflicts = resolve_conflicts(
            [*self._catalogue.tools, *pack.infos], self._catalogue.conflicts
        )
        self._catalogue = Catalogue(
            packs=(*self._catalogue.packs, pack.info),
            tools=tuple(offered),
            conflicts=tuple(conflicts),
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

    @property
    def plugin_manager(self) -> pluggy.PluginManager:
        """The host's plugin manager: packs implementing host hooks, and ``plugins=`` objects."""
        if self._plugin_manager is None:
            with self._lock:
                if self._plugin_manager is None:
                    self._plugin_manager = self._build_plugin_manager()
        return self._plugin_manager

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
        return manager

    def _has_hook(self, name: str) -> bool:
        """Whether any host plugin implements a hook (checked once: plugins are fixed)."""
        found = self._hooks_present.get(name)
        if found is None:
            caller = getattr(self.plugin_manager.hook, name, None)
            found = bool(caller is not None and caller.get_hookimpls())
            self._hooks_present[name] = found
        return found

    def _observe(self, event: CallEvent) -> None:
        """Tell every ``on_call_event`` observer; one that raises is logged and skipped."""
        if not self._has_hook("on_call_event"):
            return
        for impl in self.plugin_manager.hook.on_call_event.get_hookimpls():
            try:
                impl.function(*[{"event": event}[name] for name in impl.argnames])
            except Exception as exc:
                logger.error(
                    "on_call_event observer %s raised %s; ignored",
                    impl.plugin_name,
                    type(exc).__name__,
                    exc_info=exc,
                )

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
        from expediter.core.calls.executor import Resumer

        return Resumer(self).resume(key, approved, approver, reason, instances)

    def submit_client_result(self, key: str, result: Any) -> CallEvent:
        """Record the result of a client-side call (``requires_client_execution``)."""
        from expediter.core.calls.executor import Resumer

        return Resumer(self).submit(key, result)

    def _host_wrappers(self) -> list[object]:
        if self._wrappers is None:
            from expediter.core.discovery.loading import wrapper_shims

            self._wrappers = wrapper_shims(self.plugin_manager)
        return self._wrappers

    # -- what is installed ---------------------------------------------------------------------

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

    def toolset(
        self,
        user_id: str | None = None,
        instances: Iterable[ToolInstance | Mapping[str, Any]] | None = None,
        client_tools: Iterable[Mapping[str, Any]] = (),
        internal: Iterable[str] = (),
        headless: bool = False,
        allowlist: Iterable[str] = (),
    ) -> Toolset:
        """The tools to offer in one turn: every installed non-internal tool, plus ``instances``
        (configured instances with their own id and display name), ``client_tools`` (OpenAI-style
        function definitions the application runs itself) and the ``internal`` tools named."""
        from expediter.core.turns.toolset import build_toolset

        return build_toolset(
            self,
            user_id=user_id,
            instances=instances,
            client_tools=client_tools,
            internal=internal,
            headless=headless,
            allowlist=allowlist,
        )

    # -- calling --------------------------------------------------------------------------------

    def _secret(self, name: str, context: CallContext) -> str | None:
        value = self.plugin_manager.hook.resolve_secret(name=name, context=context)
        return value if isinstance(value, str) else None

    def _prepare(self, call: _Call) -> tuple[LoadedTool, dict[str, Any], CallContext]:
        """Resolve the tool instance and action, check the arguments, build the context."""
        tool, action, arguments, user_id = call.tool, call.action, call.arguments, call.user_id
        if arguments is None:
            arguments = {}
        if not _is_mapping(arguments):
            raise ArgumentError(
                f"arguments for {tool}.{action} must be a JSON object, "
                f"got {type(arguments).__name__}"
            )
        loaded = self.registry.load(tool, user_id)
        context = CallContext(
            user_id=user_id,
            owner_id=loaded.user_id,
            instance_id=loaded.instance_id,
            tool=tool,
            run_id=call.run_id,
            call_id=call.call_id,
            secret_resolver=self._secret,
        )
        actions = loaded.actions(context)
        found = actions.get(action)
        if found is None or not found.active:
            available = ", ".join(name for name, item in actions.items() if item.active) or "none"
            raise ActionNotFound(f"tool {tool!r} has no action {action!r} (available: {available})")
        return loaded, loaded.arguments_for(found, arguments), context

    def _new_call(
        self,
        tool: str,
        action: str,
        arguments: Mapping[str, Any] | None,
        user_id: str | None,
        run_id: str | None,
        call_id: str | None,
    ) -> _Call:
        run_id = run_id or new_run_id()
        call_id = call_id or f"call_{os.urandom(6).hex()}"
        return _Call(tool, action, arguments, user_id, run_id, call_id)

    def _begin(self, call: _Call) -> Any:
        """Check the call and start the tool: returns its value or an awaitable of it."""
        loaded, arguments, context = self._prepare(call)
        call.instance_id = loaded.instance_id
        call.owner_id = loaded.user_id
        if self.record_calls:
            call.attempt = self._propose(call)
            if call.attempt.created is False:
                raise LedgerError(
                    f"the ledger already has a call {call.key!r}; it was not run again"
                )
        return loaded.call(action=call.action, arguments=arguments, context=context)

    def _propose(self, call: _Call) -> Attempt:
        return self.ledger.begin(
            key=call.key,
            call_id=call.call_id,
            name=call.action,
            run_id=call.run_id,
            user_id=call.user_id,
            owner_id=call.owner_id,
            instance_id=call.instance_id,
            tool=call.tool,
            action=call.action,
            arguments=call.arguments if _is_mapping(call.arguments) else None,
        )

    def _record(self, call: _Call, outcome: Outcome, duration_ms: float) -> None:
        """Finish the call's ledger row (proposing it first when the call failed early)."""
        if outcome.error_type == "LedgerError":
            return
        try:
            if call.attempt is None:
                call.attempt = self._propose(call)
            self.ledger.finish(
                call.attempt,
                ok=outcome.ok,
                result=outcome.value,
                error=outcome.error,
                duration_ms=duration_ms,
            )
        except Exception as exc:
            logger.error("the ledger could not record call %s: %s", call.key, exc, exc_info=exc)

    def _end(self, call: _Call, value: Any = None, exc: BaseException | None = None) -> CallEvent:
        """Normalize the tool's value or exception into the final event."""
        outcome = _outcome_of()(value, exc, tool=call.tool, action=call.action, log=logger)
        arguments = call.arguments
        duration_ms = int((time.perf_counter() - call.started) * 1_000_000) / 1000
        if self.record_calls:
            self._record(call, outcome, duration_ms)
        return CallEvent(
            status="completed" if outcome.ok else "error",
            key=call.key,
            call_id=call.call_id,
            name=call.action,
            tool=call.tool,
            action=call.action,
            arguments=dict(arguments) if arguments is not None and _is_mapping(arguments) else {},
            result=outcome.value,
            error=outcome.error,
            error_type=outcome.error_type,
            duration_ms=duration_ms,
            instance_id=call.instance_id,
            user_id=call.user_id,
        )

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
        """Run one action of one tool and return the final event; never raises for tool errors."""
        self._open_ledger()
        call = self._new_call(tool, action, arguments, user_id, run_id, call_id)
        try:
            value = self._begin(call)
            if _is_awaitable(value):
                value = self._background_loop().run(value)
        except Exception as exc:
            return self._end(call, exc=exc)
        return self._end(call, value)

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
        """Async ``call``: async tools are awaited on the caller's event loop."""
        self._open_ledger()
        call = self._new_call(tool, action, arguments, user_id, run_id, call_id)
        try:
            value = self._begin(call)
            if _is_awaitable(value):
                value = await value
        except Exception as exc:
            return self._end(call, exc=exc)
        return self._end(call, value)

    def _background_loop(self) -> BackgroundLoop:
        if self._loop is None:
            from expediter.core.calls.eventloop import BackgroundLoop

            self._loop = BackgroundLoop()
        return self._loop

    def close(self) -> None:
        """Stop the background loop used for async tools and close the ledger."""
        if self._loop is not None:
            self._loop.close()
        if self._ledger is not None:
            self._ledger.close()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
