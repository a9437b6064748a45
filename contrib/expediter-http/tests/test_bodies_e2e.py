"""Every request body type through a real host to a real local server, read back on the
server side with real parsers (json, urllib.parse, email's MIME parser, ElementTree)."""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
import re
from email.message import EmailMessage
from typing import Any
from urllib.parse import parse_qsl
from xml.etree import ElementTree

import pytest
from conftest import call, instance
from servers import Received, TestServer

ALL_BYTES = bytes(range(256))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def body_action(content_type: str, schema: dict[str, Any], **body: Any) -> dict[str, Any]:
    """A POST /things action whose body is ``content_type``."""
    return {
        "name": "send",
        "method": "POST",
        "path": "/things",
        "body": {"content_type": content_type, "schema": schema, "required": True, **body},
    }


def send(
    http_host: Any, server: TestServer, action: dict[str, Any], body: Any
) -> tuple[Any, Received | None]:
    """Call the action with ``body``; the final event and what the server received."""
    event = call(http_host(), instance(server.url, action), "send", {"body": body})
    return event, (server.received[0] if server.received else None)


def parse_multipart(received: Received) -> tuple[str, list[EmailMessage]]:
    """The boundary and the parts of a multipart request, as the stdlib's parser reads them."""
    content_type = received.header("Content-Type") or ""
    document = b"Content-Type: " + content_type.encode("ascii") + b"\r\n\r\n" + received.body
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(document)
    assert isinstance(message, EmailMessage)
    assert message.is_multipart()
    assert not message.defects, message.defects
    boundary = message.get_boundary()
    assert boundary
    parts = [part for part in message.iter_parts() if isinstance(part, EmailMessage)]
    for part in parts:
        assert not part.defects, part.defects
    return boundary, parts


def payload(part: EmailMessage) -> bytes:
    data = part.get_payload(decode=True)
    assert isinstance(data, bytes)
    return data


# --- JSON ------------------------------------------------------------------------------------


def test_json_body_reaches_the_server_as_compact_utf8_json(server, http_host):
    value = {"name": "Rex ✓", "tags": ["a", "b"], "age": 3, "vaccinated": True, "owner": None}
    event, received = send(http_host, server, body_action("application/json", {}), value)
    assert event.status == "completed", event
    assert received is not None
    assert received.method == "POST"
    assert received.header("Content-Type") == "application/json"
    assert json.loads(received.body.decode("utf-8")) == value
    assert "✓".encode() in received.body
    assert event.result["body"]["method"] == "POST"


def test_vendor_json_type_keeps_its_content_type(server, http_host):
    action = body_action("application/vnd.api+json", {"type": "object"})
    event, received = send(http_host, server, action, {"data": {"id": "1"}})
    assert event.status == "completed", event
    assert received is not None
    assert received.header("Content-Type") == "application/vnd.api+json"
    assert json.loads(received.body) == {"data": {"id": "1"}}


# --- form-urlencoded -------------------------------------------------------------------------

FORM_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "colors": {"type": "array", "items": {"type": "string"}},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "filter": {"type": "object"},
        "meta": {"type": "object"},
        "point": {"type": "object"},
        "flag": {"type": "boolean"},
    },
}
FORM_ENCODING = {
    "tags": {"style": "form", "explode": True},
    "colors": {"style": "spaceDelimited", "explode": False},
    "ids": {"style": "pipeDelimited", "explode": False},
    "filter": {"style": "deepObject", "explode": True},
    "meta": {"contentType": "application/json"},
    "point": {"style": "form", "explode": False},
}


