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
from support.events import EVENT_FIELDS
from support.responses import openai_response

from expediter.cli import cli
from expediter.core.ledger import Ledger
from expediter.core.ledger.records import LedgerRow

EXPEDITER = Path(sys.executable).with_name("expediter")
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


def run_json(
    tools_dir: Path, response_file: Path, *extra: str, status: int = 1
) -> list[dict[str, Any]]:
    """``run --json`` events; the status is 1 by default: ``response_file`` has failing calls."""
    code, out, err = invoke(*RUN, str(response_file), "--json", *extra, tools_dir=tools_dir)
    assert code == status, err
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
    assert code == 1  # c3 and c4 end in errors
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
    assert code == 1
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
    assert (approved.status, approved.decided_by) == ("executed", f"os:{getpass.getuser()}")
    assert json.loads(invoke("approvals", "ls", "--json")[1]) == []


def test_approve_as_records_the_approver_the_host_names(
    tools_dir: Path, response_file: Path, ledger: Ledger
) -> None:
    run_json(tools_dir, response_file, "--message-id", "m1")
    code, _, err = invoke("approve", "m1:c2", "--as", "ann@example.com", tools_dir=tools_dir)
    assert code == 0, err
    assert row(ledger, "m1:c2").decided_by == "ann@example.com"


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
    assert (denied.status, denied.decided_by) == ("denied", f"os:{getpass.getuser()}")
    assert getpass.getuser() not in event["error"]  # the model hears why, never who
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
    assert ran.returncode == 1, ran.stderr  # c3 and c4 end in errors
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


# -- exit status ----------------------------------------------------------------------------------


def write_response(path: Path, *calls: tuple[str, str, dict[str, Any]]) -> Path:
    path.write_text(json.dumps(openai_response(*calls)))
    return path


