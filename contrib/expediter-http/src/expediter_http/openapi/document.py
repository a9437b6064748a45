"""Reading an OpenAPI document: a file (or its text), JSON or YAML, as plain JSON data.

Whatever the parser returns is copied into JSON data (string keys, dates as ISO text), so the
configuration the import writes can be stored as JSON. A document too large, too deeply nested,
containing itself (a YAML alias cycle) or whose YAML aliases repeat more than
``MAX_ALIAS_VALUES`` values (an alias bomb: a few hundred bytes that expand to millions of
values once copied) is a ValueError, never a crash.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from expediter.core.records.text import echo, truncate

__all__ = [
    "MAX_ALIAS_VALUES",
    "MAX_DOCUMENT_BYTES",
    "MAX_NESTING",
    "document_version",
    "kind",
    "load_document",
    "plain_data",
]

#: The largest document ``load_document`` reads.
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
#: How deeply a document may nest (deeper ones are refused, not crashed on).
MAX_NESTING = 256
#: How many values a document's shared parts (YAML aliases) may add when expanded, beyond the
#: values written out in it: the schemas' ``TOTAL_NODES``. Every value of the expanded tree
#: counts, a shared part once for each place it appears.
MAX_ALIAS_VALUES = 2_000_000
# A string longer than this is a document's text, never a path.
_PATH_LIMIT = 4096


def load_document(path_or_text: str | os.PathLike[str]) -> dict[str, Any]:
    """Read an OpenAPI document from a file (or from its text): JSON or YAML, as plain JSON data;
    ValueError saying what is wrong when it cannot be read or parsed."""
    text = _read(path_or_text)
    try:
        data = _parse(text)
        if not isinstance(data, Mapping):
            raise ValueError(
                f"an OpenAPI document is an object (a mapping), not {kind(data)}; "
                "check that the file is the document itself"
            )
        plain: dict[str, Any] = plain_data(data)
        return plain
    except (RecursionError, MemoryError):
        raise ValueError(
            f"the document nests too deeply or is too large to read (at most {MAX_NESTING} "
            "levels); check that it is an OpenAPI document"
        ) from None


def _read(path_or_text: str | os.PathLike[str]) -> str:
    if isinstance(path_or_text, str) and (
        "\n" in path_or_text
        or path_or_text.lstrip()[:1] in ("{", "[")
        or len(path_or_text) > _PATH_LIMIT
    ):
        if len(path_or_text) > MAX_DOCUMENT_BYTES:
            raise ValueError(
                f"the document is larger than {MAX_DOCUMENT_BYTES // 2**20} MiB; an OpenAPI "
                "document that large is not imported"
            )
        return path_or_text
    path = Path(path_or_text).expanduser()
    shown = truncate(str(path), 200, "…")
    try:
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            raise ValueError(
                f"{shown} is larger than {MAX_DOCUMENT_BYTES // 2**20} MiB; an OpenAPI document "
                "that large is not imported"
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(
            f"cannot read {shown}: {exc.strerror or type(exc).__name__}; give the path of an "
            "OpenAPI document (JSON or YAML)"
        ) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{shown} is not UTF-8 text; save the document as UTF-8") from None


def _parse(text: str) -> Any:
    json_error: json.JSONDecodeError | None = None
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            json_error = exc  # it may still be YAML ("{a: b}")
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = json_error or exc
        detail = " ".join(str(where).split())
        raise ValueError(
            f"not valid JSON or YAML: {truncate(detail, 300)}; fix the document"
        ) from None


def kind(value: Any) -> str:
    """What a value is, for a message ("a list", "nothing")."""
    return "nothing" if value is None else f"a {type(value).__name__}"


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)  # YAML's `200:` and `true:` keys as JSON would spell them
    return str(key)


def plain_data(value: Any) -> Any:
    """``value`` as JSON data (string keys, dates as ISO text); shared YAML aliases stay
    shared, a YAML alias cycle, nesting deeper than MAX_NESTING or aliases that repeat more
    than MAX_ALIAS_VALUES values (counted as if expanded) is a ValueError."""
    return _Plain().convert(value, 0)


class _Plain:
    """One conversion: the objects met so far and how many values the expanded tree has."""

    def __init__(self) -> None:
        #: Containers being converted (a cycle meets one again).
        self.active: set[int] = set()
        #: Each container converted, by id, and how many values it expands to.
        self.memo: dict[int, tuple[Any, int]] = {}
        #: Values in the expanded tree, and those met for the first time (the written ones).
        self.expanded = 0
        self.written = 0

    def convert(self, value: Any, depth: int) -> Any:
        self.expanded += 1
        if value is None or isinstance(value, str | bool | int):
            self.written += 1
            return value
        if isinstance(value, float):
            self.written += 1
            return value if value == value and abs(value) != float("inf") else str(value)
        if isinstance(value, datetime.date):
            self.written += 1
            return value.isoformat()
        if isinstance(value, bytes):
            self.written += 1
            return base64.b64encode(value).decode("ascii")
        if not isinstance(value, Mapping | list | tuple | set | frozenset):
            self.written += 1
            return str(value)
        if id(value) in self.memo:
            # A shared part again: it costs its whole expanded size, as any copy of it will.
            shared, size = self.memo[id(value)]
            self.expanded += size - 1
            if self.expanded - self.written > MAX_ALIAS_VALUES:
                raise ValueError(
                    f"the document expands to more than {self.written + MAX_ALIAS_VALUES:,} "
                    f"values (YAML aliases?): its aliases repeat more than "
                    f"{MAX_ALIAS_VALUES:,} values; write each shared part out once (a $ref "
                    "to components) instead of repeating it with YAML aliases"
                )
            return shared
        if id(value) in self.active:
            raise ValueError("the document contains itself (a YAML alias cycle); remove the cycle")
        if depth >= MAX_NESTING:
            raise ValueError(f"the document nests more than {MAX_NESTING} levels deep")
        self.written += 1
        before = self.expanded - 1
        self.active.add(id(value))
        if isinstance(value, Mapping):
            result: Any = {_key(k): self.convert(v, depth + 1) for k, v in value.items()}
        else:
            items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
            result = [self.convert(item, depth + 1) for item in items]
        self.active.discard(id(value))
        self.memo[id(value)] = (result, self.expanded - before)
        return result


def document_version(document: Mapping[str, Any]) -> str:
    """``"2.0"``, ``"3.0"`` or ``"3.1"`` (3.2 reads as 3.1)."""
    if "openapi" in document:
        text = str(document["openapi"])
        match = re.match(r"^3\.([0-9]+)(\.|$)", text)
        if match and int(match.group(1)) <= 2:
            return "3.0" if match.group(1) == "0" else "3.1"
        raise ValueError(
            f"OpenAPI version {echo(text, 40)} is not supported; import an OpenAPI 3.0, 3.1 "
            "or Swagger 2.0 document"
        )
    if "swagger" in document:
        text = str(document["swagger"])
        if text in ("2.0", "2"):
            return "2.0"
        raise ValueError(
            f"Swagger version {echo(text, 40)} is not supported; convert it to OpenAPI 3 "
            "(or Swagger 2.0) first"
        )
    raise ValueError(
        "not an OpenAPI document: it has neither an 'openapi' nor a 'swagger' version field"
    )
