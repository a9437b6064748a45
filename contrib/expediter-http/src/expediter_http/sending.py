"""Send one prepared request through a guarded client: redirects (off unless configured, each hop
re-checked, https->http refused, secret headers stripped on an origin change), a total time cap
and a body size cap enforced while streaming, and the result envelope.

The envelope is ``{"status_code", "headers", "body"}``: ``headers`` keeps only an allowlist,
``body`` is JSON when the response says JSON, text for text and XML, else base64 (then
``"body_encoding": "base64"``). Status >= 400, timeouts and connection errors are error results
carrying the envelope when there is one; a refusal by the egress guard raises ``EgressBlocked``.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
import urllib.parse
import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

import expediter
from expediter.core.netguard import EgressBlocked, EgressPolicy, same_origin
from expediter.core.netguard.deadlines import within
from expediter.core.records.text import echo
from expediter.errors import ArgumentError

if TYPE_CHECKING:
    import httpx

__all__ = ["ENVELOPE_HEADERS", "Limits", "header_pairs", "hide_in_client_logs", "send"]

#: Response headers the envelope keeps (lower case); ``set-cookie`` never.
ENVELOPE_HEADERS = frozenset(
    {
        "content-type",
        "content-length",
        "content-language",
        "location",
        "retry-after",
        "etag",
        "last-modified",
        "link",
        "www-authenticate",
        "x-request-id",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
    }
)
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Characters of an error response's body quoted in the error the model reads.
ERROR_EXCERPT = 500
#: Headers that always count as secret when a redirect leaves the origin.
_ALWAYS_SECRET = frozenset({"authorization", "proxy-authorization", "cookie"})
_BODY_HEADERS = frozenset({"content-type", "content-length", "transfer-encoding"})
_TEXT_TYPES = (
    "text/",
    "application/xml",
    "application/json",
    "application/javascript",
    "application/x-www-form-urlencoded",
    "application/yaml",
)


@attrs.frozen
class Limits:
    """What one call may take."""

    #: Seconds for the whole call, redirects and body included.
    timeout: float = 30.0
    #: Bytes of (decoded) response body kept; more is an error.
    max_response_bytes: int = 1_000_000
    follow_redirects: bool = False
    max_redirects: int = 5


def _envelope(response: httpx.Response, body: Any, binary: bool) -> dict[str, Any]:
    envelope: dict[str, Any] = {
        "status_code": response.status_code,
        "headers": {
            name: value
            for name, value in ((k.lower(), v) for k, v in response.headers.items())
            if name in ENVELOPE_HEADERS
        },
        "body": body,
    }
    if binary:
        envelope["body_encoding"] = "base64"
    return envelope


def _body(response: httpx.Response, data: bytes) -> tuple[Any, bool]:
    """The body in the envelope's form, and whether it is base64."""
    if not data:
        return None, False
    kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        try:
            return json.loads(data), False
        except (ValueError, RecursionError):
            pass
    if kind.startswith(_TEXT_TYPES) or kind.endswith(("+xml", "+json")):
        encoding = response.charset_encoding or "utf-8"
        try:
            return data.decode(encoding, errors="replace"), False
        except LookupError:
            return data.decode("utf-8", errors="replace"), False
    if not kind:
        try:
            return data.decode("utf-8"), False
        except UnicodeDecodeError:
            pass
    return base64.b64encode(data).decode("ascii"), True


def _strip(headers: list[tuple[str, str]], secret: Iterable[str]) -> list[tuple[str, str]]:
    names = {name.lower() for name in secret} | _ALWAYS_SECRET
    return [(name, value) for name, value in headers if name.lower() not in names]


class _Unreadable(Exception):
    """The body is in a content coding the pack does not read."""


