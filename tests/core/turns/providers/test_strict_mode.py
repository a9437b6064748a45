"""Strict mode's defect classes (``strict_schema``): ``allOf`` merged or refused, ``$ref`` with
sibling keywords inlined at every depth (recursion left bare), untyped objects typed.

Every output is checked against the strict rules by ``violations`` below, written from the
OpenAI/Anthropic strict-mode documentation, not from the implementation.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expediter.core.host import Host
from expediter.core.turns.providers.jsonschema import NotStrictable, model_schema, strict_schema
from expediter.hookspecs.tool import Action

Schema = dict[str, Any]

_MAPS = ("properties", "$defs", "definitions")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_ONES = ("items", "additionalProperties", "not")


def subschemas(node: Schema) -> Iterator[Schema]:
    yield node
    for key in _MAPS:
        for child in (node.get(key) or {}).values():
            if isinstance(child, dict):
                yield from subschemas(child)
    for key in _LISTS:
        for child in node.get(key) or ():
            if isinstance(child, dict):
                yield from subschemas(child)
    for key in _ONES:
        if isinstance(node.get(key), dict):
            yield from subschemas(node[key])


def target(reference: str, root: Schema) -> Any:
    found: Any = root
    for part in reference.removeprefix("#").strip("/").split("/") if reference != "#" else ():
        found = found[part.replace("~1", "/").replace("~0", "~")]
    return found


def violations(strict: Schema) -> list[str]:
    """What breaks the strict rules: open or untyped objects, optional properties, ``$ref``
    beside other keywords or pointing nowhere, ``allOf``, defaults."""
    found = []
    for node in subschemas(strict):
        kind = node.get("type")
        kinds = {kind} if isinstance(kind, str) else set(kind or ())
        if "properties" in node or "object" in kinds:
            if "object" not in kinds:
                found.append(f"object without type object: {node}")
            if node.get("additionalProperties") is not False:
                found.append(f"object not closed: {node}")
            if node.get("required") != list(node.get("properties", {})):
                found.append(f"not every property required: {node}")
        if "$ref" in node:
            if len(node) > 1:
                found.append(f"$ref with siblings: {node}")
            try:
                target(node["$ref"], strict)
            except (KeyError, TypeError):
                found.append(f"$ref that does not resolve: {node}")
        if "allOf" in node:
            found.append(f"allOf left: {node}")
        if "default" in node:
            found.append(f"default left: {node}")
    return found


def obj(properties: Schema, required: list[str] | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, **extra}
    if required is not None:
        schema["required"] = required
    return schema


def strict_of(parameters: Schema) -> Schema:
    """The strict schema of an action's parameters, as the toolset builds it."""
    strict = strict_schema(model_schema(Action(name="a", description="", parameters=parameters)))
    assert violations(strict) == []
    return strict


# -- allOf ---------------------------------------------------------------------------------------


def test_object_whose_properties_come_only_through_all_of_is_merged_not_left_empty() -> None:
    strict = strict_of(
        {
            "type": "object",
            "allOf": [{"properties": {"q": {"type": "string"}}, "required": ["q"]}],
        }
    )
    assert strict["properties"] == {"q": {"type": "string"}}
    assert strict["required"] == ["q"]
    assert "allOf" not in strict


def test_all_of_merge_keeps_the_parents_properties_and_makes_optional_ones_nullable() -> None:
    strict = strict_of(
        obj(
            {"a": {"type": "integer"}},
            ["a"],
            description="Outer.",
            allOf=[
                {
                    "description": "Inner.",
                    "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
                }
            ],
        )
    )
    assert strict["description"] == "Outer."  # the parent's own annotation wins
    assert strict["properties"] == {"a": {"type": "integer"}, "b": {"type": ["string", "null"]}}
    assert strict["required"] == ["a", "b"]


