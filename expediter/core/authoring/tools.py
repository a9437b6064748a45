"""Authoring sugar: ``@tool`` functions and ``Toolbox`` classes implement the tool hooks for you."""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar, overload

import attrs

from expediter.core.authoring.arguments import ArgumentBinder, Parameter
from expediter.core.authoring.docstrings import parse_docstring
from expediter.core.authoring.schema import marks_secret, schema_for, strip_annotated
from expediter.core.records.redaction import write_only_names
from expediter.errors import ActionNotFound, SchemaError
from expediter.hookspecs import TOOL_HOOKS, hookimpl
from expediter.hookspecs.tool import Action, CallContext, ConfigField, Decision

__all__ = ["ActionSpec", "FunctionGroup", "FunctionTool", "Toolbox", "action", "snake_case", "tool"]

F = TypeVar("F", bound=Callable[..., Any])
_ACTION_MARK = "__expediter_action__"


def snake_case(name: str) -> str:
    """Return ``MyHTTPTool`` as ``my_http_tool``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return spaced.lower()


def _is_context(hint: Any) -> bool:
    hint, _ = strip_annotated(hint)
    if hint is CallContext:
        return True
    members = typing.get_args(hint)
    return bool(members) and CallContext in members and set(members) <= {CallContext, type(None)}


@attrs.frozen
class _Positional:
    """How a function whose parameters are not all passable by keyword is called: which
    arguments go by position (``func(*positional, *var_args, **keywords)``)."""

    #: The parameters that may go by position, in order: the positional-only ones, then,
    #: when there is a ``*args``, the ordinary ones before it.
    names: tuple[str, ...]
    #: Their defaults (``inspect.Parameter.empty`` for none), filled in for an omitted one
    #: that a later positional argument needs.
    defaults: tuple[Any, ...]
    #: How many of ``names`` are positional-only (always passed by position).
    always: int
    #: The ``*args`` parameter (an array property), if any.
    var_positional: str | None

    def split(self, declared: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Take the positional arguments out of ``declared`` (changed in place)."""
        var_values = declared.pop(self.var_positional, ()) if self.var_positional else ()
        # With values for *args, every parameter before it must go by position; without,
        # only the positional-only ones, up to the last one given.
        count = len(self.names) if var_values else self.always
        names = self.names
        last = -1
        for index in range(count):
            if names[index] in declared:
                last = index
        if var_values:
            last = count - 1
        positional = [
            declared.pop(names[index]) if names[index] in declared else self.defaults[index]
            for index in range(last + 1)
        ]
        positional.extend(var_values)
        return positional, declared


@attrs.frozen
class ActionSpec:
    """One Python callable as an action: its schema and how to call it with model arguments."""

    name: str
    func: Callable[..., Any]
    description: str
    require_approval: bool
    parameters: dict[str, Any]
    binder: ArgumentBinder
    context_parameter: str | None
    is_async: bool
    #: For positional-only parameters and ``*args``: what goes by position (else None).
    positional: _Positional | None = None
    #: Whether the Toolbox instance is passed first (not for a staticmethod or classmethod).
    takes_owner: bool = False

    @classmethod
    def from_function(
        cls,
        func: Callable[..., Any],
        *,
        name: str,
        description: str | None,
        require_approval: bool,
        method: bool,
    ) -> ActionSpec:
        """Read a function's signature, type hints and docstring."""
        qualname = getattr(func, "__qualname__", name)
        try:
            hints = typing.get_type_hints(func, include_extras=True)
        except Exception as exc:
            raise SchemaError(f"{qualname}: cannot resolve its type hints ({exc})") from exc
        doc = parse_docstring(func.__doc__)
        signature = inspect.signature(func)
        items = list(signature.parameters.values())
        reserved: set[str] = set()
        if method and items:
            reserved.add(items[0].name)
            items = items[1:]
        bound_to = getattr(func, "__func__", None)
        if inspect.ismethod(func) and bound_to is not None:
            # A classmethod, already bound: its ``cls`` is not in the signature, but a
            # ``**kwargs`` key of that name would still reach it twice.
            reserved.update(list(inspect.signature(bound_to).parameters)[:1])
        params: list[Parameter] = []
        described: list[tuple[str, Any, Any, str | None]] = []
        context_parameter = None
        allow_extra = False
        extra_hint: Any = Any
        by_position: list[inspect.Parameter] = []
        var_positional = None
        for item in items:
            hint = hints.get(item.name, Any)
            if item.kind is inspect.Parameter.VAR_KEYWORD:
                if marks_secret(hint):
                    raise SchemaError(
                        f"{qualname}: **{item.name} cannot be Secret (an undeclared argument "
                        "has no name to hide it by); declare each secret as a parameter"
                    )
                allow_extra, extra_hint = True, hint
                continue
            if item.kind in (
                inspect.Parameter.POSITIONAL_ONLY,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
            ):
                by_position.append(item)
            if _is_context(hint):
                context_parameter = item.name
                reserved.add(item.name)
                continue
            default = shown_default = item.default
            if item.kind is inspect.Parameter.VAR_POSITIONAL:
                # ``*args: T`` is an array property named after the parameter, empty unless
                # given.
                var_positional = item.name
                hint, default, shown_default = list[hint], (), []  # type: ignore[valid-type]
            params.append(Parameter(item.name, hint, default))
            described.append((item.name, hint, shown_default, doc.arguments.get(item.name)))
        schema = schema_for(
            described, where=qualname, allow_extra=allow_extra, extra_hint=extra_hint
        )
        return cls(
            name=name,
            func=func,
            description=description or doc.summary,
            require_approval=require_approval,
            parameters=schema,
            binder=ArgumentBinder(
                name,
                params,
                allow_extra=allow_extra,
                secret_names=write_only_names(schema),
                extra_hint=extra_hint,
                reserved=frozenset(reserved),
            ),
            context_parameter=context_parameter,
            is_async=inspect.iscoroutinefunction(func),
            positional=_positional(by_position, var_positional),
            takes_owner=method,
        )

    def to_action(self) -> Action:
        """Return the action record offered to the model."""
        return Action(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            require_approval=self.require_approval,
        )

    def invoke(
        self, owner: object | None, arguments: Mapping[str, Any], context: CallContext
    ) -> Any:
        """Call the function with converted arguments (a coroutine for async functions)."""
        declared, extra = self.binder.bind(arguments)
        if self.context_parameter is not None:
            declared[self.context_parameter] = context
        if not self.takes_owner:
            owner = None
        if self.positional is not None:
            positional, declared = self.positional.split(declared)
            if owner is None:
                return self.func(*positional, **declared, **extra)
            return self.func(owner, *positional, **declared, **extra)
        if owner is None:
            return self.func(**declared, **extra)
        return self.func(owner, **declared, **extra)


