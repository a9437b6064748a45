"""Redaction: what is secret, and hiding it.

Argument values under secret-looking names (``api_key``, ``user_pin``, ``X-Auth-Token``) or
under names an action marks secret (``writeOnly`` in its schema, which
``Annotated[T, expediter.Secret]`` produces) are hidden in events and the ledger; database URLs
are shown without their passwords. Standard library only: the CLI uses it.

The values themselves are hidden too, wherever text repeats them (``hide_values``): a call's
known secrets are its instance's secret configuration fields and the values of its secret
arguments (``secret_texts`` collects them). An exception quoting one, the formatted traceback
of that exception (``log_hidden``), a result echoing one: each shows ``***`` instead. What
counts as a form of a secret is fixed here, once, for every caller:

- the text itself, and as ``clean_text`` shows it (control characters removed);
- escaped as Python shows it in a quoted string (``repr``, ``ascii``: what an exception
  message quoting a dict of the configuration holds) and as JSON does (ASCII escapes or UTF-8),
  once and twice (a JSON log line of such a message);
- percent-encoded (``quote``, ``quote_plus``: a URL's query or a form body);
- as its UTF-8 bytes show in Python (``repr(secret.encode())``: a message quoting the bytes a
  tool sent) and in hexadecimal (lower and upper case: a hex dump, ``bytes.hex()``);
- inside base64 (standard or URL-safe alphabet), at any offset: a basic credential
  ``base64(user:password)`` whoever the user is, or the token encoded on its own. The whole
  base64 run holding it is hidden.

``Bearer <token>`` and the like quote the text itself. Derived values a tool computes some
other way (a signature, a hash) are not known and not hidden: the tool hides them itself.

Very short values cannot be told from ordinary text: hiding a one-character secret would turn
every message into asterisks. So ``secret_texts``, which collects a call's secrets, leaves out
texts shorter than ``MIN_SECRET_CHARS`` (4) characters and numbers shorter than
``MIN_SECRET_DIGITS`` (6) characters (ports, counts, years and a traceback's line numbers are
shorter); and the base64 form is looked for only for secrets long enough for its fixed part
to be told from chance (five bytes or more). Such values are still hidden where they are
recorded under their names (``redact``). ``hide_values`` itself hides whatever it is given.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import logging
import re
import sys
import traceback
from collections.abc import Iterable, Mapping, Set
from typing import Any, final
from urllib.parse import quote, quote_plus

from expediter.core.records.text import CONTROL

__all__ = [
    "HOST_PORTS",
    "MASK",
    "MIN_SECRET_CHARS",
    "MIN_SECRET_DIGITS",
    "config_secrets",
    "hide_values",
    "is_secret_name",
    "log_hidden",
    "mask_url",
    "mask_url_in",
    "redact",
    "secret_config",
    "secret_texts",
    "secrets_under",
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
    | {"auth", "authorization", "authorisation", "authentication", "otp", "totp", "hotp"}
    | {"cvv", "cvc"}
    # Compounds commonly written as one lowercase word.
    | {"apikey", "apitoken", "authtoken", "accesstoken", "refreshtoken", "sessiontoken"}
    | {"secretkey", "privatekey", "privkey", "accesskey", "clientsecret", "apisecret"}
)
#: Two adjacent tokens that make a name secret though neither does alone.
_SECRET_PAIRS = frozenset(
    {("api", "key"), ("private", "key"), ("access", "key"), ("session", "key")}
    | {("signing", "key"), ("encryption", "key"), ("master", "key"), ("card", "number")}
    | {("subscription", "key")}  # Ocp-Apim-Subscription-Key and the like
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


def _is_secret_key(key: Any, secret_names: frozenset[str]) -> bool:
    return type(key) is str and (key in secret_names or is_secret_name(key))


def secrets_under(value: Any, secret_names: Set[str] = _NO_NAMES) -> frozenset[str]:
    """The texts of every value ``redact`` hides (under a secret-looking name or one of
    ``secret_names``, at any depth): what a message quoting them must not show."""
    if type(secret_names) is not frozenset:
        secret_names = frozenset(secret_names)
    if (
        type(value) is dict
        and _SCALAR_TYPES.issuperset(map(type, value.values()))
        and not _any_secret(tuple(value), secret_names)
    ):
        return frozenset()  # the common case: nothing secret, nothing nested
    found: list[Any] = []
    seen: set[int] = set()
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping | list | tuple):
            if id(item) in seen:
                continue
            seen.add(id(item))
        if isinstance(item, Mapping):
            for key, child in item.items():
                (found if _is_secret_key(key, secret_names) else pending).append(child)
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return secret_texts(found)


def secret_config(config: Mapping[str, Any], declared: Set[str] = _NO_NAMES) -> dict[str, Any]:
    """A configuration's secret fields: those the tool declares secret
    (``ConfigField(secret=True)``) and those whose names say so."""
    return {
        name: value
        for name, value in config.items()
        if name in declared or is_secret_name(str(name))
    }


def config_secrets(config: Mapping[str, Any] | None, fields: Iterable[Any] = ()) -> frozenset[str]:
    """The secret texts of a configuration (``secret_texts`` of its ``secret_config``), the
    declared fields being those of ``fields`` (``ConfigField`` records) marked ``secret``."""
    if not config:
        return frozenset()
    declared = frozenset(field.name for field in fields if getattr(field, "secret", False))
    return secret_texts(secret_config(config, declared).values())


#: Secret texts shorter than this are not hidden in other text (see the module's docstring).
MIN_SECRET_CHARS = 4
#: Numbers are hidden in text from this many characters (``str(number)``).
MIN_SECRET_DIGITS = 6


def secret_texts(values: Iterable[Any]) -> frozenset[str]:
    """The text leaves of secret values worth hiding: strings of ``MIN_SECRET_CHARS`` or
    more, numbers of ``MIN_SECRET_DIGITS`` or more, inside mappings and sequences too."""
    found: set[str] = set()
    seen: set[int] = set()
    pending = list(values)
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            if len(value) >= MIN_SECRET_CHARS:
                found.add(value)
        elif isinstance(value, Mapping | list | tuple | set | frozenset):
            if id(value) not in seen:
                seen.add(id(value))
                pending.extend(value.values() if isinstance(value, Mapping) else value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            try:
                text = str(value)
            except ValueError:  # an integer beyond the interpreter's digit limit
                continue
            if len(text) >= MIN_SECRET_DIGITS:
                found.add(text)
    return frozenset(found)


#: The base64 alphabets' characters (standard and URL-safe).
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
_URL_SAFE = str.maketrans("+/", "-_")
#: A secret's base64 form is looked for only when the part of it that does not depend on the
#: neighbouring bytes has this many characters (36 bits: no chance match in a large blob).
_BASE64_CORE = 6


def _escaped(text: str) -> set[str]:
    """``text`` as Python's and JSON's string escapes show it."""
    forms = {repr(text)[1:-1], ascii(text)[1:-1], json.dumps(text)[1:-1]}
    forms.add(json.dumps(text, ensure_ascii=False)[1:-1])
    return forms


def _forms(secret: str) -> set[str]:
    """The texts a secret appears as when quoted (see the module's docstring)."""
    forms = {secret, secret.translate(CONTROL)}
    escaped = _escaped(secret)
    for once in list(escaped):
        escaped |= _escaped(once)
    forms |= escaped
    for encode in (
        functools.partial(quote, safe=""),
        quote,
        functools.partial(quote_plus, safe=""),
    ):
        try:
            forms.add(encode(secret))
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8, so no percent-encoding
            pass
    try:
        data = secret.encode()
    except UnicodeEncodeError:
        pass
    else:
        forms.add(repr(data)[2:-1])  # b'p\xc3\xa4ss' quoted in a message
        forms |= {data.hex(), data.hex().upper()}
    forms.discard("")  # a secret of control characters only
    return forms


def _base64_cores(secret: str) -> set[str]:
    """The part of the secret's base64 form that is the same whatever bytes come before and
    after it, at each of the three offsets a byte string can start at (both alphabets)."""
    try:
        data = secret.encode()
    except UnicodeEncodeError:
        return set()
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode("ascii")
        # The characters whose six bits all come from the secret.
        core = encoded[(8 * offset + 5) // 6 : 8 * (offset + len(data)) // 6]
        if len(core) >= _BASE64_CORE:
            cores |= {core, core.translate(_URL_SAFE)}
    return cores


@final
class _Plan:
    """How to hide one set of secrets: every form, longest first, and the base64 cores."""

    __slots__ = ("cores", "forms")

    def __init__(self, secrets: frozenset[str]) -> None:
        forms: set[str] = set()
        cores: set[str] = set()
        for secret in secrets:
            if isinstance(secret, str) and secret:
                forms |= _forms(secret)
                cores |= _base64_cores(secret)
        self.forms = tuple(sorted(forms, key=len, reverse=True))
        self.cores = tuple(cores)

    def text(self, text: str) -> str:
        for form in self.forms:
            if form in text:
                text = text.replace(form, MASK)
        if self.cores and any(core in text for core in self.cores):
            text = _BASE64_RUN.sub(self._run, text)
        return text

    def _run(self, match: re.Match[str]) -> str:
        run = match.group()
        return MASK if any(core in run for core in self.cores) else run

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            changed = {self.value(key): self.value(item) for key, item in value.items()}
            same = len(changed) == len(value) and all(
                key in value and value[key] is item for key, item in changed.items()
            )
            return value if same else changed
        if isinstance(value, list | tuple):
            items = [self.value(item) for item in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        return value


# The plans of the secret sets hidden most recently (a tool instance's are hidden on each of its
# calls); a plan holds the secrets, as the loaded tools and paused calls do.
@functools.lru_cache(maxsize=256)
def _plan(secrets: frozenset[str]) -> _Plan:
    return _Plan(secrets)


def hide_values(value: Any, secrets: frozenset[str]) -> Any:
    """A value with every occurrence of the known secret values (an instance's credentials, a
    call's secret arguments) replaced by ``***``, in every form the module's docstring lists,
    in text at any depth (keys included); the value itself when none occurs."""
    if not secrets:
        return value
    return _plan(secrets if type(secrets) is frozenset else frozenset(secrets)).value(value)


def _shown(value: Any) -> str:
    """``str(value)``, or its type's name where that raises (as ``logging`` would go on)."""
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__}>"


def _traceback(exc: BaseException) -> str:
    """An exception's traceback as ``logging`` formats it (chained exceptions included)."""
    try:
        return "".join(traceback.format_exception(exc)).rstrip("\n")
    except Exception:  # an exception whose own methods raise
        return f"{type(exc).__name__} (its traceback could not be formatted)"


def log_hidden(
    logger: logging.Logger,
    level: int,
    message: str,
    *args: Any,
    secrets: frozenset[str],
    exc: BaseException | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Log ``message % args`` with ``exc``'s traceback, the secrets hidden from both.

    With secrets to hide, the record is made here: its message formatted and hidden, the
    traceback formatted and hidden into ``exc_text``, and no ``exc_info``. A formatter or error
    reporter the application configures (``logging.basicConfig``, a JSON formatter, an error
    tracker reading the frames' locals) then never sees the exception itself, only the hidden
    text, which ``logging.Formatter`` appends as it would the traceback. Without secrets, an
    ordinary record carries the exception."""
    if not logger.isEnabledFor(level):
        return
    if not secrets:
        logger.log(level, message, *args, exc_info=exc, extra=extra, stacklevel=2)
        return
    try:
        text = message % args if args else message
    except Exception:  # a bad format, or an argument whose str() raises: the parts as they are
        text = " ".join(map(_shown, (message, *args)))
    caller = sys._getframe(1)
    record = logger.makeRecord(
        logger.name,
        level,
        caller.f_code.co_filename,
        caller.f_lineno,
        hide_values(text, secrets),
        (),
        None,
        caller.f_code.co_name,
        None if extra is None else hide_values(dict(extra), secrets),
    )
    if exc is not None:
        record.exc_text = hide_values(_traceback(exc), secrets)
    logger.handle(record)


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
