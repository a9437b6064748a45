"""Tool types, their loaded instances, and constant-time dispatch to one tool's hooks.

Each loaded instance gets its own small pluggy ``PluginManager`` (a *relay*) holding just that
tool plus the host-wide ``execute_action`` wrappers. A call looks the instance up in a dict and
calls its relay, so the cost does not grow with the number of installed tools, while pluggy's
wrapper and firstresult semantics stay exactly as pluggy defines them.

Around an async action, pluggy's wrappers would finish before the action's coroutine runs and
see the coroutine. So such a call runs the wrappers *inside* a coroutine, each adapted once by
the host (``_AwaitingWrapper``): its code before ``yield`` runs when the call starts, and
``yield`` returns the awaited result or raises the exception raised while awaiting, as around
a sync action.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any, final

import attrs
import pluggy

from expediter.core.discovery.catalogue import Source
from expediter.core.records.digests import config_key
from expediter.errors import ArgumentError
from expediter.hookspecs import PROJECT_NAME, TOOL_HOOKS, hookimpl
from expediter.hookspecs import host as host_spec
from expediter.hookspecs import tool as tool_spec
from expediter.hookspecs.tool import Action, CallContext

__all__ = [
    "LoadedTool",
    "LoadedTools",
    "ToolType",
    "config_key",
    "make_relay",
    "trace_hook_calls",
    "wrapper_shims",
]

Factory = Callable[[Mapping[str, Any] | None], object]
#: Not worked out yet (a cache's marker).
_UNKNOWN: Any = object()

logger = logging.getLogger(__name__)


@attrs.frozen(eq=False)
class ToolType:
    """A registered tool: which pack it came from and how to make an instance of it."""

    name: str
    pack: str
    version: str | None
    source: Source
    #: The ``PackInfo.id`` of the registering pack.
    pack_id: str
    #: The object that was registered (a Toolbox class, a ``@tool`` function, a module...).
    obj: object
    factory: Factory
    internal: bool = False
    user_scoped: bool = False
    #: Never offered in headless runs.
    headless_excluded: bool = False
    description: str = ""
    hooks: tuple[str, ...] = TOOL_HOOKS


def make_relay(
    instance: object, name: str, wrappers: Sequence[object] = ()
) -> pluggy.PluginManager:
    """Return a plugin manager holding one tool instance and the host-wide wrappers."""
    relay = pluggy.PluginManager(PROJECT_NAME)
    relay.add_hookspecs(tool_spec)
    relay.add_hookspecs(host_spec)
    relay.register(instance, name=f"tool:{name}")
    for index, wrapper in enumerate(wrappers):
        relay.register(wrapper, name=f"wrapper:{index}")
    relay.check_pending()
    if logger.isEnabledFor(logging.DEBUG):
        trace_hook_calls(relay, f"tool {name}")
    return relay


def trace_hook_calls(manager: pluggy.PluginManager, label: str) -> Callable[[], None]:
    """Log every hook call of a plugin manager at DEBUG (``expediter -vv``): the hook, the
    plugins it reaches and how it ended; never arguments or results, which may hold secrets.
    Returns the function that stops the tracing."""

    def before(hook: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
        plugins = ", ".join(impl.plugin_name for impl in impls) or "no plugin"
        logger.debug("%s: %s -> %s", label, hook, plugins)

    def after(
        outcome: pluggy.Result[Any],
        hook: str,
        impls: Sequence[pluggy.HookImpl],
        kwargs: Mapping[str, Any],
    ) -> None:
        if outcome.exception is not None:
            logger.debug("%s: %s raised %s", label, hook, type(outcome.exception).__name__)
        else:
            logger.debug("%s: %s returned %s", label, hook, type(outcome.get_result()).__name__)

    return manager.add_hookcall_monitoring(before, after)


@final
class _WrapperShim:
    """Carries one ``execute_action`` implementation (a host-wide wrapper), so a relay gets
    only that hook."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.execute_action = function


def wrapper_shims(plugin_manager: pluggy.PluginManager) -> list[object]:
    """Return one object per host ``execute_action`` wrapper, implementing only that wrapper."""
    return [
        _WrapperShim(impl.function)
        for impl in plugin_manager.hook.execute_action.get_hookimpls()
        if impl.wrapper or impl.hookwrapper
    ]


