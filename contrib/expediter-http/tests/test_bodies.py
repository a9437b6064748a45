"""encode_body: each media type's encoding read back by a real parser, and what it refuses."""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
from email.message import EmailMessage
from typing import Any
from urllib.parse import parse_qs
from xml.etree import ElementTree

import pytest
from expediter_http import bodies
from expediter_http.actions import BodySpec, HttpAction
from expediter_http.bodies import default_body_schema, encode_body
from hypothesis import given
from hypothesis import strategies as st

from expediter.errors import ArgumentError, ConfigError

ALL_BYTES = bytes(range(256))


def spec(content_type: str, **fields: Any) -> BodySpec:
    return BodySpec(content_type=content_type, **fields)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def parse_multipart(content: bytes, content_type: str) -> list[EmailMessage]:
    """The parts of a multipart body, as the stdlib's MIME parser reads them."""
    document = b"Content-Type: " + content_type.encode("ascii") + b"\r\n\r\n" + content
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(document)
    assert isinstance(message, EmailMessage)
    assert message.is_multipart()
    assert not message.defects
    parts = list(message.iter_parts())
    for part in parts:
        assert isinstance(part, EmailMessage)
        assert not part.defects
    return parts  # type: ignore[return-value]


def part_name(part: EmailMessage) -> str | None:
    name = part.get_param("name", header="content-disposition")
    return name if isinstance(name, str) else None


def payload(part: EmailMessage) -> bytes:
    data = part.get_payload(decode=True)
    assert isinstance(data, bytes)
    return data


# --- JSON -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "application/vnd.api+json",
    ],
)
def test_json_is_compact_utf8_with_the_declared_type(content_type: str) -> None:
    value = {"name": "Rex ☃", "tags": [1, 2.5, None, True]}
    content, sent_type = encode_body(spec(content_type), value)
    assert content == '{"name":"Rex ☃","tags":[1,2.5,null,true]}'.encode()
    assert sent_type == content_type
    assert json.loads(content) == value


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_json_refuses_non_finite_numbers(number: float) -> None:
    with pytest.raises(ArgumentError, match="NaN or an infinity") as caught:
        encode_body(spec("application/json", argument="pet"), {"weight": number})
    assert caught.value.parameter == "pet"


def test_json_refuses_values_json_cannot_hold_and_lone_surrogates() -> None:
    with pytest.raises(ArgumentError, match="cannot be written as JSON"):
        encode_body(spec("application/json"), {"raw": b"x"})
    with pytest.raises(ArgumentError, match="lone surrogate"):
        encode_body(spec("application/json"), {"a": "\ud800"})


def test_json_scalars_and_strings_are_json_too() -> None:
    assert encode_body(spec("application/json"), "hi") == (b'"hi"', "application/json")
    assert encode_body(spec("application/json"), [1]) == (b"[1]", "application/json")


# --- application/x-www-form-urlencoded ------------------------------------------------------

FORM = "application/x-www-form-urlencoded"


def form(value: Any, **encoding: dict[str, Any]) -> str:
    content, sent_type = encode_body(spec(FORM, encoding=encoding), value)
    assert sent_type == FORM
    return content.decode("ascii")


def test_form_fields_scalars_arrays_and_objects() -> None:
    text = form({"name": "a b", "n": 3, "ok": True, "tags": ["x", "y"], "addr": {"city": "Oslo"}})
    assert text == ("name=a%20b&n=3&ok=true&tags=x&tags=y&addr=%7B%22city%22%3A%22Oslo%22%7D")
    assert parse_qs(text) == {
        "name": ["a b"],
        "n": ["3"],
        "ok": ["true"],
        "tags": ["x", "y"],
        "addr": ['{"city":"Oslo"}'],
    }


def test_form_none_fields_are_left_out() -> None:
    assert form({"a": None, "b": "1"}) == "b=1"
    assert form({}) == ""


