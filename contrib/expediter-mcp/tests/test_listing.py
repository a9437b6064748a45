"""A server's tool list: kept for ``list_ttl`` seconds, asked again at once when the server
says it changed, and made of names every provider accepts."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from expediter_mcp.listing import Listing, action_name
from hypothesis import given
from hypothesis import strategies as st
from servers import ADD, McpServer, build_server

from expediter.core.turns.naming import NAME_PATTERN


@pytest.fixture
def growing_server() -> Iterator[McpServer]:
    """A server whose ``grow`` tool adds a tool (fastmcp then notifies its clients)."""
    running = McpServer(build_server(growing=True))
    yield running
    running.close()


def _actions(host: Any, instance_id: str) -> set[str]:
    return {o.action.name for o in host.toolset().actions if o.instance_id == instance_id}


def test_a_list_changed_notification_refreshes_the_actions(
    host: Any, add_instance: Any, growing_server: McpServer
) -> None:
    record = add_instance(growing_server.url, list_ttl=3600)
    assert "fresh.tool" not in _actions(host, record.id)
    event = host.call(record.id, "grow", {"name": "fresh.tool"})
    assert event.status == "completed", event.error
    fresh = action_name("fresh.tool", set())
    assert fresh in _actions(host, record.id)
    assert host.call(record.id, fresh, {}).status == "completed"


def test_the_list_is_kept_while_fresh(
    host: Any, add_instance: Any, growing_server: McpServer
) -> None:
    from expediter_mcp import tool as tool_module

    record = add_instance(growing_server.url, list_ttl=3600)
    asked = []
    real = tool_module.McpTool._list

    async def counting(self: Any, context: Any, key: Any) -> Any:
        asked.append(key)
        return await real(self, context, key)

    tool_module.McpTool._list = counting  # type: ignore[method-assign]
    try:
        for _ in range(3):
            _actions(host, record.id)
            host.call(record.id, ADD, {"a": 1, "b": 1})
    finally:
        tool_module.McpTool._list = real  # type: ignore[method-assign]
    assert len(asked) == 1


class _Tool:
    def __init__(self, name: str, schema: Any = None) -> None:
        self.name = name
        self.description = f"{name} tool"
        self.input_schema = schema


@given(st.lists(st.text(min_size=1, max_size=130), max_size=30))
def test_action_names_are_valid_unique_and_map_back(names: list[str]) -> None:
    listing = Listing.of([_Tool(name) for name in names], 0.0)
    assert len(set(listing.names)) == len(listing.names)
    for action in listing.actions:
        assert NAME_PATTERN.match(action.name)
        assert listing.names[action.name] in names
    assert set(listing.names.values()) == set(names)


def test_an_action_name_depends_on_its_mcp_name_alone() -> None:
    names = ["a.b", "a_b", "x" * 128, "x" * 127 + "y", "1st", "get-sum"]
    forward = Listing.of([_Tool(n) for n in names], 0.0).names
    backward = Listing.of([_Tool(n) for n in reversed(names)], 0.0).names
    alone = {n: Listing.of([_Tool(n)], 0.0).names for n in names}
    assert forward == backward
    for name in names:  # the same name with or without the other tools
        assert {v: k for k, v in forward.items()}[name] == next(iter(alone[name]))
    assert forward["a_b"] == "a_b"  # a valid name is kept
    assert forward["get-sum"] == "get-sum"
    dotted = action_name("a.b", set())
    assert dotted.startswith("a_b_")
    assert forward[dotted] == "a.b"


def test_a_schema_that_is_not_an_object_becomes_an_empty_object() -> None:
    listing = Listing.of([_Tool("odd", {"type": "string"}), _Tool("none", None)], 0.0)
    for action in listing.actions:
        assert action.parameters["type"] == "object"


def test_a_tool_with_a_huge_schema_is_left_out() -> None:
    from expediter_mcp.listing import MAX_SCHEMA_CHARS

    huge = {
        "type": "object",
        "properties": {f"p{n}": {"type": "string", "description": "x" * 100} for n in range(2000)},
    }
    assert len(str(huge)) > MAX_SCHEMA_CHARS
    listing = Listing.of([_Tool("huge", huge), _Tool("small", {"type": "object"})], 0.0)
    assert list(listing.names.values()) == ["small"]


def test_a_tool_nested_too_deep_is_left_out_alone_over_http(
    host: Any, add_instance: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # 190 levels of arrays: within what the SDK's JSON parser takes, deeper than the
    # validators that read the schema afterwards can recurse.
    import json

    from fastmcp import FastMCP
    from fastmcp.tools.base import Tool, ToolResult

    class Echo(Tool):
        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            return ToolResult(content=f"{self.name} answered")

    inner = '{"type": "array", "items": ' * 190 + '{"type": "string"}' + "}" * 190
    server = FastMCP("deep", dereference_schemas=False)
    server.add_tool(Echo(name="good", description="fine", parameters={"type": "object"}))
    deep = json.loads('{"type": "object", "properties": {"a": ' + inner + "}}")
    server.add_tool(Echo(name="deep", description="too deep", parameters=deep))
    running = McpServer(server)
    try:
        record = add_instance(running.url)
        with caplog.at_level(logging.WARNING, logger="expediter_mcp"):
            toolset = host.toolset()
        assert not toolset.errors
        assert {o.action.name for o in toolset.actions if o.instance_id == record.id} == {"good"}
        assert "MCP tool 'deep' is left out: its input schema nests deeper than" in caplog.text
        event = host.call(record.id, "good", {})
        assert event.status == "completed", event.error
    finally:
        running.close()
