"""`expediter parse --stream` and `run --stream`: every provider's stream, saved as it came over
the wire (server-sent events, NDJSON, a JSON array), gives the calls of the equivalent whole
response; without --provider the provider is told from the shape and named on standard error
(standard output stays one document); what is not a stream is bad usage naming the line."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.responses import RESPONSES, SAVED, load

from expediter.cli import cli
from expediter.core.turns.providers.wire import READ_SIZE
from expediter.providers import read_wire

#: The two calls every capture makes, interleaved where the provider interleaves them.
THOUGHT = "héllo 日本 😀"
CALLS = [("now", {}), ("think", {"thought": THOUGHT})]


def invoke(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    """The command's exit status, standard output and error; any exception but SystemExit (a
    traceback for the user) fails the test."""
    env = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = CliRunner().invoke(cli, list(args), prog_name="expediter", env=env, input=stdin)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def detected(provider: str, what: str = "stream") -> str:
    return (
        f"expediter: provider detected from the {what}'s shape: {provider} "
        "(use --provider to choose)\n"
    )


def one_error_line(err: str) -> str:
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, err
    return errors[0]


# -- captures, as each provider sends them ---------------------------------------------------------


def split(text: str, at: int) -> tuple[str, str]:
    return text[:at], text[at:]


THINK_ARGS = json.dumps({"thought": THOUGHT}, ensure_ascii=False)
HEAD, TAIL = split(THINK_ARGS, 15)  # inside the thought, before the multi-byte characters


def openai_chunks() -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-9x", "object": "chat.completion.chunk", "created": 1750000000}
    base["model"] = "gpt-4.1-2025-04-14"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def fragment(index: int, **fields: Any) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    return [
        chunk({"role": "assistant", "content": None}),
        fragment(0, id="call_a1", type="function", function={"name": "now", "arguments": ""}),
        fragment(1, id="call_b2", type="function", function={"name": "think", "arguments": ""}),
        fragment(1, function={"arguments": HEAD}),
        fragment(0, function={"arguments": "{}"}),
        fragment(1, function={"arguments": TAIL}),
        chunk({}, "tool_calls"),
        {**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}},
    ]


def openai_final() -> dict[str, Any]:
    calls = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        for call_id, name, arguments in (("call_a1", "now", "{}"), ("call_b2", "think", THINK_ARGS))
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}


def mistral_chunks() -> list[dict[str, Any]]:
    base = {"id": "2d4c", "object": "chat.completion.chunk", "created": 1750000000}
    base["model"] = "mistral-large-latest"
    calls = [
        {"id": "D681PevKs", "function": {"name": "now", "arguments": "{}"}, "index": 0},
        {"id": "Xy3a9LmQe", "function": {"name": "think", "arguments": THINK_ARGS}, "index": 1},
    ]
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {
            **base,
            "choices": [
                {"index": 0, "delta": {"tool_calls": calls}, "finish_reason": "tool_calls"}
            ],
        },
    ]


def mistral_final() -> dict[str, Any]:
    calls = [
        {"id": "D681PevKs", "function": {"name": "now", "arguments": "{}"}},
        {"id": "Xy3a9LmQe", "function": {"name": "think", "arguments": THINK_ARGS}},
    ]
    message = {"role": "assistant", "content": "", "tool_calls": calls}
    return {"model": "mistral-large-latest", "choices": [{"index": 0, "message": message}]}


def anthropic_chunks() -> list[dict[str, Any]]:
    def delta(index: int, partial: str) -> dict[str, Any]:
        return {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": partial},
        }

    def start(index: int, block: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_start", "index": index, "content_block": block}

    message = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    return [
        {"type": "message_start", "message": message},
        start(0, {"type": "text", "text": ""}),
        {"type": "ping"},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Checking."},
        },
        {"type": "content_block_stop", "index": 0},
        start(1, {"type": "tool_use", "id": "toolu_a", "name": "now", "input": {}}),
        delta(1, ""),
        {"type": "content_block_stop", "index": 1},
        start(2, {"type": "tool_use", "id": "toolu_b", "name": "think", "input": {}}),
        delta(2, HEAD),
        delta(2, TAIL),
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 30},
        },
        {"type": "message_stop"},
    ]


def anthropic_final() -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_a", "name": "now", "input": {}},
            {"type": "tool_use", "id": "toolu_b", "name": "think", "input": dict(CALLS[1][1])},
        ],
    }


def responses_chunks() -> list[dict[str, Any]]:
    def item(index: int, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
        return {
            "id": f"fc_{index}",
            "type": "function_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
        }

    done = [
        item(0, "call_a1", "now", "{}", "completed"),
        item(1, "call_b2", "think", THINK_ARGS, "completed"),
    ]
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": item(0, "call_a1", "now", "", "in_progress"),
        },
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": item(1, "call_b2", "think", "", "in_progress"),
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 1,
            "delta": HEAD,
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_0",
            "output_index": 0,
            "delta": "{}",
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 1,
            "delta": TAIL,
        },
    ]
    for index, finished in enumerate(done):
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": finished["id"],
                "output_index": index,
                "arguments": finished["arguments"],
            }
        )
        events.append(
            {"type": "response.output_item.done", "output_index": index, "item": finished}
        )
    completed = {**response, "status": "completed", "output": done}
    events.append({"type": "response.completed", "response": completed})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def responses_final() -> dict[str, Any]:
    final: dict[str, Any] = responses_chunks()[-1]["response"]
    return final


def gemini_chunks() -> list[dict[str, Any]]:
    def chunk(parts: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
        candidate = {"content": {"role": "model", "parts": parts}, "index": 0, **more}
        return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}

    return [
        chunk([{"functionCall": {"name": "now", "args": {}}, "thoughtSignature": "c2lnbmF0dXJl"}]),
        chunk([{"functionCall": {"name": "think", "args": dict(CALLS[1][1])}}]),
        {
            **chunk([], finishReason="STOP"),
            "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 20},
        },
    ]


def gemini_final() -> dict[str, Any]:
    parts = [
        part for chunk in gemini_chunks() for part in chunk["candidates"][0]["content"]["parts"]
    ]
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}


def ollama_chunks() -> list[dict[str, Any]]:
    base = {"model": "qwen3:8b", "created_at": "2025-06-01T10:00:00.000Z"}

    def chunk(message: dict[str, Any], done: bool = False) -> dict[str, Any]:
        return {**base, "message": {"role": "assistant", "content": "", **message}, "done": done}

    return [
        chunk({"tool_calls": [{"function": {"name": "now", "arguments": {}}}]}),
        chunk({"tool_calls": [{"function": {"name": "think", "arguments": dict(CALLS[1][1])}}]}),
        {**chunk({}, done=True), "done_reason": "stop", "eval_count": 30},
    ]


def ollama_final() -> dict[str, Any]:
    calls = [{"function": {"name": name, "arguments": arguments}} for name, arguments in CALLS]
    message = {"role": "assistant", "content": "", "tool_calls": calls}
    return {"model": "qwen3:8b", "message": message, "done": True}


# -- the wire framings -----------------------------------------------------------------------------


def as_sse(chunks: list[dict[str, Any]], events: bool = False, end: str = "\n") -> bytes:
    """Server-sent events as the provider sends them (``event:`` lines for the providers that
    name their events; OpenAI's ``[DONE]`` only where ``events`` is off)."""
    lines = []
    for chunk in chunks:
        if events:
            lines.append(f"event: {chunk['type']}")
        lines += [f"data: {json.dumps(chunk, ensure_ascii=False)}", ""]
    if not events:
        lines += ["data: [DONE]", ""]
    return (end.join(lines) + end).encode()


def as_ndjson(chunks: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(chunk, ensure_ascii=False) + "\n" for chunk in chunks).encode()


def as_array(chunks: list[dict[str, Any]]) -> bytes:
    # As Gemini's streamGenerateContent without alt=sse: pretty-printed, CRLF between chunks.
    body = ",\r\n".join(json.dumps(chunk, indent=2, ensure_ascii=False) for chunk in chunks)
    return f"[{body}]".encode()


#: name -> (provider, detected as, the capture's bytes, the equivalent final response)
CAPTURES: dict[str, tuple[str, str, Callable[[], bytes], Callable[[], dict[str, Any]]]] = {
    "openai-sse": ("openai", "openai", lambda: as_sse(openai_chunks()), openai_final),
    "mistral-sse": ("mistral", "openai", lambda: as_sse(mistral_chunks()), mistral_final),
    "anthropic-sse": (
        "anthropic",
        "anthropic",
        lambda: as_sse(anthropic_chunks(), events=True),
        anthropic_final,
    ),
    "responses-sse": (
        "openai-responses",
        "openai-responses",
        lambda: as_sse(responses_chunks(), events=True),
        responses_final,
    ),
    "gemini-sse-crlf": (
        "gemini",
        "gemini",
        lambda: as_sse(gemini_chunks(), events=False, end="\r\n").replace(b"data: [DONE]\r\n", b""),
        gemini_final,
    ),
    "gemini-array": ("gemini", "gemini", lambda: as_array(gemini_chunks()), gemini_final),
    "ollama-ndjson": ("ollama", "ollama", lambda: as_ndjson(ollama_chunks()), ollama_final),
}


@pytest.fixture
def saved(tmp_path: Path) -> Callable[[str], tuple[Path, Path]]:
    """Write a capture and its equivalent final response; returns both paths."""

    def write(name: str) -> tuple[Path, Path]:
        _, _, capture, final = CAPTURES[name]
        stream, response = tmp_path / f"{name}.txt", tmp_path / f"{name}.json"
        stream.write_bytes(capture())
        response.write_text(json.dumps(final(), ensure_ascii=False), encoding="utf-8")
        return stream, response

    return write


def calls_of(out: str) -> list[tuple[Any, ...]]:
    return [
        (row["call_id"], row["name"], row["tool"], row["action"], row["arguments"], row["error"])
        for row in json.loads(out)
    ]


# -- parse --stream ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CAPTURES)
def test_parse_stream_gives_the_calls_of_the_equivalent_response(
    name: str, saved: Callable[[str], tuple[Path, Path]]
) -> None:
    provider, _, _, _ = CAPTURES[name]
    stream, response = saved(name)
    code, out, err = invoke("parse", "--provider", provider, "--stream", str(stream), "--json")
    assert (code, err) == (0, "")
    calls = calls_of(out)
    assert [(name, tool, args, error) for _, name, tool, _, args, error in calls] == [
        ("now", "clock", {}, None),
        ("think", "think", {"thought": THOUGHT}, None),
    ]
    code, whole, _ = invoke("parse", "--provider", provider, "--response", str(response), "--json")
    assert code == 0
    assert calls == calls_of(whole)  # the ids too, Gemini's made-up ones included


@pytest.mark.parametrize("name", CAPTURES)
def test_without_provider_the_streams_shape_decides_and_stderr_says_so(
    name: str, saved: Callable[[str], tuple[Path, Path]]
) -> None:
    provider, shape, _, _ = CAPTURES[name]
    stream, _ = saved(name)
    code, out, err = invoke("parse", "--stream", str(stream), "--json")
    assert code == 0
    assert err == detected(shape)
    assert [row["name"] for row in json.loads(out)] == ["now", "think"]  # one JSON document
    assert invoke("parse", "--provider", provider, "--stream", str(stream), "--json")[1] == out


@pytest.mark.parametrize("provider", sorted(SAVED))
def test_without_provider_the_responses_shape_decides_and_stderr_says_so(provider: str) -> None:
    path = str(RESPONSES / SAVED[provider])
    code, out, err = invoke("parse", "--response", path, "--json")
    assert code == 0
    shape = "openai" if provider == "mistral" else provider
    assert err == detected(shape, "response")
    assert out == invoke("parse", "--provider", provider, "--response", path, "--json")[1]
    assert len(json.loads(out)) >= 2


def test_the_table_output_also_names_the_detected_provider_on_stderr_only(
    saved: Callable[[str], tuple[Path, Path]],
) -> None:
    stream, _ = saved("anthropic-sse")
    code, out, err = invoke("parse", "--stream", str(stream))
    assert code == 0
    assert err == detected("anthropic")
    assert "toolu_b" in out
    assert "expediter:" not in out


@pytest.mark.parametrize("command", ["parse", "run"])
def test_a_stream_on_standard_input(command: str) -> None:
    data = as_sse(anthropic_chunks(), events=True)
    code, out, err = invoke(command, "--stream", "-", "--json", stdin=data)
    assert code == 0
    assert err == detected("anthropic")
    if command == "parse":
        assert [row["call_id"] for row in json.loads(out)] == ["toolu_a", "toolu_b"]
    else:
        events = [json.loads(line) for line in out.splitlines()]
        assert [(e["call_id"], e["status"]) for e in events] == [
            ("toolu_a", "completed"),
            ("toolu_b", "completed"),
        ]


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_a_character_split_between_two_reads_of_the_file(offset: int, tmp_path: Path) -> None:
    # The file is read READ_SIZE bytes at a time: put a 4-byte character across that boundary.
    data = as_sse(openai_chunks())
    emoji = "😀".encode()
    at = data.index(emoji)
    pad = READ_SIZE - offset - at
    assert pad > 10
    path = tmp_path / "stream.sse"
    path.write_bytes(b":" + b"x" * (pad - 2) + b"\n" + data)  # a comment line in front
    assert path.read_bytes()[READ_SIZE - offset : READ_SIZE - offset + 4] == emoji
    code, out, _ = invoke("parse", "--stream", str(path), "--json")
    assert code == 0
    assert json.loads(out)[1]["arguments"] == {"thought": THOUGHT}


# -- giving the input ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["parse", "run"])
def test_both_response_and_stream_is_bad_usage(command: str, tmp_path: Path) -> None:
    path = tmp_path / "reply.json"
    path.write_text(json.dumps(openai_final()))
    code, out, err = invoke(command, "--response", str(path), "--stream", str(path))
    assert (code, out) == (2, "")
    assert one_error_line(err) == "Error: give --response FILE or --stream FILE, not both"


@pytest.mark.parametrize("command", ["parse", "run"])
def test_neither_response_nor_stream_is_bad_usage(command: str) -> None:
    code, out, err = invoke(command, "--provider", "openai")
    assert (code, out) == (2, "")
    assert "give --response FILE" in one_error_line(err)
    assert "--stream FILE" in err


@pytest.mark.parametrize("command", ["parse", "run"])
def test_a_shape_that_fits_no_provider_names_every_providers_fields(
    command: str, tmp_path: Path
) -> None:
    response = tmp_path / "reply.json"
    response.write_text(json.dumps({"text": "hi", "finish": "stop"}))
    code, out, err = invoke(command, "--response", str(response))
    assert (code, out) == (2, "")
    line = one_error_line(err)
    assert f"cannot tell which provider wrote the response in {response}" in line
    for field in (
        "`choices` (openai, mistral)",
        "`output` (openai-responses)",
        "`content` with `type: message` (anthropic)",
        "`candidates` (gemini)",
        "`message` (ollama)",
        "--provider",
    ):
        assert field in line

    stream = tmp_path / "stream.ndjson"
    stream.write_text('{"token": "hi"}\n{"token": "!"}\n')
    code, out, err = invoke(command, "--stream", str(stream))
    assert (code, out) == (2, "")
    line = one_error_line(err)
    assert f"cannot tell which provider wrote the stream in {stream}" in line
    for field in (
        "`choices[].delta` (openai, mistral)",
        "`type: response.*` (openai-responses)",
        "`type: message_start` / `content_block_*` (anthropic)",
        "`candidates` (gemini)",
        "`message` with `done` (ollama)",
    ):
        assert field in line


# -- what is not a stream ------------------------------------------------------------------------

UNREADABLE = {
    "invalid-utf8": (b'data: {"a": 1}\n\ndata: {"b": "\xff"}\n\n', "line 3: not UTF-8 text"),
    "not-json": (b'data: {"a": 1}\n\ndata: {"b": nope}\n\n', "line 3: the data is not JSON"),
    "not-an-object": (b'{"message": {}, "done": false}\n[1, 2]\n', "line 2: a stream chunk"),
    "array-of-numbers": (b"[1, 2, 3]", "line 1: a stream chunk must be a JSON object"),
    "deep": (b"data: " + b"[" * 100_000 + b"\n\n", "line 1: the data is nested too deeply"),
    "deep-array": (b"[" * 100_000, "line 1: the array is nested too deeply"),
    # One limit on every Python (3.13's json reads far deeper than 3.11's).
    "just-too-deep": (
        b"data: " + b'{"a": ' * 257 + b"1" + b"}" * 257 + b"\n\n",
        "line 1: the data is nested too deeply to read (more than 256 levels)",
    ),
    "just-too-deep-array": (
        b"[" + b'{"a": ' * 257 + b"1" + b"}" * 257 + b"]",
        "line 1: the array is nested too deeply to read (more than 256 levels)",
    ),
    "huge-integer": (b'{"n": ' + b"9" * 5000 + b"}\n", "line 1: the data holds a number too"),
    "nan": (b'{"message": {}, "done": NaN}\n', "line 1: the data is not JSON (NaN"),
    "empty": (b"", "holds no stream chunks"),
    "only-comments": (b": ping\n\n: ping\n\n", "holds no stream chunks"),
    "only-done": (b"data: [DONE]\n\n", "holds no stream chunks"),
    "binary": (b"\x00\x01\xfe\xff" * 10, "not UTF-8 text"),
}


@pytest.mark.parametrize("command", ["parse", "run"])
@pytest.mark.parametrize(("content", "problem"), UNREADABLE.values(), ids=UNREADABLE.keys())
def test_what_is_not_a_stream_exits_2_with_one_error_line_naming_the_line(
    command: str, content: bytes, problem: str, tmp_path: Path
) -> None:
    path = tmp_path / "stream.txt"
    path.write_bytes(content)
    for args, stdin in (((str(path),), None), (("-",), content)):
        code, out, err = invoke(command, "--provider", "openai", "--stream", *args, stdin=stdin)
        assert (code, out) == (2, ""), err
        line = one_error_line(err)
        assert problem in line
        assert args[0] in line


@pytest.mark.parametrize("command", ["parse", "run"])
def test_a_stream_file_that_cannot_be_opened_exits_2(command: str, tmp_path: Path) -> None:
    for path in (tmp_path / "missing.sse", tmp_path):
        code, out, err = invoke(command, "--stream", str(path))
        assert (code, out) == (2, "")
        assert f"cannot read {path}" in one_error_line(err)


# -- a stream cut short or reporting an error ------------------------------------------------------


def test_a_stream_cut_inside_a_chunk_is_read_up_to_there_with_a_warning(tmp_path: Path) -> None:
    data = as_sse(anthropic_chunks(), events=True)
    cut = data.index(b'"partial_json": "{') + 20  # inside the think call's first delta
    path = tmp_path / "cut.sse"
    path.write_bytes(data[:cut])
    code, out, err = invoke("parse", "--provider", "anthropic", "--stream", str(path), "--json")
    assert code == 0
    assert f"warning: {path}: line " in err
    assert "the stream is cut off inside this chunk" in err
    rows = json.loads(out)
    assert rows[0]["call_id"] == "toolu_a"
    assert rows[0]["error"] is None


def test_a_truncated_stream_runs_its_complete_calls_only(tmp_path: Path) -> None:
    chunks = anthropic_chunks()
    cut = next(i for i, c in enumerate(chunks) if c.get("delta", {}).get("partial_json") == TAIL)
    path = tmp_path / "truncated.sse"
    path.write_bytes(as_sse(chunks[:cut], events=True))
    code, out, err = invoke("run", "--provider", "anthropic", "--stream", str(path), "--json")
    assert code == 1  # the call cut short is an error
    events = [json.loads(line) for line in out.splitlines()]
    assert [(e["call_id"], e["status"]) for e in events] == [
        ("toolu_a", "completed"),
        ("toolu_b", "error"),
    ]
    assert "Traceback" not in err


def test_an_error_inside_the_stream_is_reported_on_stderr(tmp_path: Path) -> None:
    chunks = anthropic_chunks()[:8]
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded\x1b[2J"}}
    path = tmp_path / "error.sse"
    path.write_bytes(as_sse([*chunks, error, error], events=True))
    code, out, err = invoke("parse", "--stream", str(path), "--json")
    assert code == 0
    assert err.splitlines() == [
        detected("anthropic").strip(),
        "warning: the stream reports an error: Overloaded\\x1b[2J (and 1 more)",
    ]
    assert [row["call_id"] for row in json.loads(out)] == ["toolu_a"]


@pytest.mark.parametrize(
    ("chunk", "shown"),
    [
        ({"error": {"message": "Rate limit reached", "type": "requests"}}, "Rate limit reached"),
        ({"error": "model 'qwen9' not found"}, "model 'qwen9' not found"),
        ({"type": "error", "code": "server_error", "message": "The server failed"}, "The server"),
        ({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}, '{"code": 429, "status"'),
    ],
    ids=["openai", "ollama", "responses", "gemini"],
)
def test_each_providers_error_chunk_is_reported(
    chunk: dict[str, Any], shown: str, tmp_path: Path
) -> None:
    path = tmp_path / "error.ndjson"
    path.write_bytes(as_ndjson([*ollama_chunks()[:1], chunk]))
    code, _, err = invoke("parse", "--provider", "ollama", "--stream", str(path), "--json")
    assert code == 0
    (line,) = err.splitlines()
    assert line.startswith(f"warning: the stream reports an error: {shown}")


def test_a_stream_read_as_another_provider_hints_at_the_right_one(
    saved: Callable[[str], tuple[Path, Path]],
) -> None:
    stream, _ = saved("anthropic-sse")
    code, out, err = invoke("parse", "--provider", "openai", "--stream", str(stream), "--json")
    assert (code, json.loads(out)) == (0, [])
    assert err.strip() == (
        "warning: no tool calls found reading the stream as openai; it looks like a stream "
        "from anthropic (2 tool calls): try --provider anthropic"
    )


def test_no_hint_for_a_mistral_stream_read_as_openai(
    saved: Callable[[str], tuple[Path, Path]],
) -> None:
    stream, _ = saved("mistral-sse")
    code, out, err = invoke("parse", "--provider", "openai", "--stream", str(stream), "--json")
    assert (code, err) == (0, "")
    assert len(json.loads(out)) == 2


def test_a_response_hint_names_mistral_alongside_openai(tmp_path: Path) -> None:
    path = str(RESPONSES / SAVED["mistral"])
    code, _, err = invoke("parse", "--provider", "anthropic", "--response", path, "--json")
    assert code == 0
    assert err.strip() == (
        "warning: no tool calls found reading the response as anthropic; it looks like a "
        "response from openai (or mistral: the same shape) (2 tool calls): try --provider openai"
    )


# -- run --stream ----------------------------------------------------------------------------------


def comparable(event: dict[str, Any]) -> dict[str, Any]:
    """An event without what differs between two runs: timings, and the clock's reading (two
    runs a second apart read different times)."""
    skipped = ("duration_ms", "key", "at", "started_at")
    if event.get("action") == "now":
        skipped += ("result", "content")
    return {k: v for k, v in event.items() if k not in skipped}


@pytest.mark.parametrize("name", CAPTURES)
def test_run_stream_runs_the_calls_as_run_response_does(
    name: str, saved: Callable[[str], tuple[Path, Path]]
) -> None:
    provider, _, _, _ = CAPTURES[name]
    stream, response = saved(name)
    runs = {}
    for flag, path in (("--stream", stream), ("--response", response)):
        # One reply twice: each run names its own message, or the second would run nothing.
        message = ("--message-id", f"m{flag}")
        code, out, err = invoke("run", "--provider", provider, flag, str(path), "--json", *message)
        assert (code, err) == (0, "")
        runs[flag] = [comparable(json.loads(line)) for line in out.splitlines()]
    assert runs["--stream"] == runs["--response"]
    assert [e["status"] for e in runs["--stream"]] == ["completed", "completed"]
    assert runs["--stream"][1]["result"] is not None

    stream_messages = invoke(
        "run", "--provider", provider, "--stream", str(stream), "--messages", "--message-id", "s"
    )
    response_messages = invoke(
        "run", "--provider", provider, "--response", str(response), "--messages",
        "--message-id", "r",
    )  # fmt: skip
    assert stream_messages[0] == 0
    clockless = re.compile(r"\d\d:\d\d:\d\d")  # the clock's reading in its result's text
    assert json.loads(clockless.sub("T", stream_messages[1])) == json.loads(
        clockless.sub("T", response_messages[1])
    )


def test_run_stream_exit_status_follows_the_calls(tmp_path: Path) -> None:
    chunks = openai_chunks()
    chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] = "no_such_tool"
    path = tmp_path / "unknown.sse"
    path.write_bytes(as_sse(chunks))
    code, out, err = invoke("run", "--stream", str(path), "--json")
    assert code == 1
    assert err == detected("openai")
    statuses = [json.loads(line)["status"] for line in out.splitlines()]
    assert statuses == ["error", "completed"]


def test_run_stream_messages_are_the_named_providers(
    saved: Callable[[str], tuple[Path, Path]],
) -> None:
    stream, _ = saved("mistral-sse")
    code, out, _ = invoke("run", "--provider", "mistral", "--stream", str(stream), "--messages")
    assert code == 0
    messages = json.loads(out)
    assert [(m["role"], m["tool_call_id"], m["name"]) for m in messages] == [
        ("tool", "D681PevKs", "now"),
        ("tool", "Xy3a9LmQe", "think"),
    ]


def test_the_saved_responses_are_unchanged_by_detection() -> None:
    # Mistral's saved response names a Mistral model; detection still says openai.
    assert load(SAVED["mistral"])["model"].startswith("mistral")


@pytest.mark.parametrize("name", ["openai-sse", "mistral-sse", "anthropic-sse", "responses-sse"])
def test_a_saved_stream_run_twice_runs_each_call_once(
    name: str, saved: Callable[[str], tuple[Path, Path]]
) -> None:
    provider, _, _, _ = CAPTURES[name]
    stream, _ = saved(name)
    code, out, err = invoke("run", "--provider", provider, "--stream", str(stream), "--json")
    assert (code, err) == (0, "")
    first = [json.loads(line) for line in out.splitlines()]
    # The stream's own id (in its first chunk or event) keys its calls.
    head = next(iter(read_wire([stream.read_bytes()])))
    reply_id = head.get("id") or (head.get("message") or head.get("response"))["id"]
    assert [event["key"] for event in first] == [f"{reply_id}:{e['call_id']}" for e in first]
    code, out, _ = invoke("run", "--provider", provider, "--stream", str(stream), "--json")
    assert code == 1
    second = [json.loads(line) for line in out.splitlines()]
    assert [event["key"] for event in second] == [event["key"] for event in first]
    assert {event["error_type"] for event in second} == {"LedgerError"}


def test_a_saved_stream_without_an_id_runs_with_a_warning(
    saved: Callable[[str], tuple[Path, Path]],
) -> None:
    stream, _ = saved("gemini-array")
    code, _, err = invoke("run", "--provider", "gemini", "--stream", str(stream))
    assert code == 0
    assert "warning: the reply has no id to key its calls in the ledger" in err
