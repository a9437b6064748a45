"""References and schemas: local ``$ref``s followed, and request schemas made plain JSON Schema.

A schema the model sees has every local reference inlined (a recursive one becomes
``{"type": "object"}`` where it repeats), OpenAPI-only keywords removed (``xml``,
``externalDocs``, ``discriminator``, ``example``), 3.0's ``nullable`` turned into a type union
with ``"null"``, ``readOnly`` properties left out (these are request schemas), and binary
strings (3.0 ``format: binary``, 3.1 ``contentMediaType`` alone, 2.0 ``type: file``) marked
``BINARY``, which the tool sends decoded; base64 text (3.0 ``format: byte``, 3.1
``contentEncoding: base64``) is noted as such in the description. Every cut is reported
through ``report``.

Every schema node, and every value copied as it is (``default``, ``enum``, ``const``,
``examples`` ...), counts against the node budget: a reference repeats its target, so a value
too large for what is left is left out (and reported) rather than copied again and again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

from expediter.core.records.text import echo
from expediter_http.openapi.document import kind

__all__ = ["BINARY", "SCHEMA_DEPTH", "SCHEMA_NODES", "TOTAL_NODES", "References", "nullable"]

#: How deeply one inlined schema may nest, and how many nodes it (and the whole import) may have.
SCHEMA_DEPTH = 32
SCHEMA_NODES = 20_000
TOTAL_NODES = 2_000_000
#: A binary value: the model writes base64 text, the request carries the bytes.
BINARY = {"type": "string", "format": "binary", "contentEncoding": "base64"}

_BASE64_NOTE = "base64-encoded"
# OpenAPI-only schema keywords (not JSON Schema), and keywords that lose their meaning once
# references are inlined.
_DROPPED = frozenset(
    {"xml", "externalDocs", "discriminator", "example", "nullable", "collectionFormat"}
    | {"$schema", "$id", "$anchor", "$dynamicAnchor", "$defs", "definitions", "$comment"}
)
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_ONE = frozenset(
    {"items", "additionalItems", "additionalProperties", "not", "if", "then", "else"}
    | {"contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties"}
)


class _Walk:
    """The node budget of one inlined schema."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.cut = False


