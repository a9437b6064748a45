"""The http pack behind the egress guard: what the model and the ledger learn of a refusal,
redirects (each hop checked, https->http refused, credentials kept to their origin), proxies
from the environment ignored, names resolved once per connection and checked (SNI and Host
keep the name), operator ranges per instance, and DNS rebinding.

Every test runs in the loopback-only test net (conftest): a wrong guard reaches at worst another
loopback server, and a dial anywhere else fails the test.
"""

from __future__ import annotations

import json
import select
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import call, instance, model_response
from expediter_http.tool import HttpTool
from servers import Reply, TestServer

from expediter.core.netguard import Resolver
from expediter.testing.network import StaticLookup

GENERIC = "blocked by egress policy"
REDIRECTS = (301, 302, 307, 308)


def closing(running: TestServer) -> None:
    """Shut a server down in the background (its shutdown waits out a 0.5 s poll)."""
    threading.Thread(target=running.close, daemon=True).start()


@pytest.fixture
def far() -> Iterator[TestServer]:
    """A plain HTTP server on 127.0.0.2 (another loopback address)."""
    running = TestServer("127.0.0.2")
    yield running
    closing(running)


@pytest.fixture
def proxy() -> Iterator[TestServer]:
    """A recording server to name in the proxy variables."""
    running = TestServer("127.0.0.1")
    yield running
    closing(running)


def blocked(event: Any) -> bool:
    return (
        event.status == "error"
        and event.error_type == "EgressBlocked"
        and event.error == GENERIC
        and event.result is None
    )


def ledger_error(host: Any, event: Any) -> str:
    row = host.ledger.get(event.key)
    assert row is not None, f"no ledger row for {event.key}"
    assert row.status != "completed"
    return str(row.error)


# --- what the model and the ledger learn ----------------------------------------------------


@pytest.mark.parametrize(
    ("base", "reason"),
    [
        ("{server}", "127.0.0.1 is in 127.0.0.0/8 (loopback)"),
        ("http://localhost.test:{port}", "'localhost.test' -> 127.0.0.1 is in 127.0.0.0/8"),
        ("http://2130706433:{port}", "127.0.0.1 is in 127.0.0.0/8"),
        ("http://[::ffff:127.0.0.1]:{port}", "::ffff:0:0/96"),
        ("http://[::1]:{port}", "::1 is in ::1/128"),
        ("http://169.254.169.254", "169.254.169.254 is in 169.254.0.0/16"),
        ("http://metadata.test", "'metadata.test' -> 169.254.169.254 is in 169.254.0.0/16"),
        ("http://mixed.test:{port}", "'mixed.test' -> 127.0.0.1 is in 127.0.0.0/8"),
        ("http://missing.test:{port}", "resolving 'missing.test' failed"),
    ],
)
def test_a_blocked_request_tells_the_model_only_that_and_the_ledger_why(
    server: TestServer, http_host: Any, base: str, reason: str
) -> None:
    lookup = {
        "localhost.test": ["127.0.0.1"],
        "metadata.test": ["169.254.169.254"],
        "mixed.test": ["93.184.216.34", "127.0.0.1"],
    }
    host = http_host(allow=None, lookup=lookup, record_calls=True)
    url = base.format(server=server.url, port=server.port)
    event = call(host, instance(url, timeout=5), "echo", {})
    assert blocked(event), event
    model_sees = json.dumps(event.to_dict()) + str(event.content)
    assert "127.0.0.0/8" not in model_sees
    assert "169.254.0.0/16" not in model_sees
    assert reason in ledger_error(host, event)
    assert ledger_error(host, event).startswith(GENERIC + ": ")
    assert server.received == []
    assert server.connections == 0


@pytest.mark.parametrize(
    ("base", "allow"),
    [
        ("{server}", "127.0.0.1/32"),
        ("http://metadata.test", "169.254.169.254/32"),
        ("http://[::ffff:127.0.0.1]:{port}", "127.0.0.1/32"),
        ("http://[::1]:{port}", "::1/128"),
    ],
)
def test_the_ledger_and_the_log_name_the_range_that_allows_the_address(
    server: TestServer, http_host: Any, base: str, allow: str, caplog: pytest.LogCaptureFixture
) -> None:
    host = http_host(allow=None, lookup={"metadata.test": ["169.254.169.254"]}, record_calls=True)
    tool_instance = instance(base.format(server=server.url, port=server.port), timeout=5)
    toolset = host.toolset(instances=[tool_instance])
    name = toolset.name_map.name_for(tool_instance.instance_id or "http", "echo")
    calls = toolset.parse_calls("openai", model_response(str(name)))
    with caplog.at_level("WARNING", logger="expediter.netguard"):
        (event,) = toolset.run(calls)
    assert blocked(event), event
    recorded = ledger_error(host, event)
    assert f"`--allow-network {allow}`" in recorded
    assert f"EXPEDITER_EGRESS_ALLOW={allow}" in recorded
    assert f"--allow-network {allow}" in caplog.text
    # Nothing of it reaches the model: the event and the provider's result message.
    (message,) = toolset.result_messages("openai", calls, [event])
    assert message["content"] == GENERIC
    model_sees = json.dumps(event.to_dict()) + str(event.content) + json.dumps(message)
    assert "allow" not in model_sees.lower()
    assert "EXPEDITER" not in model_sees