def _positional(items: list[inspect.Parameter], var_positional: str | None) -> _Positional | None:
    """What goes by position, or None when everything may go by keyword (the fast path)."""
    always = sum(1 for item in items if item.kind is inspect.Parameter.POSITIONAL_ONLY)
    if not always and var_positional is None:
        return None
    if var_positional is None:
        items = items[:always]
    return _Positional(
        tuple(item.name for item in items),
        tuple(item.default for item in items),
        always,
        var_positional,
    )


@attrs.frozen
class _ActionOptions:
    name: str | None
    description: str | None
    require_approval: bool


@overload
def action(func: F, /) -> F: ...
@overload
def action(
    *, name: str | None = None, description: str | None = None, require_approval: bool = False
) -> Callable[[F], F]: ...
def action(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    require_approval: bool = False,
) -> Any:
    """Mark a ``Toolbox`` method as an action (usable bare or called)."""

    def mark(target: F) -> F:
        setattr(target, _ACTION_MARK, _ActionOptions(name, description, require_approval))
        return target

    return mark(func) if func is not None else mark


class FunctionTool:
    """A tool with one action, made from a typed function by ``@expediter.tool``."""

    internal: bool
    user_scoped: bool
    headless_excluded: bool

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        internal: bool = False,
        user_scoped: bool = False,
        headless_excluded: bool = False,
        require_approval: bool = False,
    ) -> None:
        functools.update_wrapper(self, func)
        self.func = func
        self.name = name or func.__name__
        self.internal = internal
        self.user_scoped = user_scoped
        self.headless_excluded = headless_excluded
        self._description = description
        self._require_approval = require_approval

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return (
            f"<expediter tool {self.name!r} from {self.func.__module__}.{self.func.__qualname__}>"
        )

    @functools.cached_property
    def spec(self) -> ActionSpec:
        """The action this function offers (built on first use, so forward references work)."""
        return ActionSpec.from_function(
            self.func,
            name=self.name,
            description=self._description,
            require_approval=self._require_approval,
            method=False,
        )

    @property
    def description(self) -> str:
        """The tool's description: the function's docstring summary unless given."""
        return self.spec.description

    @hookimpl
    def get_actions_metadata(self) -> list[Action]:
        return [self.spec.to_action()]

    @hookimpl
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
        if action != self.spec.name:
            raise ActionNotFound(f"tool {self.name!r} has no action {action!r}")
        return self.spec.invoke(None, arguments, context)


@overload
def tool(func: Callable[..., Any], /) -> FunctionTool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    internal: bool = False,
    user_scoped: bool = False,
    headless_excluded: bool = False,
    require_approval: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...
def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    internal: bool = False,
    user_scoped: bool = False,
    headless_excluded: bool = False,
    require_approval: bool = False,
) -> Any:
    """Make a tool with one action from a typed function (usable bare or called)."""

    def make(target: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            target,
            name=name,
            description=description,
            internal=internal,
            user_scoped=user_scoped,
            headless_excluded=headless_excluded,
            require_approval=require_approval,
        )

    return make(func) if func is not None else make


