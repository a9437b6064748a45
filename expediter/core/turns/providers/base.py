"""What every provider adapter does, and the helpers they share.

An adapter turns one offered action into the provider's tool definition, reads the provider's
response (as the parsed JSON of its HTTP API, or its SDK's ``model_dump()``) into raw calls,
and builds the messages that carry results back. Resolving names, checking arguments and
dropping strict-mode nulls happen once, in the toolset, for every provider alike.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, Protocol

import attrs

from expediter.core.records.calls import NO_EXTRAS

__all__ = [
    "CallResult",
    "Malformed",
    "Provider",
    "RawCall",
    "ToolSpec",
    "as_list",
    "field",
    "json_kind",
    "parse_arguments",
    "result_text",
    "synthetic_id",
]

_ALPHABET = string.ascii_letters + string.digits
_DECODE = json.JSONDecoder().decode


class ToolSpec(NamedTuple):
    """One action as offered: its name, description and (already transformed) parameters."""

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = False


@attrs.frozen
class RawCall:
    """A call as read from a response, before its name is resolved."""

    call_id: str
    name: str
    #: As the provider sent it: a JSON string, an object, or nothing.
    arguments: Any
    extras: Mapping[str, Any] = NO_EXTRAS


@attrs.frozen
class Malformed:
    """What a call's arguments are when the call around them was malformed (say, a
    ``function`` that is a string): the toolset reports ``problem`` as the call's error."""

    problem: str


def json_kind(value: Any) -> str:
    """The JSON name of a value's type, for messages (``array``, ``string``, ``number``...)."""
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__


class CallResult(Protocol):
    """What a result message needs from a call event (``CallEvent`` satisfies it)."""

    @property
    def call_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def result(self) -> Any: ...
    @property
    def error(self) -> str | None: ...


def field(data: Mapping[str, Any], *names: str) -> Any:
    """The first of several spellings present (``functionCall`` / ``function_call``)."""
    for name in names:
        if name in data and data[name] is not None:
            return data[name]
    return None


def as_list(value: Any) -> list[Any]:
    """A list from a JSON value that may be missing or null."""
    if type(value) is list:
        return value
    return list(value) if isinstance(value, tuple) else []


def synthetic_id(seed: Any, index: int) -> str:
    """Nine alphanumerics, the same for the same response and position (for id-less calls)."""
    text = json.dumps(seed, sort_keys=True, default=repr, ensure_ascii=False)
    number = int.from_bytes(hashlib.sha256(f"{index}\x1f{text}".encode()).digest()[:8], "big")
    chars = []
    for _ in range(9):
        number, remainder = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[remainder])
    return "".join(chars)


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Return ``(arguments, None)``, or ``({}, what was wrong)`` for malformed arguments."""
    if type(raw) is not str:  # the usual case (a JSON string) first: the turn budget
        if raw is None:
            return {}, None
        if type(raw) is dict or isinstance(raw, Mapping):
            return dict(raw), None
        if isinstance(raw, bytes | bytearray):
            raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        if isinstance(raw, Malformed):
            return {}, raw.problem
        return {}, f"the arguments must be a JSON object, not {json_kind(raw)}"
    if not raw or raw.isspace():
        return {}, None
    try:
        value = _DECODE(raw)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return {}, (
                "the arguments hold more than one JSON value (e.g. two objects run together); "
                "send exactly one JSON object"
            )
        return {}, f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, not {json_kind(value)}"
    return value, None


def result_text(result: CallResult | None) -> tuple[str, bool]:
    """The text a model reads for a call's result, and whether it is an error."""
    if result is None:
        return "error: the call produced no result", True
    if result.status == "completed":
        content = getattr(result, "content", None)
        if content is not None:
            return content, False
        value = result.result
        if isinstance(value, str):
            return value, False
        return json.dumps(value, ensure_ascii=False), False
    if result.status == "denied":
        reason = result.error or "no reason given"
        return f"the call was denied and did not run: {reason}", True
    if result.status == "error":
        return result.error or "the call failed", True
    return f"the call has not finished (status: {result.status})", True


def result_object(result: CallResult | None) -> tuple[dict[str, Any], bool]:
    """A result as a JSON object (for providers whose result must be one), and the error flag."""
    if result is None or result.status != "completed":
        text, _ = result_text(result)
        return {"error": text}, True
    content = getattr(result, "content", None)
    value = result.result
    if content is not None and len(content) < len(json.dumps(value, ensure_ascii=False)):
        return {"result": content}, False  # the bounded copy, when the result was cut
    return (value if isinstance(value, dict) else {"result": value}), False


class Provider:
    """Base adapter: override what differs for a provider."""

    name: ClassVar[str] = ""
    #: Whether ``strict=True`` is supported (OpenAI and Anthropic).
    supports_strict: ClassVar[bool] = False

    def tool(self, spec: ToolSpec) -> dict[str, Any]:
        """One tool definition in the provider's shape."""
        raise NotImplementedError

    def tools(self, specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        """The value for the request's ``tools`` field."""
        return [self.tool(spec) for spec in specs]

    def parameters(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Adapt a schema to what the provider accepts (default: as is)."""
        return schema

    def read_calls(self, response: Mapping[str, Any]) -> list[RawCall]:
        """The tool calls in a response, in order."""
        raise NotImplementedError

    def result_messages(
        self, calls: Sequence[Any], results: Sequence[CallResult | None]
    ) -> list[dict[str, Any]]:
        """The messages that carry each call's result back to the model."""
        raise NotImplementedError
