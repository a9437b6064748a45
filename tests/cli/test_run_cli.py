"""`expediter run` replays a saved model response through the host; `expediter approvals ls`,
`approve` and `deny` decide the calls it paused, also from another process after it exited."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from expediter.cli import cli
from expediter.core.ledger import Ledger
from expediter.core.ledger.records import LedgerRow

EXPEDITER = Path(sys.executable).with_name("expediter")
EVENT_FIELDS = {
    "status",
    "key",
    "call_id",
    "name",
    "tool",
    "action",
    "arguments",
    "result",
    "error",
    "duration_ms",
}
#: ``expediter run`` on a saved OpenAI response (the path comes next).
RUN = ("run", "--provider", "openai", "--response")
APPROVAL_FIELDS = {"key", "call_id", "user_id", "tool", "action", "arguments", "requested_at"}

TOOLS = '''
"""A small shop."""
import os
from pathlib import Path

import expediter


@expediter.tool
def echo(text: str) -> str:
    """Say it back."""
    return text


@expediter.tool(require_approval=True)
def refund(order: str) -> dict:
    """Refund an order (a human approves)."""
    with open(Path(__file__).with_name("refunds.log"), "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {order}\\n")
    return {"refunded": order}


@expediter.tool
def crash(why: str = "") -> str:
    """Always fails."""
    raise RuntimeError("the till is jammed")
'''


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "shop.py").write_text(textwrap.dedent(TOOLS))
    return directory


def openai_response(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    tool_calls = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(a)}}
        for call_id, name, a in calls
    ]
    return {"choices": [{"message": {"role": "assistant", "tool_calls": tool_calls}}]}


@pytest.fixture
def response_file(tmp_path: Path) -> Path:
    """A saved response calling echo, refund (needs approval), crash, and a made-up name."""
    path = tmp_path / "response.json"
    response = openai_response(
        ("c1", "echo", {"text": "hi"}),
        ("c2", "refund", {"order": "A1"}),
        ("c3", "crash", {}),
        ("c4", "restock", {"sku": "X"}),
    )
    path.write_text(json.dumps(response))
    return path


@pytest.fixture
def ledger(expediter_home: Path) -> Iterator[Ledger]:
    """The ledger the commands write (the default SQLite file in EXPEDITER_HOME)."""
    opened = Ledger(None, home=expediter_home)
    yield opened
    opened.close()


def invoke(*args: str, tools_dir: Path | None = None) -> tuple[int, str, str]:
    prefix = ["--tools-dir", str(tools_dir)] if tools_dir else []
    env = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = CliRunner().invoke(cli, [*prefix, *args], prog_name="expediter", env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def run_json(tools_dir: Path, response_file: Path, *extra: str) -> list[dict[str, Any]]:
    code, out, err = invoke(*RUN, str(response_file), "--json", *extra, tools_dir=tools_dir)
    assert code == 0, err
    return lines(out)


def row(ledger: Ledger, key: str) -> LedgerRow:
    found = ledger.get(key)
    assert found is not None, f"no ledger row {key}"
    return found


# -- run ------------------------------------------------------------------------------------------


def test_run_json_prints_one_event_per_line_with_the_documented_fields(
    tools_dir: Path, response_file: Path, ledger: Ledger
) -> None:
    events = run_json(tools_dir, response_file, "--message-id", "m1", "--user", "ann")

    assert [(e["call_id"], e["status"]) for e in events] == [
        ("c1", "completed"),
        ("c2", "awaiting_approval"),
        ("c3", "error"),
        ("c4", "error"),
    ]
    assert all(set(event) >= EVENT_FIELDS for event in events)
    echo, refund, crash, unknown = events
    assert (echo["key"], echo["tool"], echo["action"], echo["result"]) == (
        "m1:c1",
        "shop",
        "echo",
        "hi",
    )
    assert echo["duration_ms"] >= 0
    assert (refund["arguments"], refund["result"], refund["duration_ms"]) == (
        {"order": "A1"},
        None,
        None,
    )
    assert crash["error"] == "RuntimeError: the till is jammed"
    assert "'restock'" in unknown["error"]
    assert "echo" in unknown["error"]
    assert [row(ledger, f"m1:c{n}").status for n in range(1, 5)] == [
        "executed",
        "awaiting_approval",
        "failed",
        "failed",
    ]
    assert row(ledger, "m1:c1").user_id == "ann"


def test_run_prints_a_readable_table_by_default(tools_dir: Path, response_file: Path) -> None:
    code, out, _ = invoke(*RUN, str(response_file), "--message-id", "m1", tools_dir=tools_dir)
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["STATUS", "CALL", "ID"]
    assert [line.split()[:2] for line in rows] == [
        ["completed", "c1"],
        ["awaiting_approval", "c2"],
        ["error", "c3"],
        ["error", "c4"],
    ]
    assert "the action requires approval" in rows[1]
    assert "the till is jammed" in rows[2]


def test_run_messages_prints_the_providers_result_messages(
    tools_dir: Path, response_file: Path
) -> None:
    code, out, _ = invoke(
        *RUN, str(response_file), "--message-id", "m1", "--messages", tools_dir=tools_dir
    )
    assert code == 0
    messages = json.loads(out)
    assert [(m["role"], m["tool_call_id"]) for m in messages] == [
        ("tool", "c1"),
        ("tool", "c2"),
        ("tool", "c3"),
        ("tool", "c4"),
    ]
    echo, refund, crash, unknown = (m["content"] for m in messages)
    assert echo == "hi"
    assert "awaiting_approval" in refund
    assert crash == "RuntimeError: the till is jammed"
    assert "'restock'" in unknown


def test_run_messages_speaks_the_named_providers_format(tools_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "anthropic.json"
    path.write_text(
        json.dumps(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "yo"}}
                ],
            }
        )
    )
    code, out, _ = invoke(
        "run", "--provider", "anthropic", "--response", str(path), "--messages", tools_dir=tools_dir
    )
    assert code == 0
    (message,) = json.loads(out)
    assert message["role"] == "user"
    (block,) = message["content"]
    assert (block["type"], block["tool_use_id"], block["content"]) == (
        "tool_result",
        "toolu_1",
        "yo",
    )


def test_run_keys_calls_by_message_id_or_else_by_run_id(
    tools_dir: Path, response_file: Path, ledger: Ledger
) -> None:
    by_message = run_json(tools_dir, response_file, "--message-id", "msg-7", "--run-id", "run-7")
    by_run = run_json(tools_dir, response_file, "--run-id", "run-8")
    generated = run_json(tools_dir, response_file)

    assert by_message[0]["key"] == "msg-7:c1"
    assert by_run[0]["key"] == "run-8:c1"
    run_id, _, call_id = generated[0]["key"].rpartition(":")
    assert call_id == "c1"
    assert len(run_id) >= 16
    first, second = row(ledger, "msg-7:c1"), row(ledger, "run-8:c1")
    assert (first.message_id, first.run_id) == ("msg-7", "run-7")
    assert (second.message_id, second.run_id) == (None, "run-8")


def test_headless_run_denies_what_needs_approval_unless_allowed(
    tools_dir: Path, response_file: Path, ledger: Ledger
) -> None:
    denied = run_json(tools_dir, response_file, "--message-id", "h1", "--headless")
    allowed = run_json(
        tools_dir, response_file, "--message-id", "h2", "--headless", "--allow", "shop"
    )

    assert [e["status"] for e in denied] == ["completed", "denied", "error", "error"]
    assert "not allowlisted" in denied[1]["error"]
    assert (row(ledger, "h1:c2").status, row(ledger, "h1:c2").decision) == (
        "denied",
        "headless_denied",
    )
    assert [e["status"] for e in allowed] == ["completed", "completed", "error", "error"]
    assert allowed[1]["result"] == {"refunded": "A1"}
    assert row(ledger, "h2:c2").status == "executed"
    assert (tools_dir / "refunds.log").read_text().count(" A1") == 1
    code, out, _ = invoke("approvals", "ls", "--json")
    assert (code, json.loads(out)) == (0, [])


# -- approvals ------------------------------------------------------------------------------------


def test_approvals_ls_lists_the_waiting_calls_oldest_first(
    tools_dir: Path, response_file: Path
) -> None:
    run_json(tools_dir, response_file, "--message-id", "m1", "--user", "ann")
    run_json(tools_dir, response_file, "--message-id", "m2")

    code, out, _ = invoke("approvals", "ls", "--json")
    assert code == 0
    items = json.loads(out)
    assert [item["key"] for item in items] == ["m1:c2", "m2:c2"]
    assert all(set(item) >= APPROVAL_FIELDS for item in items)
    first = items[0]
    assert (first["call_id"], first["user_id"], first["tool"], first["action"]) == (
        "c2",
        "ann",
        "shop",
        "refund",
    )
    assert first["arguments"] == {"order": "A1"}
    assert first["requested_at"].endswith("+00:00")

    code, out, _ = invoke("approvals", "ls")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["m1:c2", "m2:c2"]


def test_approve_runs_the_waiting_call_and_records_the_approver(
    tools_dir: Path, response_file: Path, ledger: Ledger
) -> None:
    run_json(tools_dir, response_file, "--message-id", "m1")
    code, out, err = invoke(
        "approve", "m1:c2", "--reason", "ticket 42", "--json", tools_dir=tools_dir
    )

    assert code == 0, err
    event = json.loads(out)
    assert set(event) >= EVENT_FIELDS
    assert (event["status"], event["key"], event["result"]) == (
        "completed",
        "m1:c2",
        {"refunded": "A1"},
    )
    approved = row(ledger, "m1:c2")
    assert (approved.status, approved.decided_by) == ("executed", getpass.getuser())
    assert json.loads(invoke("approvals", "ls", "--json")[1]) == []


def test_deny_records_the_reason_and_tells_the_model(
    tools_dir: Path, response_file: Path, ledger: Ledger
) -> None:
    run_json(tools_dir, response_file, "--message-id", "m1")
    code, out, _ = invoke("deny", "m1:c2", "--reason", "no ticket", "--json", tools_dir=tools_dir)

    assert code == 0
    event = json.loads(out)
    assert (event["status"], event["key"]) == ("denied", "m1:c2")
    assert "no ticket" in event["error"]
    denied = row(ledger, "m1:c2")
    assert (denied.status, denied.decided_by) == ("denied", getpass.getuser())
    assert "no ticket" in (denied.error or "")
    assert not (tools_dir / "refunds.log").exists()

    code, out, _ = invoke("deny", "m1:c2", tools_dir=tools_dir)  # the table form, decided already
    assert code == 1


def test_approve_from_another_process_after_the_run_exited(
    tools_dir: Path, response_file: Path, ledger: Ledger
) -> None:
    env = {**os.environ, "EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    tools = ["--tools-dir", str(tools_dir)]

    def expediter(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(EXPEDITER), *tools, *args], capture_output=True, text=True, env=env, timeout=60
        )

    ran = expediter(*RUN, str(response_file), "--message-id", "m1", "--json")
    assert ran.returncode == 0, ran.stderr
    assert lines(ran.stdout)[1]["status"] == "awaiting_approval"
    assert not (tools_dir / "refunds.log").exists()

    approved = expediter("approve", "m1:c2", "--reason", "ok", "--json")

    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["status"] == "completed"
    proof = (tools_dir / "refunds.log").read_text().split()
    assert proof[1] == "A1"
    assert int(proof[0]) != os.getpid()
    executed = row(ledger, "m1:c2")
    assert (executed.status, executed.result) == ("executed", {"refunded": "A1"})


@pytest.mark.parametrize("command", ["approve", "deny"])
def test_an_unknown_key_exits_non_zero_with_a_clear_message(command: str, tools_dir: Path) -> None:
    code, out, err = invoke(command, "m9:nope", "--reason", "x", tools_dir=tools_dir)
    assert code == 1
    assert out == ""
    assert "the ledger has no call 'm9:nope'" in err


def test_approving_a_call_that_already_ran_exits_non_zero(
    tools_dir: Path, response_file: Path
) -> None:
    run_json(tools_dir, response_file, "--message-id", "m1")
    assert invoke("approve", "m1:c2", tools_dir=tools_dir)[0] == 0
    code, _, err = invoke("approve", "m1:c2", tools_dir=tools_dir)
    assert code == 1
    assert "'m1:c2' is executed, not waiting for a decision" in err
    code, _, err = invoke("approve", "m1:c1", tools_dir=tools_dir)
    assert code == 1
    assert "is executed" in err
