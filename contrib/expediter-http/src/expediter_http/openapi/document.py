"""Reading an OpenAPI document: a file (or its text), JSON or YAML, as plain JSON data.

Whatever the parser returns is copied into JSON data (string keys, dates as ISO text), so the
configuration the import writes can be stored as JSON. A document too large, too deeply nested,
or containing itself (a YAML alias cycle) is a ValueError, never a crash.
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
    shared, a YAML alias cycle or nesting deeper than MAX_NESTING is a ValueError."""
    return _plain(value, 0, set(), {})


def _plain(value: Any, depth: int, active: set[int], memo: dict[int, Any]) -> Any:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if not isinstance(value, Mapping | list | tuple | set | frozenset):
        return str(value)
    if id(value) in memo:
        return memo[id(value)]
    if id(value) in active:
        raise ValueError("the document contains itself (a YAML alias cycle); remove the cycle")
    if depth >= MAX_NESTING:
        raise ValueError(f"the document nests more than {MAX_NESTING} levels deep")
    active.add(id(value))
    if isinstance(value, Mapping):
        result: Any = {_key(k): _plain(v, depth + 1, active, memo) for k, v in value.items()}
    else:
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        result = [_plain(item, depth + 1, active, memo) for item in items]
    active.discard(id(value))
    memo[id(value)] = result
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
