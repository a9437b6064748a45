"""`expediter parse` and `expediter run` given hostile response files: a file that is not one
JSON object it can read (nested too deep, binary, empty, numbers too long) exits 2 with one
``Error:`` line; a readable response whose calls are hostile parses into calls with errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from expediter.cli import cli

COMMANDS = ("parse", "run")


def invoke(*args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    """The command's exit status, standard output and error; any exception but SystemExit
    (a traceback for the user) fails the test."""
    env = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = CliRunner().invoke(cli, list(args), prog_name="expediter", env=env, input=stdin)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def one_error_line(err: str) -> str:
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, err
    assert not any(line[:1].isspace() for line in err.splitlines()), err
    return errors[0]


def arguments_nested(depth: int) -> str:
    """An OpenAI response whose call's arguments are an object nested ``depth`` deep (as an
    object, not a string: inside the file's own JSON)."""
    arguments = '{"a": ' * depth + "1" + "}" * depth
    call = '{"id": "c1", "function": {"name": "now", "arguments": ' + arguments + "}}"
    return '{"choices": [{"message": {"tool_calls": [' + call + "]}}]}"


UNREADABLE = {
    "arrays-100000-deep": ("[" * 100_000 + "]" * 100_000).encode(),
    "arguments-5000-deep": arguments_nested(5000).encode(),
    "binary": b"\xff\xfe\x00\x01garbage\x80",
    "empty": b"",
    "whitespace": b" \n\t ",
    "integer-5000-digits": b'{"choices": ' + b"1" * 5000 + b"}",
    "not-an-object": b'"response"',
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("content", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_a_response_file_it_cannot_read_exits_2_with_one_error_line(
    tmp_path: Path, command: str, content: bytes
) -> None:
    path = tmp_path / "reply.json"
    path.write_bytes(content)
    code, out, err = invoke(command, "--provider", "openai", "--response", str(path))
    assert code == 2
    assert out == ""
    assert str(path) in one_error_line(err)


@pytest.mark.parametrize("command", COMMANDS)
def test_unreadable_standard_input_exits_2(command: str) -> None:
    for data in (b"\xff\xfe\x00garbage", b"[" * 100_000):
        code, _, err = invoke(command, "--provider", "openai", "--response", "-", stdin=data)
        assert code == 2
        one_error_line(err)


def test_arguments_nested_within_what_json_reads_are_an_argument_error(tmp_path: Path) -> None:
    path = tmp_path / "reply.json"
    path.write_text(arguments_nested(200))
    code, out, _ = invoke("parse", "--provider", "openai", "--response", str(path), "--json")
    assert code == 0
    (row,) = json.loads(out)
    assert (row["call_id"], row["action"], row["arguments"]) == ("c1", "now", {})
    assert "nest more than 64 levels deep" in row["error"]

    code, out, err = invoke("run", "--provider", "openai", "--response", str(path), "--json")
    assert code == 1
    assert "Traceback" not in err
    (event,) = [json.loads(line) for line in out.splitlines()]
    assert event["status"] == "error"
    assert "nest more than 64 levels deep" in event["error"]


def test_hostile_calls_in_a_readable_response_are_rows_with_errors(tmp_path: Path) -> None:
    calls = [
        {"id": {"a": 1}, "function": {"name": "now", "arguments": "{}"}},
        {"id": "c2", "function": {"name": ["now"], "arguments": "{}"}},
        {"id": "c3", "function": {"name": "now", "arguments": '{"timezone": NaN}'}},
        {"id": "c4", "function": "now"},
        {"id": "c5", "function": {"name": "x" * 100_000, "arguments": 7}},
        {"id": "c6", "function": {"name": "now", "arguments": '{"timezone": "UTC"}'}},
    ]
    path = tmp_path / "reply.json"
    path.write_text(json.dumps({"choices": [{"message": {"tool_calls": calls}}]}))
    code, out, _ = invoke("parse", "--provider", "openai", "--response", str(path), "--json")
    assert code == 0
    rows = json.loads(out)
    assert [row["error"] is None for row in rows] == [False] * 5 + [True]
    assert all(len(row["error"]) < 500 for row in rows[:5])

    code, out, err = invoke("run", "--provider", "openai", "--response", str(path))
    assert code == 1
    assert "Traceback" not in err
    assert len(out.splitlines()) == 1 + len(calls)


@pytest.mark.parametrize("command", COMMANDS)
def test_how_deep_a_response_may_nest_is_ours_not_the_parsers(tmp_path: Path, command: str) -> None:
    """One limit on every Python: 3.13's json reads 5,000 levels that 3.11 refuses."""
    from expediter.core.records.jsonread import MAX_DOCUMENT_DEPTH

    path = tmp_path / "reply.json"
    envelope = arguments_nested(0).count("{") + arguments_nested(0).count("[")
    path.write_text(arguments_nested(MAX_DOCUMENT_DEPTH - envelope + 1))
    code, out, err = invoke(command, "--provider", "openai", "--response", str(path))
    assert (code, out) == (2, "")
    assert one_error_line(err) == (
        f"Error: {path} is nested too deeply to read (more than {MAX_DOCUMENT_DEPTH} levels)"
    )
    path.write_text(arguments_nested(MAX_DOCUMENT_DEPTH - envelope))
    code, out, err = invoke(command, "--provider", "openai", "--response", str(path), "--json")
    assert code == (0 if command == "parse" else 1), err
    assert "nest more than 64 levels deep" in out
