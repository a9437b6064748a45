"""``expediter serve --mcp --user U`` serves U's tools exactly: a user id that cannot be
stored exactly (NUL, a lone surrogate or undecodable byte, more than 512 characters, empty)
would have been taken for another user's (``"alice\\x00"`` for alice), so the command refuses it
at start, as a usage error naming ``--user``, before it builds a host or listens."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_support import cli_env, invoke, write_tools

import expediter


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something already listens on: a server that got past the checks
    fails to bind it at once instead of serving."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.parametrize(
    "user",
    ["alice\x00", "\x00alice", "alice" + chr(0xD800), "alice" + chr(0xDCFF), "", "a" * 600],
    ids=["nul-after", "nul-before", "lone-surrogate", "undecodable-byte", "empty", "too-long"],
)
def test_a_user_id_that_cannot_be_stored_exactly_is_refused_at_start(
    expediter_home: Path, tmp_path: Path, busy_port: int, user: str
) -> None:
    tools = write_tools(tmp_path / "tools")
    with expediter.Host(tools_path=(tools,), autoload=False) as host:
        host.call("stats", "stats", {"values": [1]}, user_id="alice")
        rows = len(host.ledger.rows(limit=0))
    result = invoke("--mcp", "--port", str(busy_port), "--user", user)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.output
    assert errors[0].startswith("Error: Invalid value for --user: user id "), result.output
    assert "\x00" not in result.output
    assert "serving MCP" not in result.output
    assert "cannot listen" not in result.output
    with expediter.Host(tools_path=(tools,), autoload=False) as host:
        assert len(host.ledger.rows(limit=0)) == rows


def test_an_undecodable_byte_of_the_real_command_line_is_refused_before_serving(
    tmp_path: Path,
) -> None:
    tools = write_tools(tmp_path / "tools")
    command = [sys.executable, "-m", "expediter", "serve", "--mcp", "--transport", "stdio"]
    done = subprocess.run(
        [*command, "--user", os.fsencode("alice\udcff")],
        env=cli_env(tmp_path / "home", tools),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""
    assert b"Error: Invalid value for --user: user id 'alice\\udcff'" in done.stderr
    assert b"serving MCP" not in done.stderr
