"""`expediter tools schema` and `expediter parse`: provider tool definitions on stdout, saved
responses read from a file or stdin into the documented JSON shape, and usage errors exit 2."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.responses import RESPONSES, SAVED, load

from expediter.cli import cli
from expediter.core.instances.defaults import default_instance_id

PROVIDERS = ("openai", "openai-responses", "anthropic", "gemini", "mistral", "ollama")
PARSE_FIELDS = {"call_id", "name", "instance_id", "tool", "action", "arguments", "error"}

TOOLS = '''
import expediter

@expediter.tool
def shout(text: str, times: int = 1) -> str:
    """Shout text.

    Args:
        text: What to shout.
        times: How many times.
    """
    return (text.upper() + " ") * times
'''


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "loud.py").write_text(textwrap.dedent(TOOLS))
    return directory


def run(
    *args: str, tools_dir: Path | None = None, stdin: str | None = None
) -> tuple[int, str, str]:
    prefix = ["--tools-dir", str(tools_dir)] if tools_dir else []
    # Packs installed in the test virtualenv must not change what these tests see.
    env = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = CliRunner().invoke(cli, [*prefix, *args], prog_name="expediter", env=env, input=stdin)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def names(provider: str, tools: list[dict[str, Any]]) -> list[str]:
    if provider == "gemini":
        return [d["name"] for d in tools[0]["function_declarations"]]
    if provider in ("anthropic", "openai-responses"):
        return [tool["name"] for tool in tools]
    return [tool["function"]["name"] for tool in tools]


# -- tools schema -------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tools_schema_prints_the_providers_tool_list(provider: str, tools_dir: Path) -> None:
    code, out, _ = run("tools", "schema", "--provider", provider, tools_dir=tools_dir)
    assert code == 0
    tools = json.loads(out)
    assert sorted(names(provider, tools)) == [
        "complete", "convert", "forget", "notes_add", "notes_delete", "notes_list", "now",
        "recall", "remember", "search", "shout", "think", "todo_list_add", "todo_list_delete",
        "todo_list_list",
    ]  # fmt: skip
    if provider == "gemini":
        (tool,) = tools
        assert list(tool) == ["function_declarations"]
        assert all("parameters_json_schema" in d for d in tool["function_declarations"])
    elif provider == "anthropic":
        assert all(set(t) == {"name", "description", "input_schema"} for t in tools)
    elif provider == "openai-responses":
        assert all(t["type"] == "function" and t["strict"] is False for t in tools)
    else:
        assert all(set(t) == {"type", "function"} and t["type"] == "function" for t in tools)
        assert all("strict" not in t["function"] for t in tools)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tools_schema_json_flag_prints_the_same_document(provider: str) -> None:
    plain = run("tools", "schema", "--provider", provider)
    flagged = run("tools", "schema", "--provider", provider, "--json")
    assert plain[0] == flagged[0] == 0
    assert json.loads(plain[1]) == json.loads(flagged[1])


@pytest.mark.parametrize(
    ("provider", "flag"),
    [
        ("openai", lambda t: t["function"]["strict"]),
        ("openai-responses", lambda t: t["strict"]),
        ("anthropic", lambda t: t["strict"]),
    ],
)
def test_tools_schema_strict_marks_every_tool_strict(
    provider: str, flag: Any, tools_dir: Path
) -> None:
    code, out, _ = run("tools", "schema", "--provider", provider, "--strict", tools_dir=tools_dir)
    assert code == 0
    tools = json.loads(out)
    assert tools
    assert all(flag(tool) is True for tool in tools)
    shout = next(t for t in tools if "shout" in json.dumps(t))
    parameters = (
        shout.get("input_schema") or shout.get("parameters") or shout["function"]["parameters"]
    )
    assert parameters["required"] == ["text", "times"]
    assert parameters["properties"]["times"]["type"] == ["integer", "null"]


def test_tools_schema_strict_changes_nothing_for_gemini() -> None:
    assert (
        run("tools", "schema", "--provider", "gemini", "--strict")[1]
        == run("tools", "schema", "--provider", "gemini")[1]
    )


def test_tools_schema_refuses_an_unknown_provider() -> None:
    code, _, err = run("tools", "schema", "--provider", "cohere")
    assert code == 2
    assert "cohere" in err


# -- parse ------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_parse_json_lists_each_call_with_the_documented_fields(provider: str) -> None:
    path = RESPONSES / SAVED[provider]
    code, out, _ = run("parse", "--provider", provider, "--response", str(path), "--json")
    assert code == 0
    rows = json.loads(out)
    assert len(rows) >= 2
    for row in rows:
        assert set(row) >= PARSE_FIELDS
        assert row["error"] is None
        assert row["action"] == row["name"]
        assert row["instance_id"] == default_instance_id(row["tool"])
        assert row["tool"] in ("clock", "think")
        assert isinstance(row["arguments"], dict)
        assert row["arguments"]
        assert row["call_id"]


def test_parse_json_keeps_ids_arguments_and_signatures() -> None:
    code, out, _ = run(
        "parse",
        "--provider",
        "anthropic",
        "--response",
        str(RESPONSES / "anthropic_messages.json"),
        "--json",
    )
    assert code == 0
    first = json.loads(out)[0]
    assert {key: first[key] for key in PARSE_FIELDS} == {
        "call_id": "toolu_01A09q90qw90lq917835lq9",
        "name": "now",
        "instance_id": default_instance_id("clock"),
        "tool": "clock",
        "action": "now",
        "arguments": {"timezone": "Asia/Tokyo"},
        "error": None,
    }
    code, out, _ = run(
        "parse", "--provider", "gemini", "--response", str(RESPONSES / "gemini.json"), "--json"
    )
    assert code == 0
    rows = json.loads(out)
    assert rows[0]["extras"]["thought_signature"].startswith("m3pY7AiG")
    assert all(len(row["call_id"]) == 9 and row["call_id"].isalnum() for row in rows)


def test_parse_prints_a_table_by_default() -> None:
    code, out, _ = run(
        "parse", "--provider", "openai", "--response", str(RESPONSES / "openai_chat.json")
    )
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["CALL", "ID", "NAME", "TOOL", "ACTION", "ARGUMENTS", "ERROR"]
    assert len(rows) == 3
    assert rows[0].startswith("call_Xk2PqL9vT3mN8rB4wY6zA1cD")
    assert "Asia/Tokyo" in rows[0]


def test_parse_reads_standard_input_for_a_dash() -> None:
    text = (RESPONSES / "openai_responses.json").read_text(encoding="utf-8")
    code, out, _ = run(
        "parse", "--provider", "openai-responses", "--response", "-", "--json", stdin=text
    )
    assert code == 0
    rows = json.loads(out)
    assert [row["call_id"] for row in rows] == [
        "call_Lp4Wz8Qe2Rt6Ny0Vb3Xc7Mk1",
        "call_Hs9Kd2Fj5Ga8Pq1Wt4Ze6Yr3",
    ]


def test_parse_shows_unknown_names_and_bad_arguments_as_errors(tmp_path: Path) -> None:
    response = load("openai_chat.json")
    calls = response["choices"][0]["message"]["tool_calls"]
    calls[0]["function"]["name"] = "clock_now"
    calls[1]["function"]["arguments"] = '{"time": "09:30"'
    path = tmp_path / "reply.json"
    path.write_text(json.dumps(response))
    code, out, _ = run("parse", "--provider", "openai", "--response", str(path), "--json")
    assert code == 0
    unknown, broken, fine = json.loads(out)
    assert (unknown["tool"], unknown["action"], unknown["instance_id"]) == (None, None, None)
    assert "clock_now" in unknown["error"]
    assert broken["action"] == "convert"
    assert "not valid JSON" in broken["error"]
    assert fine["error"] is None


def test_parse_resolves_names_of_tools_from_a_tools_directory(
    tools_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "reply.json"
    path.write_text(
        json.dumps(
            {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_01", "name": "shout", "input": {"text": "hi"}}
                ],
                "stop_reason": "tool_use",
            }
        )
    )
    code, out, _ = run(
        "parse", "--provider", "anthropic", "--response", str(path), "--json", tools_dir=tools_dir
    )
    assert code == 0
    (row,) = json.loads(out)
    assert (row["tool"], row["action"], row["arguments"]) == ("loud", "shout", {"text": "hi"})


@pytest.mark.parametrize(
    "content",
    [None, "{not json", "[1, 2, 3]", ""],
    ids=["missing-file", "not-json", "not-an-object", "empty"],
)
def test_parse_exits_2_for_a_response_it_cannot_read(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "reply.json"
    if content is not None:
        path.write_text(content)
    code, out, err = run("parse", "--provider", "openai", "--response", str(path))
    assert code == 2
    assert out == ""
    assert str(path) in err


def test_parse_exits_2_for_non_json_on_standard_input() -> None:
    code, _, err = run("parse", "--provider", "openai", "--response", "-", stdin="not json")
    assert code == 2
    assert "Error: - is not valid JSON: Expecting value: line 1 column 1 (char 0)" in err


def test_parse_exits_2_for_an_unknown_provider() -> None:
    code, _, err = run(
        "parse", "--provider", "cohere", "--response", str(RESPONSES / "openai_chat.json")
    )
    assert code == 2
    assert "cohere" in err
