"""Every operation of each test spec (a pet store in OpenAPI 3.0 and 3.1, and in Swagger 2.0),
imported and called against the local server with arguments made from its own schema."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import call
from expediter_http.actions import HttpAction
from expediter_http.openapi import import_spec, load_document

import expediter

SPECS = Path(__file__).parent / "specs"


def sample(schema: Any) -> Any:
    """A value the schema accepts (required properties only for objects)."""
    if not isinstance(schema, dict):
        return "x"
    if "enum" in schema:
        return next(item for item in schema["enum"] if item is not None)
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return sample(schema[key][0])
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next(item for item in kind if item != "null")
    if kind == "integer":
        return max(1, schema.get("minimum", 1))
    if kind == "number":
        return max(1.5, schema.get("minimum", 1.5))
    if kind == "boolean":
        return True
    if kind == "array":
        return [sample(schema.get("items", {"type": "string"}))]
    if kind == "string":
        if schema.get("contentEncoding") == "base64" or schema.get("format") in ("binary", "byte"):
            return base64.b64encode(b"\x00pet photo\xff").decode()
        return "x" * max(1, schema.get("minLength", 1))
    properties = schema.get("properties", {})
    return {name: sample(properties.get(name, {})) for name in schema.get("required", [])} or (
        {name: sample(item) for name, item in list(properties.items())[:1]}
    )


def arguments_for(action: HttpAction) -> dict[str, Any]:
    schema = action.arguments_schema
    return {
        name: sample(item)
        for name, item in schema["properties"].items()
        if name in schema.get("required", ()) or name == getattr(action.body, "argument", None)
    }


def path_pattern(base_path: str, template: str) -> re.Pattern[str]:
    parts = re.split(r"({[^{}]*})", template)
    body = "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts)
    return re.compile(re.escape(base_path.rstrip("/")) + body)


@pytest.mark.parametrize("spec", ["petstore-3.0.yaml", "petstore-3.1.json", "petstore-2.0.yaml"])
def test_every_imported_operation_reaches_the_server(
    spec: str, server: Any, http_host: Any
) -> None:
    imported = import_spec(load_document(SPECS / spec), base_url=server.url + "/api")
    config = imported.config()
    config["credentials"] = {
        scheme.name: "user:secret-value" for scheme in imported.security_schemes
    }
    tool_instance = expediter.ToolInstance(tool="http", name="pets", config=config)
    host = http_host()
    assert imported.actions
    for action in imported.actions:
        server.received.clear()
        event = call(host, tool_instance, action.name, arguments_for(action))
        assert event.status == "completed", (action.name, event.error)
        (received,) = server.received
        assert received.method == action.method, action.name
        assert path_pattern("/api", action.path).fullmatch(received.path), (
            action.name,
            received.path,
        )
        # Every configured credential went as the scheme says, never in clear to the model.
        assert "secret-value" not in repr(event.result), action.name
