"""OpenAI Chat Completions and Responses, and the OpenAI-shaped Mistral and Ollama APIs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from expediter.core.turns.providers.base import (
    CallResult,
    Malformed,
    Provider,
    RawCall,
    StreamAccumulator,
    ToolSpec,
    as_list,
    field,
    given_id,
    json_kind,
    read_each,
    result_text,
    synthetic_id,
    text_field,
)
from expediter.core.turns.providers.streams_ollama import OllamaStream
from expediter.core.turns.providers.streams_openai import OpenAIChatStream, ResponsesStream

__all__ = ["Mistral", "Ollama", "OpenAIChat", "OpenAIResponses"]


def _message(response: Mapping[str, Any]) -> Mapping[str, Any]:
    """The assistant message of a completion (the first choice), or the message itself."""
    choices = as_list(response.get("choices"))
    if choices and isinstance(choices[0], dict):
        message = choices[0].get("message") or {}
        return message if isinstance(message, dict) else {}
    message = response.get("message")
    if isinstance(message, dict):
        return message
    return response


class OpenAIChat(Provider):
    """Chat Completions: ``{"type": "function", "function": {...}}`` and ``role: tool`` replies."""

    name: ClassVar[str] = "openai"
    supports_strict: ClassVar[bool] = True

    def tool(self, spec: ToolSpec) -> dict[str, Any]:
        function: dict[str, Any] = {"name": spec.name}
        if spec.description:
            function["description"] = spec.description
        function["parameters"] = spec.parameters
        if spec.strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def read_calls(self, response: Mapping[str, Any]) -> list[RawCall]:
        return read_each(as_list(_message(response).get("tool_calls")), self._read_call)

    def stream(self) -> StreamAccumulator:
        return OpenAIChatStream(self.read_calls)

    def _read_call(self, item: Any, index: int) -> RawCall | None:
        # Plain type checks first, the slower general ones only off the usual path: the turn
        # budget (benchmarks/README.md). A wrong type raises Unreadable, which read_each reports.
        if type(item) is not dict and not isinstance(item, Mapping):
            return None
        identifier = item.get("id")
        if type(identifier) is not str or not identifier:
            identifier = given_id(identifier) or synthetic_id(item, index)
        function = item.get("function") or {}
        if type(function) is not dict and not isinstance(function, Mapping):
            # Still a call the model made (its id needs an answer): an error, not a crash.
            problem = (
                'the tool call\'s "function" must be an object with "name" and '
                f'"arguments", not {json_kind(function)}'
            )
            return RawCall(call_id=identifier, name="", arguments=Malformed(problem))
        name = function.get("name")
        return RawCall(
            call_id=identifier,
            name=name if type(name) is str else text_field(name, "name"),
            arguments=function.get("arguments"),
        )

    def reply(self, call: Any, text: str) -> dict[str, Any]:
        """The message answering one call."""
        return {"role": "tool", "tool_call_id": call.call_id, "content": text}

    def result_messages(
        self, calls: Sequence[Any], results: Sequence[CallResult | None]
    ) -> list[dict[str, Any]]:
        return [
            self.reply(call, result_text(result)[0])
            for call, result in zip(calls, results, strict=True)
        ]


class Mistral(OpenAIChat):
    """Mistral: the OpenAI shape; replies also name the function."""

    name: ClassVar[str] = "mistral"
    supports_strict: ClassVar[bool] = False

    def reply(self, call: Any, text: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call.call_id, "name": call.name, "content": text}


class Ollama(OpenAIChat):
    """Ollama's ``/api/chat``: arguments arrive as an object and calls carry no id."""

    name: ClassVar[str] = "ollama"
    supports_strict: ClassVar[bool] = False

    def stream(self) -> StreamAccumulator:
        return OllamaStream(self.read_calls)

    def reply(self, call: Any, text: str) -> dict[str, Any]:
        return {"role": "tool", "tool_name": call.name, "content": text}


class OpenAIResponses(Provider):
    """The Responses API: flat function tools, ``function_call`` items, ``function_call_output``."""

    name: ClassVar[str] = "openai-responses"
    supports_strict: ClassVar[bool] = True

    def tool(self, spec: ToolSpec) -> dict[str, Any]:
        tool: dict[str, Any] = {"type": "function", "name": spec.name}
        if spec.description:
            tool["description"] = spec.description
        tool["parameters"] = spec.parameters
        tool["strict"] = spec.strict
        return tool

    def read_calls(self, response: Mapping[str, Any]) -> list[RawCall]:
        return read_each(as_list(response.get("output")), self._read_call)

    def stream(self) -> StreamAccumulator:
        return ResponsesStream(self.read_calls)

    def _read_call(self, item: Any, index: int) -> RawCall | None:
        if not isinstance(item, Mapping) or item.get("type") != "function_call":
            return None
        item_id = given_id(item.get("id"))
        return RawCall(
            call_id=given_id(field(item, "call_id", "id"), "call_id") or synthetic_id(item, index),
            name=text_field(item.get("name"), "name"),
            arguments=item.get("arguments"),
            extras={"id": item_id} if item_id else {},
        )

    def result_messages(
        self, calls: Sequence[Any], results: Sequence[CallResult | None]
    ) -> list[dict[str, Any]]:
        return [
            {"type": "function_call_output", "call_id": call.call_id, "output": result_text(r)[0]}
            for call, r in zip(calls, results, strict=True)
        ]
