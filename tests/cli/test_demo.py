"""`expediter demo`: each `$ expediter ...` section of its transcript shows what that command
prints: the same columns, and for the commands a reader can run as written, the same output; the
model reply it runs is left in ``EXPEDITER_HOME/demo/`` as ``reply.json`` and ``reply.sse``, for
``parse`` and ``run`` to read as the README shows."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.transcripts import columns, sections

from expediter.cli import cli

ENV = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
#: Calls the demo makes to built-in tools whose output does not depend on the clock.
REPEATABLE_CALLS = (
    "call think think",
    "call clock convert",
    "call clock now --args '{\"timezone\": 42}'",
)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), prog_name="expediter", env=ENV)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo-home")


@pytest.fixture(scope="module")
def demo_and_ledger(demo_home: Path) -> tuple[str, str]:
    """The demo's transcript, and `ledger ls --since 1m` run right after it, in one home."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EXPEDITER_HOME", str(demo_home))
        code, transcript, err = invoke("demo")
        assert code == 0, err
        code, ledger, err = invoke("ledger", "ls", "--since", "1m")
        assert code == 0, err
    return transcript, ledger


@pytest.fixture
def in_demo_home(demo_home: Path, demo_and_ledger: tuple[str, str]) -> Iterator[Path]:
    """The folder the demo left its reply in, with ``EXPEDITER_HOME`` set to the demo's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EXPEDITER_HOME", str(demo_home))
        yield demo_home / "demo"


@pytest.fixture
def transcript(demo_and_ledger: tuple[str, str]) -> dict[str, list[str]]:
    """The demo's sections by command, without the leading ``expediter``."""
    found = sections(demo_and_ledger[0])
    assert all(command.startswith("expediter ") for command in found), list(found)
    return {command.removeprefix("expediter "): lines for command, lines in found.items()}


def test_the_demo_shows_every_command_it_claims_to(transcript: dict[str, list[str]]) -> None:
    kinds = {shlex.split(command)[0] for command in transcript}
    assert kinds == {"tools", "call", "run", "approvals", "approve", "ledger"}
    assert all(lines for lines in transcript.values()), transcript


def test_the_ledger_section_is_what_ledger_ls_prints(
    demo_and_ledger: tuple[str, str], transcript: dict[str, list[str]]
) -> None:
    assert transcript["ledger ls --since 1m"] == demo_and_ledger[1].splitlines()


def test_the_tools_list_section_has_the_commands_columns_and_built_in_rows(
    transcript: dict[str, list[str]],
) -> None:
    code, out, _ = invoke("tools", "list")
    assert code == 0
    header, *rows = out.splitlines()
    shown_header, *shown_rows = transcript["tools list"]
    assert columns(shown_header) == columns(header)
    built_in = {columns(row)[0]: columns(row) for row in rows}
    shown = {columns(row)[0]: columns(row) for row in shown_rows}
    assert {name: shown[name] for name in built_in} == built_in


@pytest.mark.parametrize("prefix", REPEATABLE_CALLS)
def test_the_call_sections_are_what_the_command_and_its_exit_status_print(
    prefix: str, transcript: dict[str, list[str]]
) -> None:
    (command,) = [command for command in transcript if command.startswith(prefix)]
    args = shlex.split(command.removesuffix("; echo $?"))
    code, out, err = invoke(*args)
    assert transcript[command] == [*(out + err).splitlines(), str(code)]


@pytest.mark.parametrize("kind", ["run", "approve"])
def test_the_event_tables_have_the_columns_run_prints(
    kind: str, transcript: dict[str, list[str]], tmp_path: Path
) -> None:
    reply = tmp_path / "reply.json"
    call = {"id": "c1", "type": "function", "function": {"name": "think", "arguments": "{}"}}
    reply.write_text(json.dumps({"choices": [{"message": {"tool_calls": [call]}}]}))
    _, out, _ = invoke("run", "--provider", "openai", "--response", str(reply))
    (section,) = [lines for command, lines in transcript.items() if command.startswith(kind)]
    assert columns(section[0]) == columns(out.splitlines()[0])


def test_the_approvals_section_has_the_columns_approvals_ls_prints(
    transcript: dict[str, list[str]],
) -> None:
    _, out, _ = invoke("approvals", "ls")
    assert columns(transcript["approvals ls"][0]) == columns(out.splitlines()[0])


def test_the_demo_leaves_its_reply_and_says_where(
    transcript: dict[str, list[str]], demo_and_ledger: tuple[str, str], in_demo_home: Path
) -> None:
    reply = in_demo_home / "reply.json"
    assert (in_demo_home / "reply.sse").is_file()
    # The run section's command names the saved file, and its calls are the reply's.
    (command,) = [command for command in transcript if command.startswith("run ")]
    assert Path(shlex.split(command)[-1]).resolve() == reply.resolve()
    (call_ids,) = [
        [columns(row)[1] for row in lines[1:]]
        for command, lines in transcript.items()
        if command.startswith("run ")
    ]
    saved = json.loads(reply.read_text(encoding="utf-8"))
    assert call_ids == [call["id"] for call in saved["choices"][0]["message"]["tool_calls"]]
    (said,) = [line for line in demo_and_ledger[0].splitlines() if "reply is saved in" in line]
    folder = said.partition("reply is saved in ")[2].partition(": reply.json")[0]
    assert Path(shlex.split(folder)[0]).resolve() == in_demo_home.resolve()


def test_the_saved_stream_holds_the_same_calls_as_the_saved_reply(in_demo_home: Path) -> None:
    code, from_reply, err = invoke(
        "parse", "--response", str(in_demo_home / "reply.json"), "--json"
    )
    assert code == 0, err
    code, from_stream, err = invoke("parse", "--stream", str(in_demo_home / "reply.sse"), "--json")
    assert code == 0, err
    assert "provider detected from the stream's shape: openai" in err
    assert json.loads(from_stream) == json.loads(from_reply)
    assert len(json.loads(from_reply)) == 5


@pytest.mark.parametrize(
    ("option", "name"), [("--response", "reply.json"), ("--stream", "reply.sse")]
)
def test_running_the_saved_reply_again_runs_none_of_its_calls(
    option: str, name: str, in_demo_home: Path
) -> None:
    code, out, _ = invoke("run", option, str(in_demo_home / name), "--json")
    assert code == 1
    events = [json.loads(line) for line in out.splitlines()]
    assert len(events) == 5
    assert {event["status"] for event in events} == {"error"}
    (again,) = [event for event in events if event["name"] == "now"]
    assert again["error_type"] == "LedgerError"
    assert again["error"].endswith("it was not run again")
    # The demo's own tools are unknown outside it: those calls cannot run either.
    assert {event["error_type"] for event in events if event["name"] != "now"} == {"ToolNotFound"}
