"""OpenAI Chat Completions and Responses, and the OpenAI-shaped Mistral and Ollama APIs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from expediter.core.turns.providers.base import (
    CallResult,
    Malformed,
    Provider,
    RawCall,
    ToolSpec,
    as_list,
    field,
    json_kind,
    result_text,
    synthetic_id,
)

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
        calls = []
        for index, item in enumerate(as_list(_message(response).get("tool_calls"))):
            if not isinstance(item, dict):
                continue
            function = item.get("function") or {}
            call_id = str(item.get("id") or synthetic_id(item, index))
            if type(function) is not dict and not isinstance(function, Mapping):
                # Still a call the model made (its id needs an answer): an error, not a crash.
                problem = (
                    'the tool call\'s "function" must be an object with "name" and '
                    f'"arguments", not {json_kind(function)}'
                )
                calls.append(RawCall(call_id=call_id, name="", arguments=Malformed(problem)))
                continue
            calls.append(
                RawCall(
                    call_id=call_id,
                    name=str(function.get("name") or ""),
                    arguments=function.get("arguments"),
                )
            )
        return calls

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
        calls = []
        for index, item in enumerate(as_list(response.get("output"))):
            if not isinstance(item, Mapping) or item.get("type") != "function_call":
                continue
            call_id = field(item, "call_id", "id") or synthetic_id(item, index)
            extras = {"id": item["id"]} if item.get("id") else {}
            calls.append(
                RawCall(
                    call_id=str(call_id),
                    name=str(item.get("name") or ""),
                    arguments=item.get("arguments"),
                    extras=extras,
                )
            )
        return calls

    def result_messages(
        self, calls: Sequence[Any], results: Sequence[CallResult | None]
    ) -> list[dict[str, Any]]:
        return [
            {"type": "function_call_output", "call_id": call.call_id, "output": result_text(r)[0]}
            for call, r in zip(calls, results, strict=True)
        ]
