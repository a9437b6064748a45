"""The HTTP request an action's arguments describe: URL, headers, cookies and body (no I/O).

Parameters are serialized as OpenAPI styles them (RFC 6570 where OpenAPI defers to it):

- path: ``simple`` (default), ``label``, ``matrix``. Every value is percent-encoded with
  nothing left safe, so ``/``, ``?``, ``#``, ``%`` and spaces in a value stay inside their
  segment (``.`` is unreserved and left as it is: ``report.pdf``, ``a..b``). A value made
  only of dots (``.``, ``..``, ``...``; for arrays and objects, any item, key or value) is
  refused: sending it as ``%2E`` runs would not help, since WHATWG URL parsers, nginx and
  many proxies read ``%2E%2E`` as ``..`` and would walk out of the action's path. An empty
  ``simple`` value is refused (``/users/{id}`` would become ``/users/``, another resource),
  and so is any expansion that leaves a segment the template did not have made only of
  ``.`` and ``%2E`` (before any ``;`` path parameter, which Tomcat and Jetty strip).
- query: ``form`` (default, explode true), ``spaceDelimited`` (``%20``), ``pipeDelimited``
  (``%7C``), ``deepObject`` (``name%5Bkey%5D=value``: brackets percent-encoded, which Rack,
  PHP, qs and Spring decode before reading the brackets; nested objects nest the brackets,
  arrays repeat the key). Names and values are percent-encoded (a space is ``%20``), None
  is left out, and the base URL's own query string is kept in front.
- header: ``simple``, sent as text (no percent-encoding); values with control characters or
  non-ASCII text are refused. Header parameters named ``Accept``, ``Content-Type`` or
  ``Authorization`` are ignored, as OpenAPI says (``IGNORED_HEADERS``); ones naming a header
  that frames or routes the request (``FORBIDDEN_HEADERS``: ``Host``, ``Content-Length``,
  ``Cookie`` ...) are a configuration error. The same list is refused in an instance's
  configured headers and as an API key scheme's header (``tool``), and left out by the OpenAPI
  import.
- cookie: ``form`` (explode true), percent-encoded; kept apart in ``PreparedRequest.cookies``
  so an authentication cookie can join them, and folded into one ``Cookie`` header by
  ``PreparedRequest.header_items``.

Scalars: strings as they are, booleans ``true``/``false``, integers (and floats with an
integral value) as digits, other floats as ``repr`` writes them; NaN and infinities are
refused; an array or object nested inside a parameter value is sent as compact JSON.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import attrs

from expediter.core.records.text import echo
from expediter.errors import ArgumentError, ConfigError
from expediter_http.actions import HttpAction, ParameterSpec

__all__ = [
    "FORBIDDEN_HEADERS",
    "HEADER_NAME",
    "IGNORED_HEADERS",
    "QUERY_STYLES",
    "PreparedRequest",
    "build_request",
    "parameter_text",
    "query_pairs",
]

_PLACEHOLDER = re.compile(r"{([^{}]*)}")
#: The OpenAPI styles of query parameters (and of form body properties).
QUERY_STYLES = ("form", "spaceDelimited", "pipeDelimited", "deepObject")
#: RFC 9110 token: what a header (and a cookie) name may be.
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: Template text that may stay as written in a path (pre-encoded ``%XX`` included).
_PATH_LITERAL_SAFE = "/:@!$&'()*+,;=%"
#: Reserved characters ``allowReserved`` leaves unencoded; ``& = + # %`` stay encoded so the
#: query (or form body) still parses into the same pairs.
_RESERVED_SAFE = ":/?@!$'()*,;[]"
#: Header parameters OpenAPI says to ignore (lower case).
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
#: Headers that frame, route or carry credentials for the request (lower case): never the
#: model's to set, nor the configuration's. ``Cookie`` is here although it is a credential too:
#: the request folds its cookie parameters and cookie API keys into one ``Cookie`` itself, so a
#: cookie credential is an API key scheme with ``in: cookie``. ``Proxy-Authorization`` too: the
#: pack dials the API directly, so it would hand a proxy's credential to the API's server.
FORBIDDEN_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "cookie",
        "proxy-authorization",
        "proxy-connection",
        "expect",
    }
)
_MAX_SAFE_INTEGER = 2**53


@attrs.frozen
class PreparedRequest:
    """An HTTP request ready to send: what ``build_request`` makes of an action's arguments."""

    #: The upper-case method.
    method: str
    #: The absolute URL: base URL, expanded path, query string.
    url: str
    #: Header parameters, in declaration order (no Content-Type, no Cookie).
    headers: list[tuple[str, str]] = attrs.field(factory=list)
    #: Cookie parameters, names and values already percent-encoded (see ``header_items``).
    cookies: list[tuple[str, str]] = attrs.field(factory=list)
    #: The encoded body, or None for a request without one.
    content: bytes | None = None
    #: The body's full Content-Type header value (None without a body).
    content_type: str | None = None

    def header_items(self) -> list[tuple[str, str]]:
        """Every header to send: the parameters', Content-Type, and one folded Cookie header."""
        items = list(self.headers)
        if self.content_type is not None:
            items.append(("Content-Type", self.content_type))
        if self.cookies:
            items.append(("Cookie", "; ".join(f"{name}={value}" for name, value in self.cookies)))
        return items