@pytest.mark.parametrize(
    ("encoding", "value", "expected"),
    [
        ({"style": "form", "explode": False}, ["x", "y"], "f=x,y"),
        ({"explode": True}, {"a": 1, "b": 2}, "a=1&b=2"),
        ({"style": "form", "explode": False}, {"a": 1}, "f=a,1"),
        ({"style": "spaceDelimited"}, ["x", "y"], "f=x%20y"),
        ({"style": "pipeDelimited"}, ["x", "y"], "f=x%7Cy"),
        ({"style": "deepObject"}, {"a": {"b": "c"}}, "f%5Ba%5D%5Bb%5D=c"),
        ({"contentType": "application/json"}, ["x", 1], "f=%5B%22x%22%2C1%5D"),
        ({"contentType": "application/json"}, "s", "f=%22s%22"),
        ({"contentType": "text/plain"}, {"a": 1}, "f=%7B%22a%22%3A1%7D"),
        ({"allowReserved": True}, "a/b?c&d", "f=a/b?c%26d"),
    ],
)
def test_form_encoding_object(encoding: dict[str, Any], value: Any, expected: str) -> None:
    assert form({"f": value}, f=encoding) == expected


def test_form_deep_object_reads_back_as_bracketed_keys() -> None:
    text = form({"f": {"a": "1 2", "b": ["x", "y"]}}, f={"style": "deepObject"})
    assert parse_qs(text) == {"f[a]": ["1 2"], "f[b]": ["x", "y"]}


@pytest.mark.parametrize("text", ["a&b=c", "x#y", "1+1 = 2", "é/?%20", "\r\n\x00", "", "%"])
def test_form_hostile_values_round_trip(text: str) -> None:
    assert parse_qs(form({text or "k": text}), keep_blank_values=True) == {text or "k": [text]}


@given(
    st.dictionaries(st.text(min_size=1), st.text() | st.lists(st.text(), min_size=1), max_size=6)
)
def test_any_object_of_text_round_trips_through_a_form_body(value: dict[str, Any]) -> None:
    parsed = parse_qs(form(value), keep_blank_values=True)
    assert parsed == {k: v if isinstance(v, list) else [v] for k, v in value.items()}


@pytest.mark.parametrize("value", ["a=b", ["a"], 3, None])
def test_form_body_must_be_an_object(value: Any) -> None:
    with pytest.raises(ArgumentError, match="must be an object of fields") as caught:
        encode_body(spec(FORM, argument="fields"), value)
    assert caught.value.parameter == "fields"


def test_form_unknown_style_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="style 'matrix'"):
        form({"f": "x"}, f={"style": "matrix"})


# --- multipart/form-data --------------------------------------------------------------------

MULTIPART = "multipart/form-data"


def multipart(value: Any, **fields: Any) -> tuple[bytes, str, list[EmailMessage]]:
    content, sent_type = encode_body(spec(MULTIPART, **fields), value)
    return content, sent_type, parse_multipart(content, sent_type)


def test_multipart_text_binary_and_json_parts() -> None:
    schema = {"properties": {"file": {"type": "string", "format": "binary"}}}
    value = {"file": b64(ALL_BYTES), "note": "a--b\r\n--c\r\nd--", "n": 7, "meta": {"k": [1]}}
    content, sent_type, parts = multipart(value, schema=schema)
    boundary = sent_type.removeprefix("multipart/form-data; boundary=")
    assert len(boundary) == 32
    assert content.startswith(f"--{boundary}\r\n".encode())
    assert content.endswith(f"\r\n--{boundary}--\r\n".encode())
    assert [part_name(p) for p in parts] == ["file", "note", "n", "meta"]
    file_part, note, number, meta = parts
    assert file_part.get_filename() == "file"
    assert file_part.get_content_type() == "application/octet-stream"
    assert payload(file_part) == ALL_BYTES
    assert payload(note) == b"a--b\r\n--c\r\nd--"
    assert "Content-Type" not in note
    assert payload(number) == b"7"
    assert meta.get_content_type() == "application/json"
    assert json.loads(payload(meta)) == {"k": [1]}