@pytest.mark.parametrize(
    "where",
    ["property", "items", "anyOf", "defs", "optional"],
)
def test_all_of_is_merged_at_every_depth(where: str) -> None:
    inner = {"allOf": [obj({"x": {"type": "string"}}, ["x"])], "description": "Inner."}
    if where == "property":
        schema = obj({"p": inner}, ["p"])
    elif where == "items":
        schema = obj({"p": {"type": "array", "items": inner}}, ["p"])
    elif where == "anyOf":
        schema = obj({"p": {"anyOf": [inner, {"type": "integer"}]}}, ["p"])
    elif where == "defs":
        schema = obj({"p": {"$ref": "#/$defs/D"}}, ["p"], **{"$defs": {"D": inner}})
    else:
        schema = obj({"p": inner})
    strict = strict_of(schema)
    merged = [node for node in subschemas(strict) if node.get("description") == "Inner."]
    assert merged
    for node in merged:
        assert node["properties"] == {"x": {"type": "string"}}


def test_single_all_of_holding_a_ref_beside_a_description_is_inlined() -> None:
    # The shape pydantic v1 gave a described record field.
    record = obj({"n": {"type": "integer"}}, ["n"])
    strict = strict_of(
        obj(
            {"r": {"allOf": [{"$ref": "#/$defs/R"}], "description": "The record."}},
            ["r"],
            **{"$defs": {"R": record}},
        )
    )
    assert strict["properties"]["r"]["description"] == "The record."
    assert strict["properties"]["r"]["properties"] == {"n": {"type": "integer"}}


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param(
            obj(
                {},
                allOf=[obj({"a": {"type": "string"}}), obj({"b": {"type": "string"}})],
            ),
            id="several-entries",
        ),
        pytest.param(
            obj({"a": {"type": "string"}}, allOf=[obj({"a": {"type": "integer"}})]),
            id="redefined-property",
        ),
        pytest.param(
            {"type": "object", "properties": {}, "allOf": [{"type": "array"}]},
            id="clashing-type",
        ),
        pytest.param(
            obj({"p": {"type": "string", "maxLength": 3, "allOf": [{"maxLength": 5}]}}, ["p"]),
            id="clashing-constraint",
        ),
        pytest.param(obj({}, allOf=[False]), id="false-entry"),
    ],
)
def test_all_of_that_cannot_be_merged_safely_is_not_strictable(schema: Schema) -> None:
    with pytest.raises(NotStrictable, match="allOf"):
        strict_schema(schema)


# -- $ref beside other keywords --------------------------------------------------------------------

_RECORD = obj({"n": {"type": "integer"}, "note": {"type": "string"}}, ["n"])


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        pytest.param(
            obj({"r": {"$ref": "#/$defs/R", "description": "D."}}, ["r"]), ["r"], id="required"
        ),
        pytest.param(
            obj({"o": obj({"r": {"$ref": "#/$defs/R", "description": "D."}}, ["r"])}, ["o"]),
            ["o", "r"],
            id="nested-object",
        ),
        pytest.param(
            obj({"o": obj({"r": {"$ref": "#/$defs/R", "title": "T", "description": "D."}})}),
            None,
            id="nested-optional-with-title",
        ),
        pytest.param(
            obj(
                {"l": {"type": "array", "items": {"$ref": "#/$defs/R", "description": "D."}}},
                ["l"],
            ),
            None,
            id="array-items",
        ),
        pytest.param(
            obj({"u": {"anyOf": [{"$ref": "#/$defs/R", "description": "D."}, {"type": "string"}]}}),
            None,
            id="anyOf-branch",
        ),
        pytest.param(
            obj({"w": {"$ref": "#/$defs/W"}}, ["w"]),
            None,
            id="inside-defs",
        ),
        pytest.param(
            obj({"r": {"$ref": "#/$defs/Alias", "description": "D."}}, ["r"]),
            ["r"],
            id="ref-to-a-ref",
        ),
        pytest.param(
            obj({"r": {"$ref": "#/$defs/R~1x", "description": "D."}}, ["r"]),
            ["r"],
            id="escaped-pointer",
        ),
        pytest.param(
            obj({"r": {"$ref": "#/%24defs/R", "description": "D."}}, ["r"]),
            ["r"],
            id="percent-encoded-pointer",
        ),
    ],
)
def test_ref_with_siblings_is_inlined_at_every_depth(
    schema: Schema, path: list[str] | None
) -> None:
    schema["$defs"] = {
        "R": _RECORD,
        "R/x": _RECORD,
        "Alias": {"$ref": "#/$defs/R"},
        "W": obj({"inner": {"$ref": "#/$defs/R", "description": "D."}}, ["inner"]),
    }
    before = copy.deepcopy(schema)
    strict = strict_of(schema)
    assert schema == before
    if path is not None:
        node = strict
        for name in path:
            node = node["properties"][name]
        assert node["description"] == "D."
        assert node["properties"] == {
            "n": {"type": "integer"},
            "note": {"type": ["string", "null"]},
        }
        assert node["required"] == ["n", "note"]


