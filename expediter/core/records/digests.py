"""Digests of configurations: what tells two tool instances apart."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["config_key"]


def config_key(config: Mapping[str, Any] | None) -> str:
    """A digest of an instance's configuration (secrets included, never stored): instances
    with different configurations are different instances."""
    if not config:
        return ""
    try:
        text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(sorted(config.items(), key=lambda item: str(item[0])))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