def test_multipart_arrays_become_one_part_per_item() -> None:
    schema = {"properties": {"files": {"type": "array", "items": {"format": "binary"}}}}
    value = {"tags": ["x", None, "y"], "files": [b64(b"\x00"), b64(b"\xff")]}
    _, _, parts = multipart(value, schema=schema)
    assert [(part_name(p), payload(p)) for p in parts] == [
        ("tags", b"x"),
        ("tags", b"y"),
        ("files", b"\x00"),
        ("files", b"\xff"),
    ]
    assert [p.get_filename() for p in parts] == [None, None, "files", "files"]


def test_multipart_encoding_content_type_decides_the_part() -> None:
    encoding = {
        "avatar": {"contentType": "image/png, image/jpeg"},
        "raw": {"contentType": "image/*"},
        "doc": {"contentType": "application/xml"},
        "cfg": {"contentType": "application/json"},
        "csv": {"contentType": "text/csv"},
    }
    schema = {"properties": {"b64": {"type": "string", "contentEncoding": "base64"}}}
    value = {
        "avatar": b64(b"\x89PNG"),
        "raw": b64(b"r"),
        "doc": {"a": "1"},
        "cfg": "s",
        "csv": "a,b",
        "b64": b64(b"z"),
    }
    _, _, parts = multipart(value, encoding=encoding, schema=schema)
    by_name = {part_name(p): p for p in parts}
    assert by_name["avatar"].get_content_type() == "image/png"
    assert by_name["avatar"].get_filename() == "avatar"
    assert payload(by_name["avatar"]) == b"\x89PNG"
    assert by_name["raw"].get_content_type() == "application/octet-stream"
    assert ElementTree.fromstring(payload(by_name["doc"])).findtext("a") == "1"
    assert payload(by_name["cfg"]) == b'"s"'
    assert (by_name["csv"].get_content_type(), payload(by_name["csv"])) == ("text/csv", b"a,b")
    assert (by_name["b64"].get_filename(), payload(by_name["b64"])) == ("b64", b"z")


def test_multipart_names_are_escaped() -> None:
    _, _, parts = multipart({'a"b\\c\r\nd\x00': "v", "é": "w"})
    assert [part_name(p) for p in parts] == ["a%22b%5Cc%0D%0Ad%00", "é"]


def test_multipart_bad_base64_names_the_property() -> None:
    schema = {"properties": {"photo": {"format": "binary"}}}
    with pytest.raises(ArgumentError, match=r"'photo'.*not valid base64") as caught:
        encode_body(spec(MULTIPART, schema=schema, argument="form"), {"photo": "not base64!"})
    assert caught.value.parameter == "form"
    with pytest.raises(ArgumentError, match=r"'photo'.*base64 text, not an object"):
        encode_body(spec(MULTIPART, schema=schema), {"photo": {"x": 1}})


def test_multipart_regenerates_a_boundary_found_in_a_part(monkeypatch: pytest.MonkeyPatch) -> None:
    candidates = iter(["clash", "fresh"])
    monkeypatch.setattr(bodies.secrets, "token_hex", lambda _size: next(candidates))
    content, sent_type = encode_body(spec(MULTIPART), {"text": "x--clash--y"})
    assert sent_type == "multipart/form-data; boundary=fresh"
    assert [payload(p) for p in parse_multipart(content, sent_type)] == [b"x--clash--y"]


def test_multipart_empty_object_is_just_the_closing_delimiter() -> None:
    content, sent_type = encode_body(spec(MULTIPART), {"skipped": None})
    assert content == f"--{sent_type.split('=', 1)[1]}--\r\n".encode()


