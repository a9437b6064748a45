"""Google Gemini: function declarations with ``parameters_json_schema``, id-less calls."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from expediter.core.turns.providers.base import (
    CallResult,
    Provider,
    RawCall,
    StreamAccumulator,
    ToolSpec,
    Unreadable,
    as_list,
    field,
    given_id,
    id_maker,
    json_kind,
    read_each,
    result_object,
    text_field,
    usable_message_id,
)
from expediter.core.turns.providers.jsonschema import gemini_schema
from expediter.core.turns.providers.streams_gemini import GeminiStream

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
        make_id = id_maker(parts)  # an id-less call's id follows from every part and its place
        return read_each(parts, lambda part, index: self._read_call(part, index, make_id), make_id)

    def message_id(self, response: Mapping[str, Any]) -> str | None:
        return usable_message_id(field(response, "responseId", "response_id"))

    def stream(self) -> StreamAccumulator:
        return GeminiStream(self.read_calls)

    def _read_call(self, part: Any, index: int, make_id: Callable[[int], str]) -> RawCall | None:
        if not isinstance(part, Mapping):
            return None
        function = field(part, "functionCall", "function_call")
        if not isinstance(function, Mapping):
            return None
        extras: dict[str, Any] = {}
        signature = field(part, "thoughtSignature", "thought_signature")
        if signature is not None:
            if not isinstance(signature, str | bytes):
                raise Unreadable(
                    f"the call's thought signature must be a string, not {json_kind(signature)}"
                )
            extras["thought_signature"] = signature
        given = given_id(function.get("id"))
        if given is None:
            # Gemini may leave calls without ids: make one that is the same every time
            # this response is read, and remember not to send it back as Gemini's own.
            extras["synthesized_id"] = True
        return RawCall(
            call_id=given or make_id(index),
            name=text_field(function.get("name"), "name"),
            arguments=function.get("args"),
            extras=extras,
        )

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
