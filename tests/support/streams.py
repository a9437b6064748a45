"""Captured-shape streams for the tests, built from a final response's calls: each provider's
chunks or events as its API documents them, with argument text cut where a test says and
the calls' fragments interleaved in the order a test picks.

A call is ``(call id, name, arguments)``: the arguments as JSON text for the providers that
stream text (openai, mistral, openai-responses, anthropic), an object for those that send
calls whole (gemini, ollama).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

Call = tuple[str, str, Any]
#: Where to cut each call's argument text (character offsets; out-of-range ones are ignored).
Cuts = Sequence[Sequence[int]]
TEXT = "Checking the clocks - ünïcödé 😀 first."


def cut(text: str, offsets: Sequence[int]) -> list[str]:
    """``text`` in pieces at these offsets (never an empty piece)."""
    points = sorted({o for o in offsets if 0 < o < len(text)})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def interleave(queues: list[list[Any]], picks: Sequence[int], in_order: bool = False) -> list[Any]:
    """Every item of every queue, each queue in its order, queues taken in turn by ``picks``
    (index into the queues not yet empty; past the end of ``picks``, the first).
    ``in_order``: a queue starts only after the one before it started."""
    waiting = [list(queue) for queue in queues if queue]
    started: list[list[Any]] = []
    out: list[Any] = []
    step = 0
    while waiting or started:
        open_ = started + waiting[:1] if in_order else started + waiting
        pick = picks[step] % len(open_) if step < len(picks) else 0
        step += 1
        queue = open_[pick]
        if pick >= len(started):
            waiting.remove(queue)
            started.append(queue)
        out.append(queue.pop(0))
        if not queue:
            started.remove(queue)
    return out


#: Picks alternating between two queues: parallel calls' fragments interleaved.
ALTERNATE = (0, 1) * 5_000


# -- OpenAI Chat Completions and Mistral ---------------------------------------------------------


def chat_final(calls: Sequence[Call], text: str = TEXT) -> dict[str, Any]:
    """The complete ``chat.completion`` making these calls."""
    tool_calls = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        for call_id, name, arguments in calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    return {"id": "chatcmpl-1", "object": "chat.completion", "choices": [choice]}


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """One ``chat.completion.chunk``."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1748012345,
        "model": "gpt-4.1-2025-04-14",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def chat_chunks(
    calls: Sequence[Call],
    cuts: Cuts = (),
    picks: Sequence[int] = (),
    text: str = TEXT,
    *,
    finish: bool = True,
    index: bool = True,
    repeat_name: bool = False,
) -> list[dict[str, Any]]:
    """A streamed completion: text in pieces, then each call's opening delta (id, name) and
    its argument pieces, interleaved by ``picks``. ``index=False``: no index (keep apart by
    id); ``repeat_name``: a router repeating id and whole name in every delta."""
    chunks = [chat_chunk({"role": "assistant", "content": ""})]
    chunks += [chat_chunk({"content": piece}) for piece in cut(text, range(0, len(text), 7))]
    queues = []
    for number, (call_id, name, arguments) in enumerate(calls):
        head: dict[str, Any] = {"index": number} if index else {}
        opening = {**head, "id": call_id, "type": "function"}
        queue = [chat_chunk({"tool_calls": [{**opening, "function": {"name": name}}]})]
        pieces = cut(arguments, cuts[number] if number < len(cuts) else ())
        for piece in pieces if arguments else []:
            fragment: dict[str, Any] = {**head, "function": {"arguments": piece}}
            if repeat_name or not index:
                fragment = {**opening, "function": {"name": name, "arguments": piece}}
            queue.append(chat_chunk({"tool_calls": [fragment]}))
        queues.append(queue)
    chunks += interleave(queues, picks, in_order=not index)
    if finish:
        chunks.append(chat_chunk({}, "tool_calls"))
    return chunks


# -- OpenAI Responses ----------------------------------------------------------------------------


