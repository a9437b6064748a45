"""``expediter serve --mcp`` in process: the host's toolset listed to MCP clients, every call
through the host's pipeline (one ledger row each), approvals, and the hosts the server rebuilds
when the installed tools change.

The tests drive the server with fastmcp's in-memory client; ``test_serve_command`` covers
bearer tokens, HTTP, the command line and the real process."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from expediter_mcp.serving.bridge import Bridge
from expediter_mcp.serving.provider import make_server
from serve_support import (
    USER,
    call,
    listed,
    row_of,
    run,
    server_for,
    text_of,
    write_tools,
)


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


def assert_no_coaching(text: str, key: str) -> None:
    """The client (often an agent with a shell) is told an operator decides, and not how."""
    assert "an operator" in text
    assert key not in text
    assert key.split(":")[0] not in text
    assert "expediter approve" not in text
    assert "expediter deny" not in text
    assert "approvals ls" not in text


def test_a_call_needing_approval_is_refused_without_coaching_the_client(
    served_host: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="expediter_mcp"):
        result = call(server_for(served_host), "launch", {"target": "moon"})

    assert result.is_error
    (waiting,) = served_host.ledger.pending_approvals()
    assert_no_coaching(text_of(result), waiting.key)
    assert "still waiting" not in text_of(result)
    assert row_of(served_host, "launch").status == "awaiting_approval"
    # The key goes to the operator's channels: the server's log (and `approvals ls`).
    assert f"expediter approve {waiting.key}" in caplog.text


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
    assert_no_coaching(text_of(result), waiting.key)
    assert "still waiting" in text_of(result)


# --- the hosts a server rebuilds -----------------------------------------------------------


class Hosts:
    """The hosts built and closed during a test (in order; a host closed twice shows twice)."""

    def __init__(self) -> None:
        self.built: list[Any] = []
        self.closed: list[Any] = []

    def is_closed(self, host: Any) -> bool:
        return any(item is host for item in self.closed)

    def times_closed(self, host: Any) -> int:
        return sum(item is host for item in self.closed)


@pytest.fixture
def hosts(monkeypatch: pytest.MonkeyPatch) -> Hosts:
    """Records every ``Host`` built and closed from now on (they still build and close)."""
    from expediter.core.host import Host

    seen = Hosts()
    init, close = Host.__init__, Host.close

    def building(self: Host, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        seen.built.append(self)

    def closing(self: Host) -> None:
        seen.closed.append(self)
        close(self)

    monkeypatch.setattr(Host, "__init__", building)
    monkeypatch.setattr(Host, "close", closing)
    return seen


def install(tools_dir: Path, number: int) -> str:
    """Add a tool module to the tools directory (so the next listing rebuilds the host);
    the name of its one action."""
    time.sleep(0.01)  # a new modification time for the directory's listing
    name = f"echo{number}"
    (tools_dir / f"{name}.py").write_text(
        f"import expediter\n\n\n@expediter.tool\ndef {name}(text: str) -> str:\n"
        '    """Echo text."""\n    return text\n'
    )
    return name


def test_a_replaced_host_is_closed(served_host: Any, tools_dir: Path, hosts: Hosts) -> None:
    bridge = Bridge(served_host, user_id=USER, approval_wait=None)
    server = make_server(bridge, auth=None)
    for number in range(6):
        name = install(tools_dir, number)
        assert name in listed(server)
        assert not call(server, name, {"text": "hi"}).is_error

    assert len(hosts.built) == 6  # a new host for each change
    assert hosts.built[-1] is bridge.host
    assert [host for host in hosts.built if not hosts.is_closed(host)] == [bridge.host]
    assert not hosts.is_closed(served_host)  # the command closes the host it gave
    bridge.close()
    assert all(hosts.times_closed(host) == 1 for host in hosts.built)
    assert not hosts.is_closed(served_host)


def test_a_call_in_flight_on_a_replaced_host_completes_then_it_is_closed(
    served_host: Any, tools_dir: Path, hosts: Hosts
) -> None:
    from fastmcp import Client

    bridge = Bridge(served_host, user_id=USER, approval_wait=None)
    server = make_server(bridge, auth=None)
    install(tools_dir, 1)
    listed(server)
    (first,) = hosts.built  # built by the bridge: closed once replaced and idle

    async def scenario() -> tuple[Any, bool]:
        import asyncio

        async with Client(server) as client:
            napping = asyncio.ensure_future(client.call_tool("nap", {"seconds": 2.0}))
            await asyncio.sleep(0.3)  # the call is running in ``first``'s toolset
            install(tools_dir, 2)
            assert "echo2" in {tool.name for tool in await client.list_tools()}
            assert bridge.host is not first
            open_while_called = not hosts.is_closed(first)
            return await napping, open_while_called

    result, open_while_called = run(scenario())
    assert open_while_called
    assert not result.is_error, text_of(result)
    assert text_of(result) == "rested"
    assert row_of(served_host, "nap").status == "executed"
    assert hosts.times_closed(first) == 1
    assert not hosts.is_closed(bridge.host)
    bridge.close()
    assert hosts.times_closed(first) == 1


def test_an_offer_of_a_closed_host_runs_in_the_current_one(
    served_host: Any, tools_dir: Path, hosts: Hosts
) -> None:
    bridge = Bridge(served_host, user_id=USER, approval_wait=None)
    install(tools_dir, 1)
    offer = bridge.offer("shout")
    install(tools_dir, 2)
    bridge.offers()
    first, second = hosts.built
    assert hosts.is_closed(first)

    reply = run(bridge.call(offer, {"text": "late"}))

    assert not reply.is_error, reply.text
    assert reply.text == "LATE "
    assert row_of(served_host, "shout").status == "executed"
    assert not hosts.is_closed(second)
    bridge.close()


def test_listings_in_threads_while_the_tools_change(
    served_host: Any, tools_dir: Path, hosts: Hosts
) -> None:
    bridge = Bridge(served_host, user_id=USER, approval_wait=None)
    failures: list[BaseException] = []
    stop = threading.Event()

    def list_often() -> None:
        while not stop.is_set():
            try:
                assert "shout" in {offer.name for offer in bridge.offers()}
            except BaseException as exc:  # reported below
                failures.append(exc)
                return

    threads = [threading.Thread(target=list_often) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for number in range(5):
            install(tools_dir, number)
            time.sleep(0.1)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert not failures, failures
    assert "echo4" in {offer.name for offer in bridge.offers()}
    assert [host for host in hosts.built if not hosts.is_closed(host)] == [bridge.host]
    bridge.close()
    assert all(hosts.times_closed(host) == 1 for host in hosts.built)
    assert not hosts.is_closed(served_host)