def test_recursive_ref_with_a_description_stays_a_bare_ref_and_terminates() -> None:
    node = obj(
        {
            "value": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node", "description": "A."}},
        },
        ["value", "children"],
    )
    strict = strict_of(
        obj(
            {"tree": {"$ref": "#/$defs/Node", "description": "Root."}},
            ["tree"],
            **{"$defs": {"Node": node}},
        )
    )
    tree = strict["properties"]["tree"]
    assert tree["description"] == "Root."
    assert tree["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert strict["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_recursive_ref_to_the_root_stays_bare() -> None:
    strict = strict_of(
        obj({"next": {"$ref": "#", "description": "More."}, "v": {"type": "integer"}})
    )
    assert {"$ref": "#"} in strict["properties"]["next"]["anyOf"]


def test_recursive_ref_beside_a_constraint_is_not_strictable() -> None:
    node = obj({"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}, "maxItems": 2}})
    node["properties"]["first"] = {"$ref": "#/$defs/N", "minProperties": 1}
    with pytest.raises(NotStrictable, match="recursive"):
        strict_schema(obj({"n": {"$ref": "#/$defs/N"}}, ["n"], **{"$defs": {"N": node}}))


@pytest.mark.parametrize(
    "reference", ["#/$defs/Missing", "https://example.com/schema.json", "#/$defs/R/nope"]
)
def test_ref_with_siblings_that_does_not_resolve_is_not_strictable(reference: str) -> None:
    with pytest.raises(NotStrictable, match="does not resolve"):
        strict_schema(
            obj({"r": {"$ref": reference, "description": "D."}}, ["r"], **{"$defs": {"R": _RECORD}})
        )


def test_ref_whose_sibling_constraint_differs_from_its_target_is_not_strictable() -> None:
    with pytest.raises(NotStrictable):
        strict_schema(
            obj(
                {"r": {"$ref": "#/$defs/S", "type": "integer"}},
                ["r"],
                **{"$defs": {"S": {"type": "string"}}},
            )
        )


def test_refs_whose_inlining_explodes_are_not_strictable() -> None:
    defs: Schema = {"L0": {"type": "string"}}
    for level in range(1, 30):
        below = {"$ref": f"#/$defs/L{level - 1}", "description": "d"}
        defs[f"L{level}"] = obj({"a": below, "b": below}, ["a", "b"])
    with pytest.raises(NotStrictable, match="too large"):
        strict_schema(
            obj({"top": {"$ref": "#/$defs/L29", "description": "t"}}, ["top"], **{"$defs": defs})
        )


def test_a_schema_nested_too_deep_is_not_strictable_rather_than_a_recursion_error() -> None:
    schema: Schema = {"type": "string"}
    for _ in range(100):
        schema = obj({"x": schema}, ["x"])
    with pytest.raises(NotStrictable, match="deeper"):
        strict_schema(schema)


# -- objects typed -------------------------------------------------------------------------------


def test_nested_objects_without_a_type_are_typed_object_when_closed() -> None:
    untyped = {"properties": {"a": {"type": "string"}}}
    strict = strict_of(
        obj(
            {
                "p": copy.deepcopy(untyped),
                "l": {"type": "array", "items": copy.deepcopy(untyped)},
                "u": {"anyOf": [copy.deepcopy(untyped), {"type": "integer"}]},
                "r": {"$ref": "#/definitions/U"},
            },
            ["p", "l", "u", "r"],
            definitions={"U": copy.deepcopy(untyped)},
        )
    )
    typed = [
        strict["properties"]["p"],
        strict["properties"]["l"]["items"],
        strict["properties"]["u"]["anyOf"][0],
        strict["definitions"]["U"],
    ]
    for node in typed:
        assert node["type"] == "object"
        assert node["additionalProperties"] is False


# -- property: any schema built from these defect classes ---------------------------------------

_LEAF = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer", "default": 1},
        {"enum": ["a", "b"]},
        {"$ref": "#/$defs/Rec"},
        {"$ref": "#/$defs/Rec", "description": "R."},
        {"$ref": "#/$defs/Tree", "title": "T"},
        {"properties": {"z": {"type": "boolean"}}},
    ]
)


def _objects(inner: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
    fields = st.dictionaries(
        st.sampled_from(["a", "b", "c"]), st.tuples(inner, st.booleans()), max_size=3
    )

    def build(items: dict[str, tuple[Schema, bool]], how: str, typed: bool) -> Schema:
        body: Schema = {
            "properties": {name: schema for name, (schema, _) in items.items()},
            "required": [name for name, (_, required) in items.items() if required],
        }
        node: Schema = {"type": "object"} if typed else {}
        if how == "allOf":
            node["properties"] = {}
            node["allOf"] = [body]
        elif how == "ref-sibling-allOf":
            node["description"] = "Wrapped."
            node["allOf"] = [{**body, "type": "object"}]
        else:
            node.update(body)
        return node

    return st.builds(
        build, fields, st.sampled_from(["plain", "allOf", "ref-sibling-allOf"]), st.booleans()
    )


_SCHEMAS = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        _objects(inner),
        st.builds(lambda item: {"type": "array", "items": item}, inner),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner),
    ),
    max_leaves=10,
)


