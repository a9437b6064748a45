"""What every provider adapter does, and the helpers they share.

An adapter turns one offered action into the provider's tool definition, reads the provider's
response (as the parsed JSON of its HTTP API, or its SDK's ``model_dump()``) into raw calls,
and builds the messages that carry results back. Resolving names, checking arguments and
dropping strict-mode nulls happen once, in the toolset, for every provider alike.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, Protocol

import attrs

from expediter.core.records.calls import NO_EXTRAS
from expediter.core.records.jsonread import decode_error
from expediter.core.records.limits import MAX_DEPTH, json_problem
from expediter.core.turns.providers.jsonschema import strict_schema
from expediter.errors import ArgumentError, UnknownProvider

__all__ = [
    "MAX_DEPTH",
    "CallResult",
    "Malformed",
    "NotJSON",
    "Provider",
    "RawCall",
    "StreamAccumulator",
    "ToolSpec",
    "Unreadable",
    "as_list",
    "decode_json",
    "field",
    "given_id",
    "id_maker",
    "json_kind",
    "json_problem",
    "parse_arguments",
    "read_each",
    "refuse_constant",
    "result_text",
    "synthetic_id",
    "text_field",
    "usable_message_id",
]

logger = logging.getLogger(__name__)

_ALPHABET = string.ascii_letters + string.digits


class NotJSON(ValueError):
    """A value Python's decoder reads but JSON does not have (``NaN``, ``Infinity``, 1e999)."""


def refuse_constant(text: str) -> Any:
    """``parse_constant`` for a JSON decoder: NaN and Infinity are not JSON."""
    raise NotJSON(f"{text} is not a JSON value")


def _finite(text: str) -> float:
    number = float(text)
    if number - number != 0.0:  # inf - inf is nan: only non-finite numbers get here
        raise NotJSON(f"the number {text[:40]} is out of range")
    return number


# Called by the C scanner only for float literals and NaN/Infinity: integer-only arguments
# (the turn benchmark's) decode as fast as with the default decoder.
_DECODE = json.JSONDecoder(parse_constant=refuse_constant, parse_float=_finite).decode


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


def _json_form(value: Any) -> Any:
    # Bytes as JSON carries them (an SDK object's thought signature is the base64 text of a
    # response's JSON), so both forms of one response make the same ids.
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    return repr(value)


def _seed_text(seed: Any) -> str:
    try:
        return json.dumps(seed, sort_keys=True, default=_json_form, ensure_ascii=False)
    except (RecursionError, ValueError, TypeError):
        return ""  # a seed too deep or odd to write out: the position alone, still stable


def _id_from(text: str, index: int) -> str:
    data = f"{index}\x1f{text}".encode("utf-8", "surrogatepass")  # lone surrogates too
    number = int.from_bytes(hashlib.sha256(data).digest()[:8], "big")
    chars = []
    for _ in range(9):
        number, remainder = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[remainder])
    return "".join(chars)


def synthetic_id(seed: Any, index: int) -> str:
    """Nine alphanumerics, the same for the same response and position (for id-less calls)."""
    return _id_from(_seed_text(seed), index)


def id_maker(seed: Any) -> Callable[[int], str]:
    """``synthetic_id(seed, index)`` by index, writing the seed out once however many calls
    need an id (a response of many id-less calls costs linear time, not quadratic)."""
    text: list[str] = []

    def make(index: int) -> str:
        if not text:
            text.append(_seed_text(seed))
        return _id_from(text[0], index)

    return make


class Unreadable(Exception):
    """A field of one call has the wrong type: the message says which, for the model.

    Raised while an adapter reads one call and caught by ``read_each``: it never escapes.
    """


def read_each(
    items: Iterable[Any],
    read: Callable[[Any, int], RawCall | None],
    make_id: Callable[[int], str] | None = None,
) -> list[RawCall]:
    """``read(item, index)`` for each item; an item that cannot be read is a call whose error
    says why, never an exception (an item ``read`` returns None for is not a call).

    ``make_id`` makes up the id of such a call (default: ``synthetic_id`` of the item).
    """
    calls = []
    for index, item in enumerate(items):
        try:
            call = read(item, index)
        except Exception as exc:  # what a model wrote must never stop the turn
            call = _unreadable(item, index, make_id, exc)
        if call is not None:
            calls.append(call)
    return calls


