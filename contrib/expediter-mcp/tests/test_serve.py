"""``expediter serve --mcp``: the host's toolset served to MCP clients, every call through the
host's pipeline (one ledger row each), approvals, bearer tokens and both transports.

Most tests drive the server in process (fastmcp's in-memory client, or uvicorn in a thread on
127.0.0.1); a few start the real command as a process."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from expediter_mcp.serving.auth import (
    TOKEN_VARIABLE,
    TokenProblem,
    is_loopback,
    make_verifier,
    read_token,
)
from expediter_mcp.serving.bridge import Bridge
from expediter_mcp.serving.command import serve
from expediter_mcp.serving.provider import make_server
from serve_support import HttpServer, ServeProcess, cli_env, run, write_tools

import expediter

USER = "ann"
TOKEN = "s3cret-Token_for.tests~1"


@pytest.fixture(autouse=True)
def _loopback_net(loopback_only: Any) -> Any:
    return loopback_only


@pytest.fixture(autouse=True)
def _no_token_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    return write_tools(tmp_path / "tools")


@pytest.fixture
def served_host(make_host: Callable[..., Any], tools_dir: Path) -> Any:
    """The host being served: the ``loud`` test tool and a SQLite ledger (created now)."""
    host = make_host(tools_path=(tools_dir,), record_calls=True)
    assert host.ledger is not None  # created now, before the test's clock starts
    return host


@pytest.fixture
def other_host(make_host: Callable[..., Any], tools_dir: Path, served_host: Any) -> Any:
    """Another host on the same data directory and ledger, as another process would be
    (``expediter approve``, ``expediter instances add``)."""
    host = make_host(tools_path=(tools_dir,), record_calls=True)
    assert host.ledger is not None
    return host


def server_for(host: Any, *, approval_wait: float | None = None, auth: Any = None) -> Any:
    return make_server(Bridge(host, user_id=USER, approval_wait=approval_wait), auth=auth)


async def _tools(server: Any) -> dict[str, Any]:
    from fastmcp import Client

    async with Client(server) as client:
        return {tool.name: tool for tool in await client.list_tools()}


def listed(server: Any) -> dict[str, Any]:
    """The server's tools by name (one ``tools/list``)."""
    return run(_tools(server))


async def _call(server: Any, name: str, arguments: dict[str, Any]) -> Any:
    from fastmcp import Client

    async with Client(server) as client:
        return await client.call_tool(name, arguments, raise_on_error=False)


def call(server: Any, name: str, arguments: dict[str, Any]) -> Any:
    """One ``tools/call``; its result (errors included, never raised)."""
    return run(_call(server, name, arguments))


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content)


def row_of(host: Any, action: str) -> Any:
    """The newest ledger row of an action of the ``loud`` tool."""
    rows = [row for row in host.ledger.rows(tool="loud", limit=0) if row.action == action]
    assert rows, f"no ledger row for loud.{action}"
    return rows[0]


# --- listing -------------------------------------------------------------------------------


def test_list_offers_the_toolset_names_and_schemas(served_host: Any) -> None:
    tools = listed(server_for(served_host))

    toolset = served_host.toolset(user_id=USER)
    assert sorted(tools) == sorted(offered.name for offered in toolset.actions)
    assert {"shout", "stats", "crash", "launch", "login", "nap"} <= set(tools)
    expected = {
        item["function"]["name"]: item["function"]["parameters"]
        for item in toolset.schemas("openai")
    }
    for name, tool in tools.items():
        assert tool.input_schema == expected[name]
    shout = tools["shout"]
    assert shout.description == "Shout text."
    assert shout.input_schema["required"] == ["text"]
    assert shout.input_schema["properties"]["times"]["type"] == "integer"
    # The host's own marks (a secret parameter's writeOnly) are stripped, as for any model.
    assert "writeOnly" not in json.dumps(tools["login"].input_schema)


def test_an_instance_added_while_serving_is_listed_next_time(
    served_host: Any, other_host: Any
) -> None:
    server = server_for(served_host)
    assert "quiet_shout" not in listed(server)

    record = other_host.instances.add("loud", name="quiet")

    tools = listed(server)
    assert "quiet_shout" in tools
    result = call(server, "quiet_shout", {"text": "psst"})
    assert not result.is_error
    assert text_of(result) == "PSST "
    assert row_of(served_host, "shout").instance_id == record.id

    other_host.instances.remove(record.id)
    assert "quiet_shout" not in listed(server)


