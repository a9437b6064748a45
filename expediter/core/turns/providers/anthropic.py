"""Anthropic Messages: ``input_schema`` tools, ``tool_use`` blocks, one ``tool_result`` message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from expediter.core.turns.providers.base import (
    CallResult,
    Provider,
    RawCall,
    ToolSpec,
    as_list,
    result_text,
    synthetic_id,
)

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
        calls = []
        for index, block in enumerate(as_list(response.get("content"))):
            if not isinstance(block, Mapping) or block.get("type") != "tool_use":
                continue
            calls.append(
                RawCall(
                    call_id=str(block.get("id") or synthetic_id(block, index)),
                    name=str(block.get("name") or ""),
                    arguments=block.get("input"),
                )
            )
        return calls

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
