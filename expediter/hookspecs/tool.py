"""The tool contract: the four hooks a tool implements and the records they exchange.

A tool is any pluggy plugin (module, class instance) implementing these hooks with
``@expediter.hookimpl``. Most authors use ``@expediter.tool`` or ``expediter.Toolbox``, which
implement them from typed Python functions.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from expediter.core.records.convert import json_form, structure, unstructure
from expediter.core.records.redaction import write_only_names
from expediter.hookspecs import hookspec

__all__ = [
    "Action",
    "CallContext",
    "ConfigField",
    "Decision",
    "ToolError",
    "ToolResult",
    "config_requirements",
    "execute_action",
    "get_actions_metadata",
    "preview_decision",
]

ConfigType = Literal["string", "integer", "number", "boolean", "object", "array"]


def _empty_object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


def _mapping(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(value) if value else {}


def _parameters(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return value or _empty_object_schema()


def _texts(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


def _fixed(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return value or {}


@json_form(load={"parameters": _parameters, "fixed": _fixed})
@attrs.frozen
class Action:
    """One operation a tool offers to the model."""

    name: str
    description: str = ""
    #: A complete JSON Schema (``type: object``) for the arguments.
    parameters: Mapping[str, Any] = attrs.field(factory=_empty_object_schema, converter=dict)
    #: Operator-fixed argument values: never shown to the model, and they win over its values.
    fixed: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    require_approval: bool = False
    active: bool = True

    @functools.cached_property
    def secret_parameters(self) -> frozenset[str]:
        """Names whose values are hidden in events, the ledger and errors: the properties
        ``parameters`` marks ``"writeOnly": true`` (``Annotated[T, expediter.Secret]``), top
        level or nested. Computed once per action; not part of its JSON form."""
        return write_only_names(self.parameters)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form of this action."""
        return unstructure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Action:
        """Build an action from its JSON form (a null or empty schema means no parameters)."""
        return structure(data, cls)


