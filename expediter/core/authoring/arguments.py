"""Bind a model's arguments to a function's parameters, with errors that name the parameter."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError

from expediter.core.authoring.constraints import ConstraintViolation
from expediter.core.authoring.conversion import TypeMismatch, argument_hook
from expediter.core.records.redaction import is_secret_name
from expediter.core.records.text import ECHO_LIMIT, clean_text, echo, truncate
from expediter.errors import ArgumentError

__all__ = ["ArgumentBinder", "Parameter"]


@attrs.frozen
class Parameter:
    """One parameter the model fills in."""

    name: str
    hint: Any
    default: Any = inspect.Parameter.empty

    @property
    def required(self) -> bool:
        """Whether the model must pass this argument."""
        return self.default is inspect.Parameter.empty


def _format_shown(exc: BaseException, hint: Any, secret_names: frozenset[str]) -> str:
    """A failure inside an ordinary argument: the offending value quoted, bounded (and
    redacted: an object's secret-looking fields are hidden)."""
    if isinstance(exc, TypeMismatch | ConstraintViolation):
        return exc.shown(secret_names)
    return _format_hidden(exc, hint, shown=True)


def _format_hidden(exc: BaseException, hint: Any, *, shown: bool = False) -> str:
    """A failure inside a secret argument: types and field names only, never a value."""
    if isinstance(exc, KeyError):
        return "missing (it is required)"
    if isinstance(exc, ForbiddenExtraKeysError):
        return "unknown fields " + ", ".join(echo(name) for name in sorted(exc.extra_fields))
    if isinstance(exc, TypeMismatch | ConstraintViolation):
        return exc.message
    if not shown:
        return f"invalid ({type(exc).__name__})"
    return f"invalid ({truncate(clean_text(str(exc)), ECHO_LIMIT)})"


#: The extra arguments of a call that has none (shared and read-only).
_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


class ArgumentBinder:
    """Checks and converts one action's arguments (strictly, by the JSON Schema's types).

    Each parameter is structured with the converter's hook for its type, so nested records,
    lists and unions get cattrs' detailed errors, each reported with its path. An error never
    quotes a value under a secret name (``secret_names``, or one redaction hides by its look),
    and quotes other values bounded.
    """

    def __init__(
        self,
        qualname: str,
        parameters: list[Parameter],
        *,
        allow_extra: bool,
        secret_names: frozenset[str] = frozenset(),
        extra_hint: Any = Any,
        reserved: frozenset[str] = frozenset(),
    ) -> None:
        self.qualname = qualname
        self.parameters = parameters
        self.allow_extra = allow_extra
        #: Names whose values errors never quote (``Annotated[T, Secret]`` parameters, fields).
        self.secret_names = secret_names
        #: Names an extra argument may not take: the function's own parameters that the
        #: model does not fill in (``self``, the ``CallContext``), which ``**kwargs`` would
        #: pass twice.
        self.reserved = reserved
        self._hooks: dict[str, tuple[Callable[[Any, Any], Any], Any]] = {}
        for parameter in parameters:
            self._hooks[parameter.name] = argument_hook(parameter.hint)
        self._required = [parameter.name for parameter in parameters if parameter.required]
        #: How each extra argument's value is checked (``**kwargs: int``), or None for any.
        self._extra: tuple[Callable[[Any, Any], Any], Any] | None = None
        hook, bare_extra = argument_hook(extra_hint)
        if allow_extra and bare_extra not in (Any, object):
            self._extra = (hook, bare_extra)

    def bind(self, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], Mapping[str, Any]]:
        """Return ``(declared, extra)`` converted arguments, or raise ArgumentError."""
        if type(arguments) is not dict and not isinstance(arguments, Mapping):
            raise ArgumentError(
                f"arguments for {self.qualname} must be a JSON object, "
                f"got {type(arguments).__name__}"
            )
        hooks = self._hooks
        converted: dict[str, Any] = {}
        # Made only when needed: one object fewer per call for the garbage collector to track
        # (it shows in the per-call turn budget).
        extra: dict[str, Any] | None = None
        problems: list[tuple[str, str]] = []
        for name, value in arguments.items():
            entry = hooks.get(name)
            if entry is None:
                if extra is None:
                    extra = {}
                extra[name] = value
                continue
            hook, hint = entry
            try:
                converted[name] = hook(value, hint)
            except Exception as exc:
                problems.extend(_problems(name, exc, self.secret_names))
        if extra:
            if not self.allow_extra:
                raise ArgumentError.unknown(self.qualname, list(extra), hooks)
            self._check_extra(extra, problems)
        for name in self._required:
            if name not in arguments:
                problems.append((name, "missing (it is required)"))
        if problems:
            text = "; ".join(
                f"argument {path!r}: {message}" for path, message in problems[:_PROBLEMS_SHOWN]
            )
            if len(problems) > _PROBLEMS_SHOWN:
                text += f"; and {len(problems) - _PROBLEMS_SHOWN} more"
            first = re.split(r"[.\[]", problems[0][0], maxsplit=1)[0]
            raise ArgumentError(f"{self.qualname}: {text}", parameter=first)
        return converted, _NO_EXTRA if extra is None else extra

    def _check_extra(self, extra: dict[str, Any], problems: list[tuple[str, str]]) -> None:
        """Refuse reserved names among the extra arguments; convert their values in place."""
        for name in extra:
            if name in self.reserved:
                raise ArgumentError(
                    f"{self.qualname}: argument {echo(name, 60)} is not accepted: "
                    "that parameter is not filled in by the model",
                    parameter=name,
                )
        if self._extra is None:
            return
        hook, hint = self._extra
        for name, value in extra.items():
            try:
                extra[name] = hook(value, hint)
            except Exception as exc:
                shown = name if len(name) <= ECHO_LIMIT else name[:ECHO_LIMIT] + "..."
                secret = self.secret_names
                if shown != name and is_secret_name(name):
                    secret = secret | {shown}
                problems.extend(_problems(shown, exc, secret))


#: An error lists this many problems at most (a model may send thousands of bad arguments).
_PROBLEMS_SHOWN = 20


#: Splits an error path (``address.zip``, ``items[2]``, ``scores['bob']``) into its names.
_PATH_PARTS = re.compile(r"[.\[\]]+")


def _is_secret_path(path: str, secret_names: frozenset[str]) -> bool:
    for part in _PATH_PARTS.split(path):
        name = part.strip("'\"")
        if name and (name in secret_names or is_secret_name(name)):
            return True
    return False


def _problems(name: str, exc: Exception, secret_names: frozenset[str]) -> list[tuple[str, str]]:
    """Each failure inside one argument, with its path (``address.zip``, ``items[2]``)."""
    secret = name in secret_names or is_secret_name(name)
    show = functools.partial(_format_shown, secret_names=secret_names)
    if secret:
        lines = cattrs.transform_error(exc, path=name, format_exception=_format_hidden)
    else:
        shown = cattrs.transform_error(exc, path=name, format_exception=show)
        hidden = cattrs.transform_error(exc, path=name, format_exception=_format_hidden)
        # A secret field inside an ordinary argument (``login.password``) is not quoted either.
        lines = [
            hide if _is_secret_path(line.rpartition(" @ ")[2], secret_names) else line
            for line, hide in zip(shown, hidden, strict=True)
        ]
    found = []
    for line in lines:
        message, _, path = line.rpartition(" @ ")
        found.append((path, message))
    if not found:
        found.append((name, _format_hidden(exc, None) if secret else show(exc, None)))
    return found
