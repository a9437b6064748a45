"""`expediter demo`: each `$ expediter ...` section of its transcript shows what that command
prints: the same columns, and for the commands a reader can run as written, the same output."""

from __future__ import annotations

import json
import shlex
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
def demo_and_ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The demo's transcript, and `ledger ls --since 1m` run right after it, in one home."""
    home = tmp_path_factory.mktemp("demo-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EXPEDITER_HOME", str(home))
        code, transcript, err = invoke("demo")
        assert code == 0, err
        code, ledger, err = invoke("ledger", "ls", "--since", "1m")
        assert code == 0, err
    return transcript, ledger


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
