"""Request bodies: the model's body argument encoded for the action's media type (no I/O).

``encode_body`` dispatches on the media type (case-insensitive, parameters allowed):

- ``application/json``, ``*+json``: compact UTF-8 JSON; NaN and infinities refused.
- ``application/x-www-form-urlencoded``: an object; each property serialized per its
  OpenAPI encoding object. With ``style``/``explode``/``allowReserved`` set, that style
  (``form``, ``spaceDelimited``, ``pipeDelimited``, ``deepObject``); else with a
  ``contentType``, the value in that type (JSON text for JSON types); else arrays and scalars
  as form fields (arrays as repeated keys) and objects as JSON text (OpenAPI's default
  ``contentType`` for objects). Percent-encoded as query strings are: a space is ``%20``.
- ``multipart/form-data``: an object; one part per property, one per item of an array.
  Binary properties (schema ``format: binary`` or ``contentEncoding: base64``, or an encoding
  ``contentType`` that is not text, JSON or XML) carry base64 text and become file parts
  (``filename`` is the property name); objects and arrays nested in an item become JSON parts;
  scalars become text parts without a Content-Type line. Names are quoted with ``"``, ``\\``,
  CR, LF and NUL percent-encoded (RFC 7578, as browsers do).
- ``application/xml``, ``text/xml``, ``*+xml``: an object written as XML (root element
  ``xml_root`` or ``root``; keys are child elements, arrays repeat the element, null is an
  empty element), or a string of XML when the body schema is ``type: string``.
- ``text/*``: a string, sent as UTF-8 with ``charset=utf-8``.
- ``application/octet-stream``, ``image/*``, ``audio/*``, ``video/*``, ``font/*``,
  ``application/pdf`` and other binary types, or any type whose schema says binary: base64
  text, sent decoded.
- a wildcard type (``*/*``, ``application/*``): a string as ``text/plain; charset=utf-8``,
  anything else as ``application/json``.
- any other type: a string as UTF-8 text, anything else as JSON, with the type as written.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from expediter.core.records.text import echo
from expediter.errors import ArgumentError, ConfigError
from expediter_http.actions import BodySpec
from expediter_http.request import QUERY_STYLES, parameter_text, query_pairs

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

__all__ = ["default_body_schema", "encode_body"]

_BINARY_TYPES = frozenset(
    {
        "application/octet-stream",
        "application/pdf",
        "application/zip",
        "application/gzip",
        "application/x-gzip",
        "application/x-tar",
        "application/x-bzip2",
        "application/x-7z-compressed",
        "application/vnd.rar",
        "application/wasm",
        "application/msword",
        "application/protobuf",
        "application/x-protobuf",
    }
)
_BINARY_PREFIXES = ("image/", "audio/", "video/", "font/", "model/")
#: A practical form of the XML Name production (no namespaces).
_XML_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")
#: Characters XML 1.0 cannot hold, escaped or not.
_XML_ILLEGAL = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_HEADER_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")
_NAME_ESCAPES = {'"': "%22", "\\": "%5C", "\r": "%0D", "\n": "%0A", "\x00": "%00"}


def encode_body(body: BodySpec, value: Any) -> tuple[bytes, str]:
    """The bytes of ``value`` as ``body``'s media type, and the full Content-Type to send."""
    content_type = body.content_type.strip()
    essence = _media_type(content_type)
    argument = body.argument
    if "*" in essence:
        if isinstance(value, str):
            return _utf8(value, argument), "text/plain; charset=utf-8"
        return _json(value, argument), "application/json"
    if _is_json(essence):
        return _json(value, argument), content_type
    if essence == "application/x-www-form-urlencoded":
        return _form(body, value), content_type
    if essence == "multipart/form-data":
        return _multipart(body, value)
    if essence.startswith("multipart/"):
        raise ConfigError(
            f"body content type {content_type!r} is not supported; use multipart/form-data",
            parameter="content_type",
        )
    if _is_xml(essence):
        return _xml(body, value), _with_charset(content_type)
    if _is_binary(essence) or _schema_is_binary(body.schema):
        return _base64(value, f"argument {argument!r}", argument), content_type
    if essence.startswith("text/"):
        if not isinstance(value, str):
            raise ArgumentError(
                f"argument {argument!r} must be a string (the body is {essence}), "
                f"not {_kind(value)}",
                parameter=argument,
            )
        return _utf8(value, argument), _with_charset(content_type)
    if isinstance(value, str):
        return _utf8(value, argument), content_type
    return _json(value, argument), content_type


