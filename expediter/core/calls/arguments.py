"""A tool's own check of a call's arguments against an action's JSON Schema, before it acts
(``expediter.ArgumentsCheck``): the HTTP pack checks before a request is built, the MCP pack
before a remote tool is called.

``jsonschema`` (Draft 2020-12 unless the schema names its draft) decides and words the errors;
a pack that uses the check depends on it (the core does not). Most actions' schemas are flat
(an object of scalar parameters with types, enums and bounds); for those a check compiled once
answers "valid" without jsonschema, which costs more than the rest of the call's own work. The
quick check only ever says *valid* or *not sure*: anything it does not fully understand, and
every invalid call, goes to jsonschema.

A schema may come from anywhere (an MCP server, a document someone imported), so the check
never lets it do harm: no reference is ever fetched (a ``$ref`` that is not inside the schema
is unresolvable, never a request that would bypass the egress guard), a schema jsonschema
cannot use, or that breaks it while it validates (a reference loop), leaves the arguments
unchecked with one logged warning, and ``check_patterns=False`` leaves regular expressions to
the tool's server (Python's ``re`` can take exponential time on a hostile pattern).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from expediter.errors import ArgumentError

__all__ = ["ArgumentsCheck"]

logger = logging.getLogger(__name__)

#: Characters of jsonschema's message kept in the error (it may quote a long value).
MESSAGE_CHARS = 300

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
#: The keywords of an object schema the quick check understands.
_QUICK_KEYS = frozenset(
    {"type", "properties", "required", "description", "title", "$schema", "additionalProperties"}
)

#: Keywords whose value is one schema, a mapping of schemas, or a list of schemas.
_ONE_SCHEMA = (
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
)
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


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


def _without_patterns(schema: Any, depth: int = 0) -> Any:
    """A copy of ``schema`` without its regular expressions (``pattern``,
    ``patternProperties``), never stricter than the original: where ``patternProperties``
    goes, so do the keywords that depend on it (``additionalProperties``,
    ``unevaluatedProperties``)."""
    if not isinstance(schema, Mapping) or depth > 200:
        return schema
    copied = {key: value for key, value in schema.items() if key != "pattern"}
    if "patternProperties" in copied:
        for key in ("patternProperties", "additionalProperties", "unevaluatedProperties"):
            copied.pop(key, None)
    for key in _ONE_SCHEMA:
        if isinstance(copied.get(key), Mapping):
            copied[key] = _without_patterns(copied[key], depth + 1)
    for key in _SCHEMA_MAPS:
        if isinstance(copied.get(key), Mapping):
            copied[key] = {
                name: _without_patterns(item, depth + 1) for name, item in copied[key].items()
            }
    for key in _SCHEMA_LISTS:
        if isinstance(copied.get(key), list):
            copied[key] = [_without_patterns(item, depth + 1) for item in copied[key]]
    return copied


class ArgumentsCheck:
    """The check of one action's arguments (build it once per action version). Calling it
    raises ``ArgumentError`` naming the first argument that does not fit, with jsonschema's
    words for why; ``check_patterns=False`` leaves the schema's regular expressions to the
    tool's server (for a schema from elsewhere)."""

    def __init__(
        self, action: str, schema: Mapping[str, Any], *, check_patterns: bool = True
    ) -> None:
        self.action = action
        self.schema = dict(schema)
        self._check_patterns = check_patterns
        self._validator: Any = None
        #: Why the schema cannot be used (the arguments then go unchecked), once known.
        self.unusable: str | None = None
        self._quick = self._compile(self.schema)

    @staticmethod
    def _compile(schema: Mapping[str, Any]) -> dict[str, Callable[[Any], bool] | None] | None:
        if set(schema) - _QUICK_KEYS:
            return None
        # Certainly valid arguments are all declared properties: a yes or no for the others
        # changes nothing.
        if not isinstance(schema.get("additionalProperties", False), bool):
            return None
        if schema.get("type") != "object" or not isinstance(schema.get("properties"), Mapping):
            return None
        return {str(name): _scalar_check(item) for name, item in schema["properties"].items()}

    def _certainly_valid(self, arguments: Mapping[str, Any]) -> bool:
        quick = self._quick
        if quick is None:
            return False
        required = self.schema.get("required") or ()
        if not isinstance(required, list | tuple):
            return False
        if any(name not in arguments for name in required):
            return False
        for name, value in arguments.items():
            check = quick.get(name)
            if check is None or not check(value):
                return False
        return True

    def _give_up(self, why: str) -> None:
        self.unusable = why
        logger.warning(
            "the arguments of %s go unchecked: its parameters schema %s",
            self.action[:200],
            why,
            extra={"action": self.action[:200]},
        )

    def _make_validator(self) -> Any:
        """The jsonschema validator, or None (logged once) when the schema is unusable."""
        if self._validator is None and self.unusable is None:
            # The core does not depend on jsonschema (the packs that use the check do), nor
            # on its type stubs.
            import referencing
            from jsonschema import validators  # type: ignore[import-untyped,unused-ignore]

            schema = self.schema if self._check_patterns else _without_patterns(self.schema)
            # Not checked against its metaschema first: jsonschema validates with a schema
            # that is a little off (a repeated type, say) as the tool's server would; one that
            # breaks it is given up on below.
            try:
                kind = validators.validator_for(schema, default=validators.Draft202012Validator)
                # An empty registry: a reference outside the schema is never fetched.
                self._validator = kind(schema, registry=referencing.Registry())
            except Exception as exc:
                self._give_up(f"cannot be used ({type(exc).__name__})")
        return self._validator

    def __call__(self, arguments: Mapping[str, Any]) -> None:
        """ArgumentError naming the first argument that does not fit, with jsonschema's
        words for why (nothing when the schema is unusable)."""
        if self._certainly_valid(arguments):
            return
        validator = self._make_validator()
        if validator is None:
            return
        from jsonschema.exceptions import (  # type: ignore[import-untyped,unused-ignore]
            best_match,
        )

        try:
            error = best_match(validator.iter_errors(dict(arguments)))
        except Exception as exc:  # RecursionError (a reference loop), an unresolvable $ref
            self._validator = None
            self._give_up(f"breaks the validator ({type(exc).__name__})")
            return
        if error is None:
            return
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
        ).lstrip(".")
        first = error.absolute_path[0] if error.absolute_path else None
        message = error.message
        if len(message) > MESSAGE_CHARS:
            message = message[:MESSAGE_CHARS] + "..."
        raise ArgumentError(
            f"{self.action}: argument {where or '(all)'}: {message}",
            parameter=first if isinstance(first, str) else None,
        )
