"""JSON Schema as each provider wants it: the model's view, strict mode, Gemini's subset.

Every transform walks the schema structurally (``properties``, ``items``, ``anyOf``, ``$defs``
...), so a *property* named ``title`` or ``default`` is never mistaken for a keyword.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from expediter.hookspecs.tool import Action

__all__ = [
    "NotStrictable",
    "ReadOnlyDict",
    "ReadOnlyList",
    "gemini_schema",
    "model_schema",
    "read_only",
    "strict_schema",
    "strip_optional_nulls",
    "walk",
]

Schema = dict[str, Any]

_SCHEMA_MAPS = (
    "properties",
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
    "dependencies",  # draft-07: values are schemas or lists of names (skipped)
)
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems", "items")  # draft-07 list ``items``
_SCHEMA_VALUES = (
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "propertyNames",
    "contentSchema",
    "not",
    "contains",
    "if",
    "then",
    "else",
)
#: Keys that belong to expediter, never to the model (none today; reserved prefix).
_FRAMEWORK_PREFIX = "x-expediter"


def walk(schema: Any, visit: Callable[[Schema], None]) -> None:
    """Call ``visit`` on every schema node, parents before children (in place)."""
    if not isinstance(schema, dict):
        return
    visit(schema)
    for key in _SCHEMA_MAPS:
        children = schema.get(key)
        if isinstance(children, dict):
            for child in children.values():
                walk(child, visit)
    for key in _SCHEMA_LISTS:
        children = schema.get(key)
        if isinstance(children, list):
            for child in children:
                walk(child, visit)
    for key in _SCHEMA_VALUES:
        walk(schema.get(key), visit)


_SHARED = (
    "this schema is shared by every toolset of the host (it is cached per action): "
    "copy.deepcopy() it before changing it"
)


class ReadOnlyDict(dict[str, Any]):
    """A dict that refuses changes: schemas handed out are cached and shared."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(_SHARED)

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


class ReadOnlyList(list[Any]):
    """A list that refuses changes (see ReadOnlyDict)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(_SHARED)

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = clear = extend = insert = pop = remove = reverse = sort = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(value, memo) for value in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


def read_only(value: Any) -> Any:
    """A deep read-only copy of JSON data (dicts and lists that refuse changes)."""
    if isinstance(value, dict):
        return ReadOnlyDict({key: read_only(item) for key, item in value.items()})
    if isinstance(value, list):
        return ReadOnlyList(read_only(item) for item in value)
    return value


def model_schema(action: Action) -> Schema:
    """The parameters the model sees: fixed values, framework keys and the host's ``writeOnly``
    marks removed, all else kept."""
    schema: Schema = copy.deepcopy(dict(action.parameters))
    fixed = set(action.fixed)
    if fixed:
        properties = schema.get("properties")
        if isinstance(properties, dict):
            for name in fixed:
                properties.pop(name, None)
        if isinstance(schema.get("required"), list):
            schema["required"] = [name for name in schema["required"] if name not in fixed]

    def drop_framework_keys(node: Schema) -> None:
        for key in [key for key in node if key.startswith(_FRAMEWORK_PREFIX)]:
            del node[key]
        # ``writeOnly`` marks a secret parameter for the host (``expediter.Secret``); providers
        # with a schema subset (Gemini, strict mode) refuse it, and the model needs it not.
        node.pop("writeOnly", None)

    walk(schema, drop_framework_keys)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


class NotStrictable(ValueError):
    """The schema cannot be expressed in strict mode (free-form maps, open objects)."""


def _allows_null(schema: Schema) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if None in schema.get("enum", ()) or ("const" in schema and schema["const"] is None):
        return True
    variants = schema.get("anyOf") or schema.get("oneOf") or ()
    return any(isinstance(v, dict) and _allows_null(v) for v in variants)


def _nullable(schema: Schema) -> Schema:
    if _allows_null(schema) or not schema:
        return schema
    kind = schema.get("type")
    plain = not ({"enum", "const", "$ref"} & set(schema))
    if isinstance(kind, str) and plain:
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list) and plain:
        return {**schema, "type": [*kind, "null"]}
    if isinstance(schema.get("anyOf"), list) and set(schema) <= {"anyOf", "description"}:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    description = schema.get("description")
    inner = {key: value for key, value in schema.items() if key != "description"}
    wrapped: Schema = {"anyOf": [inner, {"type": "null"}]}
    if description:
        wrapped["description"] = description
    return wrapped


def strict_schema(schema: Schema) -> Schema:
    """OpenAI/Anthropic strict mode: closed objects, every property required, optional ones
    nullable. Raises NotStrictable when the schema has free-form objects."""
    result: Schema = copy.deepcopy(schema)

    def close(node: Schema) -> None:
        reference = node.get("$ref")
        if isinstance(reference, str) and len(node) > 1:
            # Strict mode allows no keywords beside a $ref: inline the definition instead.
            target = _resolve({"$ref": reference}, result)
            if "$ref" not in target:
                siblings = {key: value for key, value in node.items() if key != "$ref"}
                node.clear()
                node.update(copy.deepcopy(target))
                node.update(siblings)
        node.pop("default", None)
        node.pop("uniqueItems", None)
        kind = node.get("type")
        is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
        if not (is_object or "properties" in node):
            return
        if node.get("additionalProperties") not in (None, False):
            raise NotStrictable("an object that accepts undeclared keys (a map or **kwargs)")
        properties = node.get("properties")
        if not isinstance(properties, dict):
            raise NotStrictable("an object without declared properties")
        required = set(node.get("required", []))
        for name, child in list(properties.items()):
            if name not in required and isinstance(child, dict):
                properties[name] = _nullable(child)
        node["required"] = list(properties)
        node["additionalProperties"] = False

    walk(result, close)
    return result


def gemini_schema(schema: Schema) -> Schema:
    """Gemini's ``parameters_json_schema``: no ``$schema`` or ``title``; ``const`` as ``enum``."""
    result: Schema = copy.deepcopy(schema)

    def rewrite(node: Schema) -> None:
        node.pop("$schema", None)
        node.pop("title", None)
        if "const" in node:
            node["enum"] = [node.pop("const")]

    walk(result, rewrite)
    return result


