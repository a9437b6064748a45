"""An MCP tool result as an expediter result.

A call's result is ``{"content": [...], "structured_content": ...}`` (plus ``"is_error": true``
when the server says the call failed, which the pack's ``normalize_result`` hook turns into
an error status). Content blocks become plain JSON: text; images and audio as data URLs when
they fit under the instance's cap (else a note of their type and size); resource links and
embedded resources by URI, with an embedded resource's text.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

import expediter

__all__ = ["MAX_ERROR_TEXT", "content_block", "error_result", "tool_result"]

#: Characters of a failed call's text that become its error message.
MAX_ERROR_TEXT = 2000
#: A media type without parameters: ``type/subtype`` of token characters.
_MEDIA_TYPE = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
)


def _size(data: str) -> int:
    """Decoded bytes of base64 text (without decoding it)."""
    return len(data) * 3 // 4


def _media(kind: str, block: Any, max_bytes: int) -> dict[str, Any]:
    mime = str(getattr(block, "mime_type", None) or "")
    data = getattr(block, "data", None)
    if not _MEDIA_TYPE.fullmatch(mime) or not mime.lower().startswith(f"{kind}/"):
        # Only a plain image/... or audio/... type goes into a data URL (no parameters, no
        # other type a viewer would run, such as text/html).
        return {"type": kind, "mime_type": mime[:100], "omitted": "not an image or audio type"}
    item: dict[str, Any] = {"type": kind, "mime_type": mime}
    if not isinstance(data, str):
        item["omitted"] = "no data"
        return item
    size = _size(data)
    if size > max_bytes:
        item["omitted"] = f"{size} bytes, over the {max_bytes}-byte cap"
        return item
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        item["omitted"] = "the data is not base64"
        return item
    item["data_url"] = f"data:{mime};base64,{data}"
    return item


def _resource(block: Any) -> dict[str, Any]:
    resource = getattr(block, "resource", None)
    item: dict[str, Any] = {"type": "resource", "uri": str(getattr(resource, "uri", ""))}
    mime = getattr(resource, "mime_type", None)
    if mime:
        item["mime_type"] = str(mime)
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        item["text"] = text
    else:
        blob = getattr(resource, "blob", None)
        if isinstance(blob, str):
            item["omitted"] = f"{_size(blob)} bytes of binary content"
    return item


def content_block(block: Any, max_bytes: int) -> dict[str, Any]:
    """One MCP content block as JSON."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": str(getattr(block, "text", ""))}
    if kind in ("image", "audio"):
        return _media(str(kind), block, max_bytes)
    if kind == "resource_link":
        item = {"type": "resource_link", "uri": str(getattr(block, "uri", ""))}
        for field in ("name", "title", "description", "mime_type"):
            value = getattr(block, field, None)
            if value:
                item[field] = str(value)
        return item
    if kind == "resource":
        return _resource(block)
    return {"type": str(kind or "unknown"), "omitted": "a content type this client does not read"}


def tool_result(result: Any, max_bytes: int) -> dict[str, Any]:
    """A ``CallToolResult`` as the pack's result."""
    content = [content_block(block, max_bytes) for block in getattr(result, "content", None) or ()]
    value: dict[str, Any] = {"content": content}
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        value["structured_content"] = structured
    if getattr(result, "is_error", False) is True:
        value["is_error"] = True
    return value


def error_result(value: Mapping[str, Any]) -> expediter.ToolResult:
    """An MCP result the server marked ``is_error``, as an error result: its text content is
    the error message, on one line (a validation error's lines joined with "; ") and cut; the
    whole result is kept as the value."""
    texts = [
        str(item.get("text", ""))
        for item in value.get("content") or ()
        if isinstance(item, Mapping) and item.get("type") == "text"
    ]
    lines = [" ".join(line.split()) for text in texts for line in text.splitlines()]
    message = "; ".join(line for line in lines if line) or "the MCP server reported an error"
    if len(message) > MAX_ERROR_TEXT:
        message = message[: MAX_ERROR_TEXT - 3] + "..."
    return expediter.ToolResult(value=dict(value), status="error", error=message)