class FunctionGroup:
    """One tool whose actions are several ``@tool`` functions (a tools-directory module)."""

    def __init__(
        self,
        name: str,
        functions: Sequence[FunctionTool],
        *,
        description: str = "",
        internal: bool = False,
        user_scoped: bool = False,
        headless_excluded: bool = False,
    ) -> None:
        self.name = name
        self.functions = {function.name: function for function in functions}
        if len(self.functions) != len(functions):
            raise SchemaError(f"tool {name!r}: two functions share an action name")
        self._description = description
        self.internal = internal
        self.user_scoped = user_scoped
        self.headless_excluded = headless_excluded

    @property
    def description(self) -> str:
        """The module's docstring summary, or the only function's description."""
        if self._description or len(self.functions) != 1:
            return self._description
        return next(iter(self.functions.values())).description

    @hookimpl
    def get_actions_metadata(self) -> list[Action]:
        return [function.spec.to_action() for function in self.functions.values()]

    @hookimpl
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
        function = self.functions.get(action)
        if function is None:
            raise ActionNotFound(f"tool {self.name!r} has no action {action!r}")
        return function.spec.invoke(None, arguments, context)


class Toolbox:
    """Base class for a tool whose ``@expediter.action`` methods are its actions.

    Subclasses may override any of the tool hooks (``preview_decision`` for live approval
    answers, ``get_actions_metadata`` to switch actions off by configuration); the override
    is registered as a hook implementation without needing ``@hookimpl``.
    """

    #: The tool's name (default: the class name in snake_case).
    name: ClassVar[str] = "toolbox"
    #: The tool's description (default: the class docstring's summary).
    description: ClassVar[str] = ""
    internal: ClassVar[bool] = False
    user_scoped: ClassVar[bool] = False
    #: Never offered in headless runs (e.g. a scheduler that would schedule more runs).
    headless_excluded: ClassVar[bool] = False
    #: The host asks ``get_actions_metadata`` each time it needs the actions (each turn, each
    #: call) instead of once: for actions that change, such as a remote server's tools. The
    #: tool keeps its own cache and returns the very same list while nothing changed.
    dynamic_actions: ClassVar[bool] = False
    #: The host calls the instance's ``close()`` when it closes (``Host.close()``): for a
    #: tool that keeps clients, sessions or processes open between calls.
    close_on_shutdown: ClassVar[bool] = False
    #: The configuration an instance needs, returned by ``config_requirements``.
    config_fields: ClassVar[Sequence[ConfigField]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = snake_case(cls.__name__)
        if "description" not in cls.__dict__:
            cls.description = parse_docstring(cls.__dict__.get("__doc__")).summary
        for hook in TOOL_HOOKS:
            method = getattr(cls, hook, None)
            if inspect.isfunction(method) and not hasattr(method, "expediter_impl"):
                hookimpl(method)

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.config: Mapping[str, Any] = MappingProxyType(dict(config or {}))

    @classmethod
    def action_specs(cls) -> Mapping[str, ActionSpec]:
        """The class's actions by name (built once per class, on first use)."""
        cached = cls.__dict__.get("_expediter_specs")
        if cached is None:
            cached = dict(_collect_actions(cls))
            cls._expediter_specs = cached  # type: ignore[attr-defined]
        return typing.cast(Mapping[str, ActionSpec], cached)

    @hookimpl
    def get_actions_metadata(self, context: CallContext) -> list[Action]:
        return [spec.to_action() for spec in self.action_specs().values()]

    @hookimpl
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
        spec = self.action_specs().get(action)
        if spec is None:
            raise ActionNotFound(f"tool {self.name!r} has no action {action!r}")
        return spec.invoke(self, arguments, context)

    @hookimpl
    def preview_decision(
        self, action: str, arguments: dict[str, Any], context: CallContext
    ) -> Decision | None:
        return None

    # The host need not call it: it always answers None (``LoadedTool.has_hook``).
    preview_decision.expediter_answers_none = True  # type: ignore[attr-defined]

    @hookimpl
    def config_requirements(self) -> list[ConfigField]:
        return list(self.config_fields)


def _collect_actions(cls: type) -> Iterable[tuple[str, ActionSpec]]:
    seen: dict[str, ActionSpec] = {}
    for klass in reversed(cls.__mro__):
        for key, attribute in vars(klass).items():
            options = getattr(attribute, _ACTION_MARK, None)
            if options is None and isinstance(attribute, (staticmethod, classmethod)):
                options = getattr(attribute.__func__, _ACTION_MARK, None)  # @action inside
            if not isinstance(options, _ActionOptions):
                continue
            name = options.name or attribute.__name__
            # An override without @action stays the action: call what the class resolves
            # (a staticmethod's function, a classmethod bound to the class: no instance).
            resolved = inspect.getattr_static(cls, key)
            seen[name] = ActionSpec.from_function(
                getattr(cls, key),
                name=name,
                description=options.description,
                require_approval=options.require_approval,
                method=not isinstance(resolved, (staticmethod, classmethod)),
            )
    return seen.items()