def _optional_tuple(value: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class ConfigField:
    """One setting an instance of a tool needs (an API key, a base URL, a choice)."""

    name: str
    type: ConfigType = "string"
    label: str | None = None
    description: str = ""
    required: bool = False
    #: Secret values are stored encrypted, never logged and never shown back.
    secret: bool = False
    default: Any = None
    enum: tuple[Any, ...] | None = attrs.field(default=None, converter=_optional_tuple)
    #: Only relevant when the named fields have these values, e.g. ``{"auth": "bearer"}``.
    depends_on: Mapping[str, Any] | None = None
    #: Only the operator may set it (the command line, or the instance API with
    #: ``operator=True``): e.g. the private networks an instance may reach.
    operator_only: bool = False
    #: For an object field: keys it may not hold, compared case-insensitively (e.g. the
    #: headers a request frames itself); storing one is a ConfigError naming the key.
    refused_keys: tuple[str, ...] = attrs.field(default=(), converter=_texts)
    #: For a plain object field: the secret field where keys whose names say they hold a
    #: credential (``Authorization``, ``X-Api-Key``) belong. Such a key is refused here,
    #: naming that field, since a plain field is stored and listed in clear.
    credential_keys_to: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form of this field."""
        return unstructure(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfigField:
        """Build a field from its JSON form."""
        return structure(data, cls)

    @classmethod
    def coerce(cls, item: ConfigField | Mapping[str, Any]) -> ConfigField:
        """Accept a field as ``config_requirements`` may return it: a record or its JSON form."""
        return item if isinstance(item, ConfigField) else cls.from_dict(item)


SecretResolver = Callable[[str, "CallContext"], "str | None"]


@attrs.frozen(kw_only=True)
class CallContext:
    """Who is calling which tool instance, in which run, and with which limits. Immutable."""

    #: The user on whose behalf the model is calling (the invoker).
    user_id: str | None = None
    #: The user who owns the tool instance (its configuration and credentials).
    owner_id: str | None = None
    instance_id: str | None = None
    tool: str | None = None
    #: The conversation or headless run this call belongs to.
    run_id: str | None = None
    message_id: str | None = None
    call_id: str | None = None
    headless: bool = False
    attachments: tuple[Any, ...] = ()
    #: Wall-clock time (``time.time()``) by which the call should finish, or None.
    deadline: float | None = None
    cancel_event: threading.Event | None = attrs.field(default=None, eq=False, repr=False)
    #: The tool's own persistent storage, when the host has a database.
    storage: Any = attrs.field(default=None, eq=False, repr=False)
    #: The OAuth tokens of this call's stored tool instance (``InstanceTokens``), when the
    #: host has a database and a key; None otherwise.
    tokens: Any = attrs.field(default=None, eq=False, repr=False)
    secret_resolver: SecretResolver | None = attrs.field(default=None, eq=False, repr=False)
    #: The instance's secret configuration fields, decrypted with the owner's key.
    secrets: Mapping[str, Any] = attrs.field(factory=dict, eq=False, repr=False)
    #: Network ranges the operator lets every outbound client reach on top of public
    #: addresses (``EXPEDITER_EGRESS_ALLOW``); a tool adds its instance's own
    #: ``allow_networks`` (see ``expediter.core.netguard.EgressPolicy``).
    egress_allow: tuple[str, ...] = attrs.field(default=(), converter=_texts)

    def get_secret(self, name: str) -> str | None:
        """Return the named secret for this tool instance, or None when no provider has it."""
        if self.secret_resolver is None:
            return None
        return self.secret_resolver(name, self)

    def secret(self, name: str) -> Any:
        """A secret of this tool instance: its configuration's secret field of that name
        (stored encrypted, used with the owner's authority), else what a ``resolve_secret``
        provider has; None when neither has it."""
        if name in self.secrets:
            return self.secrets[name]
        return self.get_secret(name)

    def time_left(self) -> float | None:
        """Seconds until the deadline (never negative), or None without a deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.time())

    def is_cancelled(self) -> bool:
        """Whether the call should stop: the host cancelled it, or its deadline has passed."""
        if self.cancel_event is not None and self.cancel_event.is_set():
            return True
        return self.deadline is not None and time.time() >= self.deadline


@attrs.frozen
class Decision:
    """Whether one call may run: allowed, needs a human's approval, or denied.

    A decision says one thing: ``deny`` together with ``require_approval`` or ``forced`` is
    refused with ``ValueError``. ``forced`` is a kind of ask, so ``Decision(forced=True)`` is
    the same decision as ``Decision(require_approval=True, forced=True)``.
    """

    require_approval: bool = False
    #: A forced prompt cannot be bypassed by any allowlist (e.g. deleting data).
    forced: bool = False
    deny: bool = False
    reason: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.deny and (self.require_approval or self.forced):
            asked = "forced=True" if self.forced else "require_approval=True"
            raise ValueError(
                f"a Decision cannot both deny a call and ask about it (deny=True with {asked}); "
                "use Decision.denied(...) to refuse or Decision.ask(...) to ask a human"
            )
        if self.forced and not self.require_approval:
            object.__setattr__(self, "require_approval", True)

    @property
    def verdict(self) -> Literal["allow", "ask", "deny"]:
        """The decision as one word: ``deny`` beats ``ask`` beats ``allow``."""
        if self.deny:
            return "deny"
        if self.require_approval or self.forced:
            return "ask"
        return "allow"

    @classmethod
    def allow(cls, reason: str | None = None) -> Decision:
        """The call may run without asking."""
        return cls(reason=reason)

    @classmethod
    def ask(cls, reason: str | None = None, *, forced: bool = False) -> Decision:
        """A human must approve the call first."""
        return cls(require_approval=True, forced=forced, reason=reason)

    @classmethod
    def denied(cls, reason: str | None = None) -> Decision:
        """The call must not run."""
        return cls(deny=True, reason=reason)


@attrs.frozen
class ToolResult:
    """A tool's result with an explicit status; return it to report an in-band error."""

    value: Any = None
    status: Literal["ok", "error"] = "ok"
    #: The error message for the model when ``status`` is ``"error"``.
    error: str | None = None
    #: Extra data for the host and the ledger; never shown to the model.
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)

    @property
    def ok(self) -> bool:
        """Whether the call succeeded."""
        return self.status == "ok"


class ToolError(Exception):
    """An error the tool reports to the model: raise it or return it from an action."""

    def __init__(self, message: str, *, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, ToolError)
        return (self.message, self.data) == (other.message, other.data)

    __hash__ = Exception.__hash__


# -- hook specifications ---------------------------------------------------------------------


@hookspec(firstresult=True)
def get_actions_metadata(context: CallContext) -> list[Action]:  # type: ignore[empty-body]
    """Return the actions this tool offers in this context."""


@hookspec(firstresult=True)
def execute_action(action: str, arguments: dict[str, Any], context: CallContext) -> Any:
    """Run one action; return a JSON-able value, a ToolResult, or an awaitable of either."""


@hookspec(firstresult=True)
def preview_decision(
    action: str, arguments: dict[str, Any], context: CallContext
) -> Decision | None:
    """Say whether this particular call needs approval (or must be refused) before it runs."""


@hookspec(firstresult=True)
def config_requirements() -> list[ConfigField]:  # type: ignore[empty-body]
    """Describe the configuration an instance of this tool needs."""