def _unreadable(
    item: Any, index: int, make_id: Callable[[int], str] | None, exc: Exception
) -> RawCall:
    if isinstance(exc, Unreadable):
        problem = str(exc)
    else:
        logger.debug("a tool call could not be read", exc_info=exc)
        problem = "a field of the tool call has the wrong type or nests too deeply"
    given = field(item, "id", "call_id") if isinstance(item, Mapping) else None
    if type(given) is str and given:
        identifier = given
    else:
        identifier = synthetic_id(item, index) if make_id is None else make_id(index)
    return RawCall(call_id=identifier, name="", arguments=Malformed(problem))


def text_field(value: Any, what: str) -> str:
    """A call's field that must be text (its name), as read: ``""`` when missing,
    ``Unreadable`` naming ``what`` when the model sent another kind of value."""
    if type(value) is str:
        return value
    if value is None:
        return ""
    raise Unreadable(f'the call\'s "{what}" must be a string, not {json_kind(value)}')


#: What a response's id may hold to key the ledger (``message_id:call_id``): provider ids
#: (``chatcmpl-...``, ``msg_...``, ``resp_...``, Gemini's base64 ``responseId``) fit; a colon,
#: space, control character or anything longer does not.
_MESSAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+/=-]{0,199}")


def usable_message_id(value: Any) -> str | None:
    """``value`` when it can key a turn's calls in the ledger as a message id, else None."""
    if type(value) is str and _MESSAGE_ID.fullmatch(value):
        return value
    return None


def given_id(value: Any, what: str = "id") -> str | None:
    """A call's id as the provider gave it (an integer as its digits), None when there is
    none, ``Unreadable`` naming ``what`` for any other kind of value."""
    if type(value) is str:
        return value or None
    if value is None:
        return None
    if type(value) is int and value.bit_length() <= 64:
        return str(value)
    raise Unreadable(f'the call\'s "{what}" must be a string, not {json_kind(value)}')


def _decode_problem(exc: ValueError | RecursionError) -> str:
    """What a failed decode of arguments says to the model."""
    if isinstance(exc, json.JSONDecodeError):
        exc = decode_error(exc)
        if exc.msg == "Extra data":
            return (
                "the arguments hold more than one JSON value (e.g. two objects run together); "
                "send exactly one JSON object"
            )
        return f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})"
    if isinstance(exc, NotJSON):
        return f"the arguments are not valid JSON ({exc})"
    if isinstance(exc, RecursionError):
        return f"the arguments nest more than {MAX_DEPTH} levels deep"
    return "the arguments hold an integer too long to read"  # Python's int_max_str_digits


