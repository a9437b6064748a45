"""What every stream accumulator shares: reading a chunk's fields (a JSON object or an SDK
object, read in place), joining a call's streamed argument pieces, and deciding whether a call
whose end did not arrive is complete.

The accumulators themselves live beside it, one module per wire format:
``streams_openai`` (Chat Completions, Mistral, Responses), ``streams_anthropic``,
``streams_gemini`` and ``streams_ollama``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from expediter.core.turns.providers.base import Malformed, RawCall

__all__ = [
    "by_index",
    "fields_of",
    "joined_arguments",
    "mark_unfinished",
    "plain",
    "sdk_response",
    "sent_arguments",
    "skipped",
    "unfinished",
]

logger = logging.getLogger(__name__)


#: Whether each type met is an SDK (pydantic) model class. A cache, because asking a model
#: class costs more than reading a whole chunk: the stream budget (benchmarks/README.md). Only
#: types land here (JSON values are a handful of them), and it stops growing at 1,000.
_MODEL_TYPES: dict[type, bool] = {}


def _is_model_type(kind: type) -> bool:
    known = _MODEL_TYPES.get(kind)
    if known is None:
        known = hasattr(kind, "__pydantic_fields__")
        if len(_MODEL_TYPES) < 1_000:
            _MODEL_TYPES[kind] = known
    return known


def fields_of(value: Any) -> Mapping[str, Any] | None:
    """A chunk's object as a mapping: a JSON object as is, an SDK (pydantic) object's fields
    read in place (its ``__dict__``, no copy, no ``model_dump``); None for anything else.

    Callers test ``type(value) is dict`` first: this is the slower path."""
    if _is_model_type(type(value)):
        fields = getattr(value, "__dict__", None)
        return fields if type(fields) is dict else None
    if isinstance(value, Mapping):
        return value
    return None


def plain(value: Any) -> Any:
    """An object of a chunk as a JSON-shaped dict (an SDK object dumped by its JSON names,
    without unset fields); other values as they are. Only for what is kept, once per item:
    never per chunk."""
    if type(value) is dict:
        return value
    if _is_model_type(type(value)):
        try:
            return value.model_dump(by_alias=True, exclude_none=True)
        except Exception:  # an SDK object that cannot write itself out: nothing to keep
            logger.debug("a streamed SDK object could not be dumped", exc_info=True)
            return {}
    if isinstance(value, Mapping):
        return dict(value)
    return value


def sdk_response(value: Any) -> dict[str, Any] | None:
    """A whole response given as the provider SDK's object (``ChatCompletion``, anthropic's
    ``Message``, google-genai's ``GenerateContentResponse`` ...) as its JSON-named dict, None
    for anything that is no SDK object; ``ValueError`` when the object cannot write itself
    out."""
    if not _is_model_type(type(value)):
        return None
    try:
        # Only the fields the response had: the same JSON it came as, so an id made up for an
        # id-less call is the same whichever form of the response is read.
        dumped = value.model_dump(by_alias=True, exclude_unset=True)
    except Exception as exc:
        raise ValueError(f"{type(value).__name__}.model_dump() failed: {exc!r:.200}") from exc
    return dumped if type(dumped) is dict else None


def by_index(entries: list[Any]) -> list[Any]:
    """Entries (calls, blocks, items) in the order of their ``index`` when each has an integer
    one, as the complete response orders them (arrival order for ties); else as they came."""
    if len(entries) < 2 or any(type(entry.index) is not int for entry in entries):
        return entries
    return sorted(entries, key=_index_of)


def _index_of(entry: Any) -> int:
    index: int = entry.index
    return index


def skipped(chunk: Any, exc: Exception) -> None:
    """Note a chunk the accumulator could not read (it is skipped, never raised on)."""
    logger.debug(
        "a stream chunk could not be read and was skipped",
        extra={"chunk_type": type(chunk).__name__},
        exc_info=exc,
    )


def _paired(text: str) -> str:
    """Text whose surrogate halves, streamed in separate chunks (each chunk's JSON carried one
    ``\\udXXX`` escape), are joined into the characters they encode; lone halves stay."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def joined_arguments(pieces: list[Any], mixed: bool) -> Any:
    """A call's streamed argument pieces as one value: the joined text (decoded once, later),
    or, when some piece was not text (``mixed``), bytes joined and decoded as UTF-8, a single
    object as it came (Mistral sends whole objects), or the pieces as a list, which parsing
    refuses ("not an array")."""
    if not mixed:
        return _paired(pieces[0] if len(pieces) == 1 else "".join(pieces))
    if all(type(piece) is str or isinstance(piece, bytes | bytearray) for piece in pieces):
        data = b"".join(
            piece.encode("utf-8", "surrogatepass") if type(piece) is str else bytes(piece)
            for piece in pieces
        )
        try:
            return _paired(data.decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError as exc:
            return Malformed(
                f"the arguments are not valid UTF-8 text (byte {exc.start} cannot be read)"
            )
    return pieces[0] if len(pieces) == 1 else list(pieces)


def unfinished(arguments: Any) -> bool:
    """Whether arguments whose call's end did not arrive can only be the start of the call's
    arguments: text that does not decode, or decodes to something other than an object.

    A JSON object is self-delimiting, so text that decodes to one is complete whatever the
    stream did next; text with a problem no continuation could mend (another value after the
    first, nesting too deep, an integer too long) is reported as that problem instead."""
    if type(arguments) is not str:
        return False  # an object sent whole, or a value parsing refuses for what it is
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return exc.msg != "Extra data"
    except (ValueError, RecursionError):
        return False
    return type(value) is not dict


def _cut_short(raw: RawCall) -> RawCall:
    return attrs.evolve(
        raw,
        arguments=Malformed(
            "the stream ended before this call was complete (its arguments were cut short); "
            "make the call again"
        ),
    )


def mark_unfinished(
    raws: list[RawCall], complete: list[bool], arguments: list[Any]
) -> list[RawCall]:
    """``raws`` (read from the rebuilt response, one per streamed call, in order) with the
    arguments of each call that neither ended nor ``unfinished`` clears replaced by a
    ``Malformed`` saying the stream ended first: never a guess at the rest."""
    if all(complete) or len(raws) != len(complete):
        return raws
    return [
        _cut_short(raw)
        if not done and not isinstance(raw.arguments, Malformed) and unfinished(value)
        else raw
        for raw, done, value in zip(raws, complete, arguments, strict=True)
    ]


def sent_arguments(arguments: Any) -> str:
    """A call's arguments as the JSON text a message sends back (OpenAI's APIs take only
    text): text as it came, an object written out, anything else (a value parsing refused,
    ``Malformed``) ``"{}"``, since the call's result says what was wrong."""
    if type(arguments) is str:
        return arguments
    if isinstance(arguments, Mapping):
        try:
            return json.dumps(arguments, ensure_ascii=False, allow_nan=False)
        except (ValueError, TypeError, RecursionError):
            return "{}"
    return "{}"


#: What an adapter hands its accumulator: its own ``read_calls``, so a streamed call is read
#: exactly as the same call in a complete response.
ReadCalls = Callable[[Mapping[str, Any]], list[RawCall]]
