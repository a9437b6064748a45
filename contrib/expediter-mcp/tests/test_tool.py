"""The ``mcp`` tool against a real fastmcp server on 127.0.0.1."""

from __future__ import annotations

import sys
from typing import Any

import expediter


def _offered(host: expediter.Host, instance_id: str, user_id: str | None = None) -> dict[str, Any]:
    toolset = host.toolset(user_id=user_id)
    return {o.action.name: o for o in toolset.actions if o.instance_id == instance_id}


def test_the_servers_tools_are_actions_with_valid_names(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(http_server.url)
    offered = _offered(host, record.id)
    assert {"whoami", "math_add", "sleep", "fail", "picture"} <= set(offered)
    assert offered["math_add"].action.parameters["required"] == ["a", "b"]


def test_a_call_returns_content_and_structured_content(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(http_server.url)
    event = host.call(record.id, "math_add", {"a": 2, "b": 3})
    assert event.status == "completed", event.error
    assert event.result["structured_content"] == {"result": 5}
    assert event.result["content"] == [{"type": "text", "text": "5"}]


def test_is_error_is_an_error_result(host: Any, add_instance: Any, http_server: Any) -> None:
    record = add_instance(http_server.url)
    event = host.call(record.id, "fail", {"message": "boom"})
    assert event.status == "error"
    assert "boom" in event.error
    row = host.ledger.get(event.key)
    assert row.status == "failed"


def test_a_timeout_is_an_error_result_and_the_session_stays_usable(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(http_server.url, timeout=0.5)
    event = host.call(record.id, "sleep", {"seconds": 3})
    assert event.status == "error"
    assert "did not answer within 0.5 s" in event.error
    again = host.call(record.id, "whoami", {})
    assert again.status == "completed"


def test_the_session_is_reused_across_calls(host: Any, add_instance: Any, http_server: Any) -> None:
    record = add_instance(http_server.url)
    first = host.call(record.id, "whoami", {}).result["structured_content"]
    second = host.call(record.id, "whoami", {}).result["structured_content"]
    # One session, one kept-alive connection: the server sees the same client port.
    assert first["port"] == second["port"]


def test_importing_the_pack_does_not_import_fastmcp() -> None:
    import subprocess

    code = "import expediter_mcp, expediter_mcp.tool, sys; print('fastmcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