@pytest.mark.parametrize("value", ["text", [1], 2])
def test_multipart_body_must_be_an_object(value: Any) -> None:
    with pytest.raises(ArgumentError, match="must be an object of fields"):
        encode_body(spec(MULTIPART), value)


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=4), st.text(max_size=40))
def test_any_bytes_and_text_parse_back_from_multipart(files: list[bytes], note: str) -> None:
    schema = {"properties": {"files": {"items": {"format": "binary"}}}}
    _, _, parts = multipart({"files": [b64(f) for f in files], "note": note}, schema=schema)
    assert [payload(p) for p in parts[:-1]] == files
    assert payload(parts[-1]) == note.encode("utf-8")


# --- text -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "sent_type"),
    [
        ("text/plain", "text/plain; charset=utf-8"),
        ("text/plain; charset=ISO-8859-1", "text/plain; charset=utf-8"),
        ("text/csv; header=present", "text/csv; header=present; charset=utf-8"),
        ("TEXT/HTML", "TEXT/HTML; charset=utf-8"),
    ],
)
def test_text_is_utf8_with_charset(content_type: str, sent_type: str) -> None:
    assert encode_body(spec(content_type), "é\r\n") == ("é\r\n".encode(), sent_type)


@pytest.mark.parametrize("value", [{"a": 1}, ["a"], 3, True])
def test_text_body_must_be_a_string(value: Any) -> None:
    with pytest.raises(ArgumentError, match="must be a string") as caught:
        encode_body(spec("text/plain", argument="note"), value)
    assert caught.value.parameter == "note"


# --- XML ------------------------------------------------------------------------------------


def test_xml_from_an_object() -> None:
    value = {"name": "a<b>&c", "tags": ["x", "y"], "none": None, "n": 2.0, "in": {"ok": True}}
    content, sent_type = encode_body(spec("application/xml", xml_root="Pet"), value)
    assert sent_type == "application/xml; charset=utf-8"
    assert content.startswith(b"<?xml version='1.0' encoding='utf-8'?>")
    root = ElementTree.fromstring(content)
    assert root.tag == "Pet"
    assert root.findtext("name") == "a<b>&c"
    assert [e.text for e in root.findall("tags")] == ["x", "y"]
    none = root.find("none")
    assert none is not None
    assert (none.text, len(none)) == (None, 0)
    assert root.findtext("n") == "2"
    assert root.findtext("in/ok") == "true"


@pytest.mark.parametrize("content_type", ["text/xml", "application/atom+xml", "application/XML"])
def test_xml_types_and_default_root(content_type: str) -> None:
    content, sent_type = encode_body(spec(content_type), {"a": "ü"})
    assert sent_type.endswith("; charset=utf-8")
    root = ElementTree.fromstring(content)
    assert (root.tag, root.findtext("a")) == ("root", "ü")


@pytest.mark.parametrize("key", ["1abc", "a b", "a<b", "", "xmlThing", "XML", "ns:tag", "a/b", "é"])
def test_xml_bad_element_names_are_named(key: str) -> None:
    with pytest.raises(ArgumentError, match="XML element name") as caught:
        encode_body(spec("application/xml"), {"ok": {key: "v"}})
    assert repr(key) in str(caught.value)


def test_xml_refuses_characters_xml_cannot_carry_and_nested_arrays() -> None:
    with pytest.raises(ArgumentError, match="XML cannot carry"):
        encode_body(spec("application/xml"), {"a": "x\x00y"})
    with pytest.raises(ArgumentError, match="XML cannot carry"):
        encode_body(spec("application/xml"), {"a": "\x1b[31m"})
    with pytest.raises(ArgumentError, match="array inside an array"):
        encode_body(spec("application/xml"), {"a": [[1]]})


