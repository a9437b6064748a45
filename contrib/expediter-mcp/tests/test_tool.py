"""The ``mcp`` tool against a real fastmcp server on 127.0.0.1."""

from __future__ import annotations

import sys
import time
from typing import Any

from servers import ADD

import expediter


def _offered(host: expediter.Host, instance_id: str, user_id: str | None = None) -> dict[str, Any]:
    toolset = host.toolset(user_id=user_id)
    return {o.action.name: o for o in toolset.actions if o.instance_id == instance_id}


def test_the_servers_tools_are_actions_with_valid_names(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(http_server.url)
    offered = _offered(host, record.id)
    assert {"whoami", ADD, "sleep", "fail", "picture"} <= set(offered)
    assert offered[ADD].action.parameters["required"] == ["a", "b"]


def test_a_call_returns_content_and_structured_content(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(http_server.url)
    event = host.call(record.id, ADD, {"a": 2, "b": 3})
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


def test_an_answer_over_the_cap_is_an_error_and_the_next_call_works(
    host: Any, add_instance: Any, http_server: Any
) -> None:
    record = add_instance(http_server.url, max_response_bytes=20_000)
    event = host.call(record.id, "big", {"size": 100_000})
    assert event.status == "error"
    assert "larger than 20000 bytes" in event.error
    assert host.call(record.id, "big", {"size": 100}).status == "completed"


def test_a_call_in_flight_survives_another_hosts_close(
    tmp_path: Any, monkeypatch: Any, http_server: Any
) -> None:
    import threading

    from expediter_mcp.tool import McpTool

    monkeypatch.setenv("EXPEDITER_EGRESS_ALLOW", "127.0.0.0/8")
    instance = expediter.ToolInstance(
        tool="mcp", instance_id="shared", name="shared", config={"url": http_server.url}
    )

    def make() -> expediter.Host:
        return expediter.Host(
            home=tmp_path, plugins=[McpTool], autoload=False, builtins=False, record_calls=False
        )

    first, second = make(), make()
    for made in (first, second):
        assert made.toolset(instances=[instance]).actions
    before = len(http_server.server.calls)
    toolset = second.toolset(instances=[instance])
    call = expediter.ToolCall(
        "c1", "sleep", {"seconds": 1.5}, instance_id="shared", tool="mcp", action="sleep"
    )
    events: list[Any] = []
    running = threading.Thread(target=lambda: events.extend(toolset.run([call])))
    running.start()
    time.sleep(0.5)
    first.close()  # the other host's sessions, not this call's
    running.join(30)
    assert events[0].status == "completed", events[0].error
    assert len(http_server.server.calls) - before == 1  # sent once, never again
    second.close()


def test_a_server_that_never_answers_is_not_waited_for_every_turn(
    host: Any, add_instance: Any
) -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # accepts connections (the kernel does), never answers
        record = add_instance(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp", timeout=1)
        started = time.monotonic()
        first = host.toolset()
        assert any(record.id in error for error in first.errors)
        assert time.monotonic() - started >= 1  # it waited once
        again = time.monotonic()
        second = host.toolset()  # the failure is remembered for a while: no second wait
        assert any(record.id in error for error in second.errors)
        assert time.monotonic() - again < 0.5


def test_a_server_that_never_answers_is_a_timeout_error(host: Any, add_instance: Any) -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections (the kernel does), never answers
    try:
        port = listener.getsockname()[1]
        record = add_instance(f"http://127.0.0.1:{port}/mcp", timeout=1)
        started = time.monotonic()
        event = host.call(record.id, "anything", {})
        assert event.status == "error"
        assert "did not answer within 1 s" in (event.error or "")
        assert time.monotonic() - started < 15
    finally:
        listener.close()


def test_only_image_and_audio_types_become_data_urls() -> None:
    from types import SimpleNamespace

    from expediter_mcp.results import content_block

    png = SimpleNamespace(type="image", mime_type="image/png", data="iVBORw0KGgo=")
    html = SimpleNamespace(type="image", mime_type="text/html;x=<script>", data="PGI+")
    odd = SimpleNamespace(type="audio", mime_type="image/png", data="AAAA")
    assert content_block(png, 1000)["data_url"] == "data:image/png;base64,iVBORw0KGgo="
    assert "data_url" not in content_block(html, 1000)
    assert "data_url" not in content_block(odd, 1000)
