"""Credentials of the ``http`` tool against a real local server: each security scheme and the
configured headers as the server reads them, an action's ``security`` list, no secret in
events, the ledger or logs (a server that echoes them back), and what redirects and cookies
do with them."""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading
from typing import Any
from urllib.parse import parse_qs

from conftest import call, instance
from raw_server import RawServer
from servers import Received, Reply, TestServer


def get(path: str, **fields: Any) -> dict[str, Any]:
    """A GET action named ``get``."""
    return {"name": "get", "method": "GET", "path": path, **fields}


def only(server: TestServer) -> Received:
    """The one request the server received."""
    assert len(server.received) == 1, server.received
    return server.received[0]


# --- schemes and headers -------------------------------------------------------------------

SECURITY = [
    {"name": "key_header", "type": "api_key", "in": "header", "parameter": "X-Api-Key"},
    {"name": "key_query", "type": "api_key", "in": "query", "parameter": "api_key"},
    {"name": "key_cookie", "type": "api_key", "in": "cookie", "parameter": "sid"},
    {"name": "token", "type": "bearer"},
    {"name": "login", "type": "basic"},
]
SECRETS = {
    "key_header": "hdr-SECRET-1111",
    "key_query": "qry-SECRET-2222",
    "key_cookie": "ck-SECRET-3333",
    "token": "tok-SECRET-4444",
    "login": "alice:pw-SECRET-5555",
}
SECRET_HEADER = "static-SECRET-6666"


def credentialed(base_url: str, *actions: dict[str, Any], **config: Any) -> Any:
    """An instance with a plain header, a secret header and every scheme's credential."""
    return instance(
        base_url,
        *actions,
        headers={"X-Client": "expediter-tests"},
        secret_headers={"X-Static-Token": SECRET_HEADER},
        security=SECURITY,
        credentials=SECRETS,
        **config,
    )


def scoped(name: str, *schemes: str) -> dict[str, Any]:
    return {"name": name, "method": "GET", "path": "/echo", "security": list(schemes)}


def test_each_security_scheme_reaches_the_server(server, http_host):
    actions = [
        scoped("header_key", "key_header"),
        scoped("query_key", "key_query"),
        scoped("cookie_key", "key_cookie"),
        scoped("bearer", "token"),
        scoped("basic", "login"),
        scoped("none"),
    ]
    host = http_host()
    tool_instance = credentialed(server.url, *actions)
    for action in actions:
        event = call(host, tool_instance, action["name"], {})
        assert event.status == "completed", event
    header_key, query_key, cookie_key, bearer, basic, none = server.received
    for received in server.received:
        assert received.header("X-Static-Token") == SECRET_HEADER
        assert received.header("X-Client") == "expediter-tests"
    assert header_key.header("X-Api-Key") == SECRETS["key_header"]
    assert header_key.header("Authorization") is None
    assert query_key.target == f"/echo?api_key={SECRETS['key_query']}"
    assert cookie_key.header("Cookie") == f"sid={SECRETS['key_cookie']}"
    assert bearer.header("Authorization") == f"Bearer {SECRETS['token']}"
    expected = base64.b64encode(SECRETS["login"].encode()).decode()
    assert basic.header("Authorization") == f"Basic {expected}"
    for scheme in ("X-Api-Key", "Authorization", "Cookie"):
        assert none.header(scheme) is None
    assert none.target == "/echo"


def test_an_action_without_a_security_list_gets_every_configured_api_key(server, http_host):
    security = [s for s in SECURITY if s["type"] == "api_key"]
    tool_instance = instance(server.url, security=security, credentials=SECRETS)
    event = call(http_host(), tool_instance, "echo", {})
    assert event.status == "completed", event
    received = only(server)
    assert received.header("X-Api-Key") == SECRETS["key_header"]
    assert received.target == f"/echo?api_key={SECRETS['key_query']}"
    assert received.header("Cookie") == f"sid={SECRETS['key_cookie']}"


def test_a_cookie_key_joins_the_actions_cookie_parameters(server, http_host):
    action = {
        **scoped("get", "key_cookie"),
        "parameters": [{"name": "theme", "in": "cookie"}, {"name": "q", "in": "query"}],
    }
    tool_instance = credentialed(server.url, action)
    event = call(http_host(), tool_instance, "get", {"theme": "dark", "q": "1"})
    assert event.status == "completed", event
    assert only(server).header("Cookie") == f"theme=dark; sid={SECRETS['key_cookie']}"