def build_request(
    action: HttpAction, arguments: Mapping[str, Any], *, base_url: str
) -> PreparedRequest:
    """The request ``action`` makes with the model's ``arguments`` (fixed values merged in)."""
    from expediter_http.bodies import encode_body  # bodies builds on this module's serializers

    path_values: dict[str, str] = {}
    query: list[tuple[str, str]] = []
    headers: list[tuple[str, str]] = []
    cookies: list[tuple[str, str]] = []
    for spec in action.parameters:
        value = arguments.get(spec.argument)
        if value is None:
            if spec.required or spec.location == "path":
                raise ArgumentError(
                    f"{action.name}: argument {spec.argument!r} ({spec.location} parameter "
                    f"{spec.name!r}) is required; supply a value for it",
                    parameter=spec.argument,
                )
            continue
        _check_json(value, spec.argument)
        try:
            if spec.location == "path":
                path_values[spec.name] = _path_value(spec, value)
            elif spec.location == "query":
                query.extend(_query(action.name, spec, value))
            elif spec.location == "header":
                header = _header(action.name, spec, value)
                if header is not None:
                    headers.append(header)
            else:
                cookies.extend(_cookie_pairs(spec, value))
        except UnicodeEncodeError:
            raise _surrogate(spec.argument) from None
    content: bytes | None = None
    content_type: str | None = None
    if action.body is not None:
        body_value = arguments.get(action.body.argument)
        if body_value is not None:
            content, content_type = encode_body(action.body, body_value)
        elif action.body.required:
            raise ArgumentError(
                f"{action.name}: argument {action.body.argument!r} (the request body) is "
                "required; supply it",
                parameter=action.body.argument,
            )
    url = _url(base_url, _expand_path(action, path_values), query)
    return PreparedRequest(
        method=action.method,
        url=url,
        headers=headers,
        cookies=cookies,
        content=content,
        content_type=content_type,
    )


def _surrogate(argument: str) -> ArgumentError:
    return ArgumentError(
        f"argument {argument!r} contains a lone surrogate, which cannot be sent; "
        "send valid Unicode text",
        parameter=argument,
    )


def _query(action: str, spec: ParameterSpec, value: Any) -> list[tuple[str, str]]:
    style = spec.style or "form"
    if style not in QUERY_STYLES:
        raise ConfigError(
            f"{action}: query parameter {spec.name!r} has style {style!r}; use "
            "form, spaceDelimited, pipeDelimited or deepObject",
            parameter=spec.name,
        )
    return query_pairs(spec.name, value, style=style, explode=spec.explode, argument=spec.argument)


