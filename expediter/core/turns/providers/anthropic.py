"""Anthropic Messages: ``input_schema`` tools, ``tool_use`` blocks, one ``tool_result`` message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from expediter.core.turns.providers.base import (
    CallResult,
    Provider,
    RawCall,
    StreamAccumulator,
    ToolSpec,
    as_list,
    given_id,
    read_each,
    result_text,
    synthetic_id,
    text_field,
)
from expediter.core.turns.providers.streams_anthropic import AnthropicStream

__all__ = ["Anthropic"]


class Anthropic(Provider):
    """Claude's tool use."""

    name: ClassVar[str] = "anthropic"
    supports_strict: ClassVar[bool] = True

    def tool(self, spec: ToolSpec) -> dict[str, Any]:
        tool: dict[str, Any] = {"name": spec.name}
        if spec.description:
            tool["description"] = spec.description
        tool["input_schema"] = spec.parameters
        if spec.strict:
            tool["strict"] = True
        return tool

    def read_calls(self, response: Mapping[str, Any]) -> list[RawCall]:
        return read_each(as_list(response.get("content")), self._read_call)

    def stream(self) -> StreamAccumulator:
        return AnthropicStream(self.read_calls)

    def _read_call(self, block: Any, index: int) -> RawCall | None:
        if not isinstance(block, Mapping) or block.get("type") != "tool_use":
            return None
        return RawCall(
            call_id=given_id(block.get("id")) or synthetic_id(block, index),
            name=text_field(block.get("name"), "name"),
            arguments=block.get("input"),
        )

    def result_messages(
        self, calls: Sequence[Any], results: Sequence[CallResult | None]
    ) -> list[dict[str, Any]]:
        blocks = []
        for call, result in zip(calls, results, strict=True):
            text, is_error = result_text(result)
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": call.call_id,
                    "content": text,
                    "is_error": is_error,
                }
            )
        # One user message whose content is only tool_result blocks, one per tool_use id.
        return [{"role": "user", "content": blocks}] if blocks else []