def test_a_refusal_that_no_range_allows_carries_no_hint(server: TestServer, http_host: Any) -> None:
    host = http_host(allow=None, record_calls=True)
    event = call(host, instance("http://missing.test", timeout=5), "echo", {})
    assert blocked(event), event
    assert "--allow-network" not in ledger_error(host, event)


@pytest.mark.parametrize("scheme", ["ftp", "file", "gopher"])
def test_a_base_url_that_is_not_http_is_refused_before_anything_is_dialed(
    server: TestServer, http_host: Any, scheme: str
) -> None:
    event = call(http_host(), instance(f"{scheme}://127.0.0.1:{server.port}"), "echo", {})
    assert event.status == "error"
    assert event.error_type in ("ArgumentError", "ConfigError", "EgressBlocked"), event
    assert server.connections == 0


def test_the_same_request_goes_through_when_the_operator_allows_it(
    server: TestServer, http_host: Any
) -> None:
    event = call(http_host(allow="127.0.0.0/8"), instance(server.url), "echo", {})
    assert event.status == "completed", event
    assert [r.path for r in server.received] == ["/echo"]


# --- redirects ------------------------------------------------------------------------------


def test_a_redirect_is_returned_not_followed_by_default(far: TestServer, http_host: Any) -> None:
    far.route("GET", "/echo", Reply(status=302, headers={"Location": "http://169.254.169.254/"}))
    event = call(http_host(allow="127.0.0.2/32"), instance(far.url), "echo", {})
    assert event.status == "completed", event
    assert event.result["status_code"] == 302
    assert event.result["headers"]["location"] == "http://169.254.169.254/"
    assert len(far.received) == 1


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("{server}/echo", "127.0.0.1 is in 127.0.0.0/8"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.0.0/16"),
        ("http://[::1]:{port}/", "::1/128"),
        ("http://2130706433:{port}/", "127.0.0.0/8"),
        ("http://[::ffff:7f00:1]:{port}/", "::ffff:0:0/96"),
        ("//127.0.0.1:{port}/echo", "127.0.0.0/8"),
        # a name is checked when it is dialed, by the backend
        ("http://internal.test:{port}/echo", "'internal.test' -> 127.0.0.1"),
        ("file:///etc/passwd", "scheme 'file'"),
        ("gopher://127.0.0.1:{port}/", "scheme 'gopher'"),
    ],
)
def test_a_followed_redirect_to_a_forbidden_address_is_blocked(
    far: TestServer, server: TestServer, http_host: Any, target: str, reason: str
) -> None:
    location = target.format(server=server.url, port=server.port)
    host = http_host(
        allow="127.0.0.2/32", lookup={"internal.test": ["127.0.0.1"]}, record_calls=True
    )
    for status in REDIRECTS:
        far.route("GET", "/echo", Reply(status=status, headers={"Location": location}))
        event = call(host, instance(far.url, follow_redirects=True, timeout=5), "echo", {})
        assert blocked(event), (status, event)
        assert reason in ledger_error(host, event)
    assert len(far.received) == len(REDIRECTS)
    assert server.received == []
    assert server.connections == 0


def test_a_redirect_from_https_to_http_is_refused(
    tls_server: TestServer, server: TestServer, ca_file: Any, http_host: Any
) -> None:
    tls_server.route("GET", "/echo", Reply(status=302, headers={"Location": f"{server.url}/echo"}))
    host = http_host(allow="127.0.0.0/8", lookup={"api.test": ["127.0.0.1"]}, record_calls=True)
    for base in (tls_server.url, f"https://api.test:{tls_server.port}"):
        tool_instance = instance(base, follow_redirects=True, ca_file=str(ca_file))
        event = call(host, tool_instance, "echo", {})
        assert blocked(event), event
        assert "a redirect from https to http is refused" in ledger_error(host, event)
    assert len(tls_server.received) == 2
    assert server.received == []


def credentialed(base: str, **config: Any) -> Any:
    return instance(
        base,
        {"name": "echo", "method": "GET", "path": "/echo"},
        {
            "name": "send",
            "method": "POST",
            "path": "/send",
            "body": {"content_type": "application/json", "schema": {"type": "object"}},
        },
        headers={"X-Plain": "plain-value"},
        secret_headers={"X-Secret": "secret-header-value"},
        security=[
            {"name": "token", "type": "bearer"},
            {"name": "key", "type": "api_key", "in": "header", "parameter": "X-Api-Key"},
        ],
        credentials={"token": "token-value-123", "key": "key-value-456"},
        follow_redirects=True,
        **config,
    )


