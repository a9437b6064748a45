"""Redaction: argument values under secret-looking names are hidden in events and the ledger."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["redact"]

_SECRET_WORDS = frozenset(
    {"password", "passwd", "passphrase", "secret", "token", "credential", "credentials"}
    | {"authorization", "authorisation", "apikey", "cookie", "pwd"}
)
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key")})
_NAME_PARTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


@functools.lru_cache(maxsize=4096)
def _is_secret(name: str) -> bool:
    """``api_key``, ``githubToken``, ``X-Auth-Password``: yes; ``max_tokens``, ``passage``: no."""
    parts = [part.lower() for part in _NAME_PARTS.findall(name)]
    if any(part in _SECRET_WORDS for part in parts):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))


_SCALARS = (str, int, float, bool, type(None))


_SCALAR_TYPES = frozenset(_SCALARS)


@functools.lru_cache(maxsize=4096)
def _any_secret(keys: tuple[Any, ...]) -> bool:
    return any(type(key) is str and _is_secret(key) for key in keys)


def redact(value: Any) -> Any:
    """Arguments as recorded: values under secret-looking names (api_key, token...) hidden."""
    if type(value) is dict or isinstance(value, Mapping):
        if (
            type(value) is dict
            and _SCALAR_TYPES.issuperset(map(type, value.values()))
            and not _any_secret(tuple(value))
        ):
            return value  # nothing to hide and nothing nested: no copy (once per call)
        return {
            key: "***" if isinstance(key, str) and _is_secret(key) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value