def _function_item(call: Call, status: str) -> dict[str, Any]:
    call_id, name, arguments = call
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def _message_item(text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {
        "id": "msg_1",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


_RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1748012400,
    "model": "o4-mini-2025-04-16",
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}


def responses_final(calls: Sequence[Call], text: str = TEXT) -> dict[str, Any]:
    """The complete ``response`` making these calls after a message."""
    output = [_message_item(text), *(_function_item(call, "completed") for call in calls)]
    return {**_RESPONSE, "status": "completed", "output": output}


def responses_events(
    calls: Sequence[Call],
    cuts: Cuts = (),
    picks: Sequence[int] = (),
    text: str = TEXT,
    *,
    finish: bool = True,
) -> list[dict[str, Any]]:
    """A Responses event stream: the message item's text deltas, then each call's item
    added, argument deltas, ``arguments.done`` and item done, calls interleaved by ``picks``."""
    head = {**_RESPONSE, "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": head}]
    message = _message_item("", "in_progress")
    message["content"] = []
    events.append({"type": "response.output_item.added", "output_index": 0, "item": message})
    for piece in cut(text, range(0, len(text), 5)):
        events.append(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            }
        )
    done = _message_item(text)
    events.append({"type": "response.output_item.done", "output_index": 0, "item": done})
    queues = []
    for number, call in enumerate(calls, start=1):
        item_id, arguments = f"fc_{call[0]}", call[2]
        added = {**_function_item(call, "in_progress"), "arguments": ""}
        queue: list[dict[str, Any]] = [
            {"type": "response.output_item.added", "output_index": number, "item": added}
        ]
        for piece in cut(arguments, cuts[number - 1] if number - 1 < len(cuts) else ()):
            queue.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item_id,
                    "output_index": number,
                    "delta": piece,
                }
            )
        queue.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": item_id,
                "output_index": number,
                "arguments": arguments,
            }
        )
        queue.append(
            {
                "type": "response.output_item.done",
                "output_index": number,
                "item": _function_item(call, "completed"),
            }
        )
        queues.append(queue)
    events += interleave(queues, picks)
    if finish:
        events.append({"type": "response.completed", "response": responses_final(calls, text)})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


# -- Anthropic -----------------------------------------------------------------------------------


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")  # the API never sends NaN in an input


def anthropic_final(calls: Sequence[Call], text: str = TEXT) -> dict[str, Any]:
    """The complete message: thinking (signed), text, then the calls' tool_use blocks (input
    as the JSON text decodes, or the text itself when it does not)."""
    content: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "Two clocks to read.", "signature": "EqQBCkYIBxgCKkA="},
        {"type": "text", "text": text},
    ]
    for call_id, name, arguments in calls:
        try:
            value: Any = json.loads(arguments, parse_constant=_refuse) if arguments.strip() else {}
        except ValueError:
            value = arguments
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": value})
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 20},
    }


def anthropic_events(
    calls: Sequence[Call],
    cuts: Cuts = (),
    picks: Sequence[int] = (),
    text: str = TEXT,
    *,
    finish: bool = True,
) -> list[dict[str, Any]]:
    """A Messages event stream: thinking and text blocks, then each call's tool_use block
    (start, ``input_json_delta`` pieces, stop), the blocks' events interleaved by ``picks``."""
    start = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    thinking = {"type": "thinking", "thinking": "", "signature": ""}
    events.append({"type": "content_block_start", "index": 0, "content_block": thinking})
    for piece in ("Two clocks", " to read."):
        delta = {"type": "thinking_delta", "thinking": piece}
        events.append({"type": "content_block_delta", "index": 0, "delta": delta})
    signature = {"type": "signature_delta", "signature": "EqQBCkYIBxgCKkA="}
    events.append({"type": "content_block_delta", "index": 0, "delta": signature})
    events.append({"type": "content_block_stop", "index": 0})
    events.append(
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}
    )
    for piece in cut(text, range(0, len(text), 6)):
        delta = {"type": "text_delta", "text": piece}
        events.append({"type": "content_block_delta", "index": 1, "delta": delta})
    events.append({"type": "content_block_stop", "index": 1})
    queues = []
    for number, (call_id, name, arguments) in enumerate(calls, start=2):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        queue: list[dict[str, Any]] = [
            {"type": "content_block_start", "index": number, "content_block": block}
        ]
        for piece in cut(arguments, cuts[number - 2] if number - 2 < len(cuts) else ()):
            delta = {"type": "input_json_delta", "partial_json": piece}
            queue.append({"type": "content_block_delta", "index": number, "delta": delta})
        queue.append({"type": "content_block_stop", "index": number})
        queues.append(queue)
    events += interleave(queues, picks)
    if finish:
        events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 20},
            }
        )
        events.append({"type": "message_stop"})
    return events


