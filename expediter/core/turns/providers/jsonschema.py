"""JSON Schema as each provider wants it: the model's view, strict mode, Gemini's subset.

Every transform walks the schema structurally (``properties``, ``items``, ``anyOf``, ``$defs``
...), so a *property* named ``title`` or ``default`` is never mistaken for a keyword.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

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


#: Keywords that only annotate: a copy may drop or override them without changing what is valid.
_ANNOTATIONS = frozenset(
    {"description", "title", "$comment", "examples", "deprecated", "readOnly", "writeOnly"}
)
#: How deep a strict schema may nest, and how many nodes inlining may produce: a schema
#: beyond either (a hostile remote server's) is offered non-strict instead.
_STRICT_DEPTH = 64
_STRICT_NODES = 20_000
#: How many JSON values (enum entries included) inlining may copy in all: a large target
#: referenced from many places would otherwise multiply into a schema no provider takes.
_STRICT_VALUES = 500_000
#: Keywords whose value may be a boolean in strict output (``true`` on an object is refused
#: where objects are closed).
_BOOLEAN_ALLOWED = frozenset(
    {"additionalProperties", "additionalItems", "unevaluatedItems", "unevaluatedProperties"}
)


def strict_schema(schema: Schema) -> Schema:
    """OpenAI/Anthropic strict mode: closed objects, every property required, optional ones
    nullable. Raises NotStrictable when the schema has free-form objects."""
    _check_input(schema)
    result: Schema = copy.deepcopy(schema)
    # First make every node plain (no ``allOf``, no ``$ref`` beside other keywords, objects
    # typed), then close the objects: wrapping an optional property in ``anyOf`` must see
    # the merged schema, not an ``allOf`` still to merge.
    _Normalizer(schema).normalize(result, (_pointer_key("#"),), 0)

    def close(node: Schema) -> None:
        if "$ref" in node:
            _check_reference(node["$ref"], result)
        _check_subschemas(node)
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
        required = node.get("required", [])
        if type(required) is not list or not all(isinstance(name, str) for name in required):
            raise NotStrictable("an object whose required is not a list of property names")
        required = set(required)
        for name, child in list(properties.items()):
            if name not in required and isinstance(child, dict):
                properties[name] = _nullable(child)
        node["required"] = list(properties)
        node["additionalProperties"] = False

    walk(result, close)
    return result


class _Normalizer:
    """Rewrites a schema, in place, into the plain form strict mode accepts: a single-entry
    ``allOf`` merged into its parent, a ``$ref`` beside other keywords inlined (a recursive
    one left bare), every node with ``properties`` typed ``object``."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        #: References resolve against the input, never against a half-rewritten copy.
        self.root = root
        self.budget = _STRICT_NODES
        self.values = _STRICT_VALUES

    def normalize(self, node: Schema, chain: tuple[str, ...], depth: int) -> None:
        """Rewrite ``node`` and everything under it; ``chain`` holds the references being
        inlined around it (a reference back into the chain is recursive)."""
        self.budget -= 1
        if self.budget < 0:
            raise NotStrictable("inlining its $refs makes the schema too large")
        if depth > _STRICT_DEPTH:
            raise NotStrictable(f"the schema nests deeper than {_STRICT_DEPTH} levels")
        while True:
            if "allOf" in node:
                self.merge_all_of(node)
            reference = node.get("$ref")
            if not isinstance(reference, str) or len(node) == 1:
                break
            key = _pointer_key(reference)
            if key in chain:
                self.leave_bare(node, reference)
                break
            self.inline(node, reference)
            chain = (*chain, key)
        if "properties" in node and "type" not in node:
            node["type"] = "object"
        for name in _SCHEMA_MAPS:
            children = node.get(name)
            if isinstance(children, dict):
                for child_name, child in children.items():
                    if isinstance(child, dict):
                        inner = chain
                        if name in ("$defs", "definitions") and depth == 0:
                            inner = (*chain, _pointer_key(f"#/{name}/{_escape(child_name)}"))
                        self.normalize(child, inner, depth + 1)
        for name in _SCHEMA_LISTS:
            children = node.get(name)
            if isinstance(children, list):
                for child in children:
                    if isinstance(child, dict):
                        self.normalize(child, chain, depth + 1)
        for name in _SCHEMA_VALUES:
            child = node.get(name)
            if isinstance(child, dict):
                self.normalize(child, chain, depth + 1)

    def merge_all_of(self, node: Schema) -> None:
        """Merge a single-entry ``allOf`` into ``node`` (strict mode has no ``allOf``)."""
        entries = node["allOf"]
        if not isinstance(entries, list) or len(entries) != 1:
            raise NotStrictable("an allOf of several schemas (strict mode has no allOf)")
        del node["allOf"]
        entry = entries[0]
        if entry is True:
            return
        if not isinstance(entry, dict):
            raise NotStrictable("an allOf that admits nothing")
        _refuse_reopening(entry, node, "an allOf")
        for key, value in entry.items():
            if key not in node:
                node[key] = value
            elif key == "properties" and isinstance(value, dict):
                properties = node[key]
                if not isinstance(properties, dict):
                    raise NotStrictable("an allOf whose properties clash with its parent's")
                for name, child in value.items():
                    if name in properties and properties[name] != child:
                        raise NotStrictable(f"an allOf that redefines property {name!r}")
                    properties[name] = child
            elif key == "required" and isinstance(value, list):
                names = node[key] if isinstance(node[key], list) else []
                node[key] = [*names, *(name for name in value if name not in names)]
            elif node[key] != value and key not in _ANNOTATIONS:
                # The parent's own annotation wins; a differing constraint is both at once,
                # which only allOf can say.
                raise NotStrictable(f"an allOf whose {key!r} clashes with its parent's")

    def inline(self, node: Schema, reference: str) -> None:
        """Replace a ``$ref`` that has sibling keywords by a copy of its target."""
        target = _pointer_target(reference, self.root)
        if target is None:
            raise NotStrictable(f"a $ref beside other keywords that does not resolve: {reference}")
        self.values -= _count_values(target, self.values)
        if self.values < 0:
            raise NotStrictable("inlining its $refs makes the schema too large")
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        _refuse_reopening(target, siblings, "a $ref")
        node.clear()
        node.update(copy.deepcopy(target))
        for key, value in siblings.items():
            if key in node and node[key] != value and key not in _ANNOTATIONS:
                raise NotStrictable(f"a $ref whose {key!r} differs from its target's")
            node[key] = value

    @staticmethod
    def leave_bare(node: Schema, reference: str) -> None:
        """A recursive ``$ref`` stays a bare reference: its annotations go, and a constraint
        beside it (which a bare reference would lose) makes the schema non-strict."""
        constraints = sorted(key for key in node if key != "$ref" and key not in _ANNOTATIONS)
        if constraints:
            raise NotStrictable(f"a recursive $ref beside {', '.join(constraints)}")
        node.clear()
        node["$ref"] = reference


