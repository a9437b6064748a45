"""The records an import produces: the security schemes, and the imported specification."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from expediter_http.actions import HttpAction

__all__ = ["ImportedSpec", "SecurityScheme"]


@attrs.frozen
class SecurityScheme:
    """A security scheme the ``http`` tool supports; its secret is ``credentials[name]``."""

    #: The scheme's key in the document, sanitized to ``[A-Za-z0-9_]``.
    name: str
    type: Literal["api_key", "bearer", "basic"]
    #: Where an API key goes (``api_key`` only).
    location: Literal["header", "query", "cookie"] | None = None
    #: The header, query or cookie name an API key is sent as (``api_key`` only).
    parameter: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stored form (an item of the configuration's ``security``)."""
        data: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.type == "api_key":
            data["in"] = self.location
            data["parameter"] = self.parameter
        return data


@attrs.frozen
class ImportedSpec:
    """What an OpenAPI document imports as: an ``http`` instance's configuration, and what
    could not be imported."""

    #: The URL the actions' paths are appended to (None when the document names none).
    base_url: str | None
    actions: tuple[HttpAction, ...] = ()
    security_schemes: tuple[SecurityScheme, ...] = ()
    #: Every construct not imported, or imported differently from what the document says.
    problems: tuple[str, ...] = ()
    #: The document's ``info.title``.
    title: str | None = None

    def config(self) -> dict[str, Any]:
        """The ``http`` instance configuration (no secrets): base_url, actions, security."""
        config: dict[str, Any] = {}
        if self.base_url:
            config["base_url"] = self.base_url
        if self.actions:
            config["actions"] = [action.to_dict() for action in self.actions]
        if self.security_schemes:
            config["security"] = [scheme.to_dict() for scheme in self.security_schemes]
        return config
