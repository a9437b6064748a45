"""Google Gemini: function declarations with ``parameters_json_schema``, id-less calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from expediter.core.turns.providers.base import (
    CallResult,
    Provider,
    RawCall,
    ToolSpec,
    as_list,
    field,
    result_object,
    synthetic_id,
)
from expediter.core.turns.providers.jsonschema import gemini_schema

__all__ = ["Gemini"]


def _parts(response: Mapping[str, Any]) -> list[Any]:
    candidates = as_list(response.get("candidates"))
    content: Any = response
    if candidates and isinstance(candidates[0], Mapping):
        content = candidates[0].get("content") or {}
    elif isinstance(response.get("content"), Mapping):
        content = response["content"]
    return as_list(content.get("parts")) if isinstance(content, Mapping) else []


class Gemini(Provider):
    """Gemini's function calling (REST camelCase or the SDK's snake_case both read)."""

    name: ClassVar[str] = "gemini"

    def parameters(self, schema: dict[str, Any]) -> dict[str, Any]:
        return gemini_schema(schema)

    def tool(self, spec: ToolSpec) -> dict[str, Any]:
        declaration: dict[str, Any] = {"name": spec.name}
        if spec.description:
            declaration["description"] = spec.description
        declaration["parameters_json_schema"] = spec.parameters
        return declaration

    def tools(self, specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        declarations = [self.tool(spec) for spec in specs]
        return [{"function_declarations": declarations}] if declarations else []

    def read_calls(self, response: Mapping[str, Any]) -> list[RawCall]:
        parts = _parts(response)
        calls = []
        for index, part in enumerate(parts):
            if not isinstance(part, Mapping):
                continue
            function = field(part, "functionCall", "function_call")
            if not isinstance(function, Mapping):
                continue
            extras: dict[str, Any] = {}
            signature = field(part, "thoughtSignature", "thought_signature")
            if signature is not None:
                extras["thought_signature"] = signature
            given = function.get("id")
            if not given:
                # Gemini may leave calls without ids: make one that is the same every time
                # this response is read, and remember not to send it back as Gemini's own.
                extras["synthesized_id"] = True
            calls.append(
                RawCall(
                    call_id=str(given or synthetic_id(parts, index)),
                    name=str(function.get("name") or ""),
                    arguments=function.get("args"),
                    extras=extras,
                )
            )
        return calls

    def result_messages(
        self, calls: Sequence[Any], results: Sequence[CallResult | None]
    ) -> list[dict[str, Any]]:
        parts = []
        for call, result in zip(calls, results, strict=True):
            response, _ = result_object(result)
            function_response: dict[str, Any] = {"name": call.name, "response": response}
            if not call.extras.get("synthesized_id"):
                function_response["id"] = call.call_id
            part: dict[str, Any] = {"functionResponse": function_response}
            signature = call.extras.get("thought_signature")
            if signature is not None:
                part["thoughtSignature"] = signature
            parts.append(part)
        return [{"role": "user", "parts": parts}] if parts else []