def test_a_tool_installed_while_serving_is_listed_next_time(
    served_host: Any, tools_dir: Path
) -> None:
    bridge = Bridge(served_host, user_id=USER, approval_wait=None)
    server = make_server(bridge, auth=None)
    assert "whisper" not in listed(server)
    time.sleep(0.01)  # a new modification time for the directory's listing
    (tools_dir / "hush.py").write_text(
        "import expediter\n\n\n@expediter.tool\ndef whisper(text: str) -> str:\n"
        '    """Whisper text."""\n    return text.lower()\n'
    )
    tools = listed(server)
    assert "whisper" in tools
    result = call(server, "whisper", {"text": "PSST"})
    assert not result.is_error
    assert text_of(result) == "psst"
    (tools_dir / "hush.py").unlink()
    assert "whisper" not in listed(server)
    bridge.close()


# --- calls ---------------------------------------------------------------------------------


def test_call_runs_through_the_pipeline_with_a_ledger_row(served_host: Any) -> None:
    result = call(server_for(served_host), "shout", {"text": "hi", "times": 2})

    assert not result.is_error
    assert text_of(result) == "HI HI "
    row = row_of(served_host, "shout")
    assert row.status == "executed"
    assert row.user_id == USER
    assert row.arguments == {"text": "hi", "times": 2}
    assert row.call_id.startswith("mcp_")


def test_every_request_gets_its_own_ledger_row(served_host: Any) -> None:
    server = server_for(served_host)
    for _ in range(3):
        assert not call(server, "shout", {"text": "again"}).is_error

    rows = [row for row in served_host.ledger.rows(tool="loud", limit=0) if row.action == "shout"]
    assert len(rows) == 3
    assert len({row.key for row in rows}) == 3


def test_a_json_object_result_is_also_structured_content(served_host: Any) -> None:
    result = call(server_for(served_host), "stats", {"values": [1, 2, 3]})

    assert not result.is_error
    assert result.structured_content == {"count": 3, "total": 6}
    assert json.loads(text_of(result)) == {"count": 3, "total": 6}


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"text": 3}, "'text'"),
        ({}, "'text' is a required property"),
        ({"text": "a", "times": "many"}, "'times'"),
        ({"text": "a", "volume": 11}, "'volume'"),
    ],
)
def test_bad_arguments_are_an_error_naming_the_argument_and_recorded(
    served_host: Any, arguments: dict[str, Any], named: str
) -> None:
    result = call(server_for(served_host), "shout", arguments)

    assert result.is_error
    assert named in text_of(result)
    row = row_of(served_host, "shout")
    assert row.status == "failed"
    assert named in (row.error or "")


def test_a_secret_argument_is_named_but_never_echoed(served_host: Any) -> None:
    result = call(server_for(served_host), "login", {"user": "ann", "password": 31337})

    assert result.is_error
    assert "'password'" in text_of(result)
    assert "31337" not in text_of(result)
    row = row_of(served_host, "login")
    assert row.status == "failed"
    assert "31337" not in json.dumps([row.arguments, row.error])


def test_optional_nulls_are_dropped_as_for_a_model(served_host: Any) -> None:
    result = call(server_for(served_host), "shout", {"text": "hey", "times": None})

    assert not result.is_error
    assert text_of(result) == "HEY "


def test_a_name_not_offered_is_refused_by_the_pipeline_and_recorded(served_host: Any) -> None:
    result = call(server_for(served_host), "launch_missiles", {"now": True})

    assert result.is_error
    assert "launch_missiles" in text_of(result)
    assert "shout" in text_of(result)  # what is offered instead
    (row,) = [row for row in served_host.ledger.rows(limit=0) if row.name == "launch_missiles"]
    assert row.status == "failed"


def test_a_tool_that_raises_is_an_error_and_a_failed_row(served_host: Any) -> None:
    result = call(server_for(served_host), "crash", {"reason": "kaput"})

    assert result.is_error
    assert "kaput" in text_of(result)
    row = row_of(served_host, "crash")
    assert row.status == "failed"
    assert "kaput" in (row.error or "")


def test_a_sync_tool_does_not_block_the_server(served_host: Any) -> None:
    from fastmcp import Client

    async def scenario() -> tuple[float, str]:
        import asyncio

        async with Client(server_for(served_host)) as client:
            napping = asyncio.ensure_future(client.call_tool("nap", {"seconds": 1.5}))
            await asyncio.sleep(0.2)
            started = time.monotonic()
            await client.list_tools()
            listing = time.monotonic() - started
            return listing, text_of(await napping)

    listing, napped = run(scenario())
    assert listing < 1.0
    assert napped == "rested"


# --- approvals -------------------------------------------------------------------------------


def test_a_call_needing_approval_is_refused_naming_the_command(served_host: Any) -> None:
    result = call(server_for(served_host), "launch", {"target": "moon"})

    assert result.is_error
    (waiting,) = served_host.ledger.pending_approvals()
    assert f"`expediter approve {waiting.key}`" in text_of(result)
    assert "still waiting" not in text_of(result)
    assert row_of(served_host, "launch").status == "awaiting_approval"


