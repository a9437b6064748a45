"""Redaction: what is secret, and hiding it.

Argument values under secret-looking names (``api_key``, ``user_pin``, ``X-Auth-Token``) or
under names an action marks secret (``writeOnly`` in its schema, which
``Annotated[T, expediter.Secret]`` produces) are hidden in events and the ledger; database URLs
are shown without their passwords. Standard library only: the CLI uses it.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Mapping, Set
from typing import Any

__all__ = [
    "HOST_PORTS",
    "MASK",
    "hide_values",
    "is_secret_name",
    "mask_url",
    "mask_url_in",
    "redact",
    "write_only_names",
]

#: What a hidden value is replaced with.
MASK = "***"

#: A name is secret when one of its tokens (split on ``_ - .``, spaces, camelCase and digits)
#: is one of these words. Whole tokens only: ``author``, ``spinner``, ``passage``, ``max_tokens``
#: are ordinary names. ``session`` is not here: ``session_id`` names a conversation far more
#: often than a credential (``session_token``, ``session_key`` are caught by ``token``/pairs).
_SECRET_WORDS = frozenset(
    {"password", "passwords", "passwd", "passphrase", "passcode", "pwd", "pin", "ssn"}
    | {"secret", "secrets", "token", "credential", "credentials", "cookie", "jwt", "bearer"}
    | {"auth", "authorization", "authorisation", "otp", "totp", "hotp", "cvv", "cvc"}
    # Compounds commonly written as one lowercase word.
    | {"apikey", "apitoken", "authtoken", "accesstoken", "refreshtoken", "sessiontoken"}
    | {"secretkey", "privatekey", "privkey", "accesskey", "clientsecret", "apisecret"}
)
#: Two adjacent tokens that make a name secret though neither does alone.
_SECRET_PAIRS = frozenset(
    {("api", "key"), ("private", "key"), ("access", "key"), ("session", "key")}
    | {("signing", "key"), ("encryption", "key"), ("master", "key"), ("card", "number")}
    | {("security", "code"), ("verification", "code"), ("recovery", "code")}
)
#: Secret only as the whole name (``{"user": ..., "pass": ...}``), not as a token:
#: ``pass_through`` and ``pass_count`` are ordinary.
_SECRET_WHOLE_NAMES = frozenset({"pass", "pw"})
_NAME_PARTS = re.compile(r"OAuth|[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether values under this name are hidden: ``api_key``, ``githubToken``, ``user_pin``,
    ``X-Auth-Token``: yes; ``max_tokens``, ``passage``, ``author``, ``session_id``: no."""
    parts = [part.lower() for part in _NAME_PARTS.findall(name)]
    if any(part in _SECRET_WORDS for part in parts):
        return True
    if len(parts) == 1 and parts[0] in _SECRET_WHOLE_NAMES:
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))


_SCALARS = (str, int, float, bool, type(None))


_SCALAR_TYPES = frozenset(_SCALARS)


@functools.lru_cache(maxsize=4096)
def _any_secret(keys: tuple[Any, ...], secret_names: frozenset[str]) -> bool:
    return any(type(key) is str and (key in secret_names or is_secret_name(key)) for key in keys)


_NO_NAMES: frozenset[str] = frozenset()


def redact(value: Any, secret_names: Set[str] = _NO_NAMES) -> Any:
    """Arguments as recorded: values under secret-looking names (api_key, token...) and under
    ``secret_names`` (an action's ``secret_parameters``) hidden, at any depth."""
    if type(secret_names) is not frozenset:
        secret_names = frozenset(secret_names)  # hashable, for the cache below
    if type(value) is dict or isinstance(value, Mapping):
        if (
            type(value) is dict
            and _SCALAR_TYPES.issuperset(map(type, value.values()))
            and not _any_secret(tuple(value), secret_names)
        ):
            # Nothing to hide and nothing nested: no copy. Once per call (the per-call
            # budgets, benchmarks/README.md): one cached lookup per set of argument names.
            return value
        return {
            key: MASK
            if isinstance(key, str) and (key in secret_names or is_secret_name(key))
            else redact(item, secret_names)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item, secret_names) for item in value]
    return value