def default_body_schema(content_type: str) -> dict[str, Any]:
    """The JSON Schema of a body argument whose action declares none: what ``encode_body``
    takes for that media type."""
    essence = content_type.partition(";")[0].strip().lower()
    if "*" in essence or _is_json(essence) or _is_xml(essence) or essence.startswith("multipart/"):
        return {"type": "object"}
    if _is_binary(essence):
        return {"type": "string", "contentEncoding": "base64"}
    if essence.startswith("text/"):
        return {"type": "string"}
    return {"type": "object"}


def _media_type(content_type: str) -> str:
    """The lower-cased ``type/subtype`` of a Content-Type; ConfigError when it is malformed."""
    if _HEADER_UNSAFE.search(content_type) or not content_type.isascii():
        raise ConfigError(
            f"body content type {echo(content_type, 80)} has control or non-ASCII "
            "characters; fix the action's body content_type",
            parameter="content_type",
        )
    essence = content_type.partition(";")[0].strip().lower()
    if essence.count("/") != 1 or not all(essence.split("/")):
        raise ConfigError(
            f"body content type {content_type!r} is not a media type (type/subtype); fix "
            "the action's body content_type",
            parameter="content_type",
        )
    return essence


def _with_charset(content_type: str) -> str:
    head, _, rest = content_type.partition(";")
    kept = [p.strip() for p in rest.split(";") if p.strip() and not _is_charset(p)]
    return "; ".join([head.strip(), *kept, "charset=utf-8"])


def _is_charset(parameter: str) -> bool:
    return parameter.strip().lower().startswith("charset=")


def _is_json(essence: str) -> bool:
    return essence in ("application/json", "text/json") or essence.endswith("+json")


def _is_xml(essence: str) -> bool:
    return essence in ("application/xml", "text/xml") or essence.endswith("+xml")


def _is_binary(essence: str) -> bool:
    return essence in _BINARY_TYPES or essence.startswith(_BINARY_PREFIXES)


def _is_textual(essence: str) -> bool:
    return (
        essence.startswith("text/")
        or _is_json(essence)
        or _is_xml(essence)
        or essence == "application/x-www-form-urlencoded"
    )