CREDENTIAL_HEADERS = {
    "X-Secret": "secret-header-value",
    "Authorization": "Bearer token-value-123",
    "X-Api-Key": "key-value-456",
}


@pytest.mark.parametrize("status", REDIRECTS)
def test_a_redirect_to_another_allowed_origin_drops_the_credentials(
    far: TestServer, server: TestServer, http_host: Any, status: int
) -> None:
    far.route("GET", "/echo", Reply(status=status, headers={"Location": f"{server.url}/landed"}))
    event = call(http_host(allow="127.0.0.0/8"), credentialed(far.url), "echo", {})
    assert event.status == "completed", event
    (first,) = far.received
    for name, value in CREDENTIAL_HEADERS.items():
        assert first.header(name) == value, name
    (moved,) = server.received
    assert moved.path == "/landed"
    assert moved.header("X-Plain") == "plain-value"
    for name in CREDENTIAL_HEADERS:
        assert moved.header(name) is None, name


def test_a_redirect_to_the_same_host_on_another_port_is_another_origin(
    server: TestServer, http_host: Any
) -> None:
    other = TestServer("127.0.0.1")
    try:
        server.route("GET", "/echo", Reply(status=307, headers={"Location": f"{other.url}/x"}))
        event = call(http_host(), credentialed(server.url), "echo", {})
        assert event.status == "completed", event
        (moved,) = other.received
        assert moved.header("Authorization") is None
        assert moved.header("X-Plain") == "plain-value"
    finally:
        closing(other)


@pytest.mark.parametrize("status", REDIRECTS)
def test_a_same_origin_redirect_keeps_the_credentials(
    far: TestServer, http_host: Any, status: int
) -> None:
    far.route("GET", "/echo", Reply(status=status, headers={"Location": "/landed"}))
    event = call(http_host(allow="127.0.0.2/32"), credentialed(far.url), "echo", {})
    assert event.status == "completed", event
    first, moved = far.received
    assert moved.path == "/landed"
    for name, value in {**CREDENTIAL_HEADERS, "X-Plain": "plain-value"}.items():
        assert moved.header(name) == value, name
    assert first.header("X-Api-Key") == "key-value-456"


@pytest.mark.parametrize(
    ("status", "method", "body"),
    [(303, "GET", b""), (302, "GET", b""), (301, "GET", b""), (307, "POST", b'{"a":1}')],
)
def test_a_redirected_post(
    far: TestServer, http_host: Any, status: int, method: str, body: bytes
) -> None:
    far.route("POST", "/send", Reply(status=status, headers={"Location": "/landed"}))
    event = call(http_host(allow="127.0.0.2/32"), credentialed(far.url), "send", {"body": {"a": 1}})
    assert event.status == "completed", event
    post, moved = far.received
    assert (post.method, post.body) == ("POST", b'{"a":1}')
    assert (moved.method, moved.body) == (method, body)
    if method == "GET":
        assert moved.header("Content-Type") is None
        assert moved.header("Content-Length") in (None, "0")


@pytest.mark.parametrize("limit", [0, 2])
def test_more_redirects_than_allowed_is_an_error(
    far: TestServer, http_host: Any, limit: int
) -> None:
    far.route("GET", "/echo", Reply(status=302, headers={"Location": "/echo"}))
    tool_instance = instance(far.url, follow_redirects=True, max_redirects=limit)
    event = call(http_host(allow="127.0.0.2/32"), tool_instance, "echo", {})
    assert event.status == "error"
    assert event.error == f"more than {limit} redirects; stopped"
    assert len(far.received) == limit + 1


# --- proxies from the environment -----------------------------------------------------------


def test_proxy_variables_are_ignored(
    server: TestServer,
    tls_server: TestServer,
    proxy: TestServer,
    ca_file: Any,
    http_host: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy.url)
        monkeypatch.setenv(name.lower(), proxy.url)
    host = http_host()
    assert call(host, instance(server.url), "echo", {}).status == "completed"
    tls_instance = instance(tls_server.url, ca_file=str(ca_file))
    assert call(host, tls_instance, "echo", {}).status == "completed"
    assert len(server.received) == len(tls_server.received) == 1
    assert proxy.received == []
    assert proxy.connections == 0


# --- names ----------------------------------------------------------------------------------


