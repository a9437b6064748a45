"""Streaming: collect OpenAI ``tool_calls`` deltas and Anthropic ``input_json_delta`` fragments
into the response a non-streaming call would have returned, so parsing is the same.

Chunks come from the model's side: a chunk that is not an object, or a field of the wrong
kind, never raises here. A call's field that arrives as something other than text is kept as
it came, so that parsing the response refuses that call and says which field was wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from expediter.core.turns.providers.base import as_list, decode_json
from expediter.errors import ArgumentError

__all__ = ["AnthropicStream", "OpenAIChatStream", "StreamAccumulator"]


def _is_object(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def _add(call: dict[str, Any], key: str, piece: Any) -> None:
    """Add one streamed piece of a text field (a name, the arguments) to a call, when the
    piece or the field so far is not text (the usual case is handled inline)."""
    current = call[key]
    if type(current) is str:
        if type(piece) is str:
            call[key] = current + piece
        else:  # a whole object at once, or a field of the wrong kind: parsing decides
            call[key] = [current, piece] if current else piece
    elif type(current) is not list:
        call[key] = [current, piece]  # an object followed by more: never one object
    # A list is already refused by parsing, whatever follows.


class StreamAccumulator:
    """Feed stream events in order; ``response()`` is the equivalent complete response."""

    def feed(self, event: Mapping[str, Any]) -> None:
        """Take one streamed chunk or event (its parsed JSON, or the SDK's ``model_dump()``);
        anything that is not an object is skipped."""
        raise NotImplementedError

    def feed_all(self, events: Iterable[Mapping[str, Any]]) -> StreamAccumulator:
        """Take every event of a stream; returns self."""
        if isinstance(events, str | bytes | Mapping) or not isinstance(events, Iterable):
            raise ArgumentError(
                "a stream is a sequence of chunks (each a parsed JSON object), "
                f"not {type(events).__name__}"
            )
        for event in events:
            self.feed(event)
        return self

    def response(self) -> dict[str, Any]:
        """The response as the non-streaming API would have returned it."""
        raise NotImplementedError


class OpenAIChatStream(StreamAccumulator):
    """Chat Completions chunks (also Mistral's): ``choices[0].delta.tool_calls[]`` by index."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}

    def feed(self, event: Mapping[str, Any]) -> None:
        # Plain type checks before the general ones, and text added inline: this runs once
        # per chunk (DESIGN section 9: within the provider SDK's own accumulator's time).
        if not _is_object(event):
            return
        choices = as_list(event.get("choices"))
        if not choices or not _is_object(choices[0]):
            return
        delta = choices[0].get("delta")
        if not _is_object(delta):
            return
        content = delta.get("content")
        if content and type(content) is str:
            self._text.append(content)
        for fragment in as_list(delta.get("tool_calls")):
            if not _is_object(fragment):
                continue
            index = fragment.get("index")
            if type(index) is not int:
                index = 0  # missing (Mistral), or not a number
            call = self._calls.get(index)
            given = fragment.get("id")
            if (
                call is not None
                and given
                and type(given) is str
                and call["id"] is not None
                and call["id"] != given
            ):
                # A new id at a used index: a provider (Mistral) that streams whole calls
                # without an index. Keep the calls apart, in arrival order.
                index = max(self._calls) + 1
                call = None
            if call is None:
                call = self._calls[index] = {"id": None, "name": "", "arguments": ""}
            if given:
                call["id"] = given  # not text: kept, and the parsed call refused
            function = fragment.get("function") or {}
            if not _is_object(function):
                call["malformed"] = function  # read later into the call's error
                continue
            name = function.get("name")
            if name:
                if type(name) is str and type(call["name"]) is str:
                    call["name"] += name
                else:
                    _add(call, "name", name)
            arguments = function.get("arguments")
            if arguments:
                if type(arguments) is str and type(call["arguments"]) is str:
                    call["arguments"] += arguments
                else:
                    _add(call, "arguments", arguments)

    def response(self) -> dict[str, Any]:
        calls = [
            {
                "id": call["id"],
                "type": "function",
                "function": call["malformed"]
                if "malformed" in call
                else {"name": call["name"], "arguments": call["arguments"]},
            }
            for _, call in sorted(self._calls.items())
        ]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if calls:
            message["tool_calls"] = calls
        return {"choices": [{"index": 0, "message": message}]}


class AnthropicStream(StreamAccumulator):
    """Messages stream events: ``content_block_start`` / ``_delta`` / ``_stop`` by index."""

    def __init__(self) -> None:
        self._message: dict[str, Any] = {"role": "assistant", "content": []}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[Any]] = {}
        #: Blocks some of whose ``partial_json`` pieces were not text.
        self._mixed: set[int] = set()

    def feed(self, event: Mapping[str, Any]) -> None:
        if not _is_object(event):
            return
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if _is_object(message):
                self._message.update({k: v for k, v in message.items() if k != "content"})
        elif kind == "content_block_start":
            block = event.get("content_block")
            index = event.get("index")
            index = index if type(index) is int else 0
            self._blocks[index] = dict(block) if _is_object(block) else {}
        elif kind == "content_block_delta":
            index = event.get("index")
            index = index if type(index) is int else 0
            block = self._blocks.setdefault(index, {"type": "text", "text": ""})
            delta = event.get("delta")
            if not _is_object(delta):
                return
            if delta.get("type") == "input_json_delta":
                piece = delta.get("partial_json")
                if piece:
                    if type(piece) is not str:
                        self._mixed.add(index)
                    self._json.setdefault(index, []).append(piece)
            elif delta.get("type") == "text_delta":
                text, piece = block.get("text"), delta.get("text")
                if type(piece) is str and (text is None or type(text) is str):
                    block["text"] = (text or "") + piece
        elif kind == "message_delta":
            delta = event.get("delta")
            if _is_object(delta):
                self._message.update(delta)

    def response(self) -> dict[str, Any]:
        content = []
        for index, block in sorted(self._blocks.items()):
            block = dict(block)
            fragments = self._json.get(index)
            if block.get("type") == "tool_use" and fragments is not None:
                if index in self._mixed:
                    block["input"] = fragments  # not an object: parsed into an argument error
                else:
                    text = "".join(fragments)
                    value, problem = decode_json(text) if text.strip() else ({}, None)
                    # Text that does not decode is kept: parsing turns it into the error.
                    block["input"] = text if problem is not None else value
            content.append(block)
        return {**self._message, "content": content}
