"""build_request: URL joining, the OpenAPI parameter styles, and values that try to escape."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import attrs
import pytest
from expediter_http.actions import HttpAction
from expediter_http.request import PreparedRequest, build_request, parameter_text, query_pairs
from hypothesis import example, given
from hypothesis import strategies as st

from expediter.errors import ArgumentError, ConfigError

BASE = "https://api.example.com/v1"
COLOR_ARRAY = ["blue", "black", "brown"]
COLOR_OBJECT = {"R": 100, "G": 200, "B": 150}


def action(
    path: str = "/items",
    parameters: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    method: str = "GET",
) -> HttpAction:
    data: dict[str, Any] = {
        "name": "act",
        "method": method,
        "path": path,
        "parameters": parameters or [],
    }
    if body is not None:
        data["body"] = body
    return HttpAction.from_dict(data)


def path_of(parameter: dict[str, Any], value: Any, template: str = "/items/{p}") -> str:
    spec = {"name": "p", "in": "path", **parameter}
    request = build_request(action(template, [spec]), {"p": value}, base_url=BASE)
    return urlsplit(request.url).path


def query_of(parameter: dict[str, Any], value: Any) -> str:
    spec = {"name": "q", "in": "query", **parameter}
    return urlsplit(build_request(action("/", [spec]), {"q": value}, base_url=BASE).url).query


def header_of(parameter: dict[str, Any], value: Any) -> list[tuple[str, str]]:
    spec = {"name": "X-Thing", "in": "header", **parameter}
    return build_request(action("/", [spec]), {"X-Thing": value}, base_url=BASE).headers


def cookies_of(parameter: dict[str, Any], value: Any) -> list[tuple[str, str]]:
    spec = {"name": "c", "in": "cookie", **parameter}
    return build_request(action("/", [spec]), {"c": value}, base_url=BASE).cookies


# --- base URL joining -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "path", "expected"),
    [
        ("https://h.example", "/p", "https://h.example/p"),
        ("https://h.example/", "/p", "https://h.example/p"),
        ("https://h.example/api", "/p", "https://h.example/api/p"),
        ("https://h.example/api/", "/p", "https://h.example/api/p"),
        ("https://h.example/api/", "/p/", "https://h.example/api/p/"),
        ("https://h.example/api", "", "https://h.example/api"),
        ("https://h.example/api/", "", "https://h.example/api/"),
        ("https://h.example", "", "https://h.example/"),
        ("https://h.example:8443/api", "/", "https://h.example:8443/api/"),
    ],
)
def test_base_url_and_path_join_with_one_slash(base: str, path: str, expected: str) -> None:
    assert build_request(action(path), {}, base_url=base).url == expected


@pytest.mark.parametrize("path", ["//evil.example/x", "///evil.example", "/@evil.example/x"])
def test_path_template_never_changes_the_host(path: str) -> None:
    for base in ("https://h.example", "https://h.example/api/"):
        url = build_request(action(path), {}, base_url=base).url
        assert urlsplit(url).hostname == "h.example"
        assert "//" not in urlsplit(url).path


def test_base_url_query_is_kept_and_parameters_appended() -> None:
    spec = {"name": "q", "in": "query"}
    request = build_request(action("/s", [spec]), {"q": "x"}, base_url=BASE + "?key=1#frag")
    assert request.url == "https://api.example.com/v1/s?key=1&q=x"
    assert build_request(action("/s"), {}, base_url=BASE + "?key=1").url == BASE + "/s?key=1"


@pytest.mark.parametrize("base", ["api.example.com/v1", "ftp://h.example/", "/relative", ""])
def test_base_url_must_be_absolute_http(base: str) -> None:
    with pytest.raises(ConfigError, match="absolute http"):
        build_request(action(), {}, base_url=base)


def test_literal_template_text_is_encoded_where_unsafe() -> None:
    url = build_request(action("/a b/é?x#y"), {}, base_url=BASE).url
    assert url == BASE + "/a%20b/%C3%A9%3Fx%23y"


def test_method_and_no_body_by_default() -> None:
    request = build_request(action(method="delete"), {}, base_url=BASE)
    assert request == PreparedRequest(method="DELETE", url=BASE + "/items")
    assert request.header_items() == []


# --- path parameters ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "segment"),
    [
        ("/", "%2F"),
        ("?", "%3F"),
        ("#", "%23"),
        ("@", "%40"),
        ("../../admin", "..%2F..%2Fadmin"),
        ("a..b", "a..b"),
        ("..x", "..x"),
        ("x..", "x.."),
        (". .", ".%20."),
        ("%2E%2E", "%252E%252E"),
        ("%2F", "%252F"),
        ("a b", "a%20b"),
        ("a+b;c=d", "a%2Bb%3Bc%3Dd"),
        ("é☃", "%C3%A9%E2%98%83"),
        ("\r\nX: y", "%0D%0AX%3A%20y"),
        ("\x00", "%00"),
        ("report.pdf", "report.pdf"),
        (42, "42"),
        (True, "true"),
    ],
)
def test_path_values_are_encoded_with_nothing_safe(value: Any, segment: str) -> None:
    assert path_of({}, value) == f"/v1/items/{segment}"


def test_empty_simple_path_value_is_refused() -> None:
    with pytest.raises(ArgumentError, match="empty") as caught:
        path_of({}, "")
    assert caught.value.parameter == "p"
    with pytest.raises(ArgumentError, match="empty"):
        path_of({}, [])


DOTS = re.compile(r"(?:\.|%2[eE])+")
ONLY_DOTS = "a path value made only of dots would leave the action's path"


@pytest.mark.parametrize("value", [".", "..", "...", "." * 50])
@pytest.mark.parametrize(
    ("style", "explode"),
    [(style, explode) for style in ("simple", "label", "matrix") for explode in (False, True)],
)
def test_a_path_value_made_only_of_dots_is_refused(value: str, style: str, explode: bool) -> None:
    spec = {"name": "id", "in": "path", "style": style, "explode": explode, "argument": "user"}
    users = action("/v1/users/{id}/profile", [spec])
    for shaped in (value, [value], ["ok", value], {"k": value}, {value: "v"}):
        with pytest.raises(ArgumentError, match=re.escape(ONLY_DOTS)) as caught:
            build_request(users, {"user": shaped}, base_url=BASE)
        assert caught.value.parameter == "user"
        assert "'user'" in str(caught.value)


@pytest.mark.parametrize(
    ("parameter", "value", "expected"),
    [
        ({}, ["a..b", "report.pdf"], "a..b,report.pdf"),
        ({"explode": True}, {"v1.2": "..x"}, "v1.2=..x"),
        ({"style": "label"}, "report.pdf", ".report.pdf"),
        ({"style": "label", "explode": True}, ["a.", ".b"], ".a...b"),
        ({"style": "matrix"}, "x..", ";p=x.."),
    ],
)
def test_values_with_dots_and_other_characters_still_work(
    parameter: dict[str, Any], value: Any, expected: str
) -> None:
    assert path_of(parameter, value) == "/v1/items/" + expected


def test_expansion_that_makes_a_dot_segment_is_refused() -> None:
    spec = {"style": "label"}
    with pytest.raises(ArgumentError, match=re.escape(ONLY_DOTS)) as caught:
        path_of(spec, "")
    assert caught.value.parameter == "p"
    with pytest.raises(ArgumentError, match=re.escape(ONLY_DOTS)):
        path_of(spec, "", template="/items/{p}.")
    with pytest.raises(ArgumentError, match=re.escape(ONLY_DOTS)):
        path_of(spec, "", template="/items/%2E{p}")
    with pytest.raises(ArgumentError, match=re.escape(ONLY_DOTS)):
        path_of({"style": "label", "explode": True}, ["", ""])
    with pytest.raises(ArgumentError, match=re.escape(ONLY_DOTS)):
        path_of(spec, ".")


def test_two_placeholders_in_one_segment_cannot_make_dot_dot() -> None:
    specs = [{"name": "a", "in": "path"}, {"name": "b", "in": "path", "style": "label"}]
    for template in ("/x/{b}{b}/y", "/x/.{b}/y", "/x/{b}%2e/y", "/x/%2E{b}/y"):
        with pytest.raises(ArgumentError, match=re.escape(ONLY_DOTS)) as caught:
            build_request(action(template, specs), {"a": "a", "b": ""}, base_url=BASE)
        assert caught.value.parameter == "b"
    with pytest.raises(ArgumentError, match=re.escape(ONLY_DOTS)) as caught:
        build_request(action("/x/{a}{b}/y", specs), {"a": ".", "b": "z"}, base_url=BASE)
    assert caught.value.parameter == "a"


def test_a_dot_segment_before_matrix_parameters_is_refused() -> None:
    # Tomcat and Jetty drop ";..." before resolving dot-segments: ".;m=x" is ".".
    specs = [{"name": "a", "in": "path", "style": "label"}, {"name": "m", "in": "path"}]
    specs[1]["style"] = "matrix"
    with pytest.raises(ArgumentError, match=re.escape(ONLY_DOTS)) as caught:
        build_request(action("/x/{a}{m}/y", specs), {"a": "", "m": "x"}, base_url=BASE)
    assert caught.value.parameter == "a"
    request = build_request(action("/x/{a}{m}/y", specs), {"a": "k", "m": "x"}, base_url=BASE)
    assert urlsplit(request.url).path == "/v1/x/.k;m=x/y"


def test_the_templates_own_dot_segments_are_left_alone() -> None:
    assert path_of({}, "x", template="/a/../{p}") == "/v1/a/../x"


@given(st.text() | st.text(alphabet=".%2Ee"))
@example(".")
@example("..")
@example("...")
def test_any_text_stays_inside_its_path_segment(text: str) -> None:
    try:
        path = path_of({}, text, template="/items/{p}/tail")
    except ArgumentError:
        assert text.strip(".") == ""
        return
    prefix, segment, tail = path.rsplit("/", 2)
    assert (prefix, tail) == ("/v1/items", "tail")
    assert not {"/", "?", "#"} & set(segment)
    assert not DOTS.fullmatch(segment)
    assert unquote(segment) == text


@given(
    st.one_of(
        st.text(),
        st.text(alphabet=".%2Ee;, "),
        st.lists(st.text(alphabet=".%2Eex", max_size=4), max_size=3),
        st.dictionaries(st.text(alphabet=".x", max_size=3), st.text(".x", max_size=3), max_size=2),
    ),
    st.sampled_from(["simple", "label", "matrix"]),
    st.booleans(),
    st.sampled_from(["/items/{p}/tail", "/items/{p}", "/items/.{p}", "/items/{p}%2E", "/{p}{q}"]),
)
def test_no_built_path_has_a_segment_of_only_dots(
    value: Any, style: str, explode: bool, template: str
) -> None:
    specs = [
        {"name": "p", "in": "path", "style": style, "explode": explode},
        {"name": "q", "in": "path", "style": "label"},
    ]
    try:
        request = build_request(action(template, specs), {"p": value, "q": ""}, base_url=BASE)
    except ArgumentError:
        return
    for segment in urlsplit(request.url).path.split("/"):
        assert not DOTS.fullmatch(segment.split(";")[0]), request.url


@pytest.mark.parametrize(
    ("style", "explode", "value", "expected"),
    [
        ("simple", False, "blue", "blue"),
        ("simple", False, COLOR_ARRAY, "blue,black,brown"),
        ("simple", False, COLOR_OBJECT, "R,100,G,200,B,150"),
        ("simple", True, "blue", "blue"),
        ("simple", True, COLOR_ARRAY, "blue,black,brown"),
        ("simple", True, COLOR_OBJECT, "R=100,G=200,B=150"),
        ("label", False, "blue", ".blue"),
        ("label", False, COLOR_ARRAY, ".blue,black,brown"),
        ("label", False, COLOR_OBJECT, ".R,100,G,200,B,150"),
        ("label", True, "blue", ".blue"),
        ("label", True, COLOR_ARRAY, ".blue.black.brown"),
        ("label", True, COLOR_OBJECT, ".R=100.G=200.B=150"),
        ("matrix", False, "", ";color"),
        ("matrix", False, "blue", ";color=blue"),
        ("matrix", False, COLOR_ARRAY, ";color=blue,black,brown"),
        ("matrix", False, COLOR_OBJECT, ";color=R,100,G,200,B,150"),
        ("matrix", True, "blue", ";color=blue"),
        ("matrix", True, COLOR_ARRAY, ";color=blue;color=black;color=brown"),
        ("matrix", True, COLOR_OBJECT, ";R=100;G=200;B=150"),
        ("matrix", True, [], ";color"),
    ],
)
def test_path_styles(style: str, explode: bool, value: Any, expected: str) -> None:
    spec = {"name": "color", "in": "path", "style": style, "explode": explode}
    request = build_request(action("/c/{color}", [spec]), {"color": value}, base_url=BASE)
    assert urlsplit(request.url).path == "/v1/c/" + expected


def test_path_style_separators_inside_values_are_encoded() -> None:
    assert path_of({}, ["a,b", "c/d"]) == "/v1/items/a%2Cb,c%2Fd"
    assert path_of({"explode": True}, {"k=": "v,"}) == "/v1/items/k%3D=v%2C"
    assert path_of({"style": "matrix"}, "x;y") == "/v1/items/;p=x%3By"


def test_unknown_path_style_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="simple, label or matrix"):
        path_of({"style": "form"}, "x")


def test_placeholder_without_parameter_is_a_config_error() -> None:
    hand_made = attrs.evolve(action("/items"), path="/items/{id}")
    with pytest.raises(ConfigError, match="no path parameter"):
        build_request(hand_made, {}, base_url=BASE)


# --- arguments ------------------------------------------------------------------------------


def test_missing_required_parameter_names_its_argument() -> None:
    specs = [{"name": "page size", "in": "query", "required": True}]
    with pytest.raises(ArgumentError, match="required") as caught:
        build_request(action("/", specs), {}, base_url=BASE)
    assert caught.value.parameter == "page_size"
    with pytest.raises(ArgumentError):
        build_request(action("/x/{p}", [{"name": "p", "in": "path"}]), {"p": None}, base_url=BASE)


def test_parameters_use_their_name_and_arguments_their_argument() -> None:
    specs = [{"name": "page[size]", "in": "query", "argument": "page_size"}]
    request = build_request(action("/", specs), {"page_size": 5}, base_url=BASE)
    assert request.url == BASE + "/?page%5Bsize%5D=5"


def test_optional_and_none_parameters_and_extra_arguments_are_left_out() -> None:
    specs = [{"name": "a", "in": "query"}, {"name": "b", "in": "header"}]
    request = build_request(action("/", specs), {"a": None, "zzz": "x"}, base_url=BASE)
    assert request.url == BASE + "/"
    assert request.headers == []


def test_values_json_cannot_hold_are_refused() -> None:
    with pytest.raises(ArgumentError, match="bytes"):
        query_of({}, b"raw")
    with pytest.raises(ArgumentError, match="finite"):
        query_of({}, float("nan"))


@pytest.mark.parametrize(
    ("location", "value"),
    [
        ("path", "a\ud800"),
        ("query", "\udfff"),
        ("query", ["ok", {"k": "\ud800"}]),
        ("cookie", "\ud800"),
    ],
)
def test_lone_surrogates_are_refused_naming_the_argument(location: str, value: Any) -> None:
    spec = {"name": "p", "in": location, "required": True}
    with pytest.raises(ArgumentError, match="lone surrogate") as caught:
        build_request(
            action("/x/{p}" if location == "path" else "/", [spec]), {"p": value}, base_url=BASE
        )
    assert caught.value.parameter == "p"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("x", "x"),
        (True, "true"),
        (False, "false"),
        (3, "3"),
        (3.0, "3"),
        (-0.5, "-0.5"),
        (1.5e300, "1.5e+300"),
        (2.0**60, "1.152921504606847e+18"),
        ({"a": [1, None]}, '{"a":[1,null]}'),
        (None, ""),
    ],
)
def test_parameter_text(value: Any, text: str) -> None:
    assert parameter_text(value, argument="a") == text


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_parameter_text_refuses_non_finite_numbers(value: float) -> None:
    with pytest.raises(ArgumentError, match="finite number"):
        parameter_text(value, argument="a")


# --- query parameters -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("style", "explode", "value", "expected"),
    [
        (None, None, "blue", "color=blue"),
        (None, None, "", "color="),
        (None, None, COLOR_ARRAY, "color=blue&color=black&color=brown"),
        (None, None, COLOR_OBJECT, "R=100&G=200&B=150"),
        ("form", False, COLOR_ARRAY, "color=blue,black,brown"),
        ("form", False, COLOR_OBJECT, "color=R,100,G,200,B,150"),
        ("form", False, [], "color="),
        ("form", True, [], ""),
        ("spaceDelimited", None, COLOR_ARRAY, "color=blue%20black%20brown"),
        ("spaceDelimited", False, COLOR_OBJECT, "color=R%20100%20G%20200%20B%20150"),
        ("spaceDelimited", True, COLOR_ARRAY, "color=blue&color=black&color=brown"),
        ("pipeDelimited", None, COLOR_ARRAY, "color=blue%7Cblack%7Cbrown"),
        ("pipeDelimited", False, COLOR_OBJECT, "color=R%7C100%7CG%7C200%7CB%7C150"),
        ("pipeDelimited", None, "solo", "color=solo"),
        ("deepObject", True, COLOR_OBJECT, "color%5BR%5D=100&color%5BG%5D=200&color%5BB%5D=150"),
        ("deepObject", None, {"a": {"b": 1}}, "color%5Ba%5D%5Bb%5D=1"),
        ("deepObject", None, {"t": ["x", "y"]}, "color%5Bt%5D=x&color%5Bt%5D=y"),
        ("deepObject", None, "plain", "color=plain"),
    ],
)
def test_query_styles(style: str | None, explode: bool | None, value: Any, expected: str) -> None:
    spec: dict[str, Any] = {"name": "color", "in": "query"}
    if style is not None:
        spec["style"] = style
    if explode is not None:
        spec["explode"] = explode
    url = build_request(action("/", [spec]), {"color": value}, base_url=BASE).url
    assert urlsplit(url).query == expected


def test_query_booleans_and_none_items() -> None:
    assert query_of({}, [True, None, False]) == "q=true&q=false"
    assert query_of({}, {"a": None, "b": 1}) == "b=1"
    assert query_of({"style": "deepObject"}, {"a": None, "b": {"c": None}}) == ""


@pytest.mark.parametrize(
    "value", ["a&b=c", "x#y", "1+1 = 2", "é/?%20", "\r\n\x00", "a[0]", "", "%", "q=1&q=2"]
)
def test_hostile_query_values_round_trip(value: str) -> None:
    query = query_of({}, value)
    assert parse_qs(query, keep_blank_values=True) == {"q": [value]}
    assert not {"#", " "} & set(query)


def test_deep_object_brackets_are_encoded_and_decode_to_brackets() -> None:
    query = query_of({"style": "deepObject"}, {"a b": "c&d"})
    assert query == "q%5Ba%20b%5D=c%26d"
    assert parse_qs(query) == {"q[a b]": ["c&d"]}


@given(st.dictionaries(st.text(min_size=1), st.text(), max_size=6))
def test_any_object_of_text_round_trips_through_exploded_form(value: dict[str, str]) -> None:
    pairs = query_pairs("ignored", value, argument="a")
    query = "&".join(f"{name}={text}" for name, text in pairs)
    parsed = parse_qs(query, keep_blank_values=True)
    assert parsed == {key: [text] for key, text in value.items()}


def test_allow_reserved_leaves_reserved_characters_but_not_separators() -> None:
    pairs = query_pairs("u", "http://x/y?a=b&c#d+e", allow_reserved=True, argument="a")
    assert pairs == [("u", "http://x/y?a%3Db%26c%23d%2Be")]
    assert parse_qs(f"u={pairs[0][1]}") == {"u": ["http://x/y?a=b&c#d+e"]}


@pytest.mark.parametrize("style", ["simple", "label", "matrix", "bogus"])
def test_unknown_query_style_is_a_config_error(style: str) -> None:
    with pytest.raises(ConfigError, match="deepObject"):
        query_of({"style": style}, "x")


# --- header parameters ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("explode", "value", "expected"),
    [
        (None, "blue", "blue"),
        (None, 5, "5"),
        (None, True, "true"),
        (None, COLOR_ARRAY, "blue,black,brown"),
        (False, COLOR_OBJECT, "R,100,G,200,B,150"),
        (True, COLOR_OBJECT, "R=100,G=200,B=150"),
        (None, "a b/c?d%2F", "a b/c?d%2F"),
    ],
)
def test_header_simple_style(explode: bool | None, value: Any, expected: str) -> None:
    parameter = {} if explode is None else {"explode": explode}
    assert header_of(parameter, value) == [("X-Thing", expected)]


@pytest.mark.parametrize(
    "value", ["a\r\nX-Evil: 1", "a\nb", "a\rb", "a\x00b", "\x7f", "é", ["ok", "b\n"]]
)
def test_header_values_with_line_breaks_nul_or_non_ascii_are_refused(value: Any) -> None:
    with pytest.raises(ArgumentError, match="printable ASCII") as caught:
        header_of({}, value)
    assert caught.value.parameter == "X-Thing"


def test_header_value_may_hold_a_tab() -> None:
    assert header_of({}, "a\tb") == [("X-Thing", "a\tb")]


@pytest.mark.parametrize("name", ["X Thing", "X:Thing", "X-Thing\r\n", "", "Ünicode"])
def test_header_names_must_be_tokens(name: str) -> None:
    spec = {"name": name, "in": "header", "argument": "h"}
    with pytest.raises(ConfigError, match="header name"):
        build_request(action("/", [spec]), {"h": "x"}, base_url=BASE)


@pytest.mark.parametrize("name", ["Accept", "content-type", "Authorization"])
def test_header_parameters_openapi_ignores_are_not_sent(name: str) -> None:
    spec = {"name": name, "in": "header", "argument": "h"}
    assert build_request(action("/", [spec]), {"h": "x"}, base_url=BASE).headers == []


@pytest.mark.parametrize("name", ["Host", "Content-Length", "Transfer-Encoding", "Cookie"])
def test_header_parameters_that_frame_the_request_are_refused(name: str) -> None:
    spec = {"name": name, "in": "header", "argument": "h"}
    with pytest.raises(ConfigError, match="controls"):
        build_request(action("/", [spec]), {"h": "x"}, base_url=BASE)


# --- cookie parameters ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("explode", "value", "expected"),
    [
        (None, "v", [("c", "v")]),
        (None, "a b;c=d,e\r\n", [("c", "a%20b%3Bc%3Dd%2Ce%0D%0A")]),
        (None, ["x", "y"], [("c", "x"), ("c", "y")]),
        (False, ["x", "y"], [("c", "x,y")]),
        (None, {"k": 1, "j": True}, [("k", "1"), ("j", "true")]),
        (False, {"k": 1}, [("c", "k,1")]),
    ],
)
def test_cookie_form_style(explode: bool | None, value: Any, expected: list[Any]) -> None:
    parameter = {} if explode is None else {"explode": explode}
    assert cookies_of(parameter, value) == expected


def test_cookies_fold_into_one_cookie_header_with_auth_cookies() -> None:
    specs = [{"name": "a", "in": "cookie"}, {"name": "b", "in": "cookie"}]
    request = build_request(action("/", specs), {"a": "1", "b": "x y"}, base_url=BASE)
    assert request.header_items() == [("Cookie", "a=1; b=x%20y")]
    with_auth = attrs.evolve(request, cookies=[*request.cookies, ("session", "s3")])
    assert with_auth.header_items() == [("Cookie", "a=1; b=x%20y; session=s3")]


# --- bodies through build_request ------------------------------------------------------------


def test_body_is_encoded_and_its_content_type_sent() -> None:
    body = {"content_type": "application/json", "argument": "pet"}
    specs = [{"name": "X-Trace", "in": "header"}]
    request = build_request(
        action("/pets", specs, body=body, method="POST"),
        {"pet": {"name": "Rex"}, "X-Trace": "t"},
        base_url=BASE,
    )
    assert request.content == b'{"name":"Rex"}'
    assert request.content_type == "application/json"
    assert request.header_items() == [("X-Trace", "t"), ("Content-Type", "application/json")]


def test_required_body_missing_is_refused_and_optional_body_left_out() -> None:
    body = {"content_type": "application/json", "required": True}
    with pytest.raises(ArgumentError, match="request body") as caught:
        build_request(action(body=body), {}, base_url=BASE)
    assert caught.value.parameter == "body"
    request = build_request(action(body={"content_type": "application/json"}), {}, base_url=BASE)
    assert (request.content, request.content_type) == (None, None)