def test_xml_string_is_sent_as_is_only_when_the_schema_says_string() -> None:
    document = "<a><b>1</b></a>"
    as_string = spec("application/xml", schema={"type": "string"})
    assert encode_body(as_string, document)[0] == document.encode()
    with pytest.raises(ArgumentError, match="not well-formed XML"):
        encode_body(as_string, "<a><b></a>")
    with pytest.raises(ArgumentError, match="must be an object"):
        encode_body(spec("application/xml"), document)
    with pytest.raises(ArgumentError, match="must be an object"):
        encode_body(spec("application/xml"), ["a"])


def test_xml_bad_root_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="xml_root"):
        encode_body(spec("application/xml", xml_root="bad root"), {})


# --- binary ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["application/octet-stream", "image/png", "application/pdf", "video/mp4"]
)
def test_binary_bodies_are_base64_decoded(content_type: str) -> None:
    assert encode_body(spec(content_type), b64(ALL_BYTES)) == (ALL_BYTES, content_type)


def test_binary_schema_makes_any_type_binary() -> None:
    body = spec("application/vnd.custom", schema={"type": "string", "format": "binary"})
    assert encode_body(body, b64(b"\x00\x01")) == (b"\x00\x01", "application/vnd.custom")


def test_base64_tolerates_whitespace_and_missing_padding() -> None:
    assert encode_body(spec("application/octet-stream"), "QU\nJD RA") == (
        b"ABCD",
        "application/octet-stream",
    )


@pytest.mark.parametrize("value", ["***", "QUJD!", "é", "A"])
def test_bad_base64_is_refused(value: str) -> None:
    with pytest.raises(ArgumentError, match="not valid base64"):
        encode_body(spec("application/octet-stream"), value)


def test_binary_body_must_be_text() -> None:
    with pytest.raises(ArgumentError, match="base64 text, not an array"):
        encode_body(spec("application/octet-stream"), [1, 2])


def test_error_messages_never_repeat_a_huge_value() -> None:
    with pytest.raises(ArgumentError) as caught:
        encode_body(spec("application/octet-stream"), "!" * 1_000_000)
    assert len(str(caught.value)) < 400


# --- other types ----------------------------------------------------------------------------


def test_wildcard_types_send_text_or_json() -> None:
    assert encode_body(spec("*/*"), "hi") == (b"hi", "text/plain; charset=utf-8")
    assert encode_body(spec("application/*"), {"a": 1}) == (b'{"a":1}', "application/json")


def test_unknown_types_send_strings_as_text_and_the_rest_as_json() -> None:
    assert encode_body(spec("application/graphql"), "{ a }") == (b"{ a }", "application/graphql")
    assert encode_body(spec("application/x-yaml"), {"a": 1}) == (b'{"a":1}', "application/x-yaml")


@pytest.mark.parametrize(
    "content_type", ["json", "application/json\r\nX-Evil: 1", "application/jsön", "a/b/c", "/"]
)
def test_malformed_content_type_is_a_config_error(content_type: str) -> None:
    with pytest.raises(ConfigError, match="content_type"):
        encode_body(spec(content_type), {})


def test_other_multipart_types_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="multipart/form-data"):
        encode_body(spec("multipart/mixed"), {})


@pytest.mark.parametrize(
    ("content_type", "schema"),
    [
        ("application/json", {"type": "object"}),
        ("application/x-www-form-urlencoded", {"type": "object"}),
        ("multipart/form-data", {"type": "object"}),
        ("text/xml", {"type": "object"}),
        ("Text/Plain; charset=utf-8", {"type": "string"}),
        ("image/png", {"type": "string", "contentEncoding": "base64"}),
        ("application/octet-stream", {"type": "string", "contentEncoding": "base64"}),
        ("application/x-yaml", {"type": "object"}),
    ],
)
def test_default_body_schema_matches_what_the_encoder_takes(
    content_type: str, schema: dict[str, Any]
) -> None:
    assert default_body_schema(content_type) == schema
    action = HttpAction.from_dict(
        {"name": "a", "method": "POST", "path": "/", "body": {"content_type": content_type}}
    )
    assert action.arguments_schema["properties"]["body"] == schema
