"""OpenAPI import (``expediter_http.openapi``): documents in, ``http`` actions and problems out."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from expediter_http.actions import ACTION_NAME, HttpAction, load_actions
from expediter_http.openapi import ImportedSpec, SecurityScheme, import_spec, load_document
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SPECS = Path(__file__).parent / "specs"


def imported(name: str, **options: Any) -> ImportedSpec:
    return import_spec(load_document(SPECS / name), **options)


def by_name(spec: ImportedSpec) -> dict[str, HttpAction]:
    return {action.name: action for action in spec.actions}


def doc(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A minimal OpenAPI 3.0 document around ``paths``."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.test"}],
        "paths": paths,
        **extra,
    }


def op(**fields: Any) -> dict[str, Any]:
    return {"responses": {"200": {"description": "ok"}}, **fields}


def mentions(spec: ImportedSpec, *words: str) -> list[str]:
    return [p for p in spec.problems if all(word in p for word in words)]


def check_stored(spec: ImportedSpec) -> None:
    """Every action is valid as stored: round trip, offered schema, names unique."""
    names = [action.name for action in spec.actions]
    assert len(names) == len(set(names))
    for action in spec.actions:
        assert ACTION_NAME.fullmatch(action.name)
        assert HttpAction.from_dict(action.to_dict()) == action
        offered = action.to_action()
        assert offered.parameters["type"] == "object"
    json.dumps(spec.config())  # plain JSON
    assert load_actions(spec.config().get("actions", [])).keys() == set(names)


# -- reading ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in SPECS.iterdir()))
def test_every_sample_document_imports_valid_actions(name: str) -> None:
    spec = imported(name, base_url="https://api.test")
    assert spec.actions
    check_stored(spec)


def test_load_document_reads_text_as_well_as_files() -> None:
    from_text = load_document((SPECS / "petstore-3.0.yaml").read_text())
    assert from_text == load_document(SPECS / "petstore-3.0.yaml")
    assert load_document('{"openapi": "3.1.0"}') == {"openapi": "3.1.0"}


def test_load_document_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot read .*missing\.yaml"):
        load_document(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("openapi: [3.0\n  bad: {", "not valid JSON or YAML"),
        ('{"openapi": "3.0.0",\n "paths": [1, 2}', "not valid JSON or YAML"),
        ("- a\n- b\n", "not a list"),
        ("\n", "not nothing"),
    ],
)
def test_load_document_reports_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_document(text)


def test_load_document_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("openapi: 3.0.0\ninfo: {title: caf\xe9}\n".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8"):
        load_document(path)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000 + "]" * 200_000,
        '{"a":' * 200_000 + "1" + "}" * 200_000,
        "a: " + "[" * 5_000 + "]" * 5_000 + "\n",
        "openapi: 3.0.0\nx: " + "{b: " * 300 + "1" + "}" * 300 + "\n",
    ],
    ids=["json-list", "json-object", "yaml-flow", "yaml-300"],
)
def test_deeply_nested_documents_are_a_value_error_not_a_crash(text: str) -> None:
    with pytest.raises(ValueError, match="nest"):
        load_document(text)


def test_a_yaml_alias_cycle_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="contains itself"):
        load_document("openapi: 3.0.0\nloop: &a\n  - *a\n")


def test_a_python_mapping_that_contains_itself_is_a_value_error() -> None:
    document = doc({})
    document["x-self"] = document
    with pytest.raises(ValueError, match="contains itself"):
        import_spec(document)


def test_yaml_only_values_become_json() -> None:
    document = load_document(
        "openapi: 3.0.0\npaths:\n  /a:\n    get:\n      parameters:\n"
        "        - {name: since, in: query, schema: {type: string, default: 2024-01-31}}\n"
        "      responses:\n        200: {description: ok}\n"
    )
    operation = document["paths"]["/a"]["get"]
    assert "200" in operation["responses"]
    assert operation["parameters"][0]["schema"]["default"] == "2024-01-31"


def alias_bomb(levels: int = 7) -> str:
    """A YAML document of a few hundred bytes whose aliases expand to ``10**levels`` values."""
    lines = ["openapi: 3.0.0", "info: {title: t, version: '1'}", "paths: {}", "x-bomb:"]
    lines.append("  l0: &l0 [x,x,x,x,x,x,x,x,x,x]")
    for level in range(1, levels):
        lines.append(f"  l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_a_value_error_quickly() -> None:
    text = alias_bomb()
    assert len(text) < 1000
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"expands to more than [0-9,]+ values \(YAML aliases\?\)"):
        load_document(text)
    assert time.monotonic() - started < 2


def test_a_yaml_alias_bomb_exits_2_from_the_command_line(
    expediter_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from expediter.cli import cli
    from expediter.core.instances.keys import generate_key

    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["http", "import", str(path), "--name", "bomb"])
    assert time.monotonic() - started < 2
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "expands to more than" in result.stderr
    assert "(YAML aliases?)" in result.stderr


def test_aliases_that_repeat_a_little_still_import() -> None:
    text = """\
