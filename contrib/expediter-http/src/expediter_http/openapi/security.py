"""Security schemes: the ones the ``http`` tool supports, and which of them each operation uses.

Supported: API keys (header, query or cookie), HTTP bearer and HTTP basic (Swagger 2.0's
``basic``). OAuth2, OpenID Connect, mutual TLS and other HTTP schemes are reported and left out,
and so is an API key sent as a header the request frames or routes itself (``Host``,
``Cookie``, ``Transfer-Encoding`` ...: ``request.FORBIDDEN_HEADERS``), which the tool refuses.
The secret of a scheme is stored later in the instance's ``credentials`` under the scheme's
``name``: the key or token text, or ``"user:password"`` for basic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from expediter.core.records.text import echo
from expediter_http.openapi.records import SecurityScheme
from expediter_http.openapi.schemas import References
from expediter_http.request import FORBIDDEN_HEADERS

__all__ = ["Schemes"]

_NAME_LIMIT = 64


def _safe_name(key: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", key)[:_NAME_LIMIT] or "scheme"
    candidate, number = base, 2
    while candidate in taken:
        suffix = f"_{number}"
        candidate = base[: _NAME_LIMIT - len(suffix)] + suffix
        number += 1
    taken.add(candidate)
    return candidate


def _frames(read: tuple[str, str | None, str | None]) -> bool:
    """Whether a supported scheme's API key goes in a header the request sets itself."""
    _, location, parameter = read
    return location == "header" and parameter is not None and parameter.lower() in FORBIDDEN_HEADERS


def _framing(where: str, header: str) -> str:
    """The problem of a scheme whose API key is a header the request sets itself."""
    text = (
        f"{where} sends its key as header {echo(header, 60)}, which the request frames or "
        "routes itself and the http tool never sends; it is left out, and its operations get "
        "no credentials from it"
    )
    if header.lower() == "cookie":
        text += " (an API key sent as a cookie is declared with in: cookie)"
    return text


class Schemes:
    """The security schemes one document declares (``securitySchemes`` or
    ``securityDefinitions``), read once."""

    def __init__(
        self,
        document: Mapping[str, Any],
        refs: References,
        report: Callable[[str], None],
        *,
        swagger: bool,
    ) -> None:
        self.doc = document
        self.report = report
        #: The supported schemes by their key in the document.
        self.supported: dict[str, SecurityScheme] = {}
        #: The unsupported ones by key: what they are.
        self.unsupported: dict[str, str] = {}
        if swagger:
            found = document.get("securityDefinitions")
        else:
            components = document.get("components")
            found = components.get("securitySchemes") if isinstance(components, Mapping) else None
        taken: set[str] = set()
        for key, raw in found.items() if isinstance(found, Mapping) else ():
            where = f"security scheme {echo(key, 60)}"
            scheme = refs.deref(raw, where)
            if not isinstance(scheme, Mapping):
                report(f"{where} cannot be read; its operations get no credentials from it")
                self.unsupported[key] = "unreadable"
                continue
            read = self._read(scheme, swagger=swagger)
            if not isinstance(read, str) and _frames(read):
                self.unsupported[key] = "framing header"
                report(_framing(where, str(read[2])))
                continue
            if isinstance(read, str):
                self.unsupported[key] = read
                report(
                    f"{where} ({echo(read, 40)}) is not supported (api keys, http bearer and "
                    "basic are); its operations get no credentials from it: configure headers "
                    "by hand (secret_headers) if the API needs them"
                )
            else:
                kind, location, parameter = read
                self.supported[key] = SecurityScheme(
                    _safe_name(key, taken),
                    kind,  # type: ignore[arg-type]
                    location,  # type: ignore[arg-type]
                    parameter,
                )

    @staticmethod
    def _read(
        scheme: Mapping[str, Any], *, swagger: bool
    ) -> tuple[str, str | None, str | None] | str:
        """``(type, in, parameter)`` of a supported scheme, else what it is."""
        kind = scheme.get("type")
        if kind == "apiKey":
            location, parameter = scheme.get("in"), scheme.get("name")
            if (
                location in ("header", "query", "cookie")
                and isinstance(parameter, str)
                and parameter
            ):
                return "api_key", location, parameter
            return f"apiKey in {location!r} named {parameter!r}"
        if kind == "http":
            http_scheme = str(scheme.get("scheme") or "").lower()
            if http_scheme in ("bearer", "basic"):
                return http_scheme, None, None
            return f"http {http_scheme or '(no scheme)'}"
        if kind == "basic" and swagger:
            return "basic", None, None
        return str(kind)

    def names(self) -> tuple[SecurityScheme, ...]:
        """The supported schemes, in the document's order."""
        return tuple(self.supported.values())

    def of(self, operation: Mapping[str, Any], where: str) -> tuple[str, ...] | None:
        """The supported schemes an operation lists (or the document does), by name; None when
        neither says, ``()`` when it asks for none (or only for unsupported ones)."""
        requirements = operation.get("security", self.doc.get("security"))
        if requirements is None:
            return None
        if not isinstance(requirements, list):
            self.report(f"{where}: security is not a list; every configured scheme applies")
            return None
        names: list[str] = []
        for requirement in requirements:
            for key in requirement if isinstance(requirement, Mapping) else ():
                if key in self.supported:
                    names.append(self.supported[key].name)
                elif key not in self.unsupported:
                    self.report(f"{where}: security names an undeclared scheme {echo(key, 60)}")
        return tuple(dict.fromkeys(names))