def _refuse_reopening(inner: Mapping[str, Any], outer: Mapping[str, Any], what: str) -> None:
    """Refuse to merge two schemas when one closes its object (``additionalProperties``) and
    the other declares a property it does not: the merged object would accept that property,
    which the closed one forbids (``additionalProperties`` sees only its own ``properties``)."""
    for closed, other in ((inner, outer), (outer, inner)):
        if closed.get("additionalProperties") in (None, True):
            continue
        own = closed.get("properties")
        declared = other.get("properties")
        own_names = set(own) if isinstance(own, Mapping) else set()
        if isinstance(declared, Mapping) and set(declared) - own_names:
            raise NotStrictable(
                f"{what} whose additionalProperties forbids properties declared beside it"
            )


def _check_input(schema: Any) -> None:
    """Refuse, before copying, input no JSON document gives: non-string keys, or nesting so
    deep that copying it would overflow the stack (a hostile server's)."""
    stack: list[tuple[Any, int]] = [(schema, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > 3 * _STRICT_DEPTH:
            raise NotStrictable(f"the schema nests deeper than {_STRICT_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise NotStrictable(f"a schema with a non-string key ({type(key).__name__})")
                if isinstance(item, (dict, list)):
                    stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value if isinstance(item, (dict, list)))


def _count_values(value: Any, limit: int) -> int:
    """How many JSON values ``value`` holds, counting no further than just past ``limit``."""
    count = 0
    stack = [value]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _check_reference(reference: Any, root: Mapping[str, Any]) -> None:
    """A bare ``$ref`` left in strict output must point, within the schema, at a schema
    that is more than another reference back into the same loop."""
    seen: set[str] = set()
    while True:
        if not isinstance(reference, str):
            raise NotStrictable("a $ref that is not a string")
        target = _pointer_target(reference, root)
        if target is None:
            raise NotStrictable(f"a $ref that does not resolve within the schema: {reference}")
        key = _pointer_key(reference)
        if key in seen:
            raise NotStrictable(f"a $ref that only refers to itself: {reference}")
        seen.add(key)
        if set(target) != {"$ref"}:
            return
        reference = target["$ref"]


def _check_subschemas(node: Schema) -> None:
    """Strict mode takes a schema object wherever a schema goes: ``true`` (anything) and
    other non-objects are refused (``false`` only where it closes an object or array)."""
    for key in ("properties", "$defs", "definitions"):
        children = node.get(key)
        if key in node and not isinstance(children, dict):
            raise NotStrictable(f"a {key} that is not an object")
        if isinstance(children, dict):
            for name, child in children.items():
                if not isinstance(child, dict):
                    raise NotStrictable(f"{key} entry {name!r} is not a schema object")
    for key in ("anyOf", "oneOf", "prefixItems"):
        if key in node:
            children = node[key]
            if not isinstance(children, list) or not all(type(c) is dict for c in children):
                raise NotStrictable(f"a {key} that is not a list of schema objects")
    for key in _SCHEMA_VALUES:
        if key not in node or isinstance(node[key], dict):
            continue
        child = node[key]
        if key == "items" and isinstance(child, list) and all(type(c) is dict for c in child):
            continue
        if not (isinstance(child, bool) and key in _BOOLEAN_ALLOWED):
            raise NotStrictable(f"a {key} that is not a schema object")


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _pointer_parts(reference: str) -> list[str] | None:
    """The decoded parts of a local JSON pointer reference (``#/$defs/A~1B``), or None."""
    if reference == "#":
        return []
    if not reference.startswith("#/"):
        return None
    return [
        unquote(part).replace("~1", "/").replace("~0", "~") for part in reference[2:].split("/")
    ]


def _pointer_key(reference: str) -> str:
    """One spelling per target, for recognising a reference already being inlined."""
    parts = _pointer_parts(reference)
    return reference if parts is None else "#/" + "/".join(_escape(part) for part in parts)


def _pointer_target(reference: str, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    parts = _pointer_parts(reference)
    if parts is None:
        return None
    target: Any = root
    for part in parts:
        if isinstance(target, Mapping) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target if isinstance(target, Mapping) else None


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
    if isinstance(reference, str):
        target = _pointer_target(reference, root)
        if target is not None:
            return dict(target)
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