def parameter_text(value: Any, *, argument: str) -> str:
    """A scalar as parameter text: booleans ``true``/``false``, numbers as JSON writes them,
    strings as they are; an array or object becomes compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ArgumentError(
                f"argument {argument!r}: {value!r} cannot be sent; use a finite number",
                parameter=argument,
            )
        if value.is_integer() and abs(value) < _MAX_SAFE_INTEGER:
            return str(int(value))
        return repr(value)
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ArgumentError(
            f"argument {argument!r}: cannot write {type(value).__name__} values; "
            "use strings, numbers, booleans, arrays and objects",
            parameter=argument,
        ) from error


def query_pairs(
    name: str,
    value: Any,
    *,
    style: str = "form",
    explode: bool | None = None,
    allow_reserved: bool = False,
    argument: str,
) -> list[tuple[str, str]]:
    """``name=value`` as percent-encoded query (or form body) pairs in an OpenAPI style:
    ``form``, ``spaceDelimited``, ``pipeDelimited`` or ``deepObject``."""
    safe = _RESERVED_SAFE if allow_reserved else ""

    def enc(text: str) -> str:
        try:
            return quote(text, safe=safe)
        except UnicodeEncodeError:
            raise _surrogate(argument) from None

    if value is None:
        return []
    if style == "deepObject" and isinstance(value, Mapping):
        return _deep_pairs(enc(name), value, enc, argument)
    delimiter = {"spaceDelimited": "%20", "pipeDelimited": "%7C"}.get(style)
    if explode is None:
        explode = style in ("form", "deepObject")
    if isinstance(value, list | tuple):
        texts = [enc(parameter_text(item, argument=argument)) for item in value if item is not None]
        if explode:
            return [(enc(name), text) for text in texts]
        return [(enc(name), (delimiter or ",").join(texts))]
    if isinstance(value, Mapping):
        items = _object_items(value, argument)
        if explode:
            return [(enc(key), enc(text)) for key, text in items]
        flat = [enc(part) for item in items for part in item]
        return [(enc(name), (delimiter or ",").join(flat))]
    return [(enc(name), enc(parameter_text(value, argument=argument)))]


def _deep_pairs(
    prefix: str, value: Mapping[Any, Any], enc: Callable[[str], str], argument: str
) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for key, item in value.items():
        if item is None:
            continue
        name = f"{prefix}%5B{enc(str(key))}%5D"
        if isinstance(item, Mapping):
            pairs.extend(_deep_pairs(name, item, enc, argument))
        elif isinstance(item, list | tuple):
            pairs.extend(
                (name, enc(parameter_text(element, argument=argument)))
                for element in item
                if element is not None
            )
        else:
            pairs.append((name, enc(parameter_text(item, argument=argument))))
    return pairs


def _object_items(value: Mapping[Any, Any], argument: str) -> list[tuple[str, str]]:
    return [
        (str(key), parameter_text(item, argument=argument))
        for key, item in value.items()
        if item is not None
    ]


def _check_json(value: Any, argument: str) -> None:
    """Refuse values JSON arguments cannot hold before they reach a serializer."""
    if isinstance(value, str | bool | int | float) or value is None:
        return
    if isinstance(value, list | tuple | Mapping):
        return
    raise ArgumentError(
        f"argument {argument!r}: cannot send a {type(value).__name__}; "
        "use a string, number, boolean, array or object",
        parameter=argument,
    )


#: A path segment a server may resolve as ``.`` or ``..``: dots and ``%2E`` only, before any
#: ``;`` path parameter (Tomcat and Jetty drop ``;...`` before resolving dot-segments).
_DOT_SEGMENT = re.compile(r"(?:\.|%2[eE])+(?:;.*)?", re.DOTALL)


def _path_quote(text: str, spec: ParameterSpec) -> str:
    """One path value (or item, key) percent-encoded; a value made only of dots is refused."""
    if text and text.strip(".") == "":
        raise ArgumentError(
            f"argument {spec.argument!r} (path parameter {spec.name!r}) is made only of "
            "dots: a path value made only of dots would leave the action's path; supply the "
            "resource's real identifier (one with characters other than '.')",
            parameter=spec.argument,
        )
    return quote(text, safe="")


def _path_value(spec: ParameterSpec, value: Any) -> str:
    """The expansion of one path parameter, already percent-encoded."""
    style = spec.style or "simple"
    explode = bool(spec.explode)
    argument = spec.argument
    if isinstance(value, list | tuple):
        texts = [
            _path_quote(parameter_text(v, argument=argument), spec) for v in value if v is not None
        ]
        pairs: list[tuple[str, str]] | None = None
    elif isinstance(value, Mapping):
        texts = []
        pairs = [
            (_path_quote(k, spec), _path_quote(v, spec)) for k, v in _object_items(value, argument)
        ]
    else:
        texts = [_path_quote(parameter_text(value, argument=argument), spec)]
        pairs = None
        if style == "matrix":
            name = quote(spec.name, safe="")
            return f";{name}={texts[0]}" if texts[0] else f";{name}"
    if style == "simple":
        if pairs is None:
            expanded = ",".join(texts)
        elif explode:
            expanded = ",".join(f"{k}={v}" for k, v in pairs)
        else:
            expanded = ",".join(part for pair in pairs for part in pair)
        if not expanded:
            raise ArgumentError(
                f"argument {argument!r} (path parameter {spec.name!r}) is empty; an empty "
                "path segment would address another resource, so supply a value",
                parameter=argument,
            )
        return expanded
    if style == "label":
        if pairs is None:
            return "." + ("." if explode else ",").join(texts)
        if explode:
            return "." + ".".join(f"{k}={v}" for k, v in pairs)
        return "." + ",".join(part for pair in pairs for part in pair)
    if style == "matrix":
        name = quote(spec.name, safe="")
        if pairs is None:
            if explode:
                return "".join(f";{name}={text}" for text in texts) or f";{name}"
            return (f";{name}=" + ",".join(texts)) if texts else f";{name}"
        if explode:
            return "".join(f";{k}={v}" for k, v in pairs) or f";{name}"
        flat = ",".join(part for pair in pairs for part in pair)
        return f";{name}={flat}" if flat else f";{name}"
    raise ConfigError(
        f"path parameter {spec.name!r} has style {style!r}; use simple, label or matrix",
        parameter=spec.name,
    )


def _expand_path(action: HttpAction, values: Mapping[str, str]) -> str:
    """The action's path with its placeholders replaced (literal text encoded where unsafe)."""
    template = action.path
    pieces: list[str] = []
    #: Where each placeholder's expansion lies in the path, and its parameter's name.
    spans: list[tuple[int, int, str]] = []
    length = 0
    position = 0
    for match in _PLACEHOLDER.finditer(template):
        pieces.append(quote(template[position : match.start()], safe=_PATH_LITERAL_SAFE))
        length += len(pieces[-1])
        name = match.group(1)
        if name not in values:
            raise ConfigError(
                f"{action.name}: path placeholder {{{name}}} has no path parameter; add one "
                "to the action's parameters",
                parameter=name,
            )
        pieces.append(values[name])
        spans.append((length, length + len(values[name]), name))
        length += len(values[name])
        position = match.end()
    pieces.append(quote(template[position:], safe=_PATH_LITERAL_SAFE))
    path = "".join(pieces)
    start = 0
    for segment in path.split("/"):
        end = start + len(segment)
        if _DOT_SEGMENT.fullmatch(segment):
            # Only a segment a value helped make counts; the template's own text is the
            # action author's.
            names = [name for first, last, name in spans if first <= end and last >= start]
            if names:
                argument = next(
                    (
                        p.argument
                        for p in action.parameters
                        if p.location == "path" and p.name == names[0]
                    ),
                    names[0],
                )
                raise ArgumentError(
                    f"{action.name}: argument {argument!r} makes the path segment "
                    f"{echo(segment, 60)} in {echo(path, 120)}, which a server may read as "
                    "'.' or '..'; a path value made only of dots would leave the action's "
                    "path, so supply a value with other characters",
                    parameter=argument,
                )
        start = end + 1
    return path


