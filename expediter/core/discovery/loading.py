"""Tool types, their loaded instances, and constant-time dispatch to one tool's hooks.

Each loaded instance gets its own small pluggy ``PluginManager`` (a *relay*) holding just that
tool plus the host-wide ``execute_action`` wrappers. A call looks the instance up in a dict and
calls its relay, so the cost does not grow with the number of installed tools, while pluggy's
wrapper and firstresult semantics stay exactly as pluggy defines them.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

import attrs
import pluggy

from expediter.core.discovery.catalogue import Source
from expediter.errors import ArgumentError, ToolNotFound
from expediter.hookspecs import PROJECT_NAME, TOOL_HOOKS
from expediter.hookspecs import host as host_spec
from expediter.hookspecs import tool as tool_spec
from expediter.hookspecs.tool import Action, CallContext

__all__ = ["LoadedTool", "Registry", "ToolType", "make_relay", "wrapper_shims"]

Factory = Callable[[Mapping[str, Any] | None], object]


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
    return relay


@final
class _WrapperShim:
    """Carries one host-wide ``execute_action`` wrapper, so a relay gets only that hook."""

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
class LoadedTool:
    """One tool instance with its relay; ``call`` runs ``execute_action`` through the relay."""

    __slots__ = (
        "_accepted",
        "_actions",
        "_hooks",
        "call",
        "instance",
        "instance_id",
        "relay",
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
    ) -> None:
        self.type = tool_type
        self.instance = instance
        self.relay = relay
        self.instance_id = instance_id
        self.user_id = user_id
        self.call = _direct(relay) or relay.hook.execute_action
        self._actions: dict[str, Action] | None = None
        self._accepted: dict[str, frozenset[str] | None] = {}
        self._hooks: dict[str, bool] = {}

    def has_hook(self, name: str) -> bool:
        """Whether the tool itself implements a hook (wrappers do not count)."""
        found = self._hooks.get(name)
        if found is None:
            caller = getattr(self.relay.hook, name, None)
            impls = caller.get_hookimpls() if caller is not None else []
            found = any(not (impl.wrapper or impl.hookwrapper) for impl in impls)
            self._hooks[name] = found
        return found

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
        accepted = self._accepted.get(action.name, ())
        if accepted == ():
            schema = action.parameters
            properties = schema.get("properties")
            if properties is None or schema.get("additionalProperties"):
                accepted = None
            else:
                accepted = frozenset(properties) | frozenset(action.fixed)
            self._accepted[action.name] = accepted
        if accepted is None:
            return []
        return [name for name in arguments if name not in accepted]

    def arguments_for(self, action: Action, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments the action runs with: undeclared ones refused (ArgumentError), the
        operator's fixed values winning over the model's."""
        undeclared = self.undeclared(action, arguments)
        if undeclared:
            raise ArgumentError.unknown(
                action.name, undeclared, action.parameters.get("properties", {})
            )
        return {**arguments, **action.fixed} if action.fixed else dict(arguments)

    def actions(self, context: CallContext) -> dict[str, Action]:
        """The instance's actions by name (asked once, then cached)."""
        if self._actions is None:
            found = self.relay.hook.get_actions_metadata(context=context) or []
            self._actions = {item.name: item for item in coerce_actions(found, self.type.name)}
        return self._actions


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


@final
class Registry:
    """Creates tool instances on demand (one per user for user-scoped tools) and dispatches."""

    def __init__(
        self,
        resolve: Callable[[str], ToolType],
        wrappers: Callable[[], Sequence[object]] = tuple,
    ) -> None:
        self._resolve = resolve
        self._wrappers = wrappers
        self._types: dict[str, ToolType] = {}
        self._loaded: dict[tuple[str, str | None], LoadedTool] = {}
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
    ) -> LoadedTool:
        """Return the (cached) instance of a tool; user-scoped tools get one per user."""
        instance_id = instance_id or name
        tool_type = self.type(name)
        key = (instance_id, user_id if tool_type.user_scoped else None)
        loaded = self._loaded.get(key)
        if loaded is not None:
            return loaded
        with self._lock:
            loaded = self._loaded.get(key)
            if loaded is None:
                instance = tool_type.factory(config)
                relay = make_relay(instance, tool_type.name, self._wrappers())
                loaded = LoadedTool(
                    tool_type, instance, relay, instance_id=instance_id, user_id=key[1]
                )
                self._loaded[key] = loaded
        return loaded

    def is_loaded(
        self, name: str, user_id: str | None = None, *, instance_id: str | None = None
    ) -> bool:
        """Whether ``load`` would return an instance already made (with its configuration)."""
        tool_type = self.type(name)
        return (instance_id or name, user_id if tool_type.user_scoped else None) in self._loaded

    def get(self, instance_id: str, user_id: str | None = None) -> LoadedTool:
        """Return an already loaded instance (O(1)), or raise ToolNotFound."""
        loaded = self._loaded.get((instance_id, user_id)) or self._loaded.get((instance_id, None))
        if loaded is None:
            raise ToolNotFound(f"no loaded tool instance {instance_id!r}")
        return loaded

    def execute(
        self,
        instance_id: str,
        action: str,
        arguments: dict[str, Any],
        context: CallContext,
    ) -> Any:
        """Run ``execute_action`` on a loaded instance through its relay (wrappers included)."""
        return self.get(instance_id, context.user_id).call(
            action=action, arguments=arguments, context=context
        )

    def __len__(self) -> int:
        return len(self._types)
