"""A stored tool instance as ``host.instances`` returns it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from expediter.core.ledger.records import iso

__all__ = ["MASK", "StoredInstance"]

#: How a secret field's value is shown: never the value itself.
MASK = "***"


@attrs.frozen(kw_only=True)
class StoredInstance:
    """A configured instance of a tool, owned by a user (or shared: ``owner_id`` None)."""

    id: str
    name: str
    tool: str
    owner_id: str | None
    enabled: bool
    #: The plain (not secret) configuration fields.
    config: Mapping[str, Any]
    #: The names of the secret fields it holds (their values are sealed).
    secret_fields: tuple[str, ...] = ()
    #: The secret values, only when asked for with ``decrypt=True``.
    secrets: Mapping[str, Any] | None = attrs.field(default=None, repr=False)
    #: Per-action overrides: ``{action: {"active", "require_approval", "fixed"}}``.
    actions: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    created_at: float
    updated_at: float
    #: Raised by every change.
    revision: int = 1

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``instances ls``: secret fields as ``"***"`` unless decrypted."""
        config = dict(self.config)
        for name in self.secret_fields:
            config[name] = MASK if self.secrets is None else self.secrets.get(name)
        return {
            "id": self.id,
            "name": self.name,
            "tool": self.tool,
            "owner_id": self.owner_id,
            "enabled": self.enabled,
            "config": config,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "secret_fields": list(self.secret_fields),
            "actions": {name: dict(value) for name, value in self.actions.items()},
            "revision": self.revision,
        }