def decode_json(text: str) -> tuple[Any, str | None]:
    """``(value, None)`` for JSON text, or ``(None, what was wrong)``: never an exception,
    whatever the text (deep nesting, NaN, huge numbers included)."""
    try:
        value = _DECODE(text)
    except (ValueError, RecursionError) as exc:
        return None, _decode_problem(exc)
    # Only text with that many brackets can nest that deep: most arguments skip the walk.
    if len(text) > MAX_DEPTH and text.count("[") + text.count("{") > MAX_DEPTH:
        problem = json_problem(value)
        if problem is not None:
            return None, problem
    return value, None


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Return ``(arguments, None)``, or ``({}, what was wrong)`` for malformed arguments."""
    if type(raw) is not str:  # the usual case (a JSON string) first: the turn budget
        if raw is None:
            return {}, None
        if type(raw) is dict or isinstance(raw, Mapping):
            # Already decoded (Anthropic, Gemini, Ollama): checked, since Python may have
            # decoded what JSON does not allow.
            problem = json_problem(raw)
            return ({}, problem) if problem is not None else (dict(raw), None)
        if isinstance(raw, bytes | bytearray):
            raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        if isinstance(raw, Malformed):
            return {}, raw.problem
        return {}, f"the arguments must be a JSON object, not {json_kind(raw)}"
    if not raw or raw.isspace():
        return {}, None
    try:  # decode_json, inline: the turn budget
        value = _DECODE(raw)
    except (ValueError, RecursionError) as exc:
        return {}, _decode_problem(exc)
    if type(value) is not dict:
        return {}, f"the arguments must be a JSON object, not {json_kind(value)}"
    if len(raw) > MAX_DEPTH and raw.count("[") + raw.count("{") > MAX_DEPTH:
        problem = json_problem(value)
        if problem is not None:
            return {}, problem
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


class StreamAccumulator:
    """One streamed response, fed chunk by chunk (the parsed JSON of each chunk or event, or the
    SDK's object for it). What a chunk holds comes from the model's side: a chunk of the wrong
    shape is skipped or kept for parsing to refuse, never raised on.

    An adapter's ``stream()`` returns one; ``toolset.stream(provider)`` wraps it so ``calls()``
    gives resolved ``ToolCall``s.
    """

    def feed(self, chunk: Any) -> None:
        """Take the next chunk or event of the stream."""
        raise NotImplementedError

    def feed_all(self, chunks: Iterable[Any]) -> StreamAccumulator:
        """Take every chunk of a stream, in order; returns self."""
        if isinstance(chunks, str | bytes | Mapping) or not isinstance(chunks, Iterable):
            raise ArgumentError(
                "a stream is a sequence of chunks (each a parsed JSON object), "
                f"not {type(chunks).__name__}"
            )
        feed = self.feed
        for chunk in chunks:
            feed(chunk)
        return self

    def text(self) -> str:
        """The text the model streamed so far (its visible answer, not its reasoning)."""
        return ""

    def finished(self) -> bool:
        """Whether the stream's finish event arrived (else the stream was cut short)."""
        return True

    def response(self) -> dict[str, Any]:
        """The response the non-streaming API would have returned for what was fed."""
        raise NotImplementedError

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation, in the provider's shape."""
        raise NotImplementedError

    def raw_calls(self) -> list[RawCall]:
        """The calls streamed so far, in order. A call whose end did not arrive is returned
        with ``Malformed`` arguments saying so (never a guess at the rest)."""
        raise NotImplementedError


class Provider:
    """A provider adapter: the protocol every provider implements, built-in or from a pack
    (public as ``expediter.Provider``, with what adapters are written with in
    ``expediter.providers``; packs register instances through the
    ``register_providers(register)`` hook). Subclass it and override what differs.

    - ``name``: what users pass as ``provider`` (lower case, ``[a-z0-9][a-z0-9._-]*``, at
      most 64 characters; a pack may not take a built-in's).
    - ``tool`` / ``tools``: the request's tool list; ``parameters``: adapt a JSON Schema to
      what the provider accepts; ``strict_parameters``: the strict-mode form (raise
      ``NotStrictable`` when there is none), used when ``supports_strict``.
    - ``read_calls``: a whole response into ``RawCall``s; ``stream()``: an accumulator for a
      streamed one (``streaming`` is true when an adapter overrides it); ``message_id``: the
      id the provider gave the response, which keys its calls in the ledger.
    - ``result_messages``: the messages carrying results back.
    - ``max_name_length`` and ``name_pattern``: the function names the provider accepts (a
      function whose name breaks them is left out of its ``toolset.schemas`` list).
    """

    name: ClassVar[str] = ""
    #: Whether ``strict=True`` is supported (OpenAI and Anthropic).
    supports_strict: ClassVar[bool] = False
    #: The longest function name the provider accepts.
    max_name_length: ClassVar[int] = 64
    #: The function names the provider accepts (a regular expression, matched whole).
    name_pattern: ClassVar[str] = r"[a-zA-Z_][a-zA-Z0-9_-]*"

    def tool(self, spec: ToolSpec) -> dict[str, Any]:
        """One tool definition in the provider's shape."""
        raise NotImplementedError

    def tools(self, specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        """The value for the request's ``tools`` field."""
        return [self.tool(spec) for spec in specs]

    def parameters(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Adapt a schema to what the provider accepts (default: as is)."""
        return schema

    def strict_parameters(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The strict-mode form of a schema (default: OpenAI's and Anthropic's rules); raises
        ``NotStrictable`` when the schema has none."""
        return strict_schema(schema)

    def read_calls(self, response: Mapping[str, Any]) -> list[RawCall]:
        """The tool calls in a response, in order."""
        raise NotImplementedError

    def message_id(self, response: Mapping[str, Any]) -> str | None:
        """The id the provider gave a whole response (default: its ``"id"``), or None; the
        host uses it only when it is a usable message id (``usable_message_id``)."""
        return usable_message_id(response.get("id"))

    def stream(self) -> StreamAccumulator:
        """A new accumulator for one streamed response."""
        raise UnknownProvider(f"the {self.name} provider has no stream accumulator")

    @property
    def streaming(self) -> bool:
        """Whether this adapter reads streams (it overrides ``stream``)."""
        return type(self).stream is not Provider.stream

    def result_messages(
        self, calls: Sequence[Any], results: Sequence[CallResult | None]
    ) -> list[dict[str, Any]]:
        """The messages that carry each call's result back to the model."""
        raise NotImplementedError