def decide_when_asked(host: Any, approved: bool) -> threading.Thread:
    """Approve (or deny) the first call that waits, from ``host``, once it waits."""

    def decide() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            waiting = host.ledger.pending_approvals()
            if waiting:
                host.resume(waiting[0].key, approved=approved, approver="tests")
                return
            time.sleep(0.05)

    thread = threading.Thread(target=decide, daemon=True)
    thread.start()
    return thread


def test_approval_wait_returns_the_result_once_approved_elsewhere(
    served_host: Any, other_host: Any
) -> None:
    approver = decide_when_asked(other_host, approved=True)

    result = call(server_for(served_host, approval_wait=30), "launch", {"target": "moon"})
    approver.join(5)

    assert not result.is_error, text_of(result)
    assert result.structured_content == {"launched": "moon"}
    row = row_of(served_host, "launch")
    assert row.status == "executed"
    assert row.decided_by == "tests"


def test_approval_wait_answers_a_denial(served_host: Any, other_host: Any) -> None:
    approver = decide_when_asked(other_host, approved=False)

    result = call(server_for(served_host, approval_wait=30), "launch", {"target": "moon"})
    approver.join(5)

    assert result.is_error
    assert text_of(result).startswith("denied")
    assert row_of(served_host, "launch").status == "denied"


def test_approval_wait_that_times_out_is_still_waiting(served_host: Any) -> None:
    result = call(server_for(served_host, approval_wait=0.3), "launch", {"target": "moon"})

    assert result.is_error
    (waiting,) = served_host.ledger.pending_approvals()
    assert f"`expediter approve {waiting.key}`" in text_of(result)
    assert "still waiting" in text_of(result)


# --- bearer tokens over HTTP -------------------------------------------------------------------


