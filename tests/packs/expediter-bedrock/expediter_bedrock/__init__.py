"""Amazon Bedrock's Converse API as an expediter provider, written against the public protocol
only (``expediter.hookimpl`` and ``expediter.providers``).

- tools: the request's ``toolConfig.tools``, each
  ``{"toolSpec": {"name", "description", "inputSchema": {"json": schema}}}``;
- calls: the ``toolUse`` blocks (``toolUseId``, ``name``, ``input``) of
  ``output.message.content``;
- results: one ``user`` message of ``toolResult`` blocks (``json`` or ``text`` content,
  ``status`` ``success`` or ``error``);
- streams: ConverseStream events as boto3's ``converse_stream`` yields them
  (``messageStart``, ``contentBlockStart``, ``contentBlockDelta``, ``contentBlockStop``,
  ``messageStop``, ``metadata``); reasoning deltas are kept (with their signature) in the
  assistant message, as Bedrock requires when a model with extended thinking calls a tool.
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any

import expediter
from expediter.providers import (
    CallResult,
    Malformed,
    Provider,
    RawCall,
    StreamAccumulator,
    ToolSpec,
    Unreadable,
    decode_json,
    read_each,
    result_object,
    result_text,
)

__all__ = ["Bedrock", "ConverseStream", "register_providers"]

#: What a call whose ``contentBlockStop`` never came gets as its error.
INCOMPLETE = (
    "the stream ended before this call was complete (no contentBlockStop arrived), "
    "so it was not run"
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _joined(parts: list[str]) -> str:
    """Streamed fragments as one text; a character whose surrogate halves came in two
    fragments (each escaped on its own in the event's JSON) is joined back together."""
    text = "".join(parts)
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _read_tool_use(block: Any, index: int) -> RawCall | None:
    """One ``toolUse`` block as a call (None for any other block)."""
    if not isinstance(block, Mapping):
        return None
    use = block.get("toolUse")
    if use is None:
        return None
    if not isinstance(use, Mapping):
        raise Unreadable('a "toolUse" block must be an object')
    call_id = use.get("toolUseId")
    if type(call_id) is not str or not call_id:
        raise Unreadable('the call\'s "toolUseId" must be a non-empty string')
    name = use.get("name")
    if type(name) is not str:
        return RawCall(call_id, "", Malformed('the call\'s "name" must be a string'))
    return RawCall(call_id, name, use.get("input"))


def _tool_result(call_id: str, result: CallResult | None) -> dict[str, Any]:
    """One ``toolResult`` block: an object result as ``json``, anything else as ``text``."""
    text, is_error = result_text(result)
    if not is_error and result is not None and isinstance(result.result, Mapping):
        value, _ = result_object(result)
        content: list[dict[str, Any]] = [{"json": value}]
    else:
        content = [{"text": text}]
    return {"toolUseId": call_id, "content": content, "status": "error" if is_error else "success"}


class Bedrock(Provider):
    """Amazon Bedrock's Converse API (``converse`` and ``converse_stream``)."""

    name = "bedrock"
    max_name_length = 64
    name_pattern = r"[a-zA-Z0-9_-]+"

    def tool(self, spec: ToolSpec) -> dict[str, Any]:
        """One entry of ``toolConfig.tools``."""
        definition: dict[str, Any] = {"name": spec.name, "inputSchema": {"json": spec.parameters}}
        if spec.description:  # Bedrock refuses an empty description
            definition["description"] = spec.description
        return {"toolSpec": definition}

    def read_calls(self, response: Mapping[str, Any]) -> list[RawCall]:
        """The ``toolUse`` blocks of ``output.message.content``, in order."""
        output = response.get("output")
        message = output.get("message") if isinstance(output, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if type(content) is not list:
            return []
        return read_each(content, _read_tool_use)

    def stream(self) -> "ConverseStream":
        """An accumulator for ConverseStream events."""
        return ConverseStream()

    def result_messages(
        self, calls: Sequence[Any], results: Sequence[CallResult | None]
    ) -> list[dict[str, Any]]:
        """One ``user`` message holding a ``toolResult`` block per call (none without calls)."""
        if not calls:
            return []
        blocks = [
            {"toolResult": _tool_result(call.call_id, result)}
            for call, result in zip(calls, results, strict=True)
        ]
        return [{"role": "user", "content": blocks}]


class _Block:
    """One content block of a streamed message, by its ``contentBlockIndex``."""

    __slots__ = ("call_id", "kind", "name", "parts", "redacted", "signature", "stopped")

    def __init__(self, kind: str, call_id: Any = None, name: Any = None) -> None:
        self.kind = kind
        self.call_id = call_id
        self.name = name
        self.parts: list[str] = []
        self.stopped = False
        #: A reasoning block's signature, or its redacted content (sent back as they came).
        self.signature: str | None = None
        self.redacted: Any = None


class ConverseStream(StreamAccumulator):
    """ConverseStream events, each a dict with one key (as boto3 yields them). Text blocks
    arrive as ``contentBlockDelta`` events without a start; a ``toolUse`` block starts with
    ``contentBlockStart`` (``toolUseId``, ``name``), its input comes as JSON text fragments,
    and it is complete at its ``contentBlockStop``. Events of any other shape are skipped."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._stop_reason: str | None = None
        self._usage: Any = None

    def feed(self, chunk: Any) -> None:
        """Take the next event."""
        if type(chunk) is not dict and not isinstance(chunk, Mapping):
            return
        event = chunk.get("contentBlockDelta")
        if event is not None:
            self._delta(event)
            return
        event = chunk.get("contentBlockStart")
        if event is not None:
            self._start(event)
            return
        event = chunk.get("contentBlockStop")
        if event is not None:
            index = _index(event)
            block = None if index is None else self._blocks.get(index)
            if block is not None:
                block.stopped = True
            return
        event = chunk.get("messageStop")
        if isinstance(event, Mapping):
            reason = event.get("stopReason")
            self._stop_reason = reason if type(reason) is str else "end_turn"
            return
        event = chunk.get("metadata")
        if isinstance(event, Mapping):
            self._usage = event.get("usage")

    def _delta(self, event: Any) -> None:
        index = _index(event)
        if index is None:
            return
        delta = event.get("delta")
        if not isinstance(delta, Mapping):
            return
        block = self._blocks.get(index)
        text = delta.get("text")
        if type(text) is str:
            if block is None:
                block = self._blocks[index] = _Block("text")
            if block.kind == "text":
                block.parts.append(text)
            return
        reasoning = delta.get("reasoningContent")
        if isinstance(reasoning, Mapping):
            if block is None:
                block = self._blocks[index] = _Block("reasoning")
            if block.kind == "reasoning":
                _reason(block, reasoning)
            return
        use = delta.get("toolUse")
        if isinstance(use, Mapping):
            fragment = use.get("input")
            if block is None:  # input without a start: kept, to be refused as a call
                block = self._blocks[index] = _Block("toolUse")
            if block.kind == "toolUse" and type(fragment) is str:
                block.parts.append(fragment)

    def _start(self, event: Any) -> None:
        index = _index(event)
        if index is None or index in self._blocks:
            return
        start = event.get("start")
        use = start.get("toolUse") if isinstance(start, Mapping) else None
        if isinstance(use, Mapping):
            self._blocks[index] = _Block("toolUse", use.get("toolUseId"), use.get("name"))

    def _ordered(self) -> list[tuple[int, _Block]]:
        return sorted(self._blocks.items(), key=lambda item: item[0])

    def text(self) -> str:
        """The streamed text so far."""
        return "".join(_joined(block.parts) for _, block in self._ordered() if block.kind == "text")

    def finished(self) -> bool:
        """Whether ``messageStop`` arrived."""
        return self._stop_reason is not None

    def raw_calls(self) -> list[RawCall]:
        """The streamed calls in block order; one whose ``contentBlockStop`` did not arrive,
        or whose start did not, has ``Malformed`` arguments saying so."""
        calls = []
        for index, block in self._ordered():
            if block.kind != "toolUse":
                continue
            call_id = block.call_id
            if type(call_id) is not str or not call_id:
                problem = "the stream sent this call without a toolUseId in its contentBlockStart"
                calls.append(RawCall(f"block-{index}", "", Malformed(problem)))
                continue
            if type(block.name) is not str:
                calls.append(RawCall(call_id, "", Malformed('the call\'s "name" must be a string')))
                continue
            arguments: Any = _joined(block.parts) if block.stopped else Malformed(INCOMPLETE)
            calls.append(RawCall(call_id, block.name, arguments))
        return calls

    def _content(self, *, complete_only: bool) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        for _, block in self._ordered():
            if block.kind == "text":
                content.append({"text": _joined(block.parts)})
                continue
            if block.kind == "reasoning":
                content.append({"reasoningContent": _reasoning(block)})
                continue
            if type(block.call_id) is not str or type(block.name) is not str:
                continue
            if complete_only and not block.stopped:
                continue
            raw = _joined(block.parts) if block.stopped else ""
            value, problem = decode_json(raw) if raw.strip() else ({}, None)
            if complete_only:
                value = raw if problem is not None else value  # refused again when parsed
            elif not isinstance(value, dict):
                value = {}  # the conversation needs an object; the call's error says why
            content.append(
                {"toolUse": {"toolUseId": block.call_id, "name": block.name, "input": value}}
            )
        return content

    def response(self) -> dict[str, Any]:
        """What ``converse`` would have returned: the text and the complete calls."""
        response: dict[str, Any] = {
            "output": {
                "message": {"role": "assistant", "content": self._content(complete_only=True)}
            },
            "stopReason": self._stop_reason,
        }
        if self._usage is not None:
            response["usage"] = self._usage
        return response

    def message(self) -> dict[str, Any]:
        """The assistant message for the conversation: every call is in it (an incomplete or
        malformed one with an empty input), so each ``toolResult`` has its ``toolUse``."""
        return {"role": "assistant", "content": self._content(complete_only=False)}


def _reason(block: _Block, delta: Mapping[str, Any]) -> None:
    """Add a ``reasoningContent`` delta (text, signature or redacted content) to its block."""
    text, signature = delta.get("text"), delta.get("signature")
    if type(text) is str:
        block.parts.append(text)
    if type(signature) is str:
        block.signature = (block.signature or "") + signature
    redacted = delta.get("redactedContent")
    if isinstance(redacted, bytes | str):
        block.redacted = redacted


def _reasoning(block: _Block) -> dict[str, Any]:
    """A reasoning block as ``converse`` returns it (and the next request must carry it)."""
    if block.redacted is not None:
        return {"redactedContent": block.redacted}
    text: dict[str, Any] = {"text": _joined(block.parts)}
    if block.signature is not None:
        text["signature"] = block.signature
    return {"reasoningText": text}


def _index(event: Any) -> int | None:
    """An event's ``contentBlockIndex`` (None when missing or not an integer)."""
    if not isinstance(event, Mapping):
        return None
    index = event.get("contentBlockIndex")
    return index if type(index) is int else None


@expediter.hookimpl
def register_providers(register: Any) -> None:
    """Add the ``bedrock`` provider."""
    register(Bedrock())