@final
class _Teardown:
    """One run of a host-wide wrapper around an async action, driven as pluggy drives a
    wrapper, but resumed only once the action's awaitable has finished."""

    __slots__ = ("generator", "name", "old_style")

    def __init__(self, impl: pluggy.HookImpl, given: Mapping[str, Any]) -> None:
        self.name = impl.plugin_name
        self.old_style = impl.hookwrapper
        generator = impl.function(*[given[name] for name in impl.argnames])
        if not inspect.isgenerator(generator):
            raise TypeError(f"execute_action wrapper {self.name} is not a generator")
        self.generator: Generator[Any, Any, Any] = generator
        try:
            next(generator)
        except StopIteration:
            raise RuntimeError(f"execute_action wrapper {self.name} did not yield") from None

    def finish(self, value: Any = None, exc: BaseException | None = None) -> Any:
        """Resume the wrapper with the action's value or exception: a new-style wrapper's
        return value (or exception) is the result; an old-style one gets a ``pluggy.Result``
        it may change."""
        outcome = pluggy.Result(value, exc) if self.old_style else None
        try:
            if outcome is not None:
                self.generator.send(outcome)
            elif exc is not None:
                self.generator.throw(exc)
            else:
                self.generator.send(value)
        except StopIteration as stop:
            returned = stop.value
        else:
            self.generator.close()
            raise RuntimeError(f"execute_action wrapper {self.name} has a second yield")
        # Outside the handler, so an exception raised here does not chain StopIteration.
        return outcome.get_result() if outcome is not None else returned

    async def resume(self, awaitable: Awaitable[Any]) -> Any:
        """Await the inner call, then finish the wrapper with what it gave."""
        try:
            value = await awaitable
        except BaseException as exc:  # cancellation too: the wrapper sees how the call ended
            return self.finish(exc=exc)
        return self.finish(value)


@final
class _AwaitingWrapper:
    """A host-wide wrapper adapted for async actions: after ``yield`` it sees the awaited value
    or exception (it returns a coroutine that awaits the inner one, then resumes the wrapper).
    """

    def __init__(self, impl: pluggy.HookImpl) -> None:
        @hookimpl(wrapper=True, tryfirst=impl.tryfirst, trylast=impl.trylast)
        def execute_action(
            action: str, arguments: dict[str, Any], context: CallContext
        ) -> Generator[None, Any, Any]:
            given = {"action": action, "arguments": arguments, "context": context}
            teardown = _Teardown(impl, given)
            try:
                inner = yield
            except BaseException as exc:  # raised before there was anything to await
                return teardown.finish(exc=exc)
            if inspect.isawaitable(inner):
                return teardown.resume(inner)
            return teardown.finish(inner)

        self.execute_action = execute_action


def _awaiting_hook(relay: pluggy.PluginManager) -> pluggy.HookCaller:
    """The relay's ``execute_action`` with each wrapper adapted (``_AwaitingWrapper``), in
    pluggy's order: registered in the order pluggy keeps, with the same tryfirst/trylast."""
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(tool_spec)
    for impl in relay.hook.execute_action.get_hookimpls():
        wrapper = impl.wrapper or impl.hookwrapper
        shim = _AwaitingWrapper(impl) if wrapper else _WrapperShim(impl.function)
        manager.register(shim, name=impl.plugin_name)
    return manager.hook.execute_action


async def _awaited(
    hook: pluggy.HookCaller, action: str, arguments: dict[str, Any], context: CallContext
) -> Any:
    """Run an async action through its adapted wrappers, within the awaiting task."""
    result = hook(action=action, arguments=arguments, context=context)
    return await result if inspect.isawaitable(result) else result


def _action_specs(instance: object) -> list[Any] | None:
    """The action specs of a ``@tool`` function, group or ``Toolbox`` (None for raw hooks)."""
    if hasattr(instance, "action_specs"):
        return list(instance.action_specs().values())
    if hasattr(instance, "functions"):
        return [function.spec for function in instance.functions.values()]
    if hasattr(instance, "spec"):
        return [instance.spec]
    return None