def _decoder(response: httpx.Response) -> Any:
    """A zlib decompressor for the response's content coding, or None for identity. One coding
    at most: stacked codings multiply what a few bytes on the wire unpack to."""
    codings = [
        part.strip().lower()
        for part in response.headers.get("content-encoding", "").split(",")
        if part.strip() and part.strip().lower() != "identity"
    ]
    if not codings:
        return None
    if len(codings) > 1:
        raise _Unreadable(f"more than one content coding ({', '.join(codings)[:80]})")
    if codings[0] in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if codings[0] == "deflate":
        return zlib.decompressobj()
    raise _Unreadable(f"content coding {codings[0][:40]!r}")


def _read(response: httpx.Response, limits: Limits, deadline: float) -> bytes | None:
    """The body, decoded, or None when it is larger than the cap: the cap holds for what a
    compressed body unpacks to, checked while unpacking (never after); TimeoutError past the
    deadline."""
    decoder = _decoder(response)
    cap = limits.max_response_bytes
    chunks: list[bytes] = []
    size = 0
    for raw in response.iter_raw():
        pending = raw
        while pending:
            if decoder is None:
                piece, pending = pending, b""
            else:
                piece = decoder.decompress(pending, cap - size + 1)
                pending = decoder.unconsumed_tail
            size += len(piece)
            if size > cap:
                return None
            chunks.append(piece)
            if decoder is not None and not piece and pending:
                raise _Unreadable("the compressed body does not decode")
        if time.monotonic() > deadline:
            raise TimeoutError
    if decoder is not None:
        rest = decoder.flush()
        size += len(rest)
        if size > cap:
            return None
        chunks.append(rest)
    return b"".join(chunks)


def send(
    client: httpx.Client,
    policy: EgressPolicy,
    *,
    method: str,
    url: str,
    headers: list[tuple[str, str]],
    content: bytes | None,
    secret_headers: Iterable[str],
    limits: Limits,
    deadline: float | None = None,
) -> Any:
    """Send the request and return the envelope (or an error ``ToolResult`` carrying it)."""
    started = time.monotonic()
    budget = limits.timeout
    if deadline is not None:
        budget = min(budget, max(0.0, deadline - time.time()))
    policy.check_url(url)
    # Every connect, read and write of the exchange ends within the budget, however the
    # server paces its bytes.
    with within(budget):
        return _exchange(
            client, policy, method, url, headers, content, secret_headers, limits, budget, started
        )


def _exchange(
    client: httpx.Client,
    policy: EgressPolicy,
    method: str,
    url: str,
    headers: list[tuple[str, str]],
    content: bytes | None,
    secret_headers: Iterable[str],
    limits: Limits,
    budget: float,
    started: float,
) -> Any:
    """The request and its redirects (see ``send``)."""
    import httpx

    ends = started + budget
    for hop in range(limits.max_redirects + 1):
        left = ends - time.monotonic()
        if left <= 0:
            return _timed_out(limits, budget)
        try:
            request = client.build_request(
                method, url, headers=headers, content=content, timeout=httpx.Timeout(left)
            )
        except (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError) as exc:
            raise ArgumentError(f"the request cannot be made: {echo(str(exc), 200)}") from None
        try:
            response = client.send(request, stream=True)
        except httpx.TimeoutException:
            return _timed_out(limits, budget)
        except httpx.TransportError as exc:
            return expediter.ToolResult(
                status="error",
                error=f"the request to {_origin(url)} failed: {_transport_error(exc)}",
            )
        try:
            location = response.headers.get("location")
            if limits.follow_redirects and response.status_code in _REDIRECTS and location:
                target = urllib.parse.urljoin(url, location)
                problem = policy.redirect_problem(url, target)
                if problem is not None:
                    raise EgressBlocked(f"redirect {hop + 1} to {_origin(target)}: {problem}")
                if not same_origin(url, target):
                    headers = _strip(headers, secret_headers)
                if response.status_code == 303 or (
                    response.status_code in (301, 302) and method == "POST"
                ):
                    method, content = "GET", None
                    headers = [(n, v) for n, v in headers if n.lower() not in _BODY_HEADERS]
                url = target
                continue
            try:
                data = _read(response, limits, ends)
            except httpx.TimeoutException:
                return _timed_out(limits, budget)
            except TimeoutError:
                return _timed_out(limits, budget)
            except (_Unreadable, zlib.error) as exc:
                envelope = _envelope(response, None, False)
                return expediter.ToolResult(
                    value=envelope,
                    status="error",
                    error=f"the response body cannot be read: {exc}",
                )
            except httpx.TransportError as exc:
                return expediter.ToolResult(
                    status="error",
                    error=f"reading the response of {_origin(url)} failed: {_transport_error(exc)}",
                )
            if data is None:
                envelope = _envelope(response, None, False)
                envelope["truncated"] = True
                return expediter.ToolResult(
                    value=envelope,
                    status="error",
                    error=f"the response is larger than max_response_bytes "
                    f"({limits.max_response_bytes} bytes)",
                )
            body, binary = _body(response, data)
            envelope = _envelope(response, body, binary)
            if response.status_code >= 400:
                return expediter.ToolResult(
                    value=envelope,
                    status="error",
                    error=_status_error(response, body, binary),
                )
            return envelope
        finally:
            response.close()
    return expediter.ToolResult(
        status="error", error=f"more than {limits.max_redirects} redirects; stopped"
    )