@pytest.mark.parametrize(
    ("calls", "extra", "status"),
    [
        ([("c1", "echo", {"text": "hi"})], (), 0),
        ([("c1", "echo", {"text": "hi"}), ("c2", "refund", {"order": "A1"})], (), 0),
        ([("c2", "refund", {"order": "A1"})], ("--headless",), 1),
        ([("c1", "echo", {"text": "hi"}), ("c3", "crash", {})], (), 1),
        ([("c1", "echo", {"text": "hi"}), ("c4", "restock", {})], (), 1),
        ([("c1", "echo", {})], (), 1),
        ([], (), 0),
    ],
    ids=["completed", "waiting", "denied", "error", "unknown-name", "bad-arguments", "no-calls"],
)
def test_run_exits_0_when_every_call_completed_or_waits_else_1(
    tools_dir: Path,
    tmp_path: Path,
    calls: list[tuple[str, str, dict[str, Any]]],
    extra: tuple[str, ...],
    status: int,
) -> None:
    path = write_response(tmp_path / "reply.json", *calls)
    for output in ((), ("--json",), ("--messages",)):
        code, _, err = invoke(*RUN, str(path), *extra, *output, tools_dir=tools_dir)
        assert code == status, (output, err)


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--provider", "openai"),
        ("run", "--provider", "openai", "--response", "reply.json", "--stream", "reply.json"),
        ("run", "--provider", "openai", "--response", "missing.json"),
        ("run", "--provider", "cohere", "--response", "reply.json"),
    ],
    ids=["no-input", "response-and-stream", "missing-file", "unknown-provider"],
)
def test_run_exits_2_on_bad_usage(
    args: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_response(tmp_path / "reply.json", ("c1", "now", {}))
    assert invoke(*args)[0] == 2


def test_run_help_documents_the_exit_status() -> None:
    code, out, _ = invoke("run", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "0 when every call completed or is waiting" in text
    assert "1 when any call ended in error or denied, 2 for bad usage" in text


# -- the response looks like another provider's ------------------------------------------------


@pytest.mark.parametrize("command", ["run", "parse"])
def test_a_reply_from_another_provider_is_named_when_no_call_is_found(
    command: str, tmp_path: Path
) -> None:
    from support.responses import RESPONSES

    saved = str(RESPONSES / "anthropic_messages.json")

    code, out, err = invoke(command, "--provider", "openai", "--response", saved, "--json")

    assert code == 0
    assert json.loads(out) == [] if command == "parse" else out == ""
    assert err.strip() == (
        "warning: no tool calls found reading the response as openai; it looks like a "
        "response from anthropic (3 tool calls): try --provider anthropic"
    )


@pytest.mark.parametrize(
    ("provider", "saved"),
    [
        ("openai", "mistral_chat.json"),  # read alike: its calls are found
        ("anthropic", "anthropic_messages.json"),
        ("openai-responses", "openai_responses.json"),
    ],
)
def test_no_hint_when_the_reply_reads_as_named(provider: str, saved: str) -> None:
    from support.responses import RESPONSES

    code, _, err = invoke(
        "parse", "--provider", provider, "--response", str(RESPONSES / saved), "--json"
    )
    assert (code, err) == (0, "")


def test_no_hint_for_a_reply_without_calls_from_the_named_provider(tmp_path: Path) -> None:
    path = tmp_path / "text.json"
    path.write_text(json.dumps({"choices": [{"message": {"role": "assistant", "content": "hi"}}]}))
    code, _, err = invoke("run", "--provider", "openai", "--response", str(path))
    assert (code, err) == (0, "")


# -- deciding where the tool is not installed -----------------------------------------------------


def test_deny_and_approve_in_a_process_where_the_tool_is_not_loadable(
    tools_dir: Path, tmp_path: Path, ledger: Ledger
) -> None:
    env = {**os.environ, "EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}

    def expediter(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(EXPEDITER), *args], capture_output=True, text=True, env=env, timeout=60
        )

    path = write_response(
        tmp_path / "reply.json",
        ("r1", "refund", {"order": "A1"}),
        ("r2", "refund", {"order": "B2"}),
    )
    ran = expediter("--tools-dir", str(tools_dir), *RUN, str(path), "--message-id", "m1")
    assert ran.returncode == 0, ran.stderr  # both wait for approval

    # No --tools-dir: the shop tool is not loadable in these processes.
    denied = expediter("deny", "m1:r1", "--reason", "no ticket", "--json")
    approved = expediter("approve", "m1:r2")

    assert denied.returncode == 0, denied.stderr
    assert json.loads(denied.stdout)["status"] == "denied"
    assert row(ledger, "m1:r1").status == "denied"
    assert (approved.returncode, approved.stdout) == (1, "")
    assert "Traceback" not in approved.stderr
    (line,) = approved.stderr.strip().splitlines()
    assert line.startswith("Error: call 'm1:r2' cannot run here: ")
    for advice in ("--tools-dir", "EXPEDITER_TOOLS_PATH", "deny it"):
        assert advice in line
    assert row(ledger, "m1:r2").status == "awaiting_approval"
    assert not (tools_dir / "refunds.log").exists()


# -- key prefixes ---------------------------------------------------------------------------------


@pytest.fixture
def two_waiting_calls(tools_dir: Path, tmp_path: Path) -> tuple[str, str]:
    """Keys ``msg_0123abcd:r1`` and ``msg_0124abcd:r1``, both waiting for approval."""
    path = write_response(tmp_path / "reply.json", ("r1", "refund", {"order": "A1"}))
    for message_id in ("msg_0123abcd", "msg_0124abcd"):
        code, _, err = invoke(*RUN, str(path), "--message-id", message_id, tools_dir=tools_dir)
        assert code == 0, err
    return "msg_0123abcd:r1", "msg_0124abcd:r1"


@pytest.mark.parametrize("command", ["approve", "deny"])
def test_approve_and_deny_take_a_unique_key_prefix(
    command: str, tools_dir: Path, two_waiting_calls: tuple[str, str], ledger: Ledger
) -> None:
    first, second = two_waiting_calls

    code, out, err = invoke(command, "msg_0123", "--json", tools_dir=tools_dir)

    assert code == 0, err
    assert json.loads(out)["key"] == first
    assert row(ledger, first).status in ("executed", "denied")
    assert row(ledger, second).status == "awaiting_approval"


@pytest.mark.parametrize("command", ["approve", "deny"])
def test_an_ambiguous_prefix_is_bad_usage_listing_the_keys(
    command: str, tools_dir: Path, two_waiting_calls: tuple[str, str], ledger: Ledger
) -> None:
    code, out, err = invoke(command, "msg_012", tools_dir=tools_dir)

    assert (code, out) == (2, "")
    assert (
        "'msg_012' begins several keys of calls awaiting_approval (msg_0123abcd:r1, "
        "msg_0124abcd:r1)"
    ) in err
    assert {row(ledger, key).status for key in two_waiting_calls} == {"awaiting_approval"}


@pytest.mark.parametrize("command", ["approve", "deny"])
def test_a_prefix_counts_only_the_calls_still_waiting(
    command: str, tools_dir: Path, two_waiting_calls: tuple[str, str], ledger: Ledger
) -> None:
    first, second = two_waiting_calls
    code, _, err = invoke("deny", first, tools_dir=tools_dir)
    assert code == 0, err

    code, out, err = invoke(command, "msg_012", "--json", tools_dir=tools_dir)

    assert code == 0, err
    assert json.loads(out)["key"] == second
    assert row(ledger, second).status in ("executed", "denied")
    # A prefix of decided calls only still names the call: it says it is no longer waiting.
    code, _, err = invoke(command, "msg_0123", tools_dir=tools_dir)
    assert code == 1
    assert "msg_0123abcd:r1" in err


@pytest.mark.parametrize("prefix", ["msg_9", "msg%", "msg_012_", "MSG_0123"])
def test_a_prefix_that_begins_no_key_is_an_unknown_call(
    prefix: str, tools_dir: Path, two_waiting_calls: tuple[str, str]
) -> None:
    code, _, err = invoke("approve", prefix, tools_dir=tools_dir)
    assert code == 1
    assert f"the ledger has no call {prefix!r}" in err