def _schema_is_binary(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    return schema.get("format") == "binary" or schema.get("contentEncoding") == "base64"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _utf8(text: str, argument: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ArgumentError(
            f"argument {argument!r} contains a lone surrogate ({error.object[error.start]!r}); "
            "send valid Unicode text",
            parameter=argument,
        ) from None


def _json(value: Any, argument: str) -> bytes:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise ArgumentError(
            f"argument {argument!r} contains NaN or an infinity, which JSON cannot carry; "
            "send finite numbers (or null)",
            parameter=argument,
        ) from None
    except TypeError as error:
        raise ArgumentError(
            f"argument {argument!r} cannot be written as JSON ({echo(str(error), 80)}); use "
            "strings, numbers, booleans, arrays and objects",
            parameter=argument,
        ) from None
    return _utf8(text, argument)


def _base64(value: Any, what: str, argument: str) -> bytes:
    if not isinstance(value, str):
        raise ArgumentError(
            f"{what} is binary: send its bytes as base64 text, not {_kind(value)}",
            parameter=argument,
        )
    text = "".join(value.split())
    text += "=" * (-len(text) % 4 if len(text) % 4 != 1 else 0)
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ArgumentError(
            f"{what} is not valid base64 ({echo(value, 40)}); encode the bytes with standard "
            "base64 (A-Z a-z 0-9 + /, = padding)",
            parameter=argument,
        ) from None


def _object(value: Any, argument: str, essence: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise ArgumentError(
            f"argument {argument!r} must be an object of fields (the body is {essence}), "
            f"not {_kind(value)}",
            parameter=argument,
        )
    return value


def _encoding_type(encoding: Mapping[str, Any]) -> str | None:
    """The essence of an encoding object's ``contentType`` (the first of a list)."""
    declared = encoding.get("contentType")
    if not isinstance(declared, str) or not declared.strip():
        return None
    first = declared.split(",")[0].strip()
    return first or None


def _form(body: BodySpec, value: Any) -> bytes:
    """An application/x-www-form-urlencoded body."""
    argument = body.argument
    fields = _object(value, argument, "application/x-www-form-urlencoded")
    pairs: list[tuple[str, str]] = []
    for key, item in fields.items():
        if item is None:
            continue
        name = str(key)
        encoding = body.encoding.get(name) or {}
        styled = any(k in encoding for k in ("style", "explode", "allowReserved"))
        declared = _encoding_type(encoding)
        if styled or (declared is None and not isinstance(item, Mapping)):
            style = encoding.get("style", "form")
            if style not in QUERY_STYLES:
                raise ConfigError(
                    f"body property {name!r} has style {style!r}; use one of "
                    f"{', '.join(QUERY_STYLES)}",
                    parameter=name,
                )
            explode = encoding.get("explode")
            pairs.extend(
                query_pairs(
                    name,
                    item,
                    style=style,
                    explode=explode if isinstance(explode, bool) else None,
                    allow_reserved=encoding.get("allowReserved") is True,
                    argument=argument,
                )
            )
            continue
        declared_essence = _media_type(declared) if declared else "application/json"
        if _is_json(declared_essence):
            text = _json(item, argument).decode("utf-8")
        else:
            text = parameter_text(item, argument=argument)
        pairs.extend(query_pairs(name, text, argument=argument))
    return "&".join(f"{name}={text}" for name, text in pairs).encode("ascii")


def _quote_name(name: str) -> str:
    return "".join(_NAME_ESCAPES.get(char, char) for char in name)


def _multipart(body: BodySpec, value: Any) -> tuple[bytes, str]:
    """A multipart/form-data body and its Content-Type (with the boundary)."""
    argument = body.argument
    fields = _object(value, argument, "multipart/form-data")
    properties = body.schema.get("properties") if isinstance(body.schema, Mapping) else None
    if not isinstance(properties, Mapping):
        properties = {}
    parts: list[bytes] = []
    for key, item in fields.items():
        if item is None:
            continue
        name = str(key)
        encoding = body.encoding.get(name) or {}
        schema = properties.get(name)
        schema = schema if isinstance(schema, Mapping) else {}
        if isinstance(item, list | tuple):
            items_schema = schema.get("items")
            element_schema = items_schema if isinstance(items_schema, Mapping) else {}
            parts.extend(
                _part(name, element, element_schema, encoding, argument)
                for element in item
                if element is not None
            )
        else:
            parts.append(_part(name, item, schema, encoding, argument))
    while True:
        boundary = secrets.token_hex(16)
        marker = b"--" + boundary.encode("ascii")
        if not any(marker in part for part in parts):
            break
    chunks: list[bytes] = []
    for part in parts:
        chunks.extend((marker, b"\r\n", part, b"\r\n"))
    chunks.extend((marker, b"--\r\n"))
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


def _part(
    name: str, value: Any, schema: Mapping[str, Any], encoding: Mapping[str, Any], argument: str
) -> bytes:
    """One part: its header lines, a blank line, its content."""
    declared = _encoding_type(encoding)
    declared_essence = _media_type(declared) if declared else None
    disposition = f'Content-Disposition: form-data; name="{_quote_name(name)}"'
    headers: list[str]
    if _schema_is_binary(schema) or (
        declared_essence is not None and not _is_textual(declared_essence)
    ):
        content = _base64(value, f"property {echo(name, 60)} of argument {argument!r}", argument)
        file_type = declared if declared and "*" not in declared else "application/octet-stream"
        headers = [f'{disposition}; filename="{_quote_name(name)}"', f"Content-Type: {file_type}"]
    elif declared_essence is not None and _is_xml(declared_essence) and isinstance(value, Mapping):
        content = _xml_document(name, value, argument)
        headers = [disposition, f"Content-Type: {declared}"]
    elif (declared_essence is not None and _is_json(declared_essence)) or (
        declared_essence is None and isinstance(value, Mapping | list | tuple)
    ):
        content = _json(value, argument)
        headers = [disposition, f"Content-Type: {declared or 'application/json'}"]
    else:
        content = _utf8(parameter_text(value, argument=argument), argument)
        headers = [disposition] if declared is None else [disposition, f"Content-Type: {declared}"]
    return _utf8("\r\n".join(headers), argument) + b"\r\n\r\n" + content


def _xml(body: BodySpec, value: Any) -> bytes:
    """An XML body: an object converted, or a string of XML sent as it is."""
    argument = body.argument
    if isinstance(value, str) and body.schema.get("type") == "string":
        from xml.etree import ElementTree

        try:
            ElementTree.fromstring(value)
        except (ElementTree.ParseError, ValueError) as error:
            raise ArgumentError(
                f"argument {argument!r} is not well-formed XML ({echo(str(error), 80)}); "
                "send a single well-formed XML document",
                parameter=argument,
            ) from None
        return _utf8(value, argument)
    if not isinstance(value, Mapping):
        raise ArgumentError(
            f"argument {argument!r} must be an object (it is sent as XML: keys become "
            f"elements), not {_kind(value)}",
            parameter=argument,
        )
    root = body.xml_root or "root"
    if not _valid_xml_name(root):
        raise ConfigError(
            f"xml_root {root!r} is not an XML element name; use letters, digits, '_', '-' "
            "and '.', starting with a letter or '_' (not 'xml')",
            parameter="xml_root",
        )
    return _xml_document(root, value, argument)


def _valid_xml_name(name: str) -> bool:
    return bool(_XML_NAME.match(name)) and not name.lower().startswith("xml")


def _xml_document(root_name: str, value: Mapping[Any, Any], argument: str) -> bytes:
    from xml.etree import ElementTree

    if not _valid_xml_name(root_name):
        raise ArgumentError(
            f"argument {argument!r}: {echo(root_name, 60)} cannot be an XML element name; "
            "use letters, digits, '_', '-' and '.', starting with a letter or '_' (not 'xml')",
            parameter=argument,
        )
    root = ElementTree.Element(root_name)
    _xml_fill(root, value, argument)
    document: bytes = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    return document


def _xml_fill(element: Element, value: Mapping[Any, Any], argument: str) -> None:
    from xml.etree import ElementTree

    for key, item in value.items():
        tag = str(key)
        if not _valid_xml_name(tag):
            raise ArgumentError(
                f"argument {argument!r}: key {echo(tag, 60)} cannot be an XML element name; "
                "use letters, digits, '_', '-' and '.', starting with a letter or '_' "
                "(not 'xml')",
                parameter=argument,
            )
        for entry in item if isinstance(item, list | tuple) else [item]:
            if isinstance(entry, list | tuple):
                raise ArgumentError(
                    f"argument {argument!r}: key {echo(tag, 60)} holds an array inside an "
                    "array, which XML cannot express; wrap the inner arrays in objects",
                    parameter=argument,
                )
            child = ElementTree.SubElement(element, tag)
            if isinstance(entry, Mapping):
                _xml_fill(child, entry, argument)
            elif entry is not None:
                text = parameter_text(entry, argument=argument)
                bad = _XML_ILLEGAL.search(text)
                if bad is not None:
                    raise ArgumentError(
                        f"argument {argument!r}: the value of {echo(tag, 60)} contains "
                        f"{bad.group()!r}, which XML cannot carry; remove that character",
                        parameter=argument,
                    )
                child.text = text
