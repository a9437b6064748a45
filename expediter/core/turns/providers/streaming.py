"""Streaming: collect OpenAI ``tool_calls`` deltas and Anthropic ``input_json_delta`` fragments
into the response a non-streaming call would have returned, so parsing is the same."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from expediter.core.turns.providers.base import as_list

__all__ = ["AnthropicStream", "OpenAIChatStream", "StreamAccumulator"]


def _index(event: Mapping[str, Any]) -> int:
    """An event's ``index`` (0 when missing or not a number)."""
    try:
        return int(event.get("index") or 0)
    except (TypeError, ValueError):
        return 0


class StreamAccumulator:
    """Feed stream events in order; ``response()`` is the equivalent complete response."""

    def feed(self, event: Mapping[str, Any]) -> None:
        """Take one streamed chunk or event (its parsed JSON, or the SDK's ``model_dump()``)."""
        raise NotImplementedError

    def feed_all(self, events: Iterable[Mapping[str, Any]]) -> StreamAccumulator:
        """Take every event of a stream; returns self."""
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
        choices = as_list(event.get("choices"))
        if not choices or not isinstance(choices[0], Mapping):
            return
        delta = choices[0].get("delta")
        if not isinstance(delta, Mapping):
            return
        if delta.get("content"):
            self._text.append(str(delta["content"]))
        for fragment in as_list(delta.get("tool_calls")):
            if not isinstance(fragment, Mapping):
                continue
            index = _index(fragment)
            call = self._calls.get(index)
            if call is not None and fragment.get("id") and call["id"] not in (None, fragment["id"]):
                # A new id at a used index: a provider (Mistral) that streams whole calls
                # without an index. Keep the calls apart, in arrival order.
                index = max(self._calls) + 1
                call = None
            if call is None:
                call = self._calls[index] = {"id": None, "name": "", "arguments": ""}
            if fragment.get("id"):
                call["id"] = fragment["id"]
            function = fragment.get("function") or {}
            if not isinstance(function, Mapping):
                call["malformed"] = function  # read later into the call's error
                continue
            if function.get("name"):
                call["name"] += function["name"]
            if function.get("arguments"):
                call["arguments"] += function["arguments"]

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
        self._json: dict[int, list[str]] = {}

    def feed(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), Mapping):
            self._message.update({k: v for k, v in event["message"].items() if k != "content"})
        elif kind == "content_block_start":
            block = event.get("content_block")
            self._blocks[_index(event)] = dict(block) if isinstance(block, Mapping) else {}
        elif kind == "content_block_delta":
            index = _index(event)
            block = self._blocks.setdefault(index, {"type": "text", "text": ""})
            delta = event.get("delta")
            if not isinstance(delta, Mapping):
                return
            if delta.get("type") == "input_json_delta":
                self._json.setdefault(index, []).append(str(delta.get("partial_json") or ""))
            elif delta.get("type") == "text_delta":
                block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
        elif kind == "message_delta" and isinstance(event.get("delta"), Mapping):
            self._message.update(event["delta"])

    def response(self) -> dict[str, Any]:
        content = []
        for index, block in sorted(self._blocks.items()):
            block = dict(block)
            fragments = self._json.get(index)
            if block.get("type") == "tool_use" and fragments is not None:
                text = "".join(fragments)
                try:
                    block["input"] = json.loads(text) if text.strip() else {}
                except json.JSONDecodeError:
                    block["input"] = text  # parsed later into an argument error
            content.append(block)
        return {**self._message, "content": content}