# -- Gemini --------------------------------------------------------------------------------------


def gemini_parts(calls: Sequence[Call], text: str = TEXT) -> list[dict[str, Any]]:
    """A thought, then the calls (the first signed; given ids kept, "" for none), then text."""
    parts: list[dict[str, Any]] = [{"text": "Reading two clocks, then answering.", "thought": True}]
    for number, (call_id, name, arguments) in enumerate(calls):
        function: dict[str, Any] = {"name": name, "args": arguments}
        if call_id:
            function["id"] = call_id
        part: dict[str, Any] = {"functionCall": function}
        if number == 0:
            part["thoughtSignature"] = "c2lnbmF0dXJlLW9uZQ=="
        parts.append(part)
    if text:
        parts.append({"text": text, "thoughtSignature": "dGV4dC1zaWduYXR1cmU="})
    return parts


def gemini_final(calls: Sequence[Call], text: str = TEXT) -> dict[str, Any]:
    """The complete ``GenerateContentResponse``."""
    content = {"role": "model", "parts": gemini_parts(calls, text)}
    return {
        "candidates": [{"content": content, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 20, "totalTokenCount": 40},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "Kx8xaPbRJ4WXz7IP6dKs4Ag",
    }


def _gemini_chunk(parts: list[dict[str, Any]], finish: bool = False) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 20, "totalTokenCount": 40},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "Kx8xaPbRJ4WXz7IP6dKs4Ag",
    }


def gemini_chunks(
    calls: Sequence[Call],
    cuts: Sequence[int] = (3, 11),
    together: bool = False,
    text: str = TEXT,
    *,
    finish: bool = True,
) -> list[dict[str, Any]]:
    """A streamed response: the thought in pieces, the calls whole in early chunks (one each,
    or ``together`` in one), the text in pieces at ``cuts`` (its signature on the last
    piece, an empty text), and a last chunk with no call."""
    parts = gemini_parts(calls, text)
    chunks = []
    thought = parts[0]
    for piece in cut(thought["text"], cuts):
        chunks.append(_gemini_chunk([{"text": piece, "thought": True}]))
    made = parts[1 : 1 + len(calls)]
    if together and made:
        chunks.append(_gemini_chunk(made))
    else:
        chunks += [_gemini_chunk([part]) for part in made]
    if text:
        chunks += [_gemini_chunk([{"text": piece}]) for piece in cut(text, cuts)]
        signed = {"text": "", "thoughtSignature": parts[-1]["thoughtSignature"]}
        chunks.append(_gemini_chunk([signed], finish=finish))
    elif finish:
        chunks.append(_gemini_chunk([], finish=True))
    return chunks


# -- Ollama --------------------------------------------------------------------------------------


def ollama_final(calls: Sequence[Call], text: str = TEXT) -> dict[str, Any]:
    """The complete ``/api/chat`` response (calls carry no id: they get made-up ones)."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text,
        "thinking": "Two clocks.",
        "tool_calls": [
            {"function": {"index": number, "name": name, "arguments": arguments}}
            for number, (_, name, arguments) in enumerate(calls)
        ],
    }
    return {
        "model": "qwen3:8b",
        "created_at": "2025-07-07T20:22:19.184789Z",
        "message": message,
        "done_reason": "stop",
        "done": True,
    }


def ollama_chunks(
    calls: Sequence[Call], together: bool = False, text: str = TEXT, *, finish: bool = True
) -> list[dict[str, Any]]:
    """NDJSON chunks: thinking in pieces, the calls whole (each in its chunk, or
    ``together``), the text in pieces, then ``"done": true``."""
    final = ollama_final(calls, text)
    head = {"model": final["model"], "created_at": final["created_at"]}

    def chunk(**message: Any) -> dict[str, Any]:
        return {**head, "message": {"role": "assistant", "content": "", **message}, "done": False}

    chunks = [chunk(thinking="Two"), chunk(thinking=" clocks.")]
    made = final["message"]["tool_calls"]
    if together and made:
        chunks.append(chunk(tool_calls=made))
    else:
        chunks += [chunk(tool_calls=[call]) for call in made]
    chunks += [chunk(content=piece) for piece in cut(text, range(0, len(text), 4))]
    if finish:
        last = {"role": "assistant", "content": ""}
        chunks.append({**head, "message": last, "done": True, "done_reason": "stop"})
    return chunks
