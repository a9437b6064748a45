"""A hostile stdio server cannot make the pack outrun its limits: they hold while the answer is
read, not after (``hostile_server.py`` is the server, a real process speaking JSON-RPC)."""

from __future__ import annotations

import logging
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import expediter

SERVER = Path(__file__).with_name("hostile_server.py")


@pytest.fixture
def hostile(host: expediter.Host, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Add a stdio instance running ``hostile_server.py`` in a mode; returns its id."""
    monkeypatch.setenv("EXPEDITER_MCP_STDIO_ALLOW", sys.executable)

    def add(*args: str, **config: Any) -> str:
        record = host.instances.add(
            "mcp",
            name=f"hostile-{args[0]}",
            config={
                "transport": "stdio",
                "command": sys.executable,
                "args": [str(SERVER), *args],
                **config,
            },
            operator=True,
        )
        return str(record.id)

    return add


def _actions(host: expediter.Host, instance_id: str) -> set[str]:
    toolset = host.toolset()
    assert not [error for error in toolset.errors if instance_id in str(error)], toolset.errors
    return {o.action.name for o in toolset.actions if o.instance_id == instance_id}


def test_an_answer_over_the_cap_fails_while_it_is_read(host: expediter.Host, hostile: Any) -> None:
    # 100 MB streamed by the server; the instance reads at most 1 MB of it. Before the cap held
    # while reading, the whole line was gathered (hundreds of MiB) and the call ran into its
    # timeout instead.
    instance = hostile("huge", "100", max_response_bytes=1_000_000, timeout=20)
    assert _actions(host, instance) == {"huge"}
    tracemalloc.start()
    try:
        event = host.call(instance, "huge", {})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert event.status == "error"
    assert "larger than 1000000 bytes" in (event.error or "")
    assert "max_response_bytes" in (event.error or "")
    assert peak < 40_000_000  # near the cap, not near the answer
    assert host.ledger.get(event.key).status == "failed"


def test_a_listing_stops_paging_at_the_tool_cap(
    host: expediter.Host, hostile: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from expediter_mcp.listing import MAX_TOOLS

    counter = tmp_path / "pages"
    instance = hostile("pages", "5", "10", str(counter), timeout=60)
    with caplog.at_level(logging.WARNING, logger="expediter_mcp"):
        names = _actions(host, instance)
    assert len(names) == MAX_TOOLS
    assert len(counter.read_text().split()) == MAX_TOOLS // 5  # not one page more
    assert f"more than {MAX_TOOLS} tools; the rest are left out" in caplog.text


def test_a_listing_of_empty_pages_stops_at_the_page_cap(
    host: expediter.Host, hostile: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    counter = tmp_path / "pages"
    instance = hostile("pages", "0", "0", str(counter), timeout=60)
    with caplog.at_level(logging.WARNING, logger="expediter_mcp"):
        assert _actions(host, instance) == set()
    from expediter_mcp.listing import MAX_PAGES

    assert len(counter.read_text().split()) == MAX_PAGES
    assert f"more than {MAX_PAGES} pages; the rest are left out" in caplog.text


def test_a_listing_reads_at_most_max_response_bytes_in_all(
    host: expediter.Host, hostile: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Pages of two tools with 200 kB descriptions: each page fits the 1 MB cap, the list does
    # not.
    counter = tmp_path / "pages"
    instance = hostile("pages", "2", "200000", str(counter), max_response_bytes=1_000_000)
    with caplog.at_level(logging.WARNING, logger="expediter_mcp"):
        names = _actions(host, instance)
    assert 2 <= len(names) <= 5
    assert len(counter.read_text().split()) <= 3
    assert "over 1000000 bytes (the instance's max_response_bytes); the rest are left out" in (
        caplog.text
    )


def test_a_tool_with_a_bad_input_schema_is_left_out_alone(
    host: expediter.Host, hostile: Any, caplog: pytest.LogCaptureFixture
) -> None:
    instance = hostile("schemas")
    with caplog.at_level(logging.WARNING, logger="expediter_mcp"):
        names = _actions(host, instance)
    assert names == {"good", "other"}
    for name in ("flat", "empty", "deep", "deeper"):
        assert f"MCP tool {name!r} is left out" in caplog.text
    assert "its input schema is not a JSON object" in caplog.text
    assert "its input schema nests deeper than" in caplog.text
    event = host.call(instance, "good", {})
    assert event.status == "completed", event.error
    assert event.result["content"][0]["text"] == "good answered"


@pytest.mark.parametrize(
    ("tool", "why"), [("garbage", "not a JSON-RPC message"), ("noise", "not JSON")]
)
def test_an_answer_that_is_not_json_rpc_fails_the_call_at_once(
    host: expediter.Host, hostile: Any, tool: str, why: str
) -> None:
    # The server never answers after its bad line: a call that waited for an answer would run
    # into its 20 s timeout (and say so) instead.
    instance = hostile("garbage", timeout=20)
    assert _actions(host, instance) == {"garbage", "noise", "fine"}
    event = host.call(instance, tool, {})
    assert event.status == "error"
    assert "did not answer" not in (event.error or "")
    assert "the stdio server wrote a line that is not a JSON-RPC message" in (event.error or "")
    assert why in (event.error or "")
    again = host.call(instance, "fine", {})  # a new session (and server process)
    assert again.status == "completed", again.error
