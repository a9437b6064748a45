"""The ``http`` tool through a real host against real local servers: URLs and parameters as the
server reads them, the result envelope, errors, caps, timeouts, keep-alive, TLS, and hostile
model input (credentials and redirects: ``test_credentials.py``; bodies:
``test_bodies_e2e.py``)."""

from __future__ import annotations

import base64
import json
import socket
import time
from typing import Any
from urllib.parse import parse_qs, unquote

import pytest
from conftest import call, instance, model_response
from raw_server import RawServer
from servers import Received, Reply, TestServer

ALL_BYTES = bytes(range(256))


def get(path: str, *parameters: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A GET action named ``get``."""
    return {"name": "get", "method": "GET", "path": path, "parameters": list(parameters), **fields}


def param(name: str, where: str = "query", **fields: Any) -> dict[str, Any]:
    return {"name": name, "in": where, **fields}


def only(server: TestServer) -> Received:
    """The one request the server received."""
    assert len(server.received) == 1, server.received
    return server.received[0]


# --- the path ------------------------------------------------------------------------------

HOSTILE_SEGMENTS = [
    ("a/b", "a%2Fb"),
    ("what?x=1", "what%3Fx%3D1"),
    ("frag#ment", "frag%23ment"),
    ("user@host", "user%40host"),
    ("../../admin", "..%2F..%2Fadmin"),
    ("a..b", "a..b"),
    ("..x", "..x"),
    ("%2F", "%252F"),
    ("a b", "a%20b"),
    ("naïve ✓ 日本", "na%C3%AFve%20%E2%9C%93%20%E6%97%A5%E6%9C%AC"),
    ("semi;colon,comma", "semi%3Bcolon%2Ccomma"),
    ("nul\x00cr\r\nlf", "nul%00cr%0D%0Alf"),
    (" HTTP/1.1\r\nHost: evil", "%20HTTP%2F1.1%0D%0AHost%3A%20evil"),
]


@pytest.mark.parametrize(("value", "encoded"), HOSTILE_SEGMENTS)
def test_a_path_value_stays_inside_its_segment(server, http_host, value, encoded):
    action = get("/pets/{id}/photos", param("id", "path", schema={"type": "string"}))
    event = call(http_host(), instance(server.url, action), "get", {"id": value})
    assert event.status == "completed", event
    received = only(server)
    assert received.target == f"/pets/{encoded}/photos"
    segments = received.path.split("/")
    assert len(segments) == 4
    assert unquote(segments[2]) == value


@pytest.mark.parametrize("value", [".", "..", "...", ["ok", ".."]])
@pytest.mark.parametrize("style", ["simple", "label", "matrix"])
def test_a_path_value_made_only_of_dots_is_refused_and_nothing_is_sent(
    server, http_host, value, style
):
    # WHATWG parsers and nginx read %2E%2E as "..": /v1/users/../profile is /v1/profile.
    schema = {"type": "array", "items": {"type": "string"}} if isinstance(value, list) else {}
    action = get("/v1/users/{id}/profile", param("id", "path", style=style, schema=schema))
    event = call(http_host(), instance(server.url, action), "get", {"id": value})
    assert event.status == "error", event
    assert event.error_type == "ArgumentError", event
    assert "'id'" in event.error
    assert "made only of dots" in event.error
    assert not server.received


def test_the_base_urls_path_prefix_and_query_are_kept(server, http_host):
    action = get(
        "/pets/{id}",
        param("id", "path", schema={"type": "integer"}),
        param("q", schema={"type": "string"}),
    )
    tool_instance = instance(server.url + "/api/v2/?tenant=acme&x=%2F", action)
    event = call(http_host(), tool_instance, "get", {"id": 7, "q": "a b&c=\r\n#"})
    assert event.status == "completed", event
    assert only(server).target == "/api/v2/pets/7?tenant=acme&x=%2F&q=a%20b%26c%3D%0D%0A%23"


def test_query_arrays_objects_booleans_and_none(server, http_host):
    action = get(
        "/search",
        param("tags", schema={"type": "array", "items": {"type": "string"}}),
        param("ids", schema={"type": "array"}, explode=False),
        param("pipes", schema={"type": "array"}, style="pipeDelimited", explode=False),
        param("spaces", schema={"type": "array"}, style="spaceDelimited", explode=False),
        param("filter", schema={"type": "object"}, style="deepObject", explode=True),
        param("point", schema={"type": "object"}, explode=True),
        param("flat", schema={"type": "object"}, explode=False),
        param("yes", schema={"type": "boolean"}),
        param("no", schema={"type": "boolean"}),
        param("gone", schema={"type": ["string", "null"]}),
        param("ratio", schema={"type": "number"}),
    )
    arguments = {
        "tags": ["a", "b c", "ü"],
        "ids": [1, 2],
        "pipes": ["x", "y"],
        "spaces": ["x", "y"],
        "filter": {"kind": "dog", "age": {"min": 2}},
        "point": {"lat": 1.5, "lon": -2},
        "flat": {"k": "v", "n": 1},
        "yes": True,
        "no": False,
        "gone": None,
        "ratio": 0.25,
    }
    event = call(http_host(), instance(server.url, action), "get", arguments)
    assert event.status == "completed", event
    query = only(server).query
    assert query == (
        "tags=a&tags=b%20c&tags=%C3%BC&ids=1,2&pipes=x%7Cy&spaces=x%20y"
        "&filter%5Bkind%5D=dog&filter%5Bage%5D%5Bmin%5D=2&lat=1.5&lon=-2&flat=k,v,n,1"
        "&yes=true&no=false&ratio=0.25"
    )
    assert "gone" not in query
    parsed = parse_qs(query)
    assert parsed["tags"] == ["a", "b c", "ü"]
    assert parsed["filter[age][min]"] == ["2"]


def test_header_and_cookie_parameters_reach_the_server(server, http_host):
    action = get(
        "/h",
        param("X-Trace", "header", schema={"type": "string"}),
        param("X-List", "header", schema={"type": "array"}),
        param("theme", "cookie", schema={"type": "string"}),
        param("Accept", "header", schema={"type": "string"}),
    )
    arguments = {"X-Trace": "abc 123", "X-List": [1, 2], "theme": "dark; x=1", "Accept": "x/y"}
    event = call(http_host(), instance(server.url, action), "get", arguments)
    assert event.status == "completed", event
    received = only(server)
    assert received.header("X-Trace") == "abc 123"
    assert received.header("X-List") == "1,2"
    assert received.header("Cookie") == "theme=dark%3B%20x%3D1"
    assert received.header("Accept") == "*/*"  # OpenAPI: an Accept parameter is ignored


# --- results -------------------------------------------------------------------------------


def test_the_envelope_has_status_allowlisted_headers_and_parsed_json(server, http_host):
    server.route(
        "GET",
        "/pets",
        Reply(
            headers={
                "Content-Type": "application/json; charset=utf-8",
                "Set-Cookie": "session=abc123; HttpOnly",
                "ETag": '"v1"',
                "X-Request-Id": "req-1",
                "X-RateLimit-Remaining": "9",
                "X-Internal-Debug": "leaky",
                "Server-Timing": "db;dur=53",
            },
            body=json.dumps([{"id": 1, "name": "Rex"}]).encode(),
        ),
    )
    event = call(http_host(), instance(server.url, get("/pets")), "get", {})
    assert event.status == "completed", event
    assert event.error is None
    result = event.result
    assert set(result) == {"status_code", "headers", "body"}
    assert result["status_code"] == 200
    assert result["body"] == [{"id": 1, "name": "Rex"}]
    assert result["headers"] == {
        "content-type": "application/json; charset=utf-8",
        "content-length": str(len(json.dumps([{"id": 1, "name": "Rex"}]))),
        "etag": '"v1"',
        "x-request-id": "req-1",
        "x-ratelimit-remaining": "9",
    }
    assert "abc123" not in json.dumps(result)


@pytest.mark.parametrize(
    ("content_type", "data", "body"),
    [
        ("text/plain; charset=utf-8", "héllo ✓".encode(), "héllo ✓"),
        ("text/html; charset=latin-1", "café".encode("latin-1"), "café"),
        ("application/xml", b"<a><b>1</b></a>", "<a><b>1</b></a>"),
        ("application/problem+json", b'{"title": "x"}', {"title": "x"}),
        ("application/json", b"not json", "not json"),
        ("", b"plain bytes", "plain bytes"),
    ],
)
def test_text_xml_and_json_bodies_come_back_as_text_or_data(
    server, http_host, content_type, data, body
):
    headers = {"Content-Type": content_type} if content_type else {}
    server.route("GET", "/r", Reply(headers=headers, body=data))
    event = call(http_host(), instance(server.url, get("/r")), "get", {})
    assert event.status == "completed", event
    assert event.result["body"] == body
    assert "body_encoding" not in event.result


@pytest.mark.parametrize("content_type", ["image/png", "application/octet-stream", ""])
def test_a_binary_body_comes_back_as_base64(server, http_host, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    server.route("GET", "/bin", Reply(headers=headers, body=ALL_BYTES))
    event = call(http_host(), instance(server.url, get("/bin")), "get", {})
    assert event.status == "completed", event
    assert event.result["body_encoding"] == "base64"
    assert base64.b64decode(event.result["body"]) == ALL_BYTES


def test_an_empty_body_is_none(server, http_host):
    server.route("*", "/empty", Reply(status=204))
    event = call(http_host(), instance(server.url, get("/empty")), "get", {})
    assert event.status == "completed", event
    assert event.result["status_code"] == 204
    assert event.result["body"] is None


@pytest.mark.parametrize(
    ("status", "error"), [(404, "HTTP 404 Not Found"), (500, "HTTP 500 Internal Server Error")]
)
def test_an_http_error_status_is_an_error_event_carrying_the_envelope(
    server, http_host, status, error
):
    document = {"message": "no such pet", "code": status}
    server.route("GET", "/fail", Reply(status=status, body=document))
    host = http_host(record_calls=True)
    event = call(host, instance(server.url, get("/fail")), "get", {})
    assert event.status == "error"
    # The API's explanation follows the status, for the model to act on.
    assert event.error == f'{error}: {{"message": "no such pet", "code": {status}}}'
    assert event.error_type == "ToolError"
    assert event.result == {
        "status_code": status,
        "headers": {
            "content-type": "application/json",
            "content-length": str(len(json.dumps(document))),
        },
        "body": document,
    }
    row = host.ledger.get(event.key)
    assert row is not None
    assert (row.status, row.error, row.result) == ("failed", event.error, event.result)


def test_the_model_reads_the_apis_explanation_of_an_http_error(server, http_host):
    explanation = {"detail": "name must be at most 20 characters"}
    server.route("GET", "/fail", Reply(status=422, body=explanation))
    toolset = http_host().toolset(instances=[instance(server.url, get("/fail"))])
    name = toolset.name_map.name_for("http", "get")
    assert name is not None
    calls = toolset.parse_calls("openai", model_response(name))
    (message,) = toolset.result_messages("openai", calls, toolset.run(calls))
    assert "HTTP 422" in message["content"]
    assert "at most 20 characters" in message["content"]


def test_a_chunked_response_is_read_whole(server, http_host):
    document = {"items": [{"n": n, "text": "x" * 50} for n in range(200)]}
    server.route("GET", "/chunked", Reply(body=document, chunked=97))
    event = call(http_host(), instance(server.url, get("/chunked")), "get", {})
    assert event.status == "completed", event
    assert event.result["body"] == document
    assert "content-length" not in event.result["headers"]


@pytest.mark.parametrize("chunked", [None, 100])
def test_a_response_over_max_response_bytes_is_an_error(server, http_host, chunked):
    server.route("GET", "/big", Reply(body=b"x" * 5000, chunked=chunked))
    server.route("GET", "/small", Reply(body=b"y" * 1000, chunked=chunked))
    actions = [get("/big"), {**get("/small"), "name": "small"}]
    tool_instance = instance(server.url, *actions, max_response_bytes=1000)
    host = http_host()
    event = call(host, tool_instance, "get", {})
    assert event.status == "error"
    assert event.error == "the response is larger than max_response_bytes (1000 bytes)"
    assert event.result["truncated"] is True
    assert event.result["body"] is None
    assert event.result["status_code"] == 200
    exactly = call(host, tool_instance, "small", {})
    assert exactly.status == "completed", exactly
    assert exactly.result["body"] == "y" * 1000


def test_a_slow_server_past_the_timeout_is_an_error_quickly(server, http_host):
    server.route("GET", "/slow", Reply(body={"late": True}, delay=3.0))
    tool_instance = instance(server.url, get("/slow"), timeout=0.3)
    started = time.monotonic()
    event = call(http_host(), tool_instance, "get", {})
    elapsed = time.monotonic() - started
    assert event.status == "error"
    assert event.error == "the request did not finish within 0.3 s"
    assert elapsed < 2.0


def test_a_body_trickling_past_the_timeout_is_an_error(http_host):
    def trickle(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n")
        connection.sendall(b"Content-Length: 100\r\n\r\n")
        for _ in range(100):  # every read is quick; the whole body takes 5 s
            connection.sendall(b"z")
            time.sleep(0.05)

    with RawServer(trickle) as raw:
        started = time.monotonic()
        event = call(http_host(), instance(raw.url, timeout=0.5), "echo", {})
        elapsed = time.monotonic() - started
    assert event.status == "error"
    assert event.error == "the request did not finish within 0.5 s"
    assert elapsed < 2.0


def test_a_refused_connection_is_an_error_event(http_host):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    event = call(http_host(), instance(f"http://127.0.0.1:{port}"), "echo", {})
    assert event.status == "error"
    assert event.error_type == "ToolError"
    assert event.error.startswith(f"the request to http://127.0.0.1:{port} failed: ConnectError")


def test_two_calls_reuse_one_keep_alive_connection(server, http_host):
    host = http_host()
    tool_instance = instance(server.url)
    first = call(host, tool_instance, "echo", {})
    second = call(host, tool_instance, "echo", {})
    assert first.status == second.status == "completed"
    assert len(server.received) == 2
    assert server.connections == 1


# --- TLS -----------------------------------------------------------------------------------


def test_tls_with_the_instances_ca_file(tls_server, ca_file, http_host):
    host = http_host(lookup={"api.test": ["127.0.0.1"]})
    tool_instance = instance(f"https://api.test:{tls_server.port}", ca_file=str(ca_file))
    event = call(host, tool_instance, "echo", {})
    assert event.status == "completed", event
    received = only(tls_server)
    assert received.sni == "api.test"
    assert received.header("Host") == f"api.test:{tls_server.port}"


def test_tls_without_the_ca_file_fails_the_certificate_check(tls_server, http_host):
    event = call(http_host(), instance(tls_server.url), "echo", {})
    assert event.status == "error"
    assert "CERTIFICATE_VERIFY_FAILED" in event.error
    assert not tls_server.received


# --- hostile model input -------------------------------------------------------------------

HOSTILE_ACTION = {
    "name": "hostile",
    "method": "POST",
    "path": "/items/{id}",
    "parameters": [
        param("id", "path", schema={"type": "string"}),
        param("count", schema={"type": "integer"}),
        param("q", schema={"type": "string"}),
        param("X-Note", "header", schema={"type": "string"}),
        param("X-Any", "header"),
    ],
    "body": {"content_type": "application/json", "schema": {"type": "object"}},
}


def hostile(server: TestServer, http_host: Any, arguments: dict[str, Any]) -> Any:
    return call(http_host(), instance(server.url, HOSTILE_ACTION), "hostile", arguments)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"id": "1", "X-Note": "a\x00b"}, "X-Note"),
        ({"id": "1", "X-Note": "a\r\nX-Injected: 1"}, "X-Note"),
        ({"id": "1", "X-Note": "line\nbreak"}, "X-Note"),
        ({"id": "1", "X-Note": "naïve ✓"}, "X-Note"),
        ({"id": "1", "X-Any": "a\r\n\r\nGET / HTTP/1.1"}, "X-Any"),
        ({"id": ""}, "id"),
        ({"count": 1}, "id"),
        ({"id": "1", "q": "\ud800"}, "q"),
        ({"id": "1", "body": {"text": "\udfff"}}, "body"),
    ],
)
def test_bad_arguments_are_readable_error_events_and_nothing_is_sent(
    server, http_host, arguments, message
):
    event = hostile(server, http_host, arguments)
    assert event.status == "error", event
    assert event.error_type == "ArgumentError", event
    assert message in event.error
    assert event.error.isprintable()
    assert len(event.error) < 2000
    assert not server.received


@pytest.mark.parametrize(
    "arguments",
    [
        {"id": "1", "count": "many"},
        {"id": {"nested": "object"}},
        {"id": ["a", "b"]},
        {"id": "1", "body": "not an object"},
    ],
    ids=["string-for-integer", "object-for-string-path", "array-for-string-path", "string-body"],
)
def test_values_of_the_wrong_type_are_refused(server, http_host, arguments):
    event = hostile(server, http_host, arguments)
    assert event.status == "error", event
    assert event.error_type == "ArgumentError"
    assert not server.received


def test_unicode_everywhere_arrives_intact(server, http_host):
    text = "日本語 ✓ émoji \U0001f600 ∑"
    arguments = {"id": text, "q": text, "X-Note": "ascii only", "body": {text: [text]}}
    event = hostile(server, http_host, arguments)
    assert event.status == "completed", event
    received = only(server)
    assert unquote(received.path.split("/")[2]) == text
    assert parse_qs(received.query)["q"] == [text]
    assert json.loads(received.body.decode("utf-8")) == {text: [text]}
    assert event.result["body"]["path"] == received.path


def test_a_huge_body_is_sent(server, http_host):
    server.route("POST", "/items/1", Reply(body={"ok": True}))
    event = hostile(server, http_host, {"id": "1", "body": {"blob": "x" * 2_000_000}})
    assert event.status == "completed", event
    assert len(only(server).body) > 2_000_000


def test_a_query_past_the_url_limit_is_a_readable_error(server, http_host, caplog):
    event = hostile(server, http_host, {"id": "1", "q": "x" * 200_000})
    assert event.status == "error", event
    assert event.error_type == "ArgumentError"
    assert "too long" in event.error
    assert not [r for r in caplog.records if r.exc_info]
    assert not server.received


def test_undeclared_arguments_are_refused(server, http_host):
    event = hostile(server, http_host, {"id": "1", "extra": 1})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert not server.received


def test_fixed_values_win_over_the_models(server, http_host):
    action = get(
        "/v/{version}/echo",
        param("version", "path", schema={"type": "string"}),
        param("q", schema={"type": "string"}),
        fixed={"version": "2"},
    )
    event = call(http_host(), instance(server.url, action), "get", {"q": "x"})
    assert event.status == "completed", event
    assert only(server).target == "/v/2/echo?q=x"


def test_max_response_bytes_has_a_ceiling_whatever_the_configuration_says() -> None:
    from expediter_http.tool import MAX_RESPONSE_BYTES, HttpTool

    tool = HttpTool({"base_url": "http://127.0.0.1", "actions": [], "max_response_bytes": 10**12})
    assert tool.limits.max_response_bytes == MAX_RESPONSE_BYTES


def _gzip(data: bytes, layers: int = 1) -> bytes:
    import gzip

    for _ in range(layers):
        data = gzip.compress(data, compresslevel=1)
    return data


def test_a_gzip_body_is_read_and_its_unpacked_size_is_capped(server, http_host):
    document = {"pets": ["rex"] * 20}
    server.route(
        "GET",
        "/small",
        Reply(
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
            body=_gzip(json.dumps(document).encode()),
        ),
    )
    # 20 MB of zeros: about 90 KB on the wire.
    server.route(
        "GET",
        "/bomb",
        Reply(headers={"Content-Encoding": "gzip"}, body=_gzip(b"\0" * 20_000_000)),
    )
    host = http_host()
    small = call(host, instance(server.url, get("/small")), "get", {})
    assert small.status == "completed", small
    assert small.result["body"] == document
    bomb = call(host, instance(server.url, get("/bomb"), max_response_bytes=1000), "get", {})
    assert bomb.status == "error"
    assert bomb.error == "the response is larger than max_response_bytes (1000 bytes)"
    assert bomb.result["truncated"] is True


def test_stacked_or_unknown_content_codings_are_refused(server, http_host):
    server.route(
        "GET",
        "/twice",
        Reply(headers={"Content-Encoding": "gzip, gzip"}, body=_gzip(b"x" * 100, layers=2)),
    )
    server.route("GET", "/br", Reply(headers={"Content-Encoding": "br"}, body=b"\x0b\x02\x80"))
    host = http_host()
    twice = call(host, instance(server.url, get("/twice")), "get", {})
    assert twice.status == "error"
    assert (
        twice.error == "the response body cannot be read: more than one content coding (gzip, gzip)"
    )
    unknown = call(host, instance(server.url, get("/br")), "get", {})
    assert unknown.error == "the response body cannot be read: content coding 'br'"
    assert server.received[0].header("Accept-Encoding") == "gzip, deflate"