@st.composite
def parameter_schemas(draw: st.DrawFn) -> Schema:
    root = draw(_objects(_SCHEMAS))
    root["type"] = "object"
    root["$defs"] = {
        "Rec": draw(_objects(_LEAF.filter(lambda leaf: "$ref" not in leaf))),
        "Tree": obj(
            {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree", "description": "K."}}},
            ["kids"],
        ),
    }
    return json.loads(json.dumps(root))


def _names(schema: Schema) -> set[str]:
    properties = dict(schema.get("properties") or {})
    for entry in schema.get("allOf") or ():
        properties.update(entry.get("properties") or {})
    return set(properties)


@settings(max_examples=200, deadline=None)
@given(parameter_schemas())
def test_strict_output_always_follows_the_strict_rules_and_keeps_every_parameter(
    schema: Schema,
) -> None:
    before = copy.deepcopy(schema)
    strict = strict_schema(model_schema(Action(name="a", description="", parameters=schema)))
    assert schema == before
    assert violations(strict) == []
    assert set(strict["properties"]) == _names(schema)


# -- through a toolset ---------------------------------------------------------------------------


def _client_tool(name: str, parameters: Schema) -> Schema:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_client_tool_with_properties_only_in_all_of_is_offered_strict_and_satisfiable(
    provider: str, make_host: Callable[..., Host]
) -> None:
    merged = {
        "type": "object",
        "allOf": [{"properties": {"q": {"type": "string"}}, "required": ["q"]}],
    }
    several = {"type": "object", "allOf": [obj({"a": {"type": "string"}}), obj({})]}
    toolset = make_host().toolset(
        client_tools=[_client_tool("search", merged), _client_tool("mixed", several)]
    )
    tools = toolset.schemas(provider, strict=True)
    by_name: dict[str, Schema] = {}
    for entry in tools:
        body = entry.get("function", entry)
        by_name[body["name"]] = {
            "strict": body.get("strict"),
            "parameters": body.get("parameters", body.get("input_schema")),
        }
    assert by_name["search"]["strict"] is True
    assert by_name["search"]["parameters"]["properties"] == {"q": {"type": "string"}}
    assert by_name["search"]["parameters"]["required"] == ["q"]
    assert by_name["mixed"]["strict"] in (None, False)
    assert "allOf" in by_name["mixed"]["parameters"]


def test_bare_ref_into_a_merged_all_of_is_not_strictable() -> None:
    schema = obj({"r": {"$ref": "#/allOf/0/$defs/R"}}, ["r"], allOf=[{"$defs": {"R": _RECORD}}])
    with pytest.raises(NotStrictable, match="does not resolve"):
        strict_schema(schema)


# -- hostile schemas (a remote server's): refused as NotStrictable, never another error --------


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param(obj({"a": {"$ref": "#/$defs/Missing"}}, ["a"]), id="bare-ref-to-nothing"),
        pytest.param(obj({"a": {"$ref": "https://x.test/s.json"}}, ["a"]), id="bare-remote-ref"),
        pytest.param(obj({"a": {"$ref": "#anchor"}}, ["a"]), id="bare-anchor-ref"),
        pytest.param(obj({"a": {"$ref": 5, "description": "d"}}, ["a"]), id="non-string-ref"),
        pytest.param(
            obj({"a": {"$ref": "#/$defs/A"}}, ["a"], **{"$defs": {"A": {"$ref": "#/$defs/A"}}}),
            id="ref-that-only-refers-to-itself",
        ),
        pytest.param(
            obj(
                {
                    "p": {"$ref": "#/properties/q", "description": "x"},
                    "q": {"$ref": "#/properties/p", "description": "y"},
                },
                ["p", "q"],
            ),
            id="alias-loop-through-properties",
        ),
        pytest.param(
            obj({"a": {"$ref": "#/$defs/T"}}, ["a"], **{"$defs": {"T": True}}),
            id="ref-to-boolean-def",
        ),
        pytest.param(obj({"a": {"type": "string"}}, ["a"], **{"$defs": {"T": 5}}), id="def-int"),
        pytest.param(obj({"a": {"type": "string"}}, ["a"], **{"$defs": [1]}), id="defs-list"),
        pytest.param(obj({"a": True}, ["a"]), id="property-true"),
        pytest.param(obj({"a": False}), id="property-false"),
        pytest.param(obj({"a": {"type": "array", "items": True}}, ["a"]), id="items-true"),
        pytest.param(obj({"a": {"anyOf": [True, {"type": "string"}]}}, ["a"]), id="anyOf-true"),
        pytest.param(obj({"a": {"type": "string"}}, 5), id="required-int"),  # type: ignore[arg-type]
        pytest.param(obj({"a": {"type": "string"}}, [["a"]]), id="required-unhashable"),  # type: ignore[list-item]
        pytest.param(obj({1: {"type": "string"}}), id="non-string-property-name"),
        pytest.param(obj({}, **{"$defs": {1: {"type": "string"}}}), id="non-string-def-name"),
    ],
)
def test_hostile_schema_is_not_strictable_rather_than_kept_or_crashing(schema: Schema) -> None:
    before = copy.deepcopy(schema)
    with pytest.raises(NotStrictable):
        strict_schema(schema)
    assert schema == before


