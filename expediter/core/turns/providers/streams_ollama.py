"""The stream accumulator for Ollama's ``/api/chat`` NDJSON chunks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from expediter.core.turns.providers.base import RawCall, StreamAccumulator, as_list
from expediter.core.turns.providers.streaming import ReadCalls, fields_of, plain, skipped

__all__ = ["OllamaStream"]


class OllamaStream(StreamAccumulator):
    """``/api/chat`` chunks, one JSON object a line (or the SDK's ``ChatResponse``, read in
    place): ``message.content`` and ``message.thinking`` pieces, ``message.tool_calls`` whole
    calls (arguments already an object), ``"done": true`` on the last chunk. Every call is
    complete as soon as it arrives."""

    def __init__(self, read_calls: ReadCalls) -> None:
        self._read_calls = read_calls
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[Any] = []
        self._head: Mapping[str, Any] | None = None
        self._last: Mapping[str, Any] | None = None
        self._done = False

    def feed(self, chunk: Any) -> None:
        """Take one chunk (a parsed JSON object or an SDK response); anything else is
        skipped."""
        # Plain type checks, nothing copied: the per-chunk budget (benchmarks/README.md).
        try:
            if type(chunk) is not dict:
                chunk = fields_of(chunk)
                if chunk is None:
                    return
            if self._head is None:
                self._head = chunk
            self._last = chunk
            message = chunk.get("message")
            if message is not None:
                if type(message) is not dict:
                    message = fields_of(message)
                if message is not None:
                    content = message.get("content")
                    if content and type(content) is str:
                        self._text.append(content)
                    thinking = message.get("thinking")
                    if thinking and type(thinking) is str:
                        self._thinking.append(thinking)
                    calls = message.get("tool_calls")
                    if calls:
                        self._calls += as_list(calls)
            if chunk.get("done") is True:
                self._done = True
        except Exception as exc:  # what a model sent never stops the stream
            skipped(chunk, exc)

    def text(self) -> str:
        return "".join(self._text)

    def finished(self) -> bool:
        return self._done

    def message(self) -> dict[str, Any]:
        """``{"role": "assistant", "content", "thinking"?, "tool_calls"?}``."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text)}
        if self._thinking:
            message["thinking"] = "".join(self._thinking)
        if self._calls:
            message["tool_calls"] = [plain(call) for call in self._calls]
        return message

    def response(self) -> dict[str, Any]:
        """The ``/api/chat`` response the request would have returned without streaming."""
        response: dict[str, Any] = {}
        for source in (self._head, self._last):
            if source is not None:
                response.update(
                    (key, plain(value))
                    for key, value in source.items()
                    if key != "message" and value is not None
                )
        response["message"] = self.message()
        response["done"] = self._done
        return response

    def raw_calls(self) -> list[RawCall]:
        return self._read_calls(self.response())
