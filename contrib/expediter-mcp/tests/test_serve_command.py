"""``expediter serve --mcp`` over HTTP and as a command: bearer tokens, the Host/Origin guard
against DNS rebinding, the token's sources, usage errors, and the real command as a process
(both transports).

``test_serve`` covers listing, calls and approvals in process."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from expediter_mcp.serving.auth import (
    TOKEN_VARIABLE,
    TokenProblem,
    is_loopback,
    make_verifier,
    read_token,
)
from serve_support import (
    TOKEN,
    USER,
    HttpServer,
    ServeProcess,
    cli_env,
    invoke,
    post_initialize,
    row_of,
    run,
    server_for,
    text_of,
    write_tools,
)

import expediter


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


# --- bearer tokens over HTTP -------------------------------------------------------------------


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


# --- the Host/Origin guard (DNS rebinding) ---------------------------------------------------


def test_a_foreign_host_or_origin_is_refused(served_host: Any) -> None:
    """A web page the user visits (evil.example, resolved to 127.0.0.1 by its owner's DNS)
    cannot reach a loopback server that wants no token."""
    from fastmcp import Client

    running = HttpServer(server_for(served_host))
    port = running.sock.getsockname()[1]
    try:
        assert post_initialize(running.url, headers={"Host": f"evil.example:{port}"}) == 421
        assert post_initialize(running.url, headers={"Host": "evil.example"}) == 421
        assert post_initialize(running.url, headers={"Origin": "http://evil.example"}) == 403
        evil_page = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        assert post_initialize(running.url, headers=evil_page) == 421

        # What local clients send is accepted.
        assert post_initialize(running.url) == 200
        assert post_initialize(running.url, headers={"Host": f"localhost:{port}"}) == 200
        local = {"Origin": f"http://127.0.0.1:{port}"}
        assert post_initialize(running.url, headers=local) == 200

        async def listing() -> set[str]:
            async with Client(running.url) as client:
                return {tool.name for tool in await client.list_tools()}

        assert "shout" in run(listing())
    finally:
        running.close()
    assert not served_host.ledger.rows(limit=0)  # nothing refused reached the pipeline


def test_the_guard_allows_the_bound_address_and_loopback_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fastmcp
    from expediter_mcp.serving.transport import rebinding_guard

    monkeypatch.setattr(fastmcp.settings, "http_allowed_hosts", None)

    guard = rebinding_guard("127.0.0.1", 8765)
    assert guard["host_origin_protection"] is True
    assert set(guard["allowed_hosts"]) == {
        "127.0.0.1:8765",
        "localhost:8765",
        "[::1]:8765",
    }
    assert set(rebinding_guard("[::1]", 80)["allowed_hosts"]) == {
        "[::1]:80",
        "127.0.0.1:80",
        "localhost:80",
    }
    assert rebinding_guard("10.1.2.3", 9000)["allowed_hosts"] == ["10.1.2.3:9000"]
    # fastmcp's own setting still adds names (a proxy forwarding its public name).
    monkeypatch.setattr(fastmcp.settings, "http_allowed_hosts", ["mcp.example.org"])
    assert rebinding_guard("10.1.2.3", 9000)["allowed_hosts"] == [
        "10.1.2.3:9000",
        "mcp.example.org",
    ]


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
        # The Host/Origin guard runs first: a rebinding page is refused before the token.
        evil_page = {"Host": "evil.example", "Origin": "http://evil.example"}
        assert post_initialize(served.url, f"Bearer {TOKEN}", evil_page) == 421

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
        key = row_of(host, "launch").key
    # The operator, not the client, learns which call waits and how to decide it.
    assert f"waits for an operator's decision: expediter approve {key}" in "".join(served.lines)
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


# --- stored instances that cannot be offered -----------------------------------------------------

FRAGILE = '''
import expediter


@expediter.tool
def poke() -> str:
    """Poke."""
    return "ok"
'''


def _unofferable_instances(home: Path, tools: Path, server_url: str) -> tuple[str, str, str]:
    """Store three instances: an mcp one whose loopback URL no range allows, one of a tools
    module that then breaks, and an mcp one that works; their ids."""
    (tools / "fragile.py").write_text(FRAGILE)
    with expediter.Host(home=home, tools_path=(tools,)) as host:
        refused = host.instances.add("mcp", name="far", config={"url": server_url}, operator=True)
        broken = host.instances.add("fragile", name="brittle", operator=True)
        working = host.instances.add(
            "mcp",
            name="near",
            config={"url": server_url, "allow_networks": ["127.0.0.0/8"]},
            operator=True,
        )
    (tools / "fragile.py").write_text('raise RuntimeError("fragile broke at import")\n')
    return refused.id, broken.id, working.id


def _list_and_call_a_few_times(url: str) -> set[str]:
    from fastmcp import Client

    async def session() -> set[str]:
        async with Client(url) as client:
            for _ in range(4):
                names = {tool.name for tool in await client.list_tools()}
            for _ in range(2):  # every call looks its name up in a fresh toolset too
                await client.call_tool("shout", {"text": "x"}, raise_on_error=False)
            return names

    return run(session())


@pytest.mark.slow
def test_an_instance_that_cannot_be_offered_is_one_line_with_the_reason_and_hint(
    tmp_path: Path, tools_dir: Path, http_server: Any
) -> None:
    home = tmp_path / "home"
    refused, broken, working = _unofferable_instances(home, tools_dir, http_server.url)
    served = ServeProcess(cli_env(home, tools_dir), "--port", "0")
    try:
        names = _list_and_call_a_few_times(served.url)
    finally:
        status = served.stop()
    output = "".join(served.lines)
    assert status == 0, output
    assert {"shout", "whoami"} <= names  # the working instance is offered
    assert "Traceback" not in output
    (about_refused,) = [line for line in served.lines if refused in line]
    assert "cannot be offered" in about_refused
    assert "127.0.0.1 is in 127.0.0.0/8 (loopback)" in about_refused
    assert "`--allow-network 127.0.0.1/32`" in about_refused
    assert "EXPEDITER_EGRESS_ALLOW=127.0.0.1/32" in about_refused
    (about_broken,) = [line for line in served.lines if broken in line]
    assert "no tool named 'fragile'" in about_broken
    assert not [line for line in served.lines if working in line]
    # The guard's own refusal is logged when it is made, once, not on every listing.
    assert len([line for line in served.lines if "egress blocked" in line]) == 1


@pytest.mark.slow
def test_verbose_logging_adds_the_tracebacks(
    tmp_path: Path, tools_dir: Path, http_server: Any
) -> None:
    home = tmp_path / "home"
    refused, broken, _ = _unofferable_instances(home, tools_dir, http_server.url)
    served = ServeProcess(cli_env(home, tools_dir), "--port", "0", options=("-v",))
    try:
        _list_and_call_a_few_times(served.url)
    finally:
        served.stop()
    output = "".join(served.lines)
    assert output.count("Traceback") >= 2, output
    assert "fragile broke at import" in output
    # Still once per instance.
    assert len([line for line in served.lines if refused in line]) == 1
    assert len([line for line in served.lines if broken in line]) == 1