def test_a_schema_too_deep_to_copy_is_not_strictable_rather_than_a_recursion_error() -> None:
    schema: Schema = {"type": "string"}
    for _ in range(600):
        schema = {"type": "object", "properties": {"x": schema}}
    with pytest.raises(NotStrictable, match="deeper"):
        strict_schema(schema)


def test_a_large_target_referenced_from_many_places_is_not_strictable_and_quick() -> None:
    properties = {f"p{n}": {"$ref": "#/$defs/E", "description": "d"} for n in range(2000)}
    schema = obj(properties, list(properties), **{"$defs": {"E": {"enum": list(range(100_000))}}})
    with pytest.raises(NotStrictable, match="too large"):
        strict_schema(schema)


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param(
            obj(
                {"b": {"type": "string"}},
                allOf=[obj({"a": {"type": "string"}}, additionalProperties=False)],
            ),
            id="allOf-entry-closed",
        ),
        pytest.param(
            obj(
                {"r": {"$ref": "#/$defs/Closed", "properties": {"extra": {"type": "string"}}}},
                ["r"],
                **{"$defs": {"Closed": {"type": "object", "additionalProperties": False}}},
            ),
            id="ref-target-closed",
        ),
    ],
)
def test_merge_that_would_admit_a_property_the_closed_side_forbids_is_not_strictable(
    schema: Schema,
) -> None:
    # additionalProperties sees only its own schema's properties: the original forbids "b"
    # ("extra"), so a merged, closed object that requires it would change what is valid.
    with pytest.raises(NotStrictable, match="additionalProperties"):
        strict_schema(schema)
