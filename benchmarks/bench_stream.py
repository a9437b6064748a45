"""Accumulating a 1,000-chunk stream with two parallel calls, beside the provider SDKs' own.

One figure is a whole stream: ``toolset.stream(provider)``, ``feed`` of every chunk, then
``calls()`` (resolved ``ToolCall``s), reported per chunk. The baselines, in the same run:
openai's ``ChatCompletionStreamState`` (``handle_chunk`` on ``ChatCompletionChunk`` objects,
then ``get_final_completion()``) and anthropic's ``accumulate_event`` (the Messages stream's
accumulation) on its event objects. Ours is fed the same SDK objects (the budget), and their
JSON as dicts; every other provider's stream is reported per chunk too.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from measure import Figure, Report, parse_args, time_statements

from expediter.core.host import Host
from expediter.core.turns.toolset import Toolset

CHUNKS = 1_000
#: Two calls of ``think``, their arguments streamed in pieces of this many characters.
PIECE = 4


def _arguments(number: int, pieces: int) -> str:
    """A call's arguments whose JSON text is ``pieces`` pieces of ``PIECE`` characters."""
    filler = f"call {number}: reasoning ünïcödé, step by step. " * 100
    prefix = '{"thought": "'
    room = pieces * PIECE - len(prefix) - 2
    return prefix + filler[:room] + '"}'


def _pieces(text: str) -> list[str]:
    return [text[i : i + PIECE] for i in range(0, len(text), PIECE)]


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1748012345,
        "model": "gpt-4.1",
        "choices": [choice],
    }


def chat_chunks(count: int) -> list[dict[str, Any]]:
    """Chat Completions chunks: the role, two calls opened, their argument pieces
    alternating (index 0, 1, 0, 1 ...), the finish: ``count`` chunks in all."""
    per_call = (count - 4) // 2
    chunks = [_chat_chunk({"role": "assistant", "content": ""})]
    for index in range(2):
        opening = {"index": index, "id": f"call_{index}", "type": "function"}
        function = {"name": "think", "arguments": ""}
        chunks.append(_chat_chunk({"tool_calls": [{**opening, "function": function}]}))
    pieces = [_pieces(_arguments(index, per_call)) for index in range(2)]
    for first, second in zip(*pieces, strict=True):
        for index, piece in ((0, first), (1, second)):
            fragment = {"index": index, "function": {"arguments": piece}}
            chunks.append(_chat_chunk({"tool_calls": [fragment]}))
    chunks.append(_chat_chunk({}, "tool_calls"))
    return chunks


def anthropic_events(count: int) -> list[dict[str, Any]]:
    """Messages events: message_start, two tool_use blocks (start, ``input_json_delta``
    pieces, stop), message_delta, message_stop: ``count`` events in all."""
    per_call = (count - 8) // 2
    start = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index in range(2):
        block = {"type": "tool_use", "id": f"toolu_{index}", "name": "think", "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        for piece in _pieces(_arguments(index, per_call)):
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    end = {"stop_reason": "tool_use", "stop_sequence": None}
    events.append({"type": "message_delta", "delta": end, "usage": {"output_tokens": 900}})
    events.append({"type": "message_stop"})
    return events


def responses_events(count: int) -> list[dict[str, Any]]:
    """Responses events: two function_call items added, their argument deltas alternating,
    each item's ``arguments.done`` and ``output_item.done``, then ``response.completed``."""
    per_call = (count - 8) // 2
    head = {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1748012400,
        "model": "o4-mini",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [],
        "status": "in_progress",
    }
    events: list[dict[str, Any]] = [{"type": "response.created", "response": head}]
    texts = [_arguments(index, per_call) for index in range(2)]
    items = [
        {
            "id": f"fc_{index}",
            "type": "function_call",
            "status": "in_progress",
            "call_id": f"call_{index}",
            "name": "think",
            "arguments": "",
        }
        for index in range(2)
    ]
    for index, item in enumerate(items):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
    for pair in zip(*(_pieces(text) for text in texts), strict=True):
        for index, piece in enumerate(pair):
            events.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": f"fc_{index}",
                    "output_index": index,
                    "delta": piece,
                }
            )
    done_items = []
    for index, (item, text) in enumerate(zip(items, texts, strict=True)):
        done = {**item, "status": "completed", "arguments": text}
        done_items.append(done)
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": f"fc_{index}",
                "output_index": index,
                "arguments": text,
            }
        )
        events.append({"type": "response.output_item.done", "output_index": index, "item": done})
    final = {**head, "status": "completed", "output": done_items}
    events.append({"type": "response.completed", "response": final})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def gemini_chunks(count: int) -> list[dict[str, Any]]:
    """Gemini chunks: the two calls whole in the first, text pieces after, the finish."""
    calls = [
        {"functionCall": {"name": "think", "args": {"thought": f"call {index}"}}}
        for index in range(2)
    ]
    calls[0]["thoughtSignature"] = "c2lnbmF0dXJl"

    def chunk(parts: list[dict[str, Any]], finish: bool = False) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = "STOP"
        return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}

    chunks = [chunk(calls)]
    chunks += [chunk([{"text": f"word {index} "}]) for index in range(count - 2)]
    chunks.append(chunk([{"text": ""}], finish=True))
    return chunks


