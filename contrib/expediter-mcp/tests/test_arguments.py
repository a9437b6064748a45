"""The ``mcp`` tool checks a call's arguments against the server's ``inputSchema`` before
anything is sent (``ArgumentError``, exit status 2), shows a server's own multi-line error on
one line, and is never harmed by a hostile schema: a reference loop or an outside ``$ref``
leaves the arguments unchecked (nothing fetched), and a pattern is left to the server."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from servers import ADD, McpServer, build_schema_server

import expediter
from expediter.cli import cli
from expediter.core.instances.keys import generate_key


class Listener:
    """A TCP socket on 127.0.0.1 that counts the connections made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/schema.json"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    running = Listener()
    yield running
    running.close()


@pytest.fixture(scope="module")
def schema_server(listener: Listener) -> Iterator[McpServer]:
    running = McpServer(build_schema_server(listener.url))
    yield running
    running.close()


# --- arguments checked before sending ----------------------------------------------------------


def test_a_bad_argument_is_an_argument_error_and_nothing_is_sent(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(http_server.url)
    before = list(http_server.server.calls)
    event = host.call(record.id, "sleep", {"seconds": "soon"})
    assert (event.status, event.error_type) == ("error", "ArgumentError"), event
    assert event.error == "sleep: argument seconds: 'soon' is not of type 'number'"
    assert http_server.server.calls == before  # the server never saw it
    missing = host.call(record.id, ADD, {"a": 1})
    assert missing.error_type == "ArgumentError"
    assert "'b' is a required property" in str(missing.error)
    assert host.call(record.id, ADD, {"a": 1, "b": 2}).result["structured_content"] == {"result": 3}


@pytest.fixture
def run(expediter_home: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    monkeypatch.setenv("EXPEDITER_LOAD_PLUGINS", "mcp")

    def invoke(*args: str) -> Any:
        result = CliRunner().invoke(cli, list(args))
        assert result.exception is None or isinstance(result.exception, SystemExit)
        return result

    return invoke


def test_the_command_line_exits_2_for_a_bad_argument(run: Any, http_server: Any) -> None:
    added = run("mcp", "add", http_server.url, "--name", "srv", "--allow-network", "127.0.0.1")
    instance_id = added.stdout.strip()
    result = run("call", instance_id, ADD, "--args", '{"a": 1, "b": "two"}')
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        f"error (ArgumentError): {ADD}: argument b: 'two' is not of type 'integer'"
    )


def test_a_servers_multi_line_error_is_shown_on_one_line(run: Any, http_server: Any) -> None:
    added = run("mcp", "add", http_server.url, "--name", "srv", "--allow-network", "127.0.0.1")
    instance_id = added.stdout.strip()
    message = json.dumps({"message": "first line\n  second line\n\nthird"})
    result = run("call", instance_id, "fail", "--args", message)
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("error (ToolError): ")
    assert line.endswith("first line; second line; third")
    assert "\\n" not in line


# --- hostile schemas ---------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["looped", "remote"])
def test_a_schema_that_breaks_the_check_leaves_the_call_unchecked(
    host: Any,
    add_instance: Any,
    schema_server: McpServer,
    listener: Listener,
    tool: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    record = add_instance(schema_server.url)
    with caplog.at_level("WARNING", logger="expediter.core.calls.arguments"):
        event = host.call(record.id, tool, {"x": 1})
    assert event.status == "completed", event.error
    assert event.result["content"] == [{"type": "text", "text": '{"x": 1}'}]
    assert f"the arguments of {tool} go unchecked" in caplog.text
    assert listener.accepted == 0  # the outside $ref was never fetched


def test_a_pattern_is_left_to_the_server(
    host: Any, add_instance: Any, schema_server: McpServer
) -> None:
    record = add_instance(schema_server.url)
    near_miss = "a" * 28 + "!"  # Python's re would take many seconds to refuse it
    started = time.monotonic()
    event = host.call(record.id, "backtracking", {"x": near_miss})
    keys = host.call(record.id, "pattern_keys", {near_miss: 1})
    assert time.monotonic() - started < 5
    assert event.status == "completed", event.error
    assert keys.status == "completed", keys.error
    # What is checked still is: the type, and the required property.
    assert host.call(record.id, "backtracking", {"x": 5}).error_type == "ArgumentError"
    assert host.call(record.id, "backtracking", {}).error_type == "ArgumentError"


def test_the_listing_and_the_ledger_name_no_fetched_schema(
    host: Any, add_instance: Any, schema_server: McpServer, listener: Listener
) -> None:
    record = add_instance(schema_server.url)
    offered = {o.action.name for o in host.toolset().actions if o.instance_id == record.id}
    assert {"looped", "remote", "backtracking", "pattern_keys"} <= offered
    assert listener.accepted == 0
    assert isinstance(expediter.ArgumentsCheck, type)