def test_the_model_cannot_replace_a_configured_or_credential_header(server, http_host):
    parameters = [
        {"name": name, "in": "header", "schema": {"type": "string"}}
        for name in ("X-Api-Key", "X-Static-Token", "X-Client")
    ]
    action = {**scoped("get", "key_header"), "parameters": parameters}
    arguments = {"X-Api-Key": "model", "X-Static-Token": "model", "X-Client": "model"}
    event = call(http_host(), credentialed(server.url, action), "get", arguments)
    assert event.status == "completed", event
    received = only(server)
    assert received.header("X-Api-Key") == SECRETS["key_header"]
    assert received.header("X-Static-Token") == SECRET_HEADER
    assert received.header("X-Client") == "expediter-tests"


def test_basic_credentials_as_an_object(server, http_host):
    tool_instance = instance(
        server.url,
        security=[{"name": "login", "type": "basic"}],
        credentials={"login": {"username": "bob", "password": "pw-SECRET-7777"}},
    )
    event = call(http_host(), tool_instance, "echo", {})
    assert event.status == "completed", event
    token = base64.b64encode(b"bob:pw-SECRET-7777").decode()
    assert only(server).header("Authorization") == f"Basic {token}"


def test_one_authorization_header_when_several_schemes_could_apply(http_host):
    def ok(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")

    with RawServer(ok) as raw:
        tool_instance = instance(
            raw.url,
            secret_headers={"Authorization": "Configured secret"},
            security=[s for s in SECURITY if s["name"] in ("token", "login")],
            credentials=SECRETS,
        )
        event = call(http_host(), tool_instance, "echo", {})
    assert event.status == "completed", event
    (head,) = raw.heads
    lines = head.decode("latin-1").lower().split("\r\n")
    assert sum(line.startswith("authorization:") for line in lines) == 1, head


# --- no secret shown -----------------------------------------------------------------------


def secret_texts() -> list[str]:
    """Every secret value, and the forms of them a server could echo back."""
    basic = base64.b64encode(SECRETS["login"].encode()).decode()
    return [*SECRETS.values(), SECRET_HEADER, "pw-SECRET-5555", basic]


def assert_no_secret(text: str) -> None:
    found = [secret for secret in secret_texts() if secret in text]
    assert not found, f"secrets shown: {found}"


CREDENTIALED = {
    "header_key": "key_header",
    "query_key": "key_query",
    "cookie_key": "key_cookie",
    "bearer": "token",
}


def echoed(
    server: TestServer, http_host: Any, caplog: Any, names: tuple[str, ...] = tuple(CREDENTIALED)
) -> tuple[list[Any], list[Any]]:
    """Call credentialed actions against the echo route with a recording host, logging at
    DEBUG; the events and the ledger rows."""
    caplog.set_level(logging.DEBUG)
    actions = [scoped(name, CREDENTIALED[name]) for name in names]
    host = http_host(record_calls=True)
    tool_instance = credentialed(server.url, *actions)
    events = [call(host, tool_instance, name, {}) for name in names]
    rows = [host.ledger.get(event.key) for event in events]
    return events, rows


def test_echoed_credentials_are_masked_in_events_and_the_ledger(server, http_host, caplog):
    events, rows = echoed(server, http_host, caplog)
    for event in events:
        assert event.status == "completed", event
        headers = event.result["body"]["headers"]
        assert headers["X-Static-Token"] == "***"
        text = json.dumps([event.result, event.content, event.error])
        assert_no_secret(text)
    header_key, query_key, cookie_key, bearer = (e.result["body"] for e in events)
    assert header_key["headers"]["X-Api-Key"] == "***"
    assert query_key["target"] == "/echo?api_key=***"
    assert cookie_key["headers"]["Cookie"] == "sid=***"
    assert bearer["headers"]["Authorization"] == "Bearer ***"
    for row in rows:
        assert row is not None
        assert row.status == "executed"
        assert_no_secret(json.dumps(row.to_dict()))


def test_header_cookie_and_bearer_secrets_never_reach_the_logs(server, http_host, caplog):
    echoed(server, http_host, caplog, ("header_key", "cookie_key", "bearer"))
    assert caplog.records
    assert_no_secret(caplog.text)


def test_a_query_api_key_never_reaches_the_logs(server, http_host, caplog):
    events, _ = echoed(server, http_host, caplog, ("query_key",))
    assert events[0].status == "completed"
    assert_no_secret(caplog.text)


def test_an_echoed_basic_authorization_is_masked(server, http_host):
    tool_instance = credentialed(server.url, scoped("basic", "login"))
    event = call(http_host(), tool_instance, "basic", {})
    assert event.status == "completed", event
    assert event.result["body"]["headers"]["Authorization"] == "Basic ***"
    assert_no_secret(json.dumps(event.result))


def test_encoded_forms_of_query_and_cookie_keys_are_masked(server, http_host):
    secrets = {"key_query": "q/SECRET 8888?&=", "key_cookie": "c;SECRET 9999,"}
    actions = [scoped("query_key", "key_query"), scoped("cookie_key", "key_cookie")]
    tool_instance = instance(server.url, *actions, security=SECURITY, credentials=secrets)
    host = http_host()
    query = call(host, tool_instance, "query_key", {})
    cookie = call(host, tool_instance, "cookie_key", {})
    sent_query, sent_cookie = server.received
    assert parse_qs(sent_query.query) == {"api_key": [secrets["key_query"]]}
    assert sent_cookie.header("Cookie") == "sid=c%3BSECRET%209999%2C"
    assert query.result["body"]["target"] == "/echo?api_key=***"
    assert query.result["body"]["query"] == {"api_key": ["***"]}
    assert cookie.result["body"]["headers"]["Cookie"] == "sid=***"


def test_a_secret_in_an_error_result_is_masked(server, http_host):
    server.route("GET", "/echo", lambda r: Reply(status=401, body={"got": r.header("X-Api-Key")}))
    tool_instance = credentialed(server.url, scoped("header_key", "key_header"))
    event = call(http_host(), tool_instance, "header_key", {})
    assert event.status == "error"
    assert event.error == 'HTTP 401 Unauthorized: {"got": "***"}'
    assert event.result["body"] == {"got": "***"}


# --- redirects and cookies ---------------------------------------------------------------


def test_redirects_are_followed_when_configured(server, http_host):
    server.route("GET", "/old", Reply(status=302, headers={"Location": "/echo?moved=1"}))
    tool_instance = instance(server.url, get("/old"), follow_redirects=True)
    event = call(http_host(), tool_instance, "get", {})
    assert event.status == "completed", event
    assert event.result["body"]["target"] == "/echo?moved=1"
    assert [r.path for r in server.received] == ["/old", "/echo"]


def test_redirects_are_not_followed_by_default(server, http_host):
    server.route("GET", "/old", Reply(status=302, headers={"Location": "/new"}))
    event = call(http_host(), instance(server.url, get("/old")), "get", {})
    assert event.status == "completed", event
    assert event.result["status_code"] == 302
    assert event.result["headers"]["location"] == "/new"
    assert [r.path for r in server.received] == ["/old"]


def test_a_cross_origin_redirect_drops_the_secret_headers(server, http_host):
    other = TestServer("127.0.0.1")  # another port: another origin
    try:
        server.route("GET", "/old", Reply(status=307, headers={"Location": other.url + "/new"}))
        action = {**get("/old"), "security": ["key_header", "key_cookie", "token"]}
        tool_instance = credentialed(server.url, action, follow_redirects=True)
        event = call(http_host(), tool_instance, "get", {})
        assert event.status == "completed", event
        first = only(server)
        assert first.header("X-Api-Key") == SECRETS["key_header"]
        assert first.header("Authorization") == f"Bearer {SECRETS['token']}"
        (moved,) = other.received
        assert moved.path == "/new"
        assert moved.header("X-Client") == "expediter-tests"
        for name in ("X-Api-Key", "X-Static-Token", "Authorization", "Cookie"):
            assert moved.header(name) is None, name
    finally:
        threading.Thread(target=other.close, daemon=True).start()


def test_a_same_origin_redirect_keeps_the_credentials(server, http_host):
    server.route("GET", "/old", Reply(status=308, headers={"Location": "/echo"}))
    action = {**get("/old"), "security": ["token"]}
    tool_instance = credentialed(server.url, action, follow_redirects=True)
    event = call(http_host(), tool_instance, "get", {})
    assert event.status == "completed", event
    assert [r.path for r in server.received] == ["/old", "/echo"]
    assert server.received[1].header("Authorization") == f"Bearer {SECRETS['token']}"


def test_a_303_after_a_post_becomes_a_get_without_the_body(server, http_host):
    server.route("POST", "/submit", Reply(status=303, headers={"Location": "/echo"}))
    action = {
        "name": "submit",
        "method": "POST",
        "path": "/submit",
        "body": {"content_type": "application/json", "schema": {"type": "object"}},
    }
    tool_instance = instance(server.url, action, follow_redirects=True)
    event = call(http_host(), tool_instance, "submit", {"body": {"a": 1}})
    assert event.status == "completed", event
    post, then = server.received
    assert (post.method, post.body) == ("POST", b'{"a":1}')
    assert (then.method, then.body) == ("GET", b"")
    assert then.header("Content-Type") is None


def test_a_redirect_loop_stops_at_max_redirects(server, http_host):
    server.route("GET", "/loop", Reply(status=302, headers={"Location": "/loop"}))
    tool_instance = instance(server.url, get("/loop"), follow_redirects=True, max_redirects=3)
    event = call(http_host(), tool_instance, "get", {})
    assert event.status == "error"
    assert event.error == "more than 3 redirects; stopped"
    assert len(server.received) == 4


def test_a_redirect_to_a_range_the_instance_may_not_reach_is_blocked(server, http_host):
    elsewhere = TestServer("127.0.0.2")
    try:
        server.route("GET", "/old", Reply(status=302, headers={"Location": elsewhere.url + "/x"}))
        tool_instance = instance(
            server.url, get("/old"), follow_redirects=True, allow_networks=["127.0.0.1/32"]
        )
        event = call(http_host(allow=None, record_calls=True), tool_instance, "get", {})
        assert event.status == "error"
        assert event.error_type == "EgressBlocked"
        assert event.error == "blocked by egress policy"
        assert len(server.received) == 1
        assert not elsewhere.received
    finally:
        threading.Thread(target=elsewhere.close, daemon=True).start()


def test_cookies_a_server_sets_are_never_sent_back(server, http_host):
    server.route(
        "GET", "/login", Reply(headers={"Set-Cookie": "session=s3ss10n; Path=/"}, body=b"ok")
    )
    host = http_host()
    tool_instance = instance(server.url, get("/login"), {"name": "echo", "path": "/echo"})
    first = call(host, tool_instance, "get", {})
    second = call(host, tool_instance, "echo", {})
    assert first.status == second.status == "completed"
    assert "set-cookie" not in first.result["headers"]
    assert server.received[1].header("Cookie") is None
    assert server.connections == 1


# --- review: secrets in refusals and protocol errors ----------------------------------------


def test_a_header_value_no_request_can_carry_is_refused_without_repeating_it(server, http_host):
    tool_instance = instance(
        server.url, get("/echo"), secret_headers={"X-Api-Key": "sk-live-123456789\n"}
    )
    host = http_host(record_calls=True)
    event = call(host, tool_instance, "get", {})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"  # a ConfigError is one
    assert "X-Api-Key" in event.error
    assert "sk-live" not in event.error
    row = host.ledger.get(event.key)
    assert row is not None
    assert "sk-live" not in json.dumps(row.to_dict())
    assert not server.received


def test_a_refused_redirect_names_only_the_origin_in_the_ledger_and_log(server, http_host, caplog):
    server.route("GET", "/echo", Reply(status=302, headers={"Location": "#a b"}))
    tool_instance = credentialed(
        server.url, scoped("query_key", "key_query"), follow_redirects=True
    )
    host = http_host(record_calls=True)
    with caplog.at_level(logging.INFO):
        event = call(host, tool_instance, "query_key", {})
    assert event.status == "error"
    assert event.error_type == "EgressBlocked"
    row = host.ledger.get(event.key)
    assert row is not None
    assert row.error.startswith("blocked by egress policy: ")
    assert server.url.split("//")[1] in row.error
    for text in (row.error, caplog.text, json.dumps(row.to_dict())):
        assert SECRETS["key_query"] not in text
        assert "qry-SECRET" not in text