def _status_error(response: httpx.Response, body: Any, binary: bool) -> str:
    """``HTTP 422 Unprocessable Entity: <the API's explanation>`` (the body, cut short)."""
    text = f"HTTP {response.status_code} {response.reason_phrase}".strip()
    if body is None or binary:
        return text
    excerpt = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    excerpt = " ".join(excerpt.split())
    if len(excerpt) > ERROR_EXCERPT:
        excerpt = excerpt[:ERROR_EXCERPT] + "..."
    return f"{text}: {excerpt}" if excerpt else text


def _transport_error(exc: Exception) -> str:
    """What a transport error says, without what a protocol error quotes of the request (h11
    repeats a header's value, which may be a credential)."""
    import httpx

    if isinstance(exc, httpx.ProtocolError):
        return type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


def _timed_out(limits: Limits, budget: float) -> expediter.ToolResult:
    return expediter.ToolResult(
        status="error", error=f"the request did not finish within {budget:g} s"
    )


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def header_pairs(*sources: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """Configured headers as pairs (later sources replace earlier ones, case-insensitively)."""
    merged: dict[str, tuple[str, str]] = {}
    for source in sources:
        for name, value in (source or {}).items():
            merged[str(name).lower()] = (str(name), str(value))
    return list(merged.values())


_HIDDEN_QUERY: set[str] = set()
_hidden_lock = threading.Lock()


class _QuerySecrets(logging.Filter):
    """Masks the values of credential query parameters in httpx's request log lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        names = _HIDDEN_QUERY
        if names and record.args and isinstance(record.args, tuple):
            record.args = tuple(
                _mask_query(str(arg), names) if "?" in str(arg) else arg for arg in record.args
            )
        return True


def _mask_query(url: str, names: set[str]) -> str:
    for name in names:
        url = re.sub(rf"([?&]{re.escape(urllib.parse.quote_plus(name))}=)[^&#\s]*", r"\1***", url)
    return url


def hide_in_client_logs(parameter: str) -> None:
    """Mask the value of query parameter ``parameter`` (a credential) wherever httpx logs a
    request URL (its INFO line ``HTTP Request: GET ...?api_key=...``)."""
    if parameter in _HIDDEN_QUERY or len(_HIDDEN_QUERY) >= 1000:
        return
    with _hidden_lock:
        if not _HIDDEN_QUERY:
            logging.getLogger("httpx").addFilter(_QuerySecrets())
        _HIDDEN_QUERY.add(parameter)
