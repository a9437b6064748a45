"""Fetching an OpenAPI document from an http(s) URL, through expediter's egress guard.

The document is asked for with the pack's own sending (``expediter_http.sending``): public
addresses only unless the operator allows ranges, redirects followed and each hop checked
again, a time limit for the whole exchange and a size cap on what is read. What comes back is
text for ``load_document``; a document's relative server URL is resolved against the URL it
came from (``import_spec(..., document_url=...)``).
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Sequence
from typing import Any

import expediter
from expediter.core.netguard import DEFAULT_RESOLVER, EgressPolicy, Resolver
from expediter.core.records.text import echo, truncate
from expediter.errors import ArgumentError
from expediter_http.openapi.document import MAX_DOCUMENT_BYTES
from expediter_http.sending import Limits, send

__all__ = ["FETCH_TIMEOUT", "MAX_FETCH_BYTES", "MAX_REDIRECTS", "fetch_document", "is_url"]

#: Seconds the whole fetch may take, redirects included.
FETCH_TIMEOUT = 30.0
#: The most of a fetched document read (as for a file: ``MAX_DOCUMENT_BYTES``).
MAX_FETCH_BYTES = MAX_DOCUMENT_BYTES
#: Redirects followed (each hop checked by the guard again).
MAX_REDIRECTS = 5
_ACCEPT = "application/json, application/yaml, text/yaml, text/plain;q=0.8, */*;q=0.5"


def is_url(source: str) -> bool:
    """Whether a SPEC argument is an http(s) URL rather than a path."""
    return source[:8].lower().startswith(("http://", "https://"))


def fetch_document(
    url: str,
    allow_networks: Sequence[str] = (),
    *,
    timeout: float | None = None,
    max_bytes: int | None = None,
    resolver: Resolver | None = None,
    network: Any = None,
) -> str:
    """The text of the document at ``url``, fetched through the egress guard (the operator's
    ``allow_networks`` allowed too) within ``timeout`` seconds (``FETCH_TIMEOUT``) and
    ``max_bytes`` (``MAX_FETCH_BYTES``): ``EgressBlocked`` when the guard refuses an address,
    ValueError saying what else went wrong (a status, a timeout, too large, not text)."""
    from expediter.core.netguard import for_httpx

    timeout = FETCH_TIMEOUT if timeout is None else timeout
    max_bytes = MAX_FETCH_BYTES if max_bytes is None else max_bytes

    try:
        policy = EgressPolicy(allow_networks=allow_networks, resolver=resolver or DEFAULT_RESOLVER)
    except ValueError as exc:
        raise ValueError(f"--allow-network: {exc}") from None
    client = for_httpx.client(policy, inner=network, headers={"Accept-Encoding": "gzip, deflate"})
    limits = Limits(
        timeout=timeout,
        max_response_bytes=max_bytes,
        follow_redirects=True,
        max_redirects=MAX_REDIRECTS,
    )
    try:
        result = send(
            client,
            policy,
            method="GET",
            url=url,
            headers=[("Accept", _ACCEPT)],
            content=None,
            secret_headers=(),
            limits=limits,
        )
    except ArgumentError as exc:
        raise ValueError(f"{_shown(url)} cannot be fetched: {exc}") from None
    finally:
        client.close()
    if isinstance(result, expediter.ToolResult):
        if isinstance(result.value, dict) and result.value.get("truncated"):
            raise ValueError(
                f"{_shown(url)} is larger than {max_bytes} bytes; an OpenAPI document that "
                "large is not imported"
            )
        raise ValueError(f"fetching {_shown(url)} failed: {truncate(str(result.error), 200)}")
    body = result.get("body")
    if body is None:
        raise ValueError(f"{_shown(url)} answered with an empty body, not an OpenAPI document")
    if result.get("body_encoding") == "base64":
        # Served as some binary type (YAML often is): text all the same when it is UTF-8.
        try:
            body = base64.b64decode(body).decode("utf-8-sig")
        except UnicodeDecodeError:
            kind = result["headers"].get("content-type", "no content type")
            raise ValueError(
                f"{_shown(url)} answered with binary content ({echo(kind, 80)}), not an "
                "OpenAPI document in JSON or YAML"
            ) from None
    # A newline keeps the text from ever being read as a path.
    return (body if isinstance(body, str) else json.dumps(body)) + "\n"


def _shown(url: str) -> str:
    """A URL as messages name it: scheme, host and path (a query may carry a credential)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return echo(urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", "")), 200)