openapi: 3.0.0
servers: [{url: 'https://api.test'}]
x-shared:
  id: &id {name: id, in: path, required: true, schema: &string {type: string, maxLength: 9}}
  colors: &colors [red, green, blue]
paths:
  /a/{id}:
    get:
      parameters: [*id, {name: color, in: query, schema: {type: string, enum: *colors}}]
      responses: {'200': {description: ok}}
  /b/{id}:
    get:
      parameters: [*id, {name: note, in: query, schema: *string}]
      responses: {'200': {description: ok}}
"""
    spec = import_spec(load_document(text))
    check_stored(spec)
    (a, b) = sorted(spec.actions, key=lambda action: action.path)
    assert [p.name for p in a.parameters] == ["id", "color"]
    assert a.parameters[1].schema == {"type": "string", "enum": ["red", "green", "blue"]}
    assert b.parameters[0].schema == b.parameters[1].schema == {"type": "string", "maxLength": 9}


def test_shared_yaml_aliases_cannot_blow_up_the_import() -> None:
    lines = ["openapi: 3.0.0", "servers: [{url: 'https://api.test'}]", "x-defs:"]
    lines.append("  l0: &l0 {type: object, properties: {a: {type: string}, b: {type: string}}}")
    for level in range(1, 40):
        below = f"*l{level - 1}"
        lines.append(
            f"  l{level}: &l{level} {{type: object, properties: {{a: {below}, b: {below}}}}}"
        )
    lines += [
        "paths:",
        "  /bomb:",
        "    post:",
        "      requestBody: {content: {application/json: {schema: *l39}}}",
        "      responses: {'200': {description: ok}}",
    ]
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"\(YAML aliases\?\)"):
        load_document("\n".join(lines) + "\n")
    assert time.monotonic() - started < 2


def test_shared_refs_cannot_blow_up_the_import() -> None:
    schemas: dict[str, Any] = {
        "L0": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    }
    for level in range(1, 40):
        below = {"$ref": f"#/components/schemas/L{level - 1}"}
        schemas[f"L{level}"] = {"type": "object", "properties": {"a": below, "b": below}}
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/L39"}}}
    started = time.monotonic()
    spec = import_spec(
        doc(
            {"/bomb": {"post": op(requestBody={"content": content})}},
            components={"schemas": schemas},
        )
    )
    assert time.monotonic() - started < 20
    assert mentions(spec, "POST /bomb", "nests more than") or mentions(spec, "too large")
    check_stored(spec)


def values_in(data: Any) -> int:
    if isinstance(data, dict):
        return 1 + sum(values_in(item) for item in data.values())
    if isinstance(data, list):
        return 1 + sum(values_in(item) for item in data)
    return 1


@pytest.mark.parametrize("keyword", ["enum", "default", "const", "examples"])
def test_values_copied_through_refs_count_against_the_schema_budget(keyword: str) -> None:
    from expediter_http.openapi.schemas import SCHEMA_NODES

    big = list(range(5_000))
    value = big if keyword in ("enum", "examples") else {"items": big}
    schemas = {"Big": {keyword: value}}
    properties = {f"p{i}": {"$ref": "#/components/schemas/Big"} for i in range(20)}
    body = {"content": {"application/json": {"schema": {"properties": properties}}}}
    paths = {f"/op{i}": {"post": op(requestBody=body)} for i in range(30)}
    started = time.monotonic()
    spec = import_spec(doc(paths, components={"schemas": schemas}))
    assert time.monotonic() - started < 10
    # Without the budget: 30 operations x 20 properties x 5,000 values = 3 million.
    assert values_in(spec.config()) < 30 * (SCHEMA_NODES + 100)
    assert mentions(spec, "POST /op0", "too large", repr(keyword), "left out")
    kept = spec.actions[0].body
    assert kept is not None
    assert kept.schema["properties"]["p0"] == {keyword: value}
    check_stored(spec)


@pytest.mark.parametrize(
    "document",
    [
        {"info": {"title": "no version"}},
        {"openapi": "2.0"},
        {"openapi": "4.0.0"},
        {"openapi": "1.2"},
        {"openapi": "3.9.0"},
        {"swagger": "1.2"},
        {"swagger": "3.0"},
    ],
)
def test_other_versions_are_refused_clearly(document: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"not supported|not an OpenAPI document"):
        import_spec(document)


@pytest.mark.parametrize("version", ["3.0.0", "3.0.3", "3.1.0", "3.1.1", "3.2.0", 3.0])
def test_openapi_3_versions_are_read(version: Any) -> None:
    spec = import_spec({**doc({"/a": {"get": op()}}), "openapi": version})
    assert [action.name for action in spec.actions] == ["get_a"]


# -- OpenAPI 3.0 -----------------------------------------------------------------------------


def test_base_url_is_the_first_server_with_its_variables_filled_in() -> None:
    assert imported("petstore-3.0.yaml").base_url == "https://eu.pets.example.com/v3"


def test_base_url_option_wins_over_the_servers() -> None:
    spec = imported("petstore-3.0.yaml", base_url="https://staging.test/api/")
    assert spec.base_url == "https://staging.test/api"


def test_a_relative_server_is_kept_and_reported_unless_a_base_url_is_given() -> None:
    spec = imported("weird.yaml")
    assert spec.base_url == "/api/v1"
    assert mentions(spec, "'/api/v1' is relative", "--base-url")
    given = imported("weird.yaml", base_url="https://weird.test")
    assert given.base_url == "https://weird.test"
    assert not mentions(given, "relative")


def test_no_servers_and_a_variable_without_default_are_reported() -> None:
    bare = import_spec({k: v for k, v in doc({"/a": {"get": op()}}).items() if k != "servers"})
    assert bare.base_url is None
    assert mentions(bare, "no server")
    variable = import_spec(doc({"/a": {"get": op()}}, servers=[{"url": "https://{host}/v1"}]))
    assert variable.base_url is None
    assert mentions(variable, "'host' has no default")


def test_optional_parameters_are_offered_with_their_real_types() -> None:
    action = by_name(imported("petstore-3.0.yaml"))["listPets"]
    schema = action.to_action().parameters
    assert schema["properties"]["limit"] == {
        "type": "integer",
        "format": "int32",
        "minimum": 1,
        "maximum": 100,
        "description": "How many pets to return (at most 100).",
    }
    assert schema["properties"]["weight_over"]["type"] == "number"
    status = schema["properties"]["status"]
    assert status["type"] == "array"
    assert status["items"]["enum"] == ["available", "pending", "sold"]
    assert "required" not in schema  # all optional, all offered
    trace = next(p for p in action.parameters if p.name == "X-Trace-Id")
    assert (trace.location, trace.schema) == ("header", {"type": "string", "format": "uuid"})
    limit = next(p for p in action.parameters if p.name == "limit")
    assert (limit.location, limit.required, limit.style) == ("query", False, None)
    assert next(p for p in action.parameters if p.name == "status").explode is True


def test_path_level_parameters_apply_and_path_parameters_are_required() -> None:
    actions = by_name(imported("petstore-3.0.yaml"))
    for name in ("getPetById", "deletePet", "updatePetWithForm"):
        pet_id = actions[name].parameters[0]
        assert (pet_id.name, pet_id.location, pet_id.required) == ("petId", "path", True)
        assert pet_id.schema == {"type": "integer", "format": "int64"}
    assert actions["getPetById"].to_action().parameters["required"] == ["petId"]


def test_operation_parameters_override_path_ones_by_name_and_location() -> None:
    shared = [
        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
        {"name": "id", "in": "query", "schema": {"type": "string"}},
    ]
    own = [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}]
    spec = import_spec(doc({"/a/{id}": {"parameters": shared, "get": op(parameters=own)}}))
    (action,) = spec.actions
    assert [(p.location, p.schema["type"], p.argument) for p in action.parameters] == [
        ("path", "integer", "id"),
        ("query", "string", "id_2"),
    ]
    check_stored(spec)


def test_cookie_parameters_are_kept_and_reserved_headers_are_reported() -> None:
    headers = [
        {"name": name, "in": "header", "schema": {"type": "string"}}
        for name in ("Accept", "Content-Type", "Authorization", "X-Ok")
    ]
    cookie = {"name": "session", "in": "cookie", "schema": {"type": "string"}}
    spec = import_spec(doc({"/a": {"get": op(parameters=[*headers, cookie])}}))
    assert [(p.name, p.location) for p in spec.actions[0].parameters] == [
        ("X-Ok", "header"),
        ("session", "cookie"),
    ]
    assert len(mentions(spec, "header parameter is ignored")) == 3


def test_json_body_is_preferred_and_openapi_only_keywords_are_converted() -> None:
    action = by_name(imported("petstore-3.0.yaml"))["createPet"]
    body = action.body
    assert body is not None
    assert (body.content_type, body.required, body.argument) == ("application/json", True, "body")
    assert body.description == "The pet to add"
    pet, extra = body.schema["allOf"]
    assert "id" not in pet["properties"]  # readOnly: never sent
    assert pet["required"] == ["name"]
    assert pet["properties"]["tag"] == {"type": ["string", "null"]}
    assert "xml" not in pet
    assert "externalDocs" not in pet["properties"]["category"]
    assert "example" not in pet["properties"]["name"]
    photo = extra["properties"]["photo"]
    # format: byte is base64 text on the wire: noted, not marked for decoding.
    assert photo == {"type": "string", "format": "byte", "description": "base64-encoded"}


def test_form_body_keeps_nullable_enums() -> None:
    body = by_name(imported("petstore-3.0.yaml"))["updatePetWithForm"].body
    assert body is not None
    assert body.content_type == "application/x-www-form-urlencoded"
    assert body.schema["properties"]["status"] == {
        "type": ["string", "null"],
        "enum": ["available", "pending", "sold", None],
    }
    assert body.schema["required"] == ["name"]


def test_multipart_body_marks_files_base64_and_keeps_the_encoding() -> None:
    body = by_name(imported("petstore-3.0.yaml"))["uploadImage"].body
    assert body is not None
    assert body.content_type == "multipart/form-data"
    assert body.schema["properties"]["file"] == {
        "type": "string",
        "format": "binary",
        "contentEncoding": "base64",
        "description": "base64-encoded",
    }
    assert body.encoding == {"file": {"contentType": "image/png, image/jpeg"}}


def test_xml_body_takes_its_root_from_the_schema() -> None:
    body = by_name(imported("petstore-3.0.yaml"))["replacePetXml"].body
    assert body is not None
    assert (body.content_type, body.xml_root) == ("application/xml", "pet")
    assert "xml" not in body.schema


def test_xml_root_falls_back_to_the_referenced_schema_name() -> None:
    content = {"text/xml": {"schema": {"$ref": "#/components/schemas/Order"}}}
    components = {"schemas": {"Order": {"type": "object"}}}
    spec = import_spec(
        doc({"/o": {"post": op(requestBody={"content": content})}}, components=components)
    )
    body = spec.actions[0].body
    assert body is not None
    assert (body.content_type, body.xml_root) == ("text/xml", "Order")


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (["application/xml", "application/vnd.api+json"], "application/vnd.api+json"),
        (
            ["multipart/form-data", "application/x-www-form-urlencoded"],
            "application/x-www-form-urlencoded",
        ),
        (["text/plain", "multipart/form-data"], "multipart/form-data"),
        (["application/octet-stream", "application/xml"], "application/xml"),
        (["application/octet-stream", "text/plain"], "text/plain"),
        (["image/png", "application/octet-stream"], "application/octet-stream"),
        (["image/png", "image/jpeg"], "image/png"),
        (["application/json; charset=utf-8", "text/plain"], "application/json; charset=utf-8"),
    ],
)
def test_body_media_type_preference(offered: list[str], chosen: str) -> None:
    content = {media: {"schema": {"type": "string"}} for media in offered}
    spec = import_spec(doc({"/b": {"post": op(requestBody={"content": content})}}))
    body = spec.actions[0].body
    assert body is not None
    assert body.content_type == chosen


def test_a_wildcard_media_type_is_sent_as_json_or_bytes_and_reported() -> None:
    structured = {"*/*": {"schema": {"type": "object"}}}
    raw = {"application/*": {}}
    spec = import_spec(
        doc(
            {
                "/s": {"post": op(requestBody={"content": structured})},
                "/r": {"post": op(requestBody={"content": raw})},
            }
        )
    )
    bodies = [action.body for action in spec.actions]
    assert [body.content_type for body in bodies if body] == [
        "application/json",
        "application/octet-stream",
    ]
    assert bodies[1] is not None
    assert bodies[1].schema["contentEncoding"] == "base64"
    assert len(mentions(spec, "media type", "is sent as")) == 2


def test_security_schemes_and_what_each_operation_uses() -> None:
    spec = imported("petstore-3.0.yaml")
    assert spec.security_schemes == (
        SecurityScheme("shop_key", "api_key", "header", "X-API-Key"),
        SecurityScheme("bearer_token", "bearer"),
    )
    actions = by_name(spec)
    assert actions["listPets"].security == ("shop_key",)  # the document's default
    assert actions["createPet"].security == ("bearer_token",)
    assert actions["deletePet"].security == ()  # security: [] says none
    assert spec.config()["security"] == [
        {"name": "shop_key", "type": "api_key", "in": "header", "parameter": "X-API-Key"},
        {"name": "bearer_token", "type": "bearer"},
    ]


def test_no_security_anywhere_leaves_it_unset() -> None:
    spec = import_spec(doc({"/a": {"get": op()}}))
    assert spec.actions[0].security is None
    assert "security" not in spec.actions[0].to_dict()
    assert "security" not in spec.config()


def test_scheme_names_are_sanitized_and_undeclared_ones_reported() -> None:
    schemes = {
        "my-key.v2": {"type": "apiKey", "in": "cookie", "name": "k"},
        "Basic Auth": {"type": "http", "scheme": "Basic"},
        "digest": {"type": "http", "scheme": "digest"},
        "mtls": {"type": "mutualTLS"},
    }
    security = [{"my-key.v2": [], "ghost": []}, {"Basic Auth": []}, {"digest": []}]
    spec = import_spec(
        doc(
            {"/a": {"get": op(security=security)}},
            components={"securitySchemes": schemes},
        )
    )
    assert [scheme.to_dict() for scheme in spec.security_schemes] == [
        {"name": "my_key_v2", "type": "api_key", "in": "cookie", "parameter": "k"},
        {"name": "Basic_Auth", "type": "basic"},
    ]
    assert spec.actions[0].security == ("my_key_v2", "Basic_Auth")
    assert mentions(spec, "'digest'", "not supported")
    assert mentions(spec, "'mtls'", "not supported")
    assert mentions(spec, "undeclared scheme 'ghost'")


def test_deprecated_operations_say_so() -> None:
    assert by_name(imported("petstore-3.0.yaml"))["deletePet"].description == "Deprecated."


def test_descriptions_are_summary_and_description_cut_to_a_sane_length() -> None:
    spec = import_spec(doc({"/a": {"get": op(summary="Short.", description="x" * 5000)}}))
    description = spec.actions[0].description
    assert description.startswith("Short.\n\nxxx")
    assert len(description) <= 1024


def test_config_holds_base_url_actions_and_security_and_no_secret() -> None:
    spec = imported("petstore-3.0.yaml")
    config = spec.config()
    assert set(config) == {"base_url", "actions", "security"}
    assert [a["name"] for a in config["actions"]] == [a.name for a in spec.actions]
    assert not spec.problems
    assert all(not action.require_approval for action in spec.actions)


def test_nullable_without_a_type_and_a_ref_with_nullable() -> None:
    components = {"schemas": {"Tag": {"type": "string"}}}
    properties = {
        "any": {"nullable": True, "minLength": 1},
        "tag": {"$ref": "#/components/schemas/Tag", "nullable": True},
        "wrapped": {"allOf": [{"$ref": "#/components/schemas/Tag"}], "nullable": True},
    }
    content = {"application/json": {"schema": {"type": "object", "properties": properties}}}
    spec = import_spec(
        doc({"/n": {"post": op(requestBody={"content": content})}}, components=components)
    )
    body = spec.actions[0].body
    assert body is not None
    converted = body.schema["properties"]
    assert converted["any"] == {"anyOf": [{"minLength": 1}, {"type": "null"}]}
    assert converted["tag"] == {"type": ["string", "null"]}
    assert converted["wrapped"]["anyOf"][1] == {"type": "null"}


def test_parameter_content_is_read_and_reported() -> None:
    spec = imported("petstore-3.1.json")
    listing = by_name(spec)["listPets"]
    assert next(p for p in listing.parameters if p.name == "filter").schema == {
        "type": "object",
        "properties": {"color": {"type": "string"}},
    }
    assert mentions(spec, "parameter 'filter'", "content")


# -- OpenAPI 3.1 -----------------------------------------------------------------------------


def test_openapi_31_type_arrays_and_binary_content() -> None:
    spec = imported("petstore-3.1.json")
    actions = by_name(spec)
    assert spec.base_url == "https://api.pets.example.net"
    tag = actions["listPets"].parameters[0]
    assert tag.schema == {"type": ["string", "null"]}
    created = actions["createPet"].body
    assert created is not None
    assert created.schema["description"] == "The new pet"  # a $ref's sibling (3.1)
    assert created.schema["properties"]["weight"] == {"type": ["number", "null"]}
    assert created.schema["properties"]["kind"] == {"enum": ["cat", "dog", None]}
    assert created.schema["properties"]["tags"]["examples"] == [["small"]]
    assert "id" not in created.schema["properties"]
    document = actions["attachDocument"].body
    assert document is not None
    scan = document.schema["properties"]["scan"]
    assert (scan["format"], scan["contentEncoding"]) == ("binary", "base64")
    thumbnail = document.schema["properties"]["thumbnail"]
    assert thumbnail == {
        "type": "string",
        "contentEncoding": "base64",
        "description": "base64-encoded",
    }
    photo = actions["putPhoto"].body
    assert photo is not None
    assert photo.content_type == "image/png"
    assert photo.schema["format"] == "binary"
    assert "base64" in photo.schema["description"]


def test_webhooks_and_recursive_schemas_are_reported() -> None:
    spec = imported("petstore-3.1.json")
    assert mentions(spec, "1 webhook(s) not imported")
    assert mentions(spec, "#/components/schemas/Pet", "contains itself")
    body = by_name(spec)["createPet"].body
    assert body is not None
    owner = body.schema["properties"]["owner"]
    assert owner["properties"]["pets"]["items"] == {"type": "object"}


# -- Swagger 2.0 -----------------------------------------------------------------------------


def test_swagger_base_url_prefers_https() -> None:
    assert imported("petstore-2.0.yaml").base_url == "https://petstore.example.org/v2"
    only_http = load_document(SPECS / "petstore-2.0.yaml")
    only_http["schemes"] = ["http"]
    assert import_spec(only_http).base_url == "http://petstore.example.org/v2"
    del only_http["host"]
    no_host = import_spec(only_http)
    assert no_host.base_url == "/v2"
    assert mentions(no_host, "no host")


def test_swagger_body_parameter_becomes_a_json_body() -> None:
    body = by_name(imported("petstore-2.0.yaml"))["addPet"].body
    assert body is not None
    assert (body.content_type, body.required, body.description) == (
        "application/json",
        True,
        "The pet to add",
    )
    assert body.schema == {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "nickname": {"type": ["string", "null"]},
        },
    }


def test_swagger_inline_parameter_types_and_collection_formats() -> None:
    parameters = by_name(imported("petstore-2.0.yaml"))["findPetsByStatus"].parameters
    status, tags, price = parameters
    assert status.required
    assert status.schema["items"]["enum"] == ["available", "pending", "sold"]
    assert (status.style, status.explode) == ("form", True)  # collectionFormat: multi
    assert (tags.style, tags.explode, tags.required) == ("form", False, False)  # csv
    assert price.schema == {"type": "number", "format": "double", "minimum": 0}


def test_swagger_form_data_becomes_form_or_multipart_bodies() -> None:
    actions = by_name(imported("petstore-2.0.yaml"))
    form = actions["updatePetWithForm"]
    assert form.body is not None
    assert form.body.content_type == "application/x-www-form-urlencoded"
    assert form.body.schema["required"] == ["name"]
    assert form.parameters[0].schema == {"type": "integer", "format": "int64"}  # from a $ref
    upload = actions["uploadFile"].body
    assert upload is not None
    assert upload.content_type == "multipart/form-data"
    file = upload.schema["properties"]["file"]
    assert (file["type"], file["format"], file["contentEncoding"]) == ("string", "binary", "base64")
    assert upload.required


def test_swagger_security_definitions() -> None:
    spec = imported("petstore-2.0.yaml")
    assert [scheme.to_dict() for scheme in spec.security_schemes] == [
        {"name": "api_key", "type": "api_key", "in": "query", "parameter": "key"},
        {"name": "basicAuth", "type": "basic"},
    ]
    actions = by_name(spec)
    assert actions["addPet"].security == ("basicAuth",)  # oauth2 left out
    assert actions["findPetsByStatus"].security == ("api_key",)
    assert actions["placeOrder"].security == ()
    assert mentions(spec, "'petstore_auth'", "oauth2", "not supported")


def test_swagger_xml_body_root_is_the_definition_name() -> None:
    body = by_name(imported("petstore-2.0.yaml"))["placeOrder"].body
    assert body is not None
    assert (body.content_type, body.xml_root, body.required) == ("application/xml", "Order", False)


# -- what cannot be imported -----------------------------------------------------------------


def test_unsupported_constructs_are_all_reported() -> None:
    spec = imported("weird.yaml", base_url="https://weird.test")
    assert mentions(spec, "'oauth'", "oauth2", "not supported")
    assert mentions(spec, "'oidc'", "openIdConnect", "not supported")
    assert mentions(spec, "POST /things", "callbacks are ignored")
    assert mentions(spec, "GET /things", "links are ignored")
    assert mentions(spec, "GET /things", "remote $ref", "common.yaml")
    assert mentions(spec, "GET /things", "is skipped")
    assert mentions(spec, "PUT /remote", "operation not imported")
    assert mentions(spec, "#/components/schemas/Node", "contains itself")
    assert mentions(spec, "{item.key}", "no parameter declares")
    assert mentions(spec, "allOf combines conflicting types (integer, string)")
    assert "remoteBody" not in by_name(spec)


def test_recursive_schema_is_cut_to_an_object() -> None:
    body = by_name(imported("weird.yaml"))["sameName_2"].body
    assert body is not None
    assert body.schema["properties"]["children"]["items"] == {"type": "object"}


def test_undeclared_path_placeholders_become_required_strings() -> None:
    action = by_name(imported("weird.yaml"))["get_things_id_sub_items_item_key"]
    assert [(p.name, p.required, p.schema) for p in action.parameters] == [
        ("id", True, {"type": "string"}),
        ("item.key", True, {"type": "string"}),
    ]


def test_a_declared_path_parameter_missing_from_the_path_is_dropped() -> None:
    stray = {"name": "gone", "in": "path", "required": True, "schema": {"type": "string"}}
    spec = import_spec(doc({"/a": {"get": op(parameters=[stray])}}))
    assert spec.actions[0].parameters == ()
    assert mentions(spec, "'gone' is not in the path")


def test_operation_id_clashes_long_ids_and_odd_ids_get_valid_unique_names() -> None:
    spec = imported("weird.yaml")
    names = [action.name for action in spec.actions]
    assert names[:2] == ["sameName", "sameName_2"]
    assert mentions(spec, "used by another operation", "'sameName_2'")
    long_names = [name for name in names if name.startswith("aVeryLong")]
    assert len(long_names) == 2
    assert len(set(long_names)) == 2
    assert all(len(name) == 64 for name in long_names)
    assert "_3_delete__n_code_" in names
    assert len(mentions(spec, "not a valid action name")) == 3
    check_stored(spec)


def test_parameter_names_that_are_not_property_names_get_arguments() -> None:
    action = by_name(imported("weird.yaml"))["_3_delete__n_code_"]
    assert [(p.name, p.argument) for p in action.parameters] == [
        ("naïve", "na_ve"),
        ("filter[name]", "filter_name_"),
    ]


def test_remote_and_broken_refs_inside_schemas_accept_anything() -> None:
    properties = {
        "remote": {"$ref": "other.yaml#/Thing"},
        "broken": {"$ref": "#/components/schemas/Missing"},
        "anchor": {"$ref": "#thing"},
    }
    content = {"application/json": {"schema": {"type": "object", "properties": properties}}}
    spec = import_spec(doc({"/r": {"post": op(requestBody={"content": content})}}))
    body = spec.actions[0].body
    assert body is not None
    assert body.schema["properties"] == {"remote": {}, "broken": {}, "anchor": {}}
    assert mentions(spec, "remote $ref 'other.yaml#/Thing'")
    assert mentions(spec, "'#/components/schemas/Missing' points at nothing")


def test_very_deep_schemas_are_cut_and_reported() -> None:
    schemas = {
        f"S{i}": {"type": "object", "properties": {"x": {"$ref": f"#/components/schemas/S{i + 1}"}}}
        for i in range(60)
    }
    schemas["S60"] = {"type": "string"}
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}
    spec = import_spec(
        doc({"/d": {"post": op(requestBody={"content": content})}}, components={"schemas": schemas})
    )
    assert mentions(spec, "nests more than 32 levels")
    check_stored(spec)


def test_other_constructs_are_reported_not_dropped_silently() -> None:
    encoding = {"f": {"contentType": "text/plain", "headers": {"X-Part": {}}}}
    multipart = {"multipart/form-data": {"schema": {"type": "object"}, "encoding": encoding}}
    spec = import_spec(
        doc(
            {
                "/a": {
                    "GET": op(),
                    "query": op(),
                    "servers": [{"url": "https://other.test"}],
                    "get": op(
                        parameters=[
                            {"name": "q", "in": "querystring", "schema": {}},
                            {"name": "bare", "in": "query"},
                        ],
                        security={"not": "a list"},
                    ),
                },
                "/remote": {"$ref": "https://example.com/paths.yaml#/remote"},
                "no-slash": {"get": op()},
                "/m": {"post": op(requestBody={"content": multipart})},
            }
        )
    )
    assert mentions(spec, "'GET' operations are not imported")
    assert mentions(spec, "'query' operations are not imported")
    assert mentions(spec, "path '/a' names its own servers")
    assert mentions(spec, "parameter 'q' is in 'querystring'")
    assert mentions(spec, "parameter 'bare' has no schema; taken as a string")
    assert mentions(spec, "security is not a list")
    assert mentions(spec, "path '/remote' is not imported")
    assert mentions(spec, "'no-slash' does not start with '/'")
    assert mentions(spec, "encoding headers of 'f' are ignored")
    assert [action.name for action in spec.actions] == ["get_a", "post_m"]
    assert spec.actions[0].parameters[0].schema == {"type": "string"}
    assert spec.actions[0].security is None


def test_swagger_body_and_form_together_and_unknown_collection_formats() -> None:
    parameters = [
        {"name": "b", "in": "body", "schema": {"type": "object"}},
        {"name": "f", "in": "formData", "type": "string"},
        {"name": "t", "in": "query", "type": "array", "items": {"type": "string"}},
    ]
    parameters[2]["collectionFormat"] = "tsv"
    document = {
        "swagger": "2.0",
        "host": "api.test",
        "paths": {"/x": {"post": {"parameters": parameters, "responses": {}}}},
    }
    spec = import_spec(document)
    (action,) = spec.actions
    assert action.body is not None
    assert action.body.content_type == "application/json"
    assert mentions(spec, "both a body and form parameters")
    assert mentions(spec, "collectionFormat 'tsv' is not supported")
    assert (action.parameters[0].style, action.parameters[0].explode) == ("form", False)
    assert spec.base_url == "https://api.test"


def test_a_document_without_operations_says_so() -> None:
    spec = import_spec(doc({}))
    assert spec.actions == ()
    assert mentions(spec, "no operations")
    assert "actions" not in spec.config()


# -- names, for any operationId and path ------------------------------------------------------

_operation_ids = st.one_of(
    st.none(),
    st.sampled_from(["getPet", "get_pet", "a" * 70, "1st", "", "-x", "get pet"]),
    st.text(max_size=200),
)
_segments = st.lists(
    st.one_of(st.text(max_size=12), st.text(max_size=6).map(lambda s: "{" + s + "}")),
    max_size=4,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(_segments, st.sampled_from(["get", "post", "delete"]), _operation_ids),
        max_size=12,
    )
)
def test_any_operation_ids_and_paths_give_valid_unique_names(
    operations: list[tuple[list[str], str, str | None]],
) -> None:
    paths: dict[str, dict[str, Any]] = {}
    for segments, method, operation_id in operations:
        path = "/" + "/".join(segments)
        fields = {} if operation_id is None else {"operationId": operation_id}
        paths.setdefault(path, {})[method] = op(**fields)
    spec = import_spec(doc(paths))
    assert len(spec.actions) == sum(len(item) for item in paths.values())
    check_stored(spec)