class References:
    """The local references of one document, and the request schemas built from it."""

    def __init__(self, document: Mapping[str, Any], report: Callable[[str], None]) -> None:
        self.doc = document
        self.report = report
        #: Schema nodes the rest of the import may still inline.
        self.budget = TOTAL_NODES

    def lookup(self, ref: Any, where: str, *, quiet: bool = False) -> Any:
        """What a local ``$ref`` points at; None (reported unless ``quiet``) for another."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            if not quiet:
                self.report(
                    f"{where}: the remote $ref {echo(ref, 120)} is not followed (only local "
                    "'#/...' references are); bundle the document into one file first"
                )
            return None
        node: Any = self.doc
        tokens = [] if ref == "#" else unquote(ref[1:]).split("/")[1:]
        if ref != "#" and not ref.startswith("#/"):
            node = None  # a plain-name fragment ($anchor): not supported
        for token in tokens:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                node = None
                break
        if node is None and not quiet:
            self.report(f"{where}: the $ref {echo(ref, 120)} points at nothing in the document")
        return node

    def deref(self, node: Any, where: str) -> Any:
        """An object with its ``$ref`` chain followed (None when it cannot be)."""
        followed: set[str] = set()
        while isinstance(node, Mapping) and "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or ref in followed:
                self.report(f"{where}: the $ref {echo(ref, 120)} refers to itself")
                return None
            followed.add(ref)
            node = self.lookup(ref, where)
        return node

    # -- schemas ------------------------------------------------------------------------------

    def schema(self, node: Any, where: str) -> dict[str, Any]:
        """A request schema with local references inlined and OpenAPI-only keywords converted."""
        walk = _Walk(min(SCHEMA_NODES, max(self.budget, 0)))
        result = self._convert(node, where, (), 0, walk)
        self.budget -= walk.used
        return result

    def _convert(
        self, node: Any, where: str, refs: tuple[str, ...], depth: int, walk: _Walk
    ) -> dict[str, Any]:
        walk.used += 1
        if walk.used > walk.limit:
            if not walk.cut:
                walk.cut = True
                self.report(
                    f"{where}: the schema is too large to inline; its remaining parts accept "
                    "any value"
                )
            return {}
        if depth > SCHEMA_DEPTH:
            self.report(
                f"{where}: the schema nests more than {SCHEMA_DEPTH} levels; deeper parts "
                "accept any value"
            )
            return {}
        if node is True or node is None:
            return {}
        if node is False:
            return {"not": {}}
        if not isinstance(node, Mapping):
            self.report(f"{where}: a schema is {kind(node)}, not an object; it accepts any value")
            return {}
        if "$ref" in node:
            return self._convert_ref(node, where, refs, depth, walk)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED or key.startswith("x-"):
                continue
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                out[key] = {
                    name: self._convert(item, where, refs, depth + 1, walk)
                    for name, item in value.items()
                }
            elif key in _SCHEMA_LISTS | _SCHEMA_ONE and isinstance(value, list):
                # allOf & co, and draft 4's tuple items
                out[key] = [self._convert(item, where, refs, depth + 1, walk) for item in value]
            elif key in _SCHEMA_ONE and not isinstance(value, bool):
                out[key] = self._convert(value, where, refs, depth + 1, walk)
            else:
                if isinstance(value, Mapping | list):
                    walk.used += _values(value, walk.limit - walk.used)
                    if walk.used > walk.limit:
                        if not walk.cut:
                            walk.cut = True
                            self.report(
                                f"{where}: the schema is too large to inline; its "
                                f"{echo(key, 40)} value is left out and its remaining parts "
                                "accept any value"
                            )
                        continue
                out[key] = value
        return self._finish(out, node, where)

    def _convert_ref(
        self, node: Mapping[str, Any], where: str, refs: tuple[str, ...], depth: int, walk: _Walk
    ) -> dict[str, Any]:
        ref = node["$ref"]
        if isinstance(ref, str) and ref in refs:
            self.report(
                f"{where}: the schema {echo(ref, 120)} contains itself; at the repetition it "
                'accepts any object ({"type": "object"})'
            )
            return {"type": "object"}
        target = self.lookup(ref, where)
        if target is None:
            return {}
        inner = self._convert(target, where, (*refs, ref), depth + 1, walk)
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        if siblings:
            inner = {**inner, **self._convert(siblings, where, refs, depth + 1, walk)}
            if siblings.get("nullable") is True:
                inner = nullable(inner)
        return inner

    def _finish(self, out: dict[str, Any], node: Mapping[str, Any], where: str) -> dict[str, Any]:
        properties = out.get("properties")
        if isinstance(properties, dict):
            hidden = [k for k, v in properties.items() if isinstance(v, dict) and v.get("readOnly")]
            for name in hidden:
                del properties[name]
            if hidden and isinstance(out.get("required"), list):
                out["required"] = [name for name in out["required"] if name not in hidden]
                if not out["required"]:
                    del out["required"]
        if isinstance(out.get("allOf"), list):
            types = {m.get("type") for m in out["allOf"] if isinstance(m.get("type"), str)}
            if len(types) > 1:
                self.report(
                    f"{where}: allOf combines conflicting types ({', '.join(sorted(types))}); "
                    "kept as is, so no value may match"
                )
        if out.get("type") == "file":  # Swagger 2.0
            out.update(BINARY)
        if out.get("format") == "binary" and "type" not in out:
            out["type"] = "string"
        types_ = out.get("type")
        if types_ == "string" or (isinstance(types_, list) and "string" in types_):
            binary = out.get("format") == "binary" or (
                "contentMediaType" in out and "contentEncoding" not in out
            )
            if binary:
                out.update(format="binary", contentEncoding="base64")
            # format: byte is base64 text on the wire: sent as written (no contentEncoding,
            # which the tool would decode).
            if out.get("contentEncoding") == "base64" or out.get("format") == "byte":
                note = str(out.get("description") or "")
                if "base64" not in note.lower():
                    out["description"] = f"{note} ({_BASE64_NOTE})" if note else _BASE64_NOTE
        if node.get("nullable") is True or node.get("x-nullable") is True:
            out = nullable(out)
        return out


def _values(value: Any, limit: int) -> int:
    """How many values ``value`` has (itself included, a shared part once for each place),
    counted up to one more than ``limit``."""
    count = 0
    pending = [value]
    while pending and count <= limit:
        item = pending.pop()
        count += 1
        if isinstance(item, Mapping | list):
            if count + len(item) > limit:
                return count + len(item)  # each item is at least one value: over already
            pending.extend(item.values() if isinstance(item, Mapping) else item)
    return count


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` also accepting null (OpenAPI 3.0's ``nullable: true``)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"]
    elif isinstance(kind, list):
        if "null" not in kind:
            schema["type"] = [*kind, "null"]
    elif schema:
        return {"anyOf": [schema, {"type": "null"}]}
    if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    return schema