def ollama_chunks(count: int) -> list[dict[str, Any]]:
    """Ollama NDJSON chunks: the two calls whole in the first, content pieces, then done."""
    head = {"model": "qwen3:8b", "created_at": "2025-07-07T20:22:19.184789Z"}
    calls = [
        {"function": {"index": index, "name": "think", "arguments": {"thought": f"call {index}"}}}
        for index in range(2)
    ]

    def chunk(done: bool = False, **message: Any) -> dict[str, Any]:
        return {**head, "message": {"role": "assistant", "content": "", **message}, "done": done}

    chunks = [chunk(tool_calls=calls)]
    chunks += [chunk(content=f"word {index} ") for index in range(count - 2)]
    chunks.append({**chunk(done=True), "done_reason": "stop"})
    return chunks


def accumulate(toolset: Toolset, provider: str) -> Callable[[list[Any]], list[Any]]:
    """One whole stream through ``toolset.stream(provider)``: feed each chunk, then calls."""

    def run(chunks: list[Any]) -> list[Any]:
        stream = toolset.stream(provider)
        feed = stream.feed
        for chunk in chunks:
            feed(chunk)
        return stream.calls()

    return run


def openai_sdk(chunks: list[Any]) -> Any:
    """openai's own accumulator over the same chunk objects, to its final completion."""
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state: Any = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    return state.get_final_completion()


def anthropic_sdk(events: list[Any]) -> Any:
    """anthropic's own accumulation (what ``MessageStream`` runs per event), to its message."""
    from anthropic.lib.streaming._messages import accumulate_event

    snapshot = None
    buffers: dict[int, bytes] = {}
    for event in events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
    return snapshot


def sdk_objects() -> dict[str, Callable[[list[dict[str, Any]]], list[Any]]]:
    """Each provider's chunks as its SDK yields them (validated objects)."""
    import pydantic
    from anthropic.types import RawMessageStreamEvent
    from google.genai.types import GenerateContentResponse
    from mistralai.client.models import CompletionEvent
    from ollama import ChatResponse
    from openai.types.chat import ChatCompletionChunk
    from openai.types.responses import ResponseStreamEvent

    anthropic_adapter: Any = pydantic.TypeAdapter(RawMessageStreamEvent)
    responses_adapter: Any = pydantic.TypeAdapter(ResponseStreamEvent)
    return {
        "openai": lambda cs: [ChatCompletionChunk.model_validate(c) for c in cs],
        "mistral": lambda cs: [CompletionEvent.model_validate({"data": c}) for c in cs],
        "openai-responses": lambda cs: [responses_adapter.validate_python(c) for c in cs],
        "anthropic": lambda cs: [anthropic_adapter.validate_python(c) for c in cs],
        "gemini": lambda cs: [GenerateContentResponse.model_validate(c) for c in cs],
        "ollama": lambda cs: [ChatResponse.model_validate(c) for c in cs],
    }


def mistral_chunks(count: int) -> list[dict[str, Any]]:
    """Mistral's chunks: the Chat Completions shape, each call whole (name and arguments as
    mistralai's types require) then its argument pieces."""
    chunks = chat_chunks(count)
    for chunk in chunks[1:3]:
        chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] = ""
    for chunk in chunks[3:-1]:
        chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] = ""
    return chunks


STREAMS: dict[str, Callable[[int], list[dict[str, Any]]]] = {
    "openai": chat_chunks,
    "mistral": mistral_chunks,
    "openai-responses": responses_events,
    "anthropic": anthropic_events,
    "gemini": gemini_chunks,
    "ollama": ollama_chunks,
}


