"""Bind a model's arguments to a function's parameters, with errors that name the parameter."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError

from expediter.core.conversion import TypeMismatch, converter
from expediter.core.schema import strip_annotated
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


_PATH_PART = re.compile(r"^\$\.?")


def _format(exc: BaseException, hint: Any) -> str:
    if isinstance(exc, KeyError):
        return "missing (it is required)"
    if isinstance(exc, ForbiddenExtraKeysError):
        return "unknown fields " + ", ".join(repr(name) for name in sorted(exc.extra_fields))
    if isinstance(exc, TypeMismatch):
        return str(exc)
    return f"invalid ({exc})"


class ArgumentBinder:
    """Checks and converts one action's arguments (strictly, by the JSON Schema's types)."""

    def __init__(self, qualname: str, parameters: list[Parameter], *, allow_extra: bool) -> None:
        self.qualname = qualname
        self.parameters = parameters
        self.allow_extra = allow_extra
        self._names = frozenset(parameter.name for parameter in parameters)
        fields = {}
        for index, parameter in enumerate(parameters):
            bare, _ = strip_annotated(parameter.hint)
            if parameter.required:
                fields[f"p{index}"] = attrs.field(type=bare)
            else:
                fields[f"p{index}"] = attrs.field(type=bare, default=parameter.default)
        record_name = re.sub(r"\W", "_", qualname) + "_arguments"
        self._record = attrs.make_class(record_name, fields, frozen=True)
        self._field_names = [(f"p{index}", p.name) for index, p in enumerate(parameters)]
        self._field_of = {alias: field for field, alias in self._field_names}
        self._structure = converter.get_structure_hook(self._record)

    def bind(self, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Return ``(declared, extra)`` converted arguments, or raise ArgumentError."""
        if not isinstance(arguments, Mapping):
            raise ArgumentError(
                f"arguments for {self.qualname} must be a JSON object, "
                f"got {type(arguments).__name__}"
            )
        field_of = self._field_of
        remapped: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for name, value in arguments.items():
            field = field_of.get(name)
            if field is None:
                extra[name] = value
            else:
                remapped[field] = value
        if extra and not self.allow_extra:
            expected = ", ".join(sorted(self._names)) or "none"
            names = ", ".join(repr(name) for name in extra)
            noun = "argument" if len(extra) == 1 else "arguments"
            raise ArgumentError(
                f"{self.qualname}: unknown {noun} {names} (expected: {expected})",
                parameter=next(iter(extra)),
            )
        try:
            record = self._structure(remapped, self._record)
        except Exception as exc:
            raise self._argument_error(exc) from exc
        converted = {alias: getattr(record, field) for field, alias in self._field_names}
        return converted, extra

    def _argument_error(self, exc: Exception) -> ArgumentError:
        problems: list[tuple[str, str]] = []
        for line in cattrs.transform_error(exc, format_exception=_format):
            message, _, path = line.rpartition(" @ ")
            path = _PATH_PART.sub("", path)
            head, _, rest = path.partition(".")
            field, bracket, tail = head.partition("[")
            alias = dict(self._field_names).get(field, field)
            path = alias + (bracket + tail if bracket else "") + ("." + rest if rest else "")
            problems.append((path, message))
        if not problems:
            problems.append(("", f"invalid ({exc})"))
        text = "; ".join(f"argument {path!r}: {message}" for path, message in problems)
        first = problems[0][0].split(".")[0].split("[")[0] or None
        return ArgumentError(f"{self.qualname}: {text}", parameter=first)