def _url(base_url: str, path: str, query: list[tuple[str, str]]) -> str:
    """``base_url`` joined with ``path`` (one slash between) and ``query`` appended."""
    parts = urlsplit(base_url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"base_url {echo(base_url, 120)} must be an absolute http(s) URL such as "
            "https://api.example.com/v1",
            parameter="base_url",
        )
    # One slash at the joint whatever either side has, so the template never becomes a
    # network-path reference ("//host/...").
    full_path = parts.path.rstrip("/") + "/" + path.lstrip("/") if path else parts.path or "/"
    own = "&".join(f"{name}={value}" for name, value in query)
    query_text = "&".join(text for text in (parts.query, own) if text)
    url = f"{parts.scheme}://{parts.netloc}{full_path}"
    return f"{url}?{query_text}" if query_text else url


def _header(action: str, spec: ParameterSpec, value: Any) -> tuple[str, str] | None:
    """One header parameter (simple style), or None for one OpenAPI says to ignore."""
    if not HEADER_NAME.fullmatch(spec.name):
        raise ConfigError(
            f"{action}: header parameter name {spec.name!r} is not a valid HTTP header name "
            "(letters, digits and !#$%&'*+.^_`|~-)",
            parameter=spec.name,
        )
    lowered = spec.name.lower()
    if lowered in IGNORED_HEADERS:
        return None
    if lowered in FORBIDDEN_HEADERS:
        raise ConfigError(
            f"{action}: header parameter {spec.name!r} would set a header the request itself "
            "controls; remove it from the action",
            parameter=spec.name,
        )
    argument = spec.argument
    if isinstance(value, list | tuple):
        text = ",".join(parameter_text(v, argument=argument) for v in value if v is not None)
    elif isinstance(value, Mapping):
        items = _object_items(value, argument)
        if spec.explode:
            text = ",".join(f"{k}={v}" for k, v in items)
        else:
            text = ",".join(part for item in items for part in item)
    else:
        text = parameter_text(value, argument=argument)
    bad = next((c for c in text if (ord(c) < 32 and c != "\t") or ord(c) >= 127), None)
    if bad is not None:
        raise ArgumentError(
            f"argument {argument!r} (header {spec.name!r}) contains {bad!r}; header values "
            "must be printable ASCII without line breaks, so remove or encode that character",
            parameter=argument,
        )
    return spec.name, text


def _cookie_pairs(spec: ParameterSpec, value: Any) -> list[tuple[str, str]]:
    """One cookie parameter (form style) as percent-encoded name/value pairs."""
    explode = True if spec.explode is None else spec.explode
    argument = spec.argument
    name = quote(spec.name, safe="")
    if isinstance(value, list | tuple):
        texts = [
            quote(parameter_text(v, argument=argument), safe="") for v in value if v is not None
        ]
        if explode:
            return [(name, text) for text in texts]
        return [(name, ",".join(texts))]
    if isinstance(value, Mapping):
        items = [(quote(k, safe=""), quote(v, safe="")) for k, v in _object_items(value, argument)]
        if explode:
            return items
        return [(name, ",".join(part for item in items for part in item))]
    return [(name, quote(parameter_text(value, argument=argument), safe=""))]
