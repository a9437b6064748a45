"""The model's arguments checked against an action's JSON Schema before a request is built.

``jsonschema`` (Draft 2020-12) decides and words the errors. Most actions' schemas are flat
(an object of scalar parameters with types, enums and bounds); for those a check compiled once
answers "valid" without jsonschema, which costs more than the rest of the call's own work. The
quick check only ever says *valid* or *not sure*: anything it does not fully understand, and
every invalid call, goes to jsonschema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from expediter.errors import ArgumentError

__all__ = ["ArgumentsCheck"]

#: Keywords that only annotate (Draft 2020-12 asserts no ``format`` by default).
_ANNOTATIONS = frozenset(
    {
        "description",
        "title",
        "format",
        "examples",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentEncoding",
        "contentMediaType",
        "$comment",
    }
)
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_LENGTHS = ("minLength", "maxLength")
_KNOWN = _ANNOTATIONS | {"type", "enum", *_BOUNDS, *_LENGTHS}


def _is(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    return False


def _scalar_check(schema: Any) -> Callable[[Any], bool] | None:
    """A check that returns True only for values ``schema`` certainly accepts, or None when
    the schema says more than the quick check understands."""
    if not isinstance(schema, Mapping) or not set(schema) <= _KNOWN:
        return None
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) for k in kinds):
        return None
    if any(kind not in ("string", "integer", "number", "boolean", "null") for kind in kinds):
        return None
    enum = schema.get("enum")
    if enum is not None and not (
        isinstance(enum, list) and all(isinstance(item, str) for item in enum)
    ):
        return None
    choices = None if enum is None else frozenset(enum)
    bounds = [(name, schema[name]) for name in _BOUNDS if name in schema]
    lengths = [(name, schema[name]) for name in _LENGTHS if name in schema]
    if any(isinstance(v, bool) or not isinstance(v, int | float) for _, v in bounds + lengths):
        return None

    def check(value: Any) -> bool:
        if not any(_is(kind, value) for kind in kinds):
            return False
        if choices is not None and not (isinstance(value, str) and value in choices):
            return False
        if bounds and isinstance(value, int | float) and not isinstance(value, bool):
            for name, limit in bounds:
                if (
                    (name == "minimum" and value < limit)
                    or (name == "maximum" and value > limit)
                    or (name == "exclusiveMinimum" and value <= limit)
                    or (name == "exclusiveMaximum" and value >= limit)
                ):
                    return False
        if lengths and isinstance(value, str):
            for name, limit in lengths:
                if (name == "minLength" and len(value) < limit) or (
                    name == "maxLength" and len(value) > limit
                ):
                    return False
        return True

    return check


class ArgumentsCheck:
    """The check of one action's arguments (built once per action)."""

    def __init__(self, action: str, schema: Mapping[str, Any]) -> None:
        self.action = action
        self.schema = dict(schema)
        self._validator: Any = None
        self._quick = self._compile(self.schema)

    @staticmethod
    def _compile(schema: Mapping[str, Any]) -> dict[str, Callable[[Any], bool] | None] | None:
        if set(schema) - {"type", "properties", "required", "description", "title"}:
            return None
        if schema.get("type") != "object" or not isinstance(schema.get("properties"), Mapping):
            return None
        return {str(name): _scalar_check(item) for name, item in schema["properties"].items()}

    def _certainly_valid(self, arguments: Mapping[str, Any]) -> bool:
        quick = self._quick
        if quick is None:
            return False
        required = self.schema.get("required") or ()
        if any(name not in arguments for name in required):
            return False
        for name, value in arguments.items():
            check = quick.get(name)
            if check is None or not check(value):
                return False
        return True

    def __call__(self, arguments: Mapping[str, Any]) -> None:
        """ArgumentError naming the first argument that does not fit, with jsonschema's
        words for why."""
        if self._certainly_valid(arguments):
            return
        if self._validator is None:
            from jsonschema import Draft202012Validator

            self._validator = Draft202012Validator(self.schema)
        from jsonschema.exceptions import best_match

        error = best_match(self._validator.iter_errors(dict(arguments)))
        if error is None:
            return
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
        ).lstrip(".")
        first = error.absolute_path[0] if error.absolute_path else None
        message = error.message if len(error.message) <= 300 else error.message[:300] + "..."
        raise ArgumentError(
            f"{self.action}: argument {where or '(all)'}: {message}",
            parameter=first if isinstance(first, str) else None,
        )