def test_a_name_is_dialed_at_its_checked_address_and_sent_as_host(
    server: TestServer, http_host: Any
) -> None:
    lookup = StaticLookup({"api.test": ["127.0.0.1"]})
    host = http_host(allow="127.0.0.0/8", lookup=lookup)
    event = call(host, instance(f"http://api.test:{server.port}"), "echo", {})
    assert event.status == "completed", event
    (received,) = server.received
    assert received.header("Host") == f"api.test:{server.port}"
    assert received.local == ("127.0.0.1", server.port)
    assert lookup.calls == {"api.test": 1}


def test_over_tls_the_name_is_the_sni_and_what_is_verified(
    tls_server: TestServer, ca_file: Any, http_host: Any
) -> None:
    host = http_host(
        allow="127.0.0.0/8", lookup={"api.test": ["127.0.0.1"], "wrong.test": ["127.0.0.1"]}
    )
    event = call(
        host, instance(f"https://api.test:{tls_server.port}", ca_file=str(ca_file)), "echo"
    )
    assert event.status == "completed", event
    (received,) = tls_server.received
    assert received.sni == "api.test"
    assert received.header("Host") == f"api.test:{tls_server.port}"
    # the certificate does not name wrong.test, though the address is the same
    wrong = instance(f"https://wrong.test:{tls_server.port}", ca_file=str(ca_file))
    event = call(host, wrong, "echo")
    assert event.status == "error", event
    assert "CERTIFICATE_VERIFY_FAILED" in str(event.error)
    assert len(tls_server.received) == 1


# --- operator ranges per instance -----------------------------------------------------------


def test_an_instances_allow_networks_works_without_the_host_setting(
    server: TestServer, http_host: Any
) -> None:
    host = http_host(allow=None)
    allowed = instance(server.url, allow_networks=["127.0.0.0/8"])
    assert call(host, allowed, "echo", {}).status == "completed"
    assert len(server.received) == 1


def test_an_instances_allow_networks_does_not_leak_to_another_instance(
    server: TestServer, http_host: Any
) -> None:
    host = http_host(allow=None)
    allowed = instance(server.url, allow_networks=["127.0.0.0/8"])
    plain = instance(server.url)
    narrow = instance(server.url, allow_networks=["10.0.0.0/8"])
    assert call(host, allowed, "echo", {}).status == "completed"
    assert blocked(call(host, plain, "echo", {}))
    assert blocked(call(host, narrow, "echo", {}))
    assert call(host, allowed, "echo", {}).status == "completed"
    assert blocked(call(host, plain, "echo", {}))
    assert len(server.received) == 2


def test_an_invalid_allow_networks_is_a_configuration_error(
    server: TestServer, http_host: Any
) -> None:
    event = call(http_host(allow=None), instance(server.url, allow_networks=["nope"]), "echo", {})
    assert event.status == "error"
    assert event.error_type != "EgressBlocked"
    assert "allow_networks" in str(event.error)
    assert server.received == []


# --- DNS rebinding --------------------------------------------------------------------------


@pytest.fixture
def rebinding() -> Iterator[tuple[TestServer, socket.socket]]:
    """A server on 127.0.0.2 and, on 127.0.0.1 at the same port, a listener that must never
    get a connection."""
    for _ in range(20):
        allowed = TestServer("127.0.0.2")
        forbidden = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            forbidden.bind(("127.0.0.1", allowed.port))
        except OSError:
            forbidden.close()
            allowed.close()
            continue
        forbidden.listen(8)
        yield allowed, forbidden
        forbidden.close()
        closing(allowed)
        return
    raise RuntimeError("no port free on both 127.0.0.2 and 127.0.0.1")


def test_dns_rebinding_through_the_tool_never_reaches_the_forbidden_address(
    rebinding: tuple[TestServer, socket.socket],
    make_host: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    allowed, forbidden = rebinding
    lookup = StaticLookup({"rebind.test": [["127.0.0.2"], ["127.0.0.1"]]})

    class RebindingHttpTool(HttpTool):
        name = "http"
        resolver = Resolver(lookup, ttl=0)
        network = None

    # The server closes every connection: each call dials (and resolves) anew.
    allowed.route("GET", "/echo", Reply(headers={"Connection": "close"}, body={"ok": True}))
    monkeypatch.setenv("EXPEDITER_EGRESS_ALLOW", "127.0.0.2/32")
    host = make_host(RebindingHttpTool, record_calls=True)
    tool_instance = instance(f"http://rebind.test:{allowed.port}", timeout=3)
    events = [call(host, tool_instance, "echo", {}) for _ in range(4)]
    assert [event.status for event in events] == ["completed", "error", "error", "error"]
    assert all(blocked(event) for event in events[1:]), events
    assert "'rebind.test' -> 127.0.0.1 is in 127.0.0.0/8" in ledger_error(host, events[1])
    assert len(allowed.received) == 1
    assert lookup.calls["rebind.test"] == 4
    readable, _, _ = select.select([forbidden], [], [], 0)
    assert readable == [], "a connection reached 127.0.0.1"
