"""What an operator reads cannot be forged by a model or a tool: every human-readable view of
the command line shows control characters, bidi controls and lone surrogates as visible escapes
(``\\x1b``, ``\\u202e``), and a newline inside a value never breaks a table row."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.responses import openai_response

from expediter.cli import cli
from expediter.cli.output import dump_json, escape

#: Hides the rest of a line, reverses it, returns to its start, starts another, and (C1) opens
#: a control sequence.
PLANTED = "\x1b[8m\u202e\r\n\x9b\x7f"
#: What no view may print raw: C0 (a newline only between lines), DEL, C1, bidi controls,
#: lone surrogates.
RAW = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)

TOOLS = '''
"""Tools whose output a model can steer.\\x1b[8m hidden \\u202e reversed"""
import expediter


@expediter.tool(description="Say it back.\\x1b[8m hidden \\u202e reversed")
def echo(text: str) -> str:
    """Say it back."""
    return text


@expediter.tool(require_approval=True)
def refund(order: str) -> dict:
    """Refund an order (a human approves)."""
    return {"refunded": order}


@expediter.tool
def crash(why: str = "") -> str:
    """Always fails, quoting what it was given."""
    raise RuntimeError("jammed by " + why)
'''

BROKEN = 'raise RuntimeError("broken\\x1b[8m\\u202e\\r\\nfake row")\n'


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "shop.py").write_text(textwrap.dedent(TOOLS))
    return directory


@pytest.fixture
def response_file(tmp_path: Path) -> Path:
    """A response whose call ids, names and arguments all carry the planted characters."""
    path = tmp_path / "response.json"
    response = openai_response(
        (f"c1{PLANTED}", "echo", {"text": f"hi{PLANTED}"}),
        (f"c2{PLANTED}", "refund", {"order": f"A1{PLANTED}"}),
        (f"c3{PLANTED}", "crash", {"why": PLANTED}),
        (f"c4{PLANTED}", f"restock{PLANTED}", {"sku": PLANTED}),
    )
    path.write_text(json.dumps(response))
    return path


def invoke(*args: str, tools_dir: Path | None = None) -> tuple[int, str, str]:
    prefix = ["--tools-dir", str(tools_dir)] if tools_dir else []
    env = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = CliRunner().invoke(cli, [*prefix, *args], prog_name="expediter", env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def assert_safe(text: str) -> None:
    found = sorted({f"U+{ord(char):04X}" for char in RAW.findall(text)})
    assert not found, f"printed raw: {found}\n{text}"


def table(out: str, rows: int) -> list[str]:
    """The lines of a table printed safely, one per row under the header."""
    assert_safe(out)
    lines = out.splitlines()
    assert len(lines) == 1 + rows, f"a value broke a row:\n{out}"
    return lines[1:]


def run_once(tools_dir: Path, response_file: Path) -> str:
    """``run`` the response (message m1) and return its table."""
    code, out, err = invoke(
        "run", "--provider", "openai", "--response", str(response_file), "--message-id", "m1",
        tools_dir=tools_dir,
    )  # fmt: skip
    assert code == 1, err  # the crash and the unknown name end in errors
    assert_safe(err)
    return out


def test_escape_shows_each_unsafe_character_as_a_visible_escape() -> None:
    assert escape("c1\x1b[8m\u202e\r\n\t\x9b\x7f\ud800\u2066") == (
        "c1\\x1b[8m\\u202e\\r\\n\\t\\x9b\\x7f\\ud800\\u2066"
    )
    assert escape("line\nnext\r\x1b", keep_newlines=True) == "line\nnext\\r\\x1b"
    assert escape("plain text, é, 中文") == "plain text, é, 中文"


def test_dump_json_is_the_same_document_with_nothing_raw() -> None:
    value = {"text": f"é {PLANTED}\ud800\u2066"}
    text = dump_json(value, indent=2)
    assert_safe(text.replace("\n", ""))
    assert json.loads(text) == value
    assert "é" in text, "non-ASCII text stays readable"


def test_parse_table(tools_dir: Path, response_file: Path) -> None:
    code, out, err = invoke(
        "parse", "--provider", "openai", "--response", str(response_file), tools_dir=tools_dir
    )
    assert code == 0, err
    rows = table(out, 4)
    assert rows[0].startswith("c1\\x1b[8m\\u202e\\r\\n\\x9b\\x7f")
    assert "\\u202e" in rows[1], "the arguments are escaped"
    assert "restock\\x1b[8m\\u202e" in rows[3], "the made-up name is escaped"


def test_run_table(tools_dir: Path, response_file: Path) -> None:
    rows = table(run_once(tools_dir, response_file), 4)
    assert [row.split()[0] for row in rows] == ["completed", "awaiting_approval", "error", "error"]
    assert rows[0].split()[1].startswith("c1\\x1b[8m\\u202e\\r\\n")
    assert "jammed by" in rows[2]
    assert "\\u202e" in rows[2], "the tool's error is escaped"


def test_run_json_lines_hold_no_raw_characters(tools_dir: Path, response_file: Path) -> None:
    code, out, _ = invoke(
        "run", "--provider", "openai", "--response", str(response_file), "--message-id", "m2",
        "--json", tools_dir=tools_dir,
    )  # fmt: skip
    assert code == 1
    assert_safe(out)
    events = [json.loads(line) for line in out.splitlines()]
    assert [event["call_id"] for event in events] == [f"c{n}{PLANTED}" for n in range(1, 5)]


def test_approvals_ls(tools_dir: Path, response_file: Path) -> None:
    run_once(tools_dir, response_file)
    code, out, err = invoke("approvals", "ls")
    assert code == 0, err
    (row,) = table(out, 1)
    assert row.startswith("m1:c2\\x1b[8m\\u202e\\r\\n\\x9b\\x7f")


def test_ledger_ls(tools_dir: Path, response_file: Path) -> None:
    run_once(tools_dir, response_file)
    code, out, err = invoke("ledger", "ls")
    assert code == 0, err
    rows = table(out, 4)
    assert all(row.startswith("m1:c") and "\\x1b[8m\\u202e" in row for row in rows)


def test_ledger_show(tools_dir: Path, response_file: Path) -> None:
    run_once(tools_dir, response_file)
    code, data, _ = invoke("ledger", "show", "m1:c3", "--json")
    assert code == 0
    assert_safe(data.replace("\n", ""))
    fields = json.loads(data)
    code, out, err = invoke("ledger", "show", "m1:c3")
    assert code == 0, err
    assert_safe(out)
    lines = out.splitlines()
    assert len(lines) == len(fields), f"a value broke a line:\n{out}"
    assert [line.split(":")[0].strip() for line in lines] == list(fields)
    (error,) = [line for line in lines if line.split(":")[0].strip() == "error"]
    assert "jammed by" in error
    assert "\\u202e" in error


def test_call_output(tools_dir: Path) -> None:
    code, out, err = invoke(
        "call", "shop", "echo", "--args", json.dumps({"text": f"one{PLANTED}two"}),
        tools_dir=tools_dir,
    )  # fmt: skip
    assert code == 0, err
    assert_safe(out)
    # A string result keeps its newlines (it may be a file); nothing else is raw.
    assert out.startswith("one")
    assert "\\u202e\\r\n" in out
    assert "\\x9b" in out
    assert out.splitlines()[-1].endswith("two")
    code, out, err = invoke(
        "call", "shop", "crash", "--args", json.dumps({"why": PLANTED}), tools_dir=tools_dir
    )
    assert code == 1
    assert_safe(err)
    assert len(err.splitlines()) == 1
    assert "error (RuntimeError): RuntimeError: jammed by" in err


def test_call_json_result_is_escaped(tools_dir: Path) -> None:
    code, out, err = invoke(
        "call", "shop", "refund", "--args", json.dumps({"order": PLANTED}), tools_dir=tools_dir
    )
    assert code == 0, err
    assert_safe(out.replace("\n", "") + err)
    assert json.loads(out)["refunded"].endswith("\u202e\r\n\x9b")


def test_plugins_and_tools_listings(tools_dir: Path) -> None:
    (tools_dir / "broken.py").write_text(BROKEN)
    code, out, err = invoke("plugins", tools_dir=tools_dir)
    assert code == 0, err
    rows = table(out, 7)  # the built-ins clock, memory, notes, think and todo_list, broken, shop
    (broken,) = [row for row in rows if row.startswith("broken")]
    assert "\\x1b[8m\\u202e" in broken
    assert_safe(err)
    code, out, err = invoke("tools", "list", tools_dir=tools_dir)
    rows = table(out, 6)  # clock, memory, notes, shop, think, todo_list
    (shop,) = [row for row in rows if row.startswith("shop")]
    assert "\\x1b[8m hidden \\u202e" in shop
    assert_safe(err)
    code, out, err = invoke("tools", "show", "shop", tools_dir=tools_dir)
    assert code == 0, err
    assert_safe(out)
    assert "steer.\\x1b[8m hidden \\u202e reversed" in out


def test_a_key_as_the_tables_print_it_names_the_call(tools_dir: Path, response_file: Path) -> None:
    run_once(tools_dir, response_file)
    _, out, _ = invoke("approvals", "ls")
    (row,) = table(out, 1)
    printed = row.split()[0]
    code, data, err = invoke("ledger", "show", printed, "--json")
    assert code == 0, err
    assert json.loads(data)["key"] == f"m1:c2{PLANTED}"


def test_a_key_ledger_ls_prints_names_the_call(tools_dir: Path, response_file: Path) -> None:
    run_once(tools_dir, response_file)
    _, out, _ = invoke("ledger", "ls", "--status", "awaiting_approval")
    (row,) = table(out, 1)
    code, data, err = invoke("ledger", "show", row.split()[0], "--json")
    assert code == 0, err
    assert json.loads(data)["key"] == f"m1:c2{PLANTED}"