def _same_calls(ours: list[Any], names: list[str], arguments: list[Any]) -> bool:
    return (
        [c.name for c in ours] == names
        and [c.arguments for c in ours] == arguments
        and all(c.error is None for c in ours)
    )


def main() -> int:
    """Measure and report."""
    args = parse_args(__doc__)
    count, rounds, batch = (200, 3, 0.005) if args.quick else (CHUNKS, 15, 0.05)
    report = Report("stream", args.quick)
    report.settings.update(chunks=count, rounds=rounds, piece_characters=PIECE)
    with tempfile.TemporaryDirectory() as home:
        host = Host(
            autoload=False,
            builtins=True,
            home=home,
            environ={"EXPEDITER_DEFAULT_TOOLS": "think"},
            record_calls=False,
        )
        toolset = host.toolset()
        status = measure(report, toolset, count, rounds, batch)
        host.close()
    return report.finish(args.results_dir) if status is None else status


def measure(report: Report, toolset: Toolset, count: int, rounds: int, batch: float) -> None:
    """Check every stream's calls, then time every case, into ``report``."""
    objects = sdk_objects()
    cases: dict[str, tuple[str, dict[str, Any]]] = {}
    sizes: dict[str, int] = {}
    for provider, build in STREAMS.items():
        dicts = build(count)
        sdk = objects[provider](dicts)
        key = provider.replace("-", "_")
        sizes[key] = len(dicts)
        run = accumulate(toolset, provider)
        cases[f"{key}_dicts"] = ("run(chunks)", {"run": run, "chunks": dicts})
        cases[f"{key}_objects"] = ("run(chunks)", {"run": run, "chunks": sdk})
        made = run(dicts)
        from_sdk = run(sdk)
        report.check(
            f"{provider}: SDK objects give the calls their JSON gives",
            len(made) == 2
            and _same_calls(made, [c.name for c in from_sdk], [c.arguments for c in from_sdk]),
            f"{len(from_sdk)} calls",
        )
        if provider == "openai":
            final = openai_sdk(sdk)
            tool_calls = final.choices[0].message.tool_calls
            report.check(
                "openai: the same calls as ChatCompletionStreamState",
                _same_calls(
                    made,
                    [c.function.name for c in tool_calls],
                    [json.loads(c.function.arguments) for c in tool_calls],
                ),
            )
            cases["openai_sdk"] = ("sdk(chunks)", {"sdk": openai_sdk, "chunks": sdk})
        if provider == "anthropic":
            message = anthropic_sdk(sdk)
            uses = [block for block in message.content if block.type == "tool_use"]
            report.check(
                "anthropic: the same calls as accumulate_event",
                _same_calls(made, [b.name for b in uses], [b.input for b in uses]),
            )
            cases["anthropic_sdk"] = ("sdk(chunks)", {"sdk": anthropic_sdk, "chunks": sdk})
    runs = time_statements(cases, rounds=rounds, batch_seconds=batch)
    names = {provider.replace("-", "_"): provider for provider in STREAMS}
    for name, seconds in runs.items():
        key = name.rsplit("_", 1)[0]
        provider, size = names[key], sizes[key]
        if name.endswith("_sdk"):
            what = f"the {provider} SDK's own accumulator over its objects"
        elif name.endswith("_objects"):
            what = f"toolset.stream({provider!r}) fed the SDK's objects, then calls()"
        else:
            what = f"toolset.stream({provider!r}) fed parsed JSON dicts, then calls()"
        per_chunk = tuple(value / size for value in seconds)
        report.add(Figure(name, f"{what}: per chunk, {size} chunks", per_chunk))
    report.ratio(
        f"accumulating a {count}-chunk stream, two parallel calls (openai)",
        "openai_objects",
        "openai_sdk",
        1.0,
    )
    report.ratio(
        f"accumulating a {count}-chunk stream, two parallel calls (anthropic)",
        "anthropic_objects",
        "anthropic_sdk",
        1.0,
    )
    report.ratio("openai, dicts against the SDK's objects", "openai_dicts", "openai_sdk")
    report.ratio("anthropic, dicts against the SDK's objects", "anthropic_dicts", "anthropic_sdk")
    return None


if __name__ == "__main__":
    sys.exit(main())