def hide_values(value: Any, secrets: frozenset[str]) -> Any:
    """A value with every occurrence of the known secret values (an instance's credentials)
    replaced by ``***``, in text at any depth (keys included); the value itself when none
    occurs."""
    if not secrets:
        return value
    if isinstance(value, str):
        if not any(secret in value for secret in secrets):
            return value
        for secret in sorted(secrets, key=len, reverse=True):
            value = value.replace(secret, MASK)
        return value
    if isinstance(value, Mapping):
        changed = {
            hide_values(key, secrets): hide_values(item, secrets) for key, item in value.items()
        }
        same = len(changed) == len(value) and all(
            key in value and value[key] is item for key, item in changed.items()
        )
        return value if same else changed
    if isinstance(value, list | tuple):
        items = [hide_values(item, secrets) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


# -- schemas: which parameters an action marks secret ----------------------------------------

_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf")


def _write_only(schema: Any) -> bool:
    """Whether a property's schema marks its value write-only (itself, an array's items, or a
    variant of ``anyOf``/``oneOf``/``allOf``, as ``T | None`` produces)."""
    if not isinstance(schema, Mapping):
        return False
    if schema.get("writeOnly") is True:
        return True
    if _write_only(schema.get("items")):
        return True
    return any(
        _write_only(variant)
        for key in _SUBSCHEMA_LISTS
        if isinstance(schema.get(key), list)
        for variant in schema[key]
    )


def write_only_names(schema: Mapping[str, Any]) -> frozenset[str]:
    """Names of the properties a JSON Schema marks ``"writeOnly": true``: the top-level
    parameters, and fields of nested objects and of ``$defs`` records (whose values are then
    hidden wherever the name appears, as secret-looking names are)."""
    found: set[str] = set()
    seen: set[int] = set()
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if not isinstance(node, Mapping) or id(node) in seen:
            continue
        seen.add(id(node))
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            for name, child in properties.items():
                if isinstance(name, str) and _write_only(child):
                    found.add(name)
                pending.append(child)
        for key in ("$defs", "definitions"):
            if isinstance(node.get(key), Mapping):
                pending.extend(node[key].values())
        for key in ("items", "additionalProperties"):
            pending.append(node.get(key))
        for key in (*_SUBSCHEMA_LISTS, "prefixItems"):
            if isinstance(node.get(key), list):
                pending.extend(node[key])
    return frozenset(found)


# -- database URLs ---------------------------------------------------------------------------

#: Connection parameters whose values are passwords (``?password=`` in a URL, or libpq's
#: ``key=value`` form); ``passfile`` names a file and is shown.
_PASSWORD_KEYS = frozenset({"password", "sslpassword"})
# A query value runs to the next ``&key=`` (a password may hold ``&`` or ``#``) or the end.
_QUERY_VALUE = re.compile(r"(?P<key>[^?&=\s]+)=(?P<value>.*?)(?=&[^&=]*=|\Z)", re.DOTALL)
_KEYWORD_VALUE = re.compile(
    r"(?P<key>\b\w+)\s*=\s*(?P<value>'(?:[^'\\]|\\.)*'?|[^\s']\S*)", re.DOTALL
)

#: Hosts with optional ports before a URL's path (``h1:5432,[::1]:5433``, or nothing).
HOST_PORTS = re.compile(
    r"(?:\[[^\]]*\]|[^:,\[\]/@]*)(?::\d*)?(?:,(?:\[[^\]]*\]|[^:,\[\]/@]*)(?::\d*)?)*"
)


def _masks(key: str) -> bool:
    return key.lower() in _PASSWORD_KEYS or is_secret_name(key)


def _password_spans(url: str) -> list[tuple[int, int]]:
    """Where the passwords are in a database URL or libpq ``key=value`` string."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        if "=" not in url:
            return []
        return [
            match.span("value") for match in _KEYWORD_VALUE.finditer(url) if _masks(match["key"])
        ]
    start = len(scheme) + len(separator)
    spans = []
    query_from = 0
    if not rest.startswith("/"):  # an authority: ``user:password@host`` (sqlite:/// has none)
        at = rest.rfind("@")  # the last '@': a password may hold '@', '/', '?' or '#'
        head = rest.split("/", 1)[0]
        if at > len(head) and "?" in rest[len(head) : at]:  # that '@' is in the query
            if "@" in head:
                at = head.rfind("@")  # ``user:pw@host/db?x=a@b``
            elif HOST_PORTS.fullmatch(head):
                at = -1  # ``host:5432/db?x=a@b``: no user at all
        if at >= 0:
            userinfo = rest[:at]
            colon = userinfo.find(":")
            first_at = userinfo.find("@")
            # ``user@host:5432/db``: the first '@' ends the user (no password).
            if colon >= 0 and (first_at < 0 or colon < first_at):
                spans.append((start + colon + 1, start + at))
                query_from = at
    question = rest.find("?", query_from)
    if question >= 0:
        offset = start + question + 1
        spans.extend(
            (offset + match.start("value"), offset + match.end("value"))
            for match in _QUERY_VALUE.finditer(rest[question + 1 :])
            if _masks(match["key"])
        )
    return spans


def mask_url(url: str) -> str:
    """A database URL (or libpq ``key=value`` connection string) fit to print: the password
    replaced by ``***`` wherever it is (``user:PASSWORD@``, ``?password=``), even when it holds
    ``#``, ``/``, ``?`` or ``@`` (which URL parsers misread). Never raises."""
    masked = url
    for begin, end in reversed(_password_spans(url)):
        masked = f"{masked[:begin]}{MASK}{masked[end:]}"
    return masked


def mask_url_in(text: str, url: str) -> str:
    """``text`` (an error message from a driver) with the URL's passwords hidden: the URL
    itself, and each password as written and percent-decoded, wherever they appear."""
    from urllib.parse import unquote

    if not text:
        return text
    text = text.replace(url, mask_url(url))
    passwords = {url[begin:end] for begin, end in _password_spans(url)}
    passwords |= {unquote(password) for password in passwords}
    passwords |= {password.strip("'") for password in passwords}
    for password in sorted(passwords, key=len, reverse=True):
        if password and password != MASK:
            text = text.replace(password, MASK)
    return text