def test_form_body_follows_the_openapi_encoding_object(server, http_host):
    action = body_action("application/x-www-form-urlencoded", FORM_SCHEMA, encoding=FORM_ENCODING)
    value = {
        "name": "Rex & Co=1 ✓",
        "tags": ["a b", "c"],
        "colors": ["red", "dark green"],
        "ids": [1, 2, 3],
        "filter": {"kind": "dog", "age": {"min": 1}},
        "meta": {"a": [1, 2], "b": "x&y"},
        "point": {"x": 1, "y": 2},
        "flag": False,
    }
    event, received = send(http_host, server, action, value)
    assert event.status == "completed", event
    assert received is not None
    assert received.header("Content-Type") == "application/x-www-form-urlencoded"
    raw = received.body.decode("ascii")
    # Percent-encoded the way query strings are: a space is %20, never '+'.
    assert "+" not in raw
    assert "colors=red%20dark%20green" in raw  # spaceDelimited: ambiguous, as OpenAPI says
    assert "ids=1%7C2%7C3" in raw
    assert "filter%5Bkind%5D=dog" in raw
    pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=True)
    assert pairs == [
        ("name", "Rex & Co=1 ✓"),
        ("tags", "a b"),
        ("tags", "c"),
        ("colors", "red dark green"),
        ("ids", "1|2|3"),
        ("filter[kind]", "dog"),
        ("filter[age][min]", "1"),
        ("meta", '{"a":[1,2],"b":"x&y"}'),
        ("point", "x,1,y,2"),
        ("flag", "false"),
    ]


def test_form_body_without_encoding_sends_objects_as_json_text(server, http_host):
    action = body_action("application/x-www-form-urlencoded", {"type": "object"})
    event, received = send(http_host, server, action, {"list": [1, 2], "obj": {"k": "v"}})
    assert event.status == "completed", event
    assert received is not None
    assert parse_qsl(received.body.decode("ascii")) == [
        ("list", "1"),
        ("list", "2"),
        ("obj", '{"k":"v"}'),
    ]


# --- multipart -------------------------------------------------------------------------------

MULTIPART_SCHEMA = {
    "type": "object",
    "properties": {
        "note": {"type": "string"},
        "meta": {"type": "object"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "file": {"type": "string", "format": "binary"},
    },
}


def test_multipart_body_has_text_json_repeated_and_file_parts(server, http_host):
    action = body_action("multipart/form-data", MULTIPART_SCHEMA)
    value = {
        "note": "héllo\r\nworld",
        "meta": {"a": 1, "nested": {"b": [True, None]}},
        "tags": ["x", "y ✓"],
        "file": b64(ALL_BYTES),
    }
    event, received = send(http_host, server, action, value)
    assert event.status == "completed", event
    assert received is not None
    content_type = received.header("Content-Type") or ""
    match = re.fullmatch(r"multipart/form-data; boundary=([0-9a-f]{32})", content_type)
    assert match, content_type
    boundary = match.group(1)
    assert received.body.startswith(f"--{boundary}\r\n".encode())
    assert received.body.endswith(f"\r\n--{boundary}--\r\n".encode())
    assert received.body.count(f"--{boundary}".encode()) == 6  # 5 parts + the closing one
    assert received.header("Content-Length") == str(len(received.body))

    parsed_boundary, parts = parse_multipart(received)
    assert parsed_boundary == boundary
    names = [part.get_param("name", header="content-disposition") for part in parts]
    assert names == ["note", "meta", "tags", "tags", "file"]

    note, meta, tag1, tag2, file = parts
    assert "content-type" not in {key.lower() for key in note}
    assert payload(note).decode("utf-8") == "héllo\r\nworld"
    assert meta.get_content_type() == "application/json"
    assert json.loads(payload(meta)) == {"a": 1, "nested": {"b": [True, None]}}
    assert [payload(tag1).decode(), payload(tag2).decode()] == ["x", "y ✓"]
    assert file.get_filename() == "file"
    assert file.get_content_type() == "application/octet-stream"
    assert payload(file) == ALL_BYTES


def test_multipart_encoding_content_type_makes_a_typed_file_part(server, http_host):
    schema = {"type": "object", "properties": {"image": {"type": "string"}}}
    action = body_action(
        "multipart/form-data", schema, encoding={"image": {"contentType": "image/png"}}
    )
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(32))
    event, received = send(http_host, server, action, {"image": b64(png)})
    assert event.status == "completed", event
    assert received is not None
    _, (part,) = parse_multipart(received)
    assert part.get_content_type() == "image/png"
    assert part.get_filename() == "image"
    assert payload(part) == png