def post_initialize(url: str, authorization: str | None) -> int:
    """The HTTP status of an MCP ``initialize`` request sent with this Authorization header."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "0"},
        },
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request("POST", parts.path, body=json.dumps(body), headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def test_http_wants_the_bearer_token(served_host: Any) -> None:
    from fastmcp import Client

    running = HttpServer(server_for(served_host, auth=make_verifier(TOKEN)))
    try:
        assert post_initialize(running.url, None) == 401
        assert post_initialize(running.url, "Bearer not-the-token") == 401
        assert post_initialize(running.url, f"Bearer {TOKEN}x") == 401
        assert post_initialize(running.url, f"Basic {TOKEN}") == 401

        async def with_token() -> Any:
            async with Client(running.url, auth=TOKEN) as client:
                return await client.call_tool("shout", {"text": "ok"}, raise_on_error=False)

        result = run(with_token())
        assert not result.is_error
        assert text_of(result) == "OK "
    finally:
        running.close()
    assert row_of(served_host, "shout").status == "executed"


def test_the_verifier_never_shows_the_token() -> None:
    verifier = make_verifier(TOKEN)
    assert TOKEN not in repr(verifier)
    accepted = run(verifier.verify_token(TOKEN))
    assert accepted is not None
    assert TOKEN not in repr(accepted)
    assert run(verifier.verify_token("")) is None


# --- the token's sources and the command's usage errors --------------------------------------


def test_the_token_comes_from_the_most_explicit_source(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"  {TOKEN}-file\n")
    environ = {TOKEN_VARIABLE: f"{TOKEN}-env"}

    assert read_token(None, token_file, environ) == f"{TOKEN}-file"
    assert read_token(TOKEN, None, environ) == TOKEN
    assert read_token(None, None, environ) == f"{TOKEN}-env"
    assert read_token(None, None, {}) is None
    with pytest.raises(TokenProblem, match="not both"):
        read_token(TOKEN, token_file, environ)


@pytest.mark.parametrize("content", ["", "   \n", "two words", "caf\u00e9"])
def test_an_unusable_token_file_is_refused_without_showing_it(tmp_path: Path, content: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(content, encoding="utf-8")
    with pytest.raises(TokenProblem) as caught:
        read_token(None, token_file, {})
    assert caught.value.option == "--token-file"
    if content.strip():
        assert content.strip() not in str(caught.value)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("192.168.1.2", False),
        ("example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def invoke(*arguments: str) -> Any:
    """``expediter serve ARGUMENTS`` in process (the command as a pack registers it)."""
    from expediter.cli.app import CliState
    from expediter.core.config import HostConfig

    state = CliState(HostConfig.from_env(), refresh=False)
    try:
        return CliRunner().invoke(serve, list(arguments), obj=state, prog_name="expediter serve")
    finally:
        state.close()


def test_serve_without_mcp_is_a_usage_error_naming_it(expediter_home: Path) -> None:
    result = invoke()
    assert result.exit_code == 2
    assert "--mcp" in result.output


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "example.com"])
def test_a_non_loopback_address_without_a_token_is_refused_before_binding(
    expediter_home: Path, host: str
) -> None:
    result = invoke("--mcp", "--host", host, "--port", "1")
    assert result.exit_code == 2
    assert "give a token" in result.output
    assert "serving MCP" not in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--token", TOKEN, "--token-file", "/nonexistent"), "not both"),
        (("--token", "two words"), "printable ASCII"),
        (("--token-file", "/nonexistent/token"), "cannot read"),
        (("--transport", "stdio", "--port", "9"), "--port"),
        (("--transport", "stdio", "--token", TOKEN), "--token"),
        (("--path", "mcp"), "URL path"),
        (("--approval-wait", "0"), "--approval-wait"),
    ],
)
def test_usage_errors(expediter_home: Path, arguments: tuple[str, ...], message: str) -> None:
    result = invoke("--mcp", *arguments)
    assert result.exit_code == 2
    assert message in result.output
    assert TOKEN not in result.output


# --- the real command ----------------------------------------------------------------------


def test_serve_help_imports_no_fastmcp(tmp_path: Path, tools_dir: Path) -> None:
    script = (
        "import sys\n"
        "from expediter.cli import cli\n"
        "try:\n"
        "    cli.main(['serve', '--help'], prog_name='expediter')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "print('FASTMCP', sorted(m for m in sys.modules if m.split('.')[0] == 'fastmcp'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=cli_env(tmp_path / "home", tools_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--approval-wait" in done.stdout
    assert "FASTMCP []" in done.stdout


def approve_from_the_command_line(env: dict[str, str], home: Path, tools: Path) -> None:
    """Wait for a call to wait, then approve it with ``expediter approve KEY``."""
    with expediter.Host(home=home, tools_path=(tools,), autoload=False) as host:
        deadline = time.monotonic() + 30
        while not host.ledger.pending_approvals():
            assert time.monotonic() < deadline, "no call came to wait for approval"
            time.sleep(0.1)
        (waiting,) = host.ledger.pending_approvals()
    done = subprocess.run(
        [sys.executable, "-m", "expediter", "approve", waiting.key, "--as", "tests"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_command_serves_http_with_a_token(tmp_path: Path, tools_dir: Path) -> None:
    import asyncio

    from fastmcp import Client

    home = tmp_path / "home"
    env = cli_env(home, tools_dir, **{TOKEN_VARIABLE: TOKEN})
    served = ServeProcess(env, "--port", "0", "--user", USER, "--approval-wait", "60")
    try:
        assert served.url.startswith("http://127.0.0.1:")
        assert served.url.endswith("/mcp")
        assert post_initialize(served.url, None) == 401

        async def session() -> tuple[set[str], Any, Any]:
            async with Client(served.url, auth=TOKEN) as client:
                names = {tool.name for tool in await client.list_tools()}
                shouted = await client.call_tool("shout", {"text": "far"}, raise_on_error=False)
                launching = client.call_tool("launch", {"target": "moon"}, raise_on_error=False)
                approving = asyncio.to_thread(approve_from_the_command_line, env, home, tools_dir)
                launched, _ = await asyncio.gather(launching, approving)
                return names, shouted, launched

        names, shouted, launched = run(session())
    finally:
        status = served.stop()
    assert status == 0, "".join(served.lines)
    assert {"shout", "launch"} <= names
    assert text_of(shouted) == "FAR "
    assert not launched.is_error, text_of(launched)
    assert launched.structured_content == {"launched": "moon"}
    assert TOKEN not in "".join(served.lines)
    with expediter.Host(home=home, tools_path=(tools_dir,), autoload=False) as host:
        shout, launch = row_of(host, "shout"), row_of(host, "launch")
    assert (shout.status, shout.user_id) == ("executed", USER)
    assert (launch.status, launch.decided_by) == ("executed", "tests")


@pytest.mark.slow
def test_the_command_serves_stdio(tmp_path: Path, tools_dir: Path) -> None:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    home = tmp_path / "home"
    transport = StdioTransport(
        command=sys.executable,
        args=["-m", "expediter", "serve", "--mcp", "--transport", "stdio", "--user", USER],
        env=cli_env(home, tools_dir),
    )

    async def session() -> tuple[set[str], Any]:
        async with Client(transport) as client:
            names = {tool.name for tool in await client.list_tools()}
            result = await client.call_tool("stats", {"values": [4, 5]}, raise_on_error=False)
            return names, result

    names, result = run(session())
    assert {"shout", "stats"} <= names
    assert result.structured_content == {"count": 2, "total": 9}
    with expediter.Host(home=home, tools_path=(tools_dir,), autoload=False) as host:
        row = row_of(host, "stats")
    assert (row.status, row.user_id) == ("executed", USER)
