"""``expediter serve --mcp`` offering an ``mcp`` instance: the served tool answers with the
content the inner server gave (text, images, structured content), not with the pack's JSON
envelope as text. Two real MCP servers on 127.0.0.1: the test server, and the served host over
streamable HTTP in front of it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from serve_support import HttpServer, run, server_for
from servers import ADD


@pytest.fixture
def front(host: Any, add_instance: Any, http_server: Any) -> Iterator[HttpServer]:
    """The host served over HTTP, offering a shared ``mcp`` instance of the test server."""
    add_instance(http_server.url, name="inner")
    running = HttpServer(server_for(host))
    yield running
    running.close()


def _call(url: str, name: str, arguments: dict[str, Any]) -> Any:
    from fastmcp import Client

    async def session() -> Any:
        async with Client(url) as client:
            return await client.call_tool(name, arguments, raise_on_error=False)

    return run(session())


def test_a_proxied_tool_answers_with_the_inner_content(front: HttpServer) -> None:
    result = _call(front.url, ADD, {"a": 2, "b": 40})
    assert not result.is_error
    assert [(block.type, block.text) for block in result.content] == [("text", "42")]
    assert result.structured_content == {"result": 42}
    assert "content" not in result.content[0].text  # no envelope


def test_a_proxied_image_stays_an_image(front: HttpServer) -> None:
    result = _call(front.url, "picture", {"size": 32})
    assert not result.is_error
    (block,) = result.content
    assert (block.type, block.mime_type) == ("image", "image/png")
    assert block.data  # base64, as the inner server sent it


def test_a_proxied_text_over_the_budget_is_cut_and_says_so(host: Any, front: HttpServer) -> None:
    budget = host.model_result_chars
    result = _call(front.url, "big", {"size": budget * 2})
    assert not result.is_error
    (block,) = result.content
    assert block.text.endswith("[cut: over the result budget]")
    assert len(block.text) < budget + 100
    assert result.structured_content is None


def test_a_proxied_error_is_an_error_with_the_inner_text(front: HttpServer) -> None:
    result = _call(front.url, "fail", {"message": "inner trouble"})
    assert result.is_error
    text = "".join(block.text for block in result.content)
    assert "inner trouble" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # a message, not an envelope