def test_multipart_file_part_with_bad_base64_is_refused_before_sending(server, http_host):
    action = body_action("multipart/form-data", MULTIPART_SCHEMA)
    event, received = send(http_host, server, action, {"file": "not base64!!"})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert "base64" in event.error
    assert received is None


# --- text ------------------------------------------------------------------------------------


def test_text_plain_body_is_utf8_with_charset(server, http_host):
    text = "line one\nligne deux ✓ \U0001f600\ttab"
    event, received = send(http_host, server, body_action("text/plain", {"type": "string"}), text)
    assert event.status == "completed", event
    assert received is not None
    assert received.header("Content-Type") == "text/plain; charset=utf-8"
    assert received.body == text.encode("utf-8")


def test_text_body_that_is_not_a_string_is_an_argument_error(server, http_host):
    action = body_action("text/plain", {})
    event, received = send(http_host, server, action, {"not": "text"})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert "string" in event.error
    assert received is None


# --- XML -------------------------------------------------------------------------------------


def test_xml_body_has_its_root_nested_elements_and_lists(server, http_host):
    action = body_action("application/xml", {"type": "object"}, xml_root="Pet")
    value = {
        "name": "Rex <&> ✓",
        "age": 3,
        "owner": {"name": "Ann", "email": None},
        "tag": ["a", "b"],
        "photos": {"photo": [{"url": "x"}, {"url": "y"}]},
    }
    event, received = send(http_host, server, action, value)
    assert event.status == "completed", event
    assert received is not None
    assert received.header("Content-Type") == "application/xml; charset=utf-8"
    root = ElementTree.fromstring(received.body)
    assert root.tag == "Pet"
    assert root.findtext("name") == "Rex <&> ✓"
    assert root.findtext("age") == "3"
    assert root.findtext("owner/name") == "Ann"
    email_element = root.find("owner/email")
    assert email_element is not None
    assert not email_element.text
    assert [tag.text for tag in root.findall("tag")] == ["a", "b"]
    assert [photo.findtext("url") for photo in root.findall("photos/photo")] == ["x", "y"]


def test_xml_body_without_a_root_name_uses_root(server, http_host):
    event, received = send(http_host, server, body_action("text/xml", {}), {"a": 1})
    assert event.status == "completed", event
    assert received is not None
    assert ElementTree.fromstring(received.body).tag == "root"


@pytest.mark.parametrize("key", ["1bad", "a b", "xmlThing", "a<b", ""])
def test_xml_body_with_an_invalid_element_name_is_refused_before_sending(server, http_host, key):
    action = body_action("application/xml", {"type": "object"}, xml_root="Pet")
    event, received = send(http_host, server, action, {"ok": 1, "nested": {key: "v"}})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert "XML element name" in event.error
    assert received is None
    assert not server.received


def test_xml_string_body_must_be_well_formed(server, http_host):
    action = body_action("application/xml", {"type": "string"})
    event, received = send(http_host, server, action, "<a><b>1</b></a>")
    assert event.status == "completed", event
    assert received is not None
    assert received.body == b"<a><b>1</b></a>"
    server.received.clear()
    event, received = send(http_host, server, action, "<a><b>1</a>")
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert "well-formed" in event.error
    assert received is None


# --- binary ----------------------------------------------------------------------------------


def test_octet_stream_body_is_sent_decoded_from_base64(server, http_host):
    action = body_action("application/octet-stream", {"type": "string"})
    event, received = send(http_host, server, action, b64(ALL_BYTES))
    assert event.status == "completed", event
    assert received is not None
    assert received.header("Content-Type") == "application/octet-stream"
    assert received.body == ALL_BYTES
    assert event.result["body"]["body_encoding"] == "base64"
    assert base64.b64decode(event.result["body"]["body"]) == ALL_BYTES


def test_octet_stream_body_that_is_not_base64_is_refused(server, http_host):
    action = body_action("application/octet-stream", {"type": "string"})
    event, received = send(http_host, server, action, "%%% definitely not base64 %%%")
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert "base64" in event.error
    assert received is None
