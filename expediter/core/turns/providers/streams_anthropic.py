"""The stream accumulator for Anthropic's Messages API events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from expediter.core.turns.providers.base import RawCall, StreamAccumulator, as_list, decode_json
from expediter.core.turns.providers.streaming import (
    ReadCalls,
    by_index,
    fields_of,
    joined_arguments,
    mark_unfinished,
    plain,
    skipped,
)

__all__ = ["AnthropicStream"]

#: The delta each kind of content block grows by, and the block field it grows.
_GROWS = {
    "text": ("text_delta", "text"),
    "thinking": ("thinking_delta", "thinking"),
    "tool_use": ("input_json_delta", "partial_json"),
    "server_tool_use": ("input_json_delta", "partial_json"),
    "mcp_tool_use": ("input_json_delta", "partial_json"),
}


class _Block:
    """One content block: as ``content_block_start`` opened it, and the pieces since."""

    __slots__ = (
        "base",
        "citations",
        "field",
        "grows",
        "index",
        "kind",
        "mixed",
        "pieces",
        "readable",
        "signature",
        "stopped",
    )

    def __init__(self, base: Any, fields: Mapping[str, Any] | None, index: Any) -> None:
        self.base = base
        self.index = index
        #: Whether the block is an object (anything else is no block, and skipped).
        self.readable = fields is not None
        kind = fields.get("type") if fields is not None else None
        self.kind = kind if type(kind) is str else None
        #: The delta type this block takes, and the field of that delta holding the piece.
        grows: tuple[str | None, str | None] = _GROWS.get(self.kind or "", (None, None))
        self.grows, self.field = grows
        self.pieces: list[Any] = []
        self.mixed = False
        self.signature: Any = None
        self.citations: list[Any] = []
        self.stopped = False


class AnthropicStream(StreamAccumulator):
    """Messages stream events: ``message_start``, ``content_block_start`` / ``_delta``
    (``text_delta``, ``input_json_delta``, ``thinking_delta``, ``signature_delta``,
    ``citations_delta``) / ``_stop`` by block index, ``message_delta`` and ``message_stop``.
    SDK events (``RawMessageStreamEvent``) are read by their attributes.

    A ``tool_use`` block is complete when its ``content_block_stop`` arrived, or when its
    input already is a whole JSON object; otherwise its arguments are an error saying the
    stream ended first.
    """

    def __init__(self, read_calls: ReadCalls) -> None:
        self._read_calls = read_calls
        self._start: Any = None
        self._blocks: list[_Block] = []
        self._open: dict[int, _Block] = {}
        self._delta: dict[str, Any] = {}
        self._usage: dict[str, Any] = {}
        self._finished = False

    def feed(self, event: Any) -> None:
        """Take one event (a parsed JSON object or an SDK event); anything else is skipped."""
        # Deltas first, plain type checks, nothing copied: the per-chunk budget
        # (benchmarks/README.md).
        try:
            if type(event) is not dict:
                event = fields_of(event)
                if event is None:
                    return
            kind = event.get("type")
            if kind == "content_block_delta":
                index = event.get("index")
                block = self._open.get(index) if type(index) is int else None
                delta = event.get("delta")
                if block is None or delta is None:
                    return
                if type(delta) is not dict:
                    delta = fields_of(delta)
                    if delta is None:
                        return
                grows = delta.get("type")
                if grows == block.grows:
                    piece = delta.get(block.field)
                    if type(piece) is str:
                        if piece:
                            block.pieces.append(piece)
                    elif piece is not None and block.field == "partial_json":
                        block.pieces.append(piece)  # not text: the call is refused when read
                        block.mixed = True
                elif grows == "signature_delta":
                    block.signature = delta.get("signature")
                elif grows == "citations_delta":
                    block.citations.append(plain(delta.get("citation")))
            elif kind == "content_block_start":
                base = event.get("content_block")
                index = event.get("index")
                block = _Block(base, base if type(base) is dict else fields_of(base), index)
                self._blocks.append(block)
                if type(index) is int:
                    self._open[index] = block
            elif kind == "content_block_stop":
                index = event.get("index")
                block = self._open.get(index) if type(index) is int else None
                if block is not None:
                    block.stopped = True
            elif kind == "message_start":
                self._start = event.get("message")
            elif kind == "message_delta":
                self._update(self._delta, event.get("delta"))
                self._update(self._usage, event.get("usage"))
            elif kind == "message_stop":
                self._finished = True
        except Exception as exc:  # what a model sent never stops the stream
            skipped(event, exc)

    @staticmethod
    def _update(into: dict[str, Any], value: Any) -> None:
        fields = plain(value)
        if isinstance(fields, Mapping):
            into.update(fields)

    def _json_text(self, block: _Block) -> Any:
        """A tool_use block's input as streamed: joined text, or the pieces when mixed."""
        return joined_arguments(block.pieces, block.mixed) if block.pieces else ""

    def _content(self, for_message: bool) -> list[Any]:
        content = []
        for block in by_index(self._blocks):
            if not block.readable:
                continue
            base = plain(block.base)
            rebuilt = dict(base) if isinstance(base, Mapping) else {}
            field = block.field
            if field == "partial_json":
                if block.pieces:
                    text = self._json_text(block)
                    if type(text) is str:
                        value, problem = decode_json(text) if text.strip() else ({}, None)
                        # Text that does not decode is kept: parsing turns it into the error.
                        rebuilt["input"] = text if problem is not None else value
                    else:
                        rebuilt["input"] = text
                if for_message and type(rebuilt.get("input")) is not dict:
                    rebuilt["input"] = {}  # the API takes only an object; the result says why
            elif field is not None:
                start = rebuilt.get(field)
                pieces = [piece for piece in block.pieces if type(piece) is str]
                rebuilt[field] = (start if type(start) is str else "") + "".join(pieces)
                if block.kind == "thinking" and block.signature is not None:
                    rebuilt["signature"] = block.signature
            if block.citations:
                rebuilt["citations"] = [*as_list(rebuilt.get("citations")), *block.citations]
            content.append(rebuilt)
        return content

    def text(self) -> str:
        return "".join(
            piece
            for block in by_index(self._blocks)
            if block.kind == "text"
            for piece in block.pieces
            if type(piece) is str
        )

    def finished(self) -> bool:
        return self._finished

    def response(self) -> dict[str, Any]:
        """The ``message`` the request would have returned without streaming (a tool_use
        block cut short keeps the text that arrived: ``raw_calls`` says it was cut)."""
        start = plain(self._start) if self._start is not None else None
        response: dict[str, Any] = {"type": "message", "role": "assistant"}
        if isinstance(start, Mapping):
            response.update(start)
        response.update(self._delta)
        usage = response.get("usage")
        if self._usage:
            response["usage"] = {**(usage if isinstance(usage, Mapping) else {}), **self._usage}
        response["content"] = self._content(for_message=False)
        return response

    def message(self) -> dict[str, Any]:
        """``{"role": "assistant", "content": [blocks]}``: text, thinking (with its
        signature) and tool_use blocks, a tool_use input that is not an object sent as ``{}``
        (the call's result carries the error), each tool_use carrying the id its tool_result
        will answer (made up for a block that came without one)."""
        content = self._content(for_message=True)
        uses = [block for block in content if block.get("type") == "tool_use"]
        for block, raw in zip(uses, self.raw_calls(), strict=False):
            block["id"] = raw.call_id
        return {"role": "assistant", "content": content}

    def raw_calls(self) -> list[RawCall]:
        response = self.response()
        raws = self._read_calls(response)
        complete, arguments = [], []
        for block in by_index(self._blocks):
            if block.kind == "tool_use" and block.readable:
                complete.append(block.stopped)
                arguments.append(self._json_text(block))
        return mark_unfinished(raws, complete, arguments)
