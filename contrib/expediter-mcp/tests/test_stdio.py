"""Real MCP servers over stdio, started only with commands the operator allows: the reference
"everything" server from npm (``make test`` installs it; CI requires it) and the official
time server from PyPI."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import expediter

_ROOT = Path(__file__).resolve().parents[3]
EVERYTHING = Path(
    os.environ.get("EXPEDITER_MCP_EVERYTHING")
    or _ROOT / ".cache/mcp-servers/node_modules/.bin/mcp-server-everything"
)
TIME_SERVER = Path(sys.executable).with_name("mcp-server-time")


def _everything() -> Path:
    if not EVERYTHING.exists():
        if os.environ.get("EXPEDITER_REQUIRE_MCP_EVERYTHING"):
            pytest.fail(f"the everything MCP server is not installed at {EVERYTHING}")
        pytest.skip("@modelcontextprotocol/server-everything is not installed (make test does)")
    return EVERYTHING


@pytest.fixture
def stdio_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXPEDITER_MCP_STDIO_ALLOW", f"{EVERYTHING},{TIME_SERVER}")


@pytest.fixture
def everything(host: Any, stdio_allowed: None) -> str:
    record = host.instances.add(
        "mcp",
        name="everything",
        config={"transport": "stdio", "command": str(_everything()), "args": ["stdio"]},
        operator=True,
    )
    return str(record.id)


def test_everything_lists_its_tools_by_name(host: expediter.Host, everything: str) -> None:
    toolset = host.toolset()
    names = {o.action.name for o in toolset.actions if o.instance_id == everything}
    assert {"echo", "get-sum", "get-structured-content", "get-tiny-image"} <= names


def test_everything_calls(host: expediter.Host, everything: str) -> None:
    echoed = host.call(everything, "echo", {"message": "hello"})
    assert echoed.status == "completed", echoed.error
    assert "hello" in echoed.result["content"][0]["text"]

    total = host.call(everything, "get-sum", {"a": 2, "b": 40})
    assert total.status == "completed", total.error
    assert "42" in total.result["content"][0]["text"]

    weather = host.call(everything, "get-structured-content", {"location": "New York"})
    assert weather.status == "completed", weather.error
    assert isinstance(weather.result["structured_content"], dict)

    image = host.call(everything, "get-tiny-image", {})
    assert image.status == "completed", image.error
    images = [item for item in image.result["content"] if item["type"] == "image"]
    assert images
    assert images[0]["data_url"].startswith("data:image/png;base64,")


def test_a_missing_argument_is_an_error_result(host: expediter.Host, everything: str) -> None:
    event = host.call(everything, "get-sum", {"a": 2})
    assert event.status == "error"
    assert event.result is None or event.result.get("is_error") is True
    assert host.ledger.get(event.key).status == "failed"


def test_a_command_the_operator_did_not_allow_never_starts(
    host: expediter.Host, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    monkeypatch.setenv("EXPEDITER_MCP_STDIO_ALLOW", str(TIME_SERVER))
    config = {"transport": "stdio", "command": "touch", "args": [str(marker)]}
    with pytest.raises(expediter.errors.ArgumentError, match="command"):
        host.instances.add("mcp", name="sneaky", config=config)  # only the operator may
    record = host.instances.add("mcp", name="sneaky", config=config, operator=True)
    event = host.call(record.id, "anything", {})
    assert event.status == "error"
    assert "EXPEDITER_MCP_STDIO_ALLOW" in (event.error or "")
    assert not marker.exists()


def test_time_server(host: expediter.Host, stdio_allowed: None) -> None:
    record = host.instances.add(
        "mcp",
        name="time",
        config={
            "transport": "stdio",
            "command": str(TIME_SERVER),
            "args": ["--local-timezone", "UTC"],
        },
        operator=True,
    )
    now = host.call(record.id, "get_current_time", {"timezone": "Europe/Paris"})
    assert now.status == "completed", now.error
    assert "Europe/Paris" in now.result["content"][0]["text"]
    bad = host.call(record.id, "get_current_time", {"timezone": "Mars/Olympus"})
    assert bad.status == "error"
    assert "Mars/Olympus" in (bad.error or "")
    host.close()
    assert _server_processes(str(TIME_SERVER)) == 0  # closing the host ended the server


def test_the_server_process_gets_no_host_secret(
    host: expediter.Host, stdio_allowed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The everything server's env tool shows the process environment.
    monkeypatch.setenv("EXPEDITER_TEST_SECRET", "s3cr3t-value")
    record = host.instances.add(
        "mcp",
        name="everything-env",
        config={"transport": "stdio", "command": str(_everything()), "args": ["stdio"]},
        operator=True,
    )
    names = {o.action.name for o in host.toolset().actions if o.instance_id == record.id}
    tool = next(name for name in names if "env" in name)
    event = host.call(record.id, tool, {})
    assert event.status == "completed", event.error
    text = str(event.result)
    assert "PATH" in text
    assert "s3cr3t-value" not in text
    assert "EXPEDITER_SECRET_KEYS" not in text


def _server_processes(marker: str) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        count += marker in command
    return count


def _wait_for_no_server(marker: str) -> None:
    deadline = time.monotonic() + 10
    while _server_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _server_processes(marker) == 0


def test_listing_and_calls_share_one_server_process(
    host: expediter.Host, stdio_allowed: None
) -> None:
    record = host.instances.add(
        "mcp",
        name="time-once",
        config={
            "transport": "stdio",
            "command": str(TIME_SERVER),
            "args": ["--local-timezone", "UTC"],
        },
        operator=True,
    )
    _wait_for_no_server(str(TIME_SERVER))  # the processes of earlier tests have ended
    names = {o.action.name for o in host.toolset().actions if o.instance_id == record.id}
    assert "get_current_time" in names
    assert host.call(record.id, "get_current_time", {"timezone": "UTC"}).status == "completed"
    assert _server_processes(str(TIME_SERVER)) == 1
    host.close()
    _wait_for_no_server(str(TIME_SERVER))  # it ends with the host


def test_a_server_process_that_dies_mid_call_is_an_error_and_the_next_call_restarts_it(
    host: expediter.Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPEDITER_MCP_STDIO_ALLOW", sys.executable)
    script = Path(__file__).with_name("exiting_server.py")
    record = host.instances.add(
        "mcp",
        name="exiting",
        config={"transport": "stdio", "command": sys.executable, "args": [str(script)]},
        operator=True,
    )
    assert host.call(record.id, "ok", {}).status == "completed"
    died = host.call(record.id, "die", {})
    assert died.status == "error"
    assert host.ledger.get(died.key).status == "failed"
    assert host.call(record.id, "ok", {}).status == "completed"  # a new process
