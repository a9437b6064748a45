"""What ``toolset.stream(provider)`` returns: a provider's stream accumulator whose calls come
out resolved against the toolset, as ``parse_calls`` resolves a complete response's."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, final

from expediter.core.records.calls import ToolCall
from expediter.core.turns.providers.base import RawCall, StreamAccumulator
from expediter.errors import ArgumentError

__all__ = ["CallStream"]


@final
class CallStream:
    """One streamed response: ``feed(chunk)`` each chunk or event as the provider's SDK
    yields it (or its parsed JSON), then ``calls()`` for the ``ToolCall``s, ``text()`` for the
    streamed text and ``message()`` for the assistant message to append to the conversation.

    ``feed`` is the accumulator's own method (no wrapper on the per-chunk path); a chunk
    of the wrong shape is skipped, never raised on."""

    __slots__ = ("_accumulator", "_name", "_resolve", "feed")

    def __init__(
        self, accumulator: StreamAccumulator, resolve: Callable[[RawCall], ToolCall], name: str
    ) -> None:
        self._accumulator = accumulator
        self._resolve = resolve
        self._name = name
        #: Take the next chunk or event of the stream (a dict, or the SDK's object for it).
        self.feed: Callable[[Any], None] = accumulator.feed

    def feed_all(self, chunks: Iterable[Any]) -> CallStream:
        """Take every chunk of a stream, in order; returns self (``ArgumentError`` when
        ``chunks`` is not a sequence of chunks, or when a pack's accumulator raises on one)."""
        accumulator = self._accumulator
        if type(accumulator).feed_all is not StreamAccumulator.feed_all:
            accumulator.feed_all(chunks)  # the adapter's own loop
            return self
        if isinstance(chunks, str | bytes | Mapping) or not isinstance(chunks, Iterable):
            accumulator.feed_all(chunks)  # raises the ArgumentError saying what a stream is
        feed = self.feed
        for chunk in chunks:  # what the iterator raises (the network, say) is not the adapter's
            try:
                feed(chunk)
            except Exception as exc:  # the built-in accumulators never raise; a pack's might
                raise self._failed("reading a chunk", exc) from exc
        return self

    def _failed(self, doing: str, exc: Exception) -> ArgumentError:
        """The error for a pack's accumulator that raised (its text is left out: it may quote
        the model)."""
        return ArgumentError(
            f"the {self._name} stream accumulator failed {doing} "
            f"({type(exc).__name__}): report it to the adapter's authors"
        )

    def calls(self) -> list[ToolCall]:
        """The calls streamed so far, in order, each resolved (or with ``error`` saying why it
        cannot run, e.g. that the stream ended before the call was complete)."""
        return [self._resolve(raw) for raw in self.raw_calls()]

    def raw_calls(self) -> list[RawCall]:
        """The calls as read, before their names are resolved."""
        try:
            return self._accumulator.raw_calls()
        except Exception as exc:  # the built-in accumulators never raise here; a pack's might
            raise self._failed("reading the calls", exc) from exc

    def text(self) -> str:
        """The visible text streamed so far (not the model's reasoning)."""
        return self._accumulator.text()

    def finished(self) -> bool:
        """Whether the stream's finish event arrived (else it was cut short, so far)."""
        return self._accumulator.finished()

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation, in the provider's shape
        (for ``openai-responses``: ``{"output": [items]}``, the items to add to ``input``)."""
        try:
            return self._accumulator.message()
        except Exception as exc:  # the built-in accumulators never raise here; a pack's might
            raise self._failed("building the message", exc) from exc

    def response(self) -> dict[str, Any]:
        """The response the request would have returned without streaming."""
        try:
            return self._accumulator.response()
        except Exception as exc:  # the built-in accumulators never raise here; a pack's might
            raise self._failed("building the response", exc) from exc
