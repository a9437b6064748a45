"""The stream accumulator for Gemini's ``streamGenerateContent`` chunks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from expediter.core.turns.providers.base import RawCall, StreamAccumulator, as_list, field
from expediter.core.turns.providers.streaming import ReadCalls, fields_of, plain, skipped

__all__ = ["GeminiStream"]


class _Text:
    """A text part growing across chunks: the part that opened it and the text since."""

    __slots__ = ("base", "closed", "key", "pieces", "signature", "thought")

    def __init__(self, base: Any, text: str, thought: bool) -> None:
        self.base = base
        self.pieces = [text]
        self.thought = thought
        self.signature: Any = None
        #: How the signature's key was spelled (``thoughtSignature`` or the SDK's snake_case).
        self.key = "thoughtSignature"
        #: Whether a signature closed the part (text after it is a new part).
        self.closed = False


class GeminiStream(StreamAccumulator):
    """Chunks of a streamed ``generateContent`` (each a ``GenerateContentResponse``: REST
    camelCase, or the SDK's object with snake_case attributes, read in place).

    Parts add up across chunks: the first text part of a chunk continues the last text part
    so far when both are thoughts or both are not, and no thought signature closed it (a
    signature comes with the last piece of its part, often an empty text); every other part
    (a function call, above all) is kept whole, with its thought signature. Function calls
    arrive whole, so every call is complete as soon as it arrives; ``finishReason`` marks the
    end. Id-less calls get the ids the complete response's parse would give them, since
    ``response()`` rebuilds its parts (SDK parts as ``model_dump(by_alias=True,
    exclude_none=True)`` writes them).
    """

    def __init__(self, read_calls: ReadCalls) -> None:
        self._read_calls = read_calls
        self._parts: list[Any] = []
        self._finish: Any = None
        self._usage: Any = None
        self._model: Any = None
        self._response_id: Any = None

    def feed(self, chunk: Any) -> None:
        """Take one chunk (a parsed JSON object or an SDK response); anything else is
        skipped."""
        # Plain type checks, text joined in place: the per-chunk budget (benchmarks/README.md).
        try:
            if type(chunk) is not dict:
                chunk = fields_of(chunk)
                if chunk is None:
                    return
            candidates = chunk.get("candidates")
            if candidates:
                for candidate in as_list(candidates):
                    if type(candidate) is not dict:
                        candidate = fields_of(candidate)
                    if candidate is None:
                        continue
                    number = candidate.get("index")
                    if number and type(number) is int:
                        continue  # another of several candidates: this follows the first
                    self._candidate(candidate)
                    break
            usage = field(chunk, "usageMetadata", "usage_metadata")
            if usage is not None:
                self._usage = usage
            if self._model is None:
                self._model = field(chunk, "modelVersion", "model_version")
                self._response_id = field(chunk, "responseId", "response_id")
        except Exception as exc:  # what a model sent never stops the stream
            skipped(chunk, exc)

    def _candidate(self, candidate: Mapping[str, Any]) -> None:
        content = candidate.get("content")
        if content is not None:
            if type(content) is not dict:
                content = fields_of(content)
            if content is not None:
                parts = content.get("parts")
                if parts:
                    self._add(as_list(parts))
        finish = field(candidate, "finishReason", "finish_reason")
        if finish is not None:
            self._finish = finish

    def _add(self, parts: list[Any]) -> None:
        first = True
        for part in parts:
            fields = part if type(part) is dict else fields_of(part)
            text = fields.get("text") if fields is not None else None
            if (
                fields is None
                or type(text) is not str
                or field(fields, "functionCall", "function_call") is not None
            ):
                self._parts.append(part)  # kept whole: read (or refused) as the response's
                first = False
                continue
            thought = fields.get("thought") is True
            last = self._parts[-1] if first and self._parts else None
            if type(last) is _Text and not last.closed and last.thought is thought:
                last.pieces.append(text)
            else:
                last = _Text(part, text, thought)
                self._parts.append(last)
            first = False
            signature = field(fields, "thoughtSignature", "thought_signature")
            if signature is not None:
                last.signature, last.closed = signature, True
                if type(part) is dict and "thoughtSignature" not in part:
                    last.key = "thought_signature"

    def _rebuilt_parts(self) -> list[Any]:
        parts = []
        for entry in self._parts:
            if type(entry) is not _Text:
                parts.append(plain(entry))
                continue
            base = plain(entry.base)
            part = dict(base) if isinstance(base, Mapping) else {}
            part["text"] = "".join(entry.pieces)
            if entry.signature is not None:
                other = (
                    "thought_signature" if entry.key == "thoughtSignature" else "thoughtSignature"
                )
                part.pop(other, None)
                part[entry.key] = entry.signature
            parts.append(part)
        return parts

    def text(self) -> str:
        return "".join(
            "".join(entry.pieces)
            for entry in self._parts
            if type(entry) is _Text and not entry.thought
        )

    def finished(self) -> bool:
        return self._finish is not None

    def response(self) -> dict[str, Any]:
        """The ``GenerateContentResponse`` the request would have returned without streaming,
        in the REST API's camelCase."""
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": self._rebuilt_parts()}}
        if self._finish is not None:
            candidate["finishReason"] = self._finish
        candidate["index"] = 0
        response: dict[str, Any] = {"candidates": [candidate]}
        if self._usage is not None:
            response["usageMetadata"] = plain(self._usage)
        if self._model is not None:
            response["modelVersion"] = self._model
        if self._response_id is not None:
            response["responseId"] = self._response_id
        return response

    def message(self) -> dict[str, Any]:
        """``{"role": "model", "parts": [...]}``: text joined, every part's thought signature
        kept on it."""
        return {"role": "model", "parts": self._rebuilt_parts()}

    def raw_calls(self) -> list[RawCall]:
        return self._read_calls(self.response())