@final
class LoadedTool:
    """One tool instance with its relay; ``call`` runs ``execute_action`` through the relay."""

    __slots__ = (
        "_accepted",
        "_actions",
        "_async",
        "_awaiting",
        "_contexts",
        "_found",
        "_hooks",
        "_is_sugar",
        "_secret_fields",
        "call",
        "dynamic",
        "instance",
        "instance_id",
        "relay",
        "run_async",
        "secret_values",
        "secrets",
        "type",
        "user_id",
    )

    def __init__(
        self,
        tool_type: ToolType,
        instance: object,
        relay: pluggy.PluginManager,
        *,
        instance_id: str,
        user_id: str | None,
        run_async: Callable[[Any], Any] | None = None,
    ) -> None:
        self.type = tool_type
        #: Runs an awaitable to its result on the host's background loop (where the tool's
        #: sync callers' calls run): for a ``get_actions_metadata`` that returns one.
        self.run_async = run_async
        self.instance = instance
        self.relay = relay
        self.instance_id = instance_id
        self.user_id = user_id
        self._async: dict[str, bool] = {}
        self._awaiting: pluggy.HookCaller | None = None
        # A traced relay (-vv) is always called through pluggy, so every call is logged.
        direct = None if logger.isEnabledFor(logging.DEBUG) else _direct(relay)
        self.call: Callable[..., Any] = direct or self._through_wrappers()
        self._actions: dict[str, Action] | None = None
        #: What ``get_actions_metadata`` last returned (a dynamic tool's cache key).
        self._found: object = None
        #: The tool lists its actions anew whenever asked (``dynamic_actions``), e.g. the
        #: tools of a remote MCP server; it returns the very same list while nothing changed.
        self.dynamic = getattr(instance, "dynamic_actions", False) is True
        self._accepted: dict[str, tuple[Action, frozenset[str] | None]] = {}
        self._hooks: dict[str, bool] = {}
        self._contexts: dict[str, bool] = {}
        self._is_sugar: bool | None = None
        self._secret_fields: frozenset[str] | None = _UNKNOWN
        #: The instance's secret configuration values by field (``CallContext.secret``).
        self.secrets: Mapping[str, Any] = {}
        #: Those values as text, hidden wherever a call's arguments or result shows them.
        self.secret_values: frozenset[str] = frozenset()

    @property
    def secret_fields(self) -> frozenset[str] | None:
        """The configuration fields the tool declares secret (``ConfigField(secret=True)``),
        asked once; None when the tool cannot say (its ``config_requirements`` failed)."""
        found = self._secret_fields
        if found is _UNKNOWN:
            from expediter.hookspecs.tool import ConfigField

            try:
                found = frozenset(
                    field.name
                    for field in map(
                        ConfigField.coerce, self.relay.hook.config_requirements() or []
                    )
                    if field.secret
                )
            except Exception:
                logger.debug("tool %s: config_requirements failed", self.type.name, exc_info=True)
                found = None
            self._secret_fields = found
        return found

    def keep_secrets(self, config: Mapping[str, Any]) -> None:
        """Keep the configuration's secret fields: those the tool declares secret
        (``ConfigField(secret=True)``) and those whose names say so."""
        from expediter.core.records.redaction import secret_config, secret_texts

        self.secrets = secret_config(config, self.secret_fields or frozenset())
        self.secret_values = secret_texts(self.secrets.values())

    def _through_wrappers(self) -> Callable[..., Any]:
        """``execute_action`` through the relay: pluggy's own call for sync actions, the
        adapted wrappers inside a coroutine for async ones."""
        hook = self.relay.hook.execute_action
        if not self._may_await():
            return hook

        def call(*, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
            found = self._async.get(action)
            if found is None:
                found = self._async[action] = self.is_async(action)
            if not found:
                return hook(action=action, arguments=arguments, context=context)
            if self._awaiting is None:
                self._awaiting = _awaiting_hook(self.relay)
            return _awaited(self._awaiting, action, arguments, context)

        return call

    def _may_await(self) -> bool:
        """Whether any action of the tool is a coroutine function."""
        specs = _action_specs(self.instance)
        if specs is not None:
            return any(spec.is_async for spec in specs)
        return any(
            inspect.iscoroutinefunction(impl.function)
            for impl in self.relay.hook.execute_action.get_hookimpls()
            if not (impl.wrapper or impl.hookwrapper)
        )

    def has_hook(self, name: str) -> bool:
        """Whether the tool itself implements a hook (wrappers do not count, nor a default
        implementation marked ``expediter_answers_none``, such as a ``Toolbox``'s inherited
        ``preview_decision``)."""
        found = self._hooks.get(name)
        if found is None:
            caller = getattr(self.relay.hook, name, None)
            impls = caller.get_hookimpls() if caller is not None else []
            found = any(
                not (impl.wrapper or impl.hookwrapper)
                and not getattr(impl.function, "expediter_answers_none", False)
                for impl in impls
            )
            self._hooks[name] = found
        return found

    def wants_context(self, action: str) -> bool:
        """Whether running the action reads its ``CallContext``: False only for a sugar tool
        (``@tool``, ``Toolbox``) that nothing wraps, whose function takes no context. The
        executor then skips building one (the per-call turn budget, benchmarks/README.md)."""
        found = self._contexts.get(action)
        if found is None:
            found = self._reads_context(action)
            self._contexts[action] = found
        return found

    def _sugar(self) -> bool:
        """Whether this is an ``@tool``/``Toolbox`` tool that nothing wraps, whose own
        ``execute_action`` runs: it reads its arguments once and its context only when a
        function takes one."""
        found = self._is_sugar
        if found is None:
            from expediter.core.authoring.tools import FunctionGroup, FunctionTool, Toolbox

            sugar = (
                FunctionTool.execute_action,
                FunctionGroup.execute_action,
                Toolbox.execute_action,
            )
            own = getattr(type(self.instance), "execute_action", None)
            found = own in sugar and getattr(self.call, "__func__", None) is own
            self._is_sugar = found
        return found

    def _reads_context(self, action: str) -> bool:
        from expediter.core.authoring.tools import FunctionGroup, FunctionTool, Toolbox

        instance = self.instance
        if not self._sugar():
            return True  # a raw hook, an override, or wrapped: it may read the context
        if isinstance(instance, Toolbox):
            spec = instance.action_specs().get(action)
        elif isinstance(instance, FunctionGroup):
            function = instance.functions.get(action)
            spec = function.spec if function is not None else None
        else:
            spec = instance.spec if isinstance(instance, FunctionTool) else None
        return spec is None or spec.context_parameter is not None

    def is_async(self, action: str) -> bool:
        """Whether the action is a coroutine function (sugar tools know; raw hooks are checked)."""
        instance = self.instance
        spec = None
        if hasattr(instance, "action_specs"):
            spec = instance.action_specs().get(action)
        elif hasattr(instance, "functions"):
            function = instance.functions.get(action)
            spec = function.spec if function is not None else None
        elif hasattr(instance, "spec"):
            spec = instance.spec
        if spec is not None:
            return bool(spec.is_async)
        return any(
            inspect.iscoroutinefunction(impl.function)
            for impl in self.relay.hook.execute_action.get_hookimpls()
            if not (impl.wrapper or impl.hookwrapper)
        )

    def undeclared(self, action: Action, arguments: Mapping[str, Any]) -> list[str]:
        """Argument names the action's schema does not declare (none if it allows extras)."""
        # Kept per action object: a dynamic tool may list another action of that name (a
        # new schema, or another user's list).
        found = self._accepted.get(action.name)
        if found is not None and found[0] is action:
            accepted = found[1]
        else:
            schema = action.parameters
            properties = schema.get("properties")
            if properties is None or schema.get("additionalProperties"):
                accepted = None
            else:
                accepted = frozenset(properties) | frozenset(action.fixed)
            self._accepted[action.name] = (action, accepted)
        if accepted is None or accepted.issuperset(arguments):
            return []
        return [name for name in arguments if name not in accepted]

    def arguments_for(self, action: Action, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """The arguments the action runs with: undeclared ones refused (ArgumentError), the
        operator's fixed values winning over the model's."""
        undeclared = self.undeclared(action, arguments)
        if undeclared:
            raise ArgumentError.unknown(
                action.name, undeclared, action.parameters.get("properties", {})
            )
        if action.fixed:
            return {**arguments, **action.fixed}
        # A sugar tool that nothing wraps binds its arguments into a new dict itself: a copy
        # here would be one more object per call (the per-call turn budget).
        return arguments if self._sugar() else dict(arguments)

    @property
    def known_actions(self) -> dict[str, Action] | None:
        """The actions ``actions()`` found, or None before it was first asked (always None
        for a tool with dynamic actions: ask ``actions()``)."""
        return None if self.dynamic else self._actions

    def actions(self, context: CallContext) -> dict[str, Action]:
        """The instance's actions by name: asked once, or for a tool with
        ``dynamic_actions``, asked each time and rebuilt when the tool returns another list."""
        actions = self._actions
        if actions is not None and not self.dynamic:
            return actions
        found = self.relay.hook.get_actions_metadata(context=context) or []
        if hasattr(found, "__await__"):
            # A remote tool asks its server on the loop its calls from sync callers use.
            if self.run_async is None:
                raise TypeError(f"tool {self.type.name!r}: get_actions_metadata is async here")
            found = self.run_async(found) or []
        if actions is not None and found is self._found:
            return actions
        actions = {item.name: item for item in coerce_actions(found, self.type.name)}
        self._accepted = {}
        self._actions, self._found = actions, found
        return actions


def _direct(relay: pluggy.PluginManager) -> Callable[..., Any] | None:
    """The tool's own ``execute_action`` when nothing wraps it: calling it directly is what
    pluggy would do with one implementation and no wrappers, minus the dispatch."""
    impls = relay.hook.execute_action.get_hookimpls()
    if len(impls) != 1 or impls[0].wrapper or impls[0].hookwrapper:
        return None
    function, names = impls[0].function, tuple(impls[0].argnames)
    if names == ("action", "arguments", "context"):
        return function
    return lambda **kwargs: function(*[kwargs[name] for name in names])


def coerce_actions(found: object, tool: str) -> list[Action]:
    """Check what ``get_actions_metadata`` returned, accepting ``Action`` records or dicts."""
    if not isinstance(found, list | tuple):
        raise TypeError(f"tool {tool!r}: get_actions_metadata returned {type(found).__name__}")
    actions = [item if isinstance(item, Action) else Action.from_dict(item) for item in found]
    names = [item.name for item in actions]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"tool {tool!r}: duplicate action names {', '.join(duplicates)}")
    return actions


#: Loaded instances kept per process; the least recently loaded go first beyond this.
MAX_LOADED = 4096


@final
class LoadedTools:
    """The loaded tool instances of a host, made on demand and reused.

    An instance is reused only for the same instance id, owner, configuration and, for
    user-scoped tools, the same invoker: one user's configuration (credentials) is never used
    for a call made with another's.
    """

    def __init__(
        self,
        resolve: Callable[[str], ToolType],
        wrappers: Callable[[], Sequence[object]] = tuple,
        run_async: Callable[[Any], Any] | None = None,
    ) -> None:
        self._resolve = resolve
        self._wrappers = wrappers
        self._run_async = run_async
        self._types: dict[str, ToolType] = {}
        self._loaded: OrderedDict[tuple[str, str | None, str | None, str], LoadedTool] = (
            OrderedDict()
        )
        #: Unconfigured instances by ``(tool, instance id as asked, invoker as asked)``.
        self._plain: dict[tuple[str, str | None, str | None], LoadedTool] = {}
        #: The instance last loaded for ``(instance id, invoker)``, whatever its configuration.
        self._latest: dict[tuple[str, str | None], LoadedTool] = {}
        self._lock = threading.Lock()

    def add(self, tool_type: ToolType) -> None:
        """Make a tool type known without resolving it later."""
        self._types[tool_type.name] = tool_type

    def type(self, name: str) -> ToolType:
        """Return the tool type of that name, importing its pack if needed."""
        found = self._types.get(name)
        if found is None:
            found = self._resolve(name)
            self._types[name] = found
        return found

    def load(
        self,
        name: str,
        user_id: str | None = None,
        *,
        instance_id: str | None = None,
        config: Mapping[str, Any] | None = None,
        owner_id: str | None = None,
        digest: str | None = None,
    ) -> LoadedTool:
        """Return the instance of a tool for this configuration, making it on first use.

        ``user_id`` is the invoker; a user-scoped tool gets one instance per invoker, and
        (unless ``owner_id`` says otherwise) the invoker owns it. ``digest`` is the
        configuration's ``config_key`` when the caller has it already.
        """
        if not config and owner_id is None:
            # Unconfigured and owned by the invoker (every installed tool in a turn): one
            # lookup (the per-call turn budget). Entries are only ever added, like ``_loaded``'s.
            found = self._plain.get((name, instance_id, user_id))
            if found is not None:
                return found
        loaded = self._load(name, user_id, instance_id, config, owner_id, digest)
        if not config and owner_id is None:
            if len(self._plain) >= MAX_LOADED:
                self._plain.clear()
            self._plain[(name, instance_id, user_id)] = loaded
        return loaded

    def _load(
        self,
        name: str,
        user_id: str | None,
        instance_id: str | None,
        config: Mapping[str, Any] | None,
        owner_id: str | None,
        digest: str | None = None,
    ) -> LoadedTool:
        instance_id = instance_id or name
        tool_type = self.type(name)
        # An instance someone owns (a stored instance) is never shared between invokers.
        invoker = user_id if tool_type.user_scoped or owner_id is not None else None
        owner = owner_id if owner_id is not None else invoker
        key = (instance_id, invoker, owner, config_key(config) if digest is None else digest)
        loaded = self._loaded.get(key)
        if loaded is not None:
            return loaded
        with self._lock:
            loaded = self._loaded.get(key)
            if loaded is None:
                try:
                    instance = tool_type.factory(config)
                except SystemExit as exc:
                    # A constructor calling sys.exit must not stop the host (nor every user's
                    # toolset of a shared instance): it is that instance's error, as a call's
                    # SystemExit is the call's (its message is hidden where it is shown).
                    code = exc.code if type(exc.code) is int or exc.code is None else "a message"
                    raise RuntimeError(
                        f"the tool {tool_type.name!r} tried to exit the program while it was "
                        f"being set up (SystemExit with {code})"
                    ) from exc
                relay = make_relay(instance, tool_type.name, self._wrappers())
                loaded = LoadedTool(
                    tool_type,
                    instance,
                    relay,
                    instance_id=instance_id,
                    user_id=owner,
                    run_async=self._run_async,
                )
                if config:
                    loaded.keep_secrets(config)
                self._loaded[key] = loaded
                if len(self._loaded) > MAX_LOADED:
                    self._loaded.popitem(last=False)
            self._latest[(instance_id, invoker)] = loaded
        return loaded

    def latest(
        self, name: str, user_id: str | None = None, *, instance_id: str | None = None
    ) -> LoadedTool | None:
        """The instance this process loaded last under that id for that invoker, or None."""
        tool_type = self.type(name)
        return self._latest.get((instance_id or name, user_id if tool_type.user_scoped else None))

    def execute(
        self,
        name: str,
        action: str,
        arguments: dict[str, Any],
        context: CallContext,
    ) -> Any:
        """Run ``execute_action`` on a tool's default instance through its relay (wrappers
        included)."""
        loaded = self.load(name, context.user_id)
        return loaded.call(action=action, arguments=arguments, context=context)

    def close(self) -> None:
        """Call ``close()`` on every loaded tool instance whose class declares
        ``close_on_shutdown = True`` (pooled clients, sessions, server processes); an error is
        logged, never raised. Nothing else is called: a ``close`` may be an action."""
        with self._lock:
            loaded = {
                id(item.instance): item for item in (*self._loaded.values(), *self._plain.values())
            }
        for item in loaded.values():
            instance = item.instance
            if getattr(type(instance), "close_on_shutdown", False) is not True:
                continue
            close = getattr(instance, "close", None)
            if not callable(close):
                continue
            try:
                close()
            except Exception as exc:
                logger.error("closing tool %s failed: %s", item.type.name, exc, exc_info=exc)

    def __len__(self) -> int:
        return len(self._types)