def _resolve(schema: Schema, root: Mapping[str, Any]) -> Schema:
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/"):
        target: Any = root
        for part in reference[2:].split("/"):
            if not isinstance(target, Mapping) or part not in target:
                return schema
            target = target[part]
        return dict(target) if isinstance(target, Mapping) else schema
    return schema


def strip_optional_nulls(
    arguments: dict[str, Any], schema: Mapping[str, Any], root: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Drop ``null`` values the model sent for optional parameters that do not accept null.

    Strict mode makes every parameter required and optional ones nullable; the model then sends
    ``null`` for what it means to leave out. Records (nested objects) are cleaned the same way.
    """
    if not any(value is None or type(value) in (dict, list) for value in arguments.values()):
        return arguments  # nothing null and nothing nested: nothing to strip
    root = schema if root is None else root
    node = _resolve(dict(schema), root)
    properties = node.get("properties")
    if not isinstance(properties, Mapping):
        return arguments
    required = set(node.get("required", []))
    cleaned: dict[str, Any] = {}
    for name, value in arguments.items():
        child = properties.get(name)
        if not isinstance(child, Mapping):
            cleaned[name] = value
            continue
        resolved = _resolve(dict(child), root)
        if value is None and name not in required and not _allows_null(resolved):
            continue
        if isinstance(value, dict):
            record = _variant(resolved, root, "properties")
            if record is not None:
                value = strip_optional_nulls(value, record, root)
        elif isinstance(value, list):
            array = _variant(resolved, root, "items")
            items = array.get("items") if array is not None else None
            if isinstance(items, Mapping):
                element = _variant(_resolve(dict(items), root), root, "properties")
                if element is not None:
                    value = [
                        strip_optional_nulls(item, element, root)
                        if isinstance(item, dict)
                        else item
                        for item in value
                    ]
        cleaned[name] = value
    return cleaned


def _variant(schema: Schema, root: Mapping[str, Any], key: str) -> Schema | None:
    """The schema (or, for ``T | None`` and other unions, the first variant) that has ``key``."""
    if key in schema:
        return schema
    for combinator in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(combinator) or ():
            if isinstance(option, Mapping):
                found = _variant(_resolve(dict(option), root), root, key)
                if found is not None:
                    return found
    return None
