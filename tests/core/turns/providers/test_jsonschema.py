"""Schema transforms (``core/providers/jsonschema.py``): the model's view, strict mode, Gemini."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expediter.core.turns.providers.jsonschema import (
    NotStrictable,
    gemini_schema,
    model_schema,
    strict_schema,
    strip_optional_nulls,
    walk,
)
from expediter.hookspecs.tool import Action

Schema = dict[str, Any]

_SETTINGS = settings(max_examples=50, deadline=None)

# -- oracles, written from the JSON Schema spec ------------------------------------------------

#: Applicator keywords whose value is a map of name -> subschema.
_MAP_KEYWORDS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
#: Applicator keywords whose value is a list of subschemas.
_LIST_KEYWORDS = ("anyOf", "oneOf", "allOf", "prefixItems")
#: Applicator keywords whose value is one subschema.
_ONE_KEYWORDS = ("items", "additionalProperties", "not", "contains", "if", "then", "else")


def children(node: Schema) -> Iterator[Schema]:
    """The direct subschemas of a schema node (dicts only; boolean schemas have none)."""
    for key in _MAP_KEYWORDS:
        value = node.get(key)
        if isinstance(value, dict):
            yield from (child for child in value.values() if isinstance(child, dict))
    for key in _LIST_KEYWORDS:
        value = node.get(key)
        if isinstance(value, list):
            yield from (child for child in value if isinstance(child, dict))
    for key in _ONE_KEYWORDS:
        value = node.get(key)
        if isinstance(value, dict):
            yield value


def nodes(schema: Schema) -> Iterator[Schema]:
    """Every schema node, the root first."""
    yield schema
    for child in children(schema):
        yield from nodes(child)


def resolve(schema: Any, root: Schema) -> Any:
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return target
    return schema


def json_type(value: Any) -> set[str]:
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"number"}
    if isinstance(value, str):
        return {"string"}
    if isinstance(value, list):
        return {"array"}
    return {"object"}


def admits(value: Any, schema: Any, root: Schema) -> bool:
    """Whether ``value`` passes the type/enum/const/combinator keywords (the others are ignored)."""
    if isinstance(schema, bool):
        return schema
    if "$ref" in schema and not admits(value, resolve(schema, root), root):
        return False
    kind = schema.get("type")
    if kind is not None:
        kinds = {kind} if isinstance(kind, str) else set(kind)
        if not kinds & json_type(value):
            return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "const" in schema and value != schema["const"]:
        return False
    if "anyOf" in schema and not any(admits(value, s, root) for s in schema["anyOf"]):
        return False
    if "oneOf" in schema and sum(admits(value, s, root) for s in schema["oneOf"]) != 1:
        return False
    if "allOf" in schema and not all(admits(value, s, root) for s in schema["allOf"]):
        return False
    return not ("not" in schema and admits(value, schema["not"], root))


def is_object(node: Schema) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def obj(properties: Schema, required: list[str] | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, **extra}
    if required is not None:
        schema["required"] = required
    return schema


# -- strategies ----------------------------------------------------------------------------------

_PROPERTY_NAMES = st.sampled_from(
    ["query", "limit", "default", "title", "type", "properties", "required", "$schema", "const"]
)
_LEAVES = st.one_of(
    st.just({"type": "string"}),
    st.just({"type": "integer", "minimum": 0, "default": 3}),
    st.just({"type": "string", "enum": ["a", "b"], "description": "A choice."}),
    st.just({"enum": [1, "one"]}),
    st.just({"type": ["string", "integer"]}),
    st.just({"type": ["string", "null"]}),
    st.just({"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}),
    st.just({"anyOf": [{"type": "string"}, {"type": "integer"}], "description": "Either."}),
    st.just({"type": "boolean", "default": True, "title": "Flag"}),
    st.just({"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    st.just({"$ref": "#/$defs/Record"}),
    st.just({"$ref": "#/$defs/Record", "description": "The record."}),
)


def _object_of(values: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
    return st.builds(
        lambda fields, extra: {
            "type": "object",
            "properties": {name: schema for name, (schema, _) in fields.items()},
            "required": [name for name, (_, required) in fields.items() if required],
            **extra,
        },
        st.dictionaries(_PROPERTY_NAMES, st.tuples(values, st.booleans()), max_size=4),
        st.fixed_dictionaries(
            {},
            optional={
                "title": st.just("Thing"),
                "description": st.just("A thing."),
                "additionalProperties": st.just(False),
                "default": st.just({}),
            },
        ),
    )


_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        _object_of(inner),
        st.builds(lambda item: {"type": "array", "items": item}, inner),
    ),
    max_leaves=8,
)


@st.composite
def object_schemas(draw: st.DrawFn) -> Schema:
    """A tool's parameters: an object, with a ``Record`` in ``$defs`` that leaves may reference."""
    root = draw(_object_of(_VALUES))
    root["$defs"] = {"Record": draw(_object_of(_LEAVES.filter(lambda s: "$ref" not in s)))}
    # Distinct objects everywhere, as a schema read from JSON has.
    return json.loads(json.dumps(root))


_TREE_KEYS = st.sampled_from(["a", "title", "$schema", "const", "default", "properties"])


def _tree_node(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Schema]:
    one = dict.fromkeys(_ONE_KEYWORDS, inner)
    many = {key: st.lists(inner, min_size=1, max_size=2) for key in _LIST_KEYWORDS}
    named = {key: st.dictionaries(_TREE_KEYS, inner, max_size=2) for key in _MAP_KEYWORDS}
    return st.fixed_dictionaries(
        {"description": st.text("xyz", max_size=2)},
        optional={
            **one,
            **many,
            **named,
            "title": st.just("T"),
            "$schema": st.just("https://json-schema.org/draft/2020-12/schema"),
            "const": st.sampled_from(["c", 1, None]),
            # Values that look like schemas but are data: never visited, never rewritten.
            "default": st.just({"title": "kept", "type": "object", "const": 1}),
            "examples": st.just([{"$schema": "kept", "title": "kept"}]),
            "enum": st.just(["a", {"title": "kept"}]),
        },
    )


_LEAF_NODES = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "object"])},
    optional={"title": st.just("Leaf"), "const": st.just("x")},
)


@st.composite
def schema_trees(draw: st.DrawFn) -> Schema:
    """Schemas using every applicator keyword, with data values that look like schemas."""
    tree = draw(st.recursive(_LEAF_NODES, _tree_node, max_leaves=10))
    return json.loads(json.dumps(tree))


# -- walk ----------------------------------------------------------------------------------------


@_SETTINGS
@given(schema_trees())
def test_walk_visits_every_subschema_exactly_once_parents_first(tree: Schema) -> None:
    visited: list[int] = []
    walk(tree, lambda node: visited.append(id(node)))
    expected = [id(node) for node in nodes(tree)]
    assert sorted(visited) == sorted(expected)
    assert len(set(visited)) == len(visited)
    position = {identity: index for index, identity in enumerate(visited)}
    for node in nodes(tree):
        for child in children(node):
            assert position[id(node)] < position[id(child)]


def test_walk_does_not_visit_data_that_looks_like_a_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"type": "string", "default": {"type": "string"}}},
        "enum": [{"type": "object"}],
        "examples": [{"type": "object"}],
        "const": {"type": "object"},
    }
    visited: list[Schema] = []
    walk(schema, visited.append)
    assert visited == [schema, schema["properties"]["p"]]


def test_walk_ignores_boolean_schemas_and_non_dicts() -> None:
    visited: list[Schema] = []
    walk(
        {"items": True, "additionalProperties": False, "anyOf": [True, {"type": "x"}]},
        visited.append,
    )
    assert len(visited) == 2
    walk(True, visited.append)
    walk(None, visited.append)
    assert len(visited) == 2


@pytest.mark.parametrize(
    "keyword_schema",
    [
        pytest.param({"type": "array", "items": [{"title": "T"}]}, id="items-as-list"),
        pytest.param({"type": "array", "additionalItems": {"title": "T"}}, id="additionalItems"),
        pytest.param({"type": "object", "propertyNames": {"title": "T"}}, id="propertyNames"),
        pytest.param({"type": "object", "unevaluatedProperties": {"title": "T"}}, id="unevaluated"),
        pytest.param({"type": "object", "dependencies": {"a": {"title": "T"}}}, id="dependencies"),
    ],
)
def test_walk_visits_subschemas_under_every_applicator_keyword(keyword_schema: Schema) -> None:
    visited: list[Schema] = []
    walk(keyword_schema, visited.append)
    assert {"title": "T"} in visited
    assert "title" not in json.dumps(gemini_schema(keyword_schema))


# -- model_schema --------------------------------------------------------------------------------

SEARCH = obj(
    {
        "query": {"type": "string", "description": "What to look for."},
        "api_key": {"type": "string"},
        "limit": {"type": "integer", "default": 10},
        "filters": {"$ref": "#/$defs/Filters"},
    },
    ["query", "api_key"],
    additionalProperties=False,
    **{
        "$defs": {
            "Filters": obj(
                {"lang": {"type": "string", "enum": ["en", "de"]}},
                ["lang"],
                additionalProperties=False,
            )
        }
    },
)


def test_model_schema_hides_fixed_parameters_from_properties_and_required() -> None:
    action = Action("search", parameters=SEARCH, fixed={"api_key": "secret"})
    schema = model_schema(action)
    assert "api_key" not in schema["properties"]
    assert schema["required"] == ["query"]
    assert "secret" not in json.dumps(schema)


def test_model_schema_passes_everything_else_through_unchanged() -> None:
    assert model_schema(Action("search", parameters=SEARCH)) == SEARCH


def test_model_schema_drops_framework_keys_at_every_level() -> None:
    parameters = obj(
        {
            "query": {"type": "string", "x-expediter-hidden": True},
            "tags": {"type": "array", "items": {"type": "string", "x-expediter-source": "ui"}},
            "record": {"$ref": "#/$defs/R"},
        },
        **{
            "x-expediter-approval": "always",
            "$defs": {"R": obj({"a": {"type": "string", "x-expediter": 1}})},
        },
    )
    schema = model_schema(Action("a", parameters=parameters))
    assert "x-expediter" not in json.dumps(schema)
    assert set(schema["properties"]) == {"query", "tags", "record"}
    assert schema["properties"]["tags"]["items"] == {"type": "string"}
    assert schema["$defs"]["R"]["properties"]["a"] == {"type": "string"}


def test_model_schema_leaves_the_action_untouched() -> None:
    parameters = copy.deepcopy(SEARCH)
    parameters["properties"]["query"]["x-expediter-hidden"] = True
    action = Action("search", parameters=parameters, fixed={"api_key": "k"})
    before = copy.deepcopy(action.parameters)
    schema = model_schema(action)
    schema["properties"]["query"]["description"] = "changed"
    schema["$defs"]["Filters"]["properties"].clear()
    assert action.parameters == before
    assert action.fixed == {"api_key": "k"}


def test_model_schema_of_an_action_without_parameters_is_an_empty_object() -> None:
    assert model_schema(Action("ping", parameters={})) == {"type": "object", "properties": {}}


@_SETTINGS
@given(object_schemas())
def test_model_schema_without_fixed_values_is_the_schema_itself(schema: Schema) -> None:
    before = copy.deepcopy(schema)
    assert model_schema(Action("a", parameters=schema)) == before
    assert schema == before


# -- strict_schema -------------------------------------------------------------------------------


def test_strict_schema_closes_every_object_and_requires_every_property() -> None:
    schema = obj(
        {
            "query": {"type": "string"},
            "page": obj({"size": {"type": "integer"}}, ["size"]),
            "rows": {"type": "array", "items": obj({"cell": {"type": "string"}})},
            "record": {"$ref": "#/$defs/R"},
        },
        ["query", "page", "rows", "record"],
        **{"$defs": {"R": obj({"a": {"type": "string"}, "b": {"type": "integer"}}, ["a"])}},
    )
    strict = strict_schema(schema)
    objects = [strict, strict["properties"]["page"], strict["properties"]["rows"]["items"]]
    objects.append(strict["$defs"]["R"])
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    assert strict["$defs"]["R"]["properties"]["b"]["type"] == ["integer", "null"]


@pytest.mark.parametrize(
    ("optional", "nullable"),
    [
        pytest.param({"type": "string"}, {"type": ["string", "null"]}, id="type"),
        pytest.param(
            {"type": ["string", "integer"]}, {"type": ["string", "integer", "null"]}, id="types"
        ),
        pytest.param(
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            id="anyOf",
        ),
        pytest.param(
            {"$ref": "#/$defs/R"}, {"anyOf": [{"$ref": "#/$defs/R"}, {"type": "null"}]}, id="ref"
        ),
        pytest.param({"type": ["string", "null"]}, {"type": ["string", "null"]}, id="nullable"),
    ],
)
def test_strict_schema_makes_optional_parameters_nullable(
    optional: Schema, nullable: Schema
) -> None:
    schema = obj({"x": optional}, **{"$defs": {"R": obj({}, additionalProperties=False)}})
    strict = strict_schema(schema)
    assert strict["properties"]["x"] == nullable
    assert strict["required"] == ["x"]


@pytest.mark.parametrize(
    "optional",
    [
        pytest.param({"type": "string", "enum": ["a", "b"]}, id="typed-enum"),
        pytest.param({"enum": ["a", 1]}, id="enum"),
        pytest.param({"type": "integer", "enum": [1, 2], "description": "N."}, id="described"),
        pytest.param({"oneOf": [{"type": "string"}, {"type": "integer"}]}, id="oneOf"),
        pytest.param({"allOf": [{"$ref": "#/$defs/R"}]}, id="allOf-ref"),
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "string"}}}, id="optional-record"
        ),
        pytest.param(
            {"type": "string", "const": "fast"},
            id="typed-const",
        ),
    ],
)
def test_strict_schema_lets_an_optional_parameter_be_null_and_keeps_its_values(
    optional: Schema,
) -> None:
    schema = obj({"x": optional}, **{"$defs": {"R": obj({"a": {"type": "string"}}, ["a"])}})
    strict = strict_schema(schema)
    x = strict["properties"]["x"]
    assert admits(None, x, strict)
    for value in [*optional.get("enum", []), optional.get("const", "a"), {"a": "b"}, 1, "a"]:
        if admits(value, optional, schema):
            assert admits(value, x, strict), value
    if "description" in optional:
        assert x["description"] == optional["description"]


def test_strict_schema_leaves_required_parameters_non_nullable() -> None:
    strict = strict_schema(
        obj(
            {"q": {"type": "string"}, "r": {"$ref": "#/$defs/R"}},
            ["q", "r"],
            **{"$defs": {"R": obj({"z": {"type": "boolean"}}, ["z"])}},
        )
    )
    assert strict["properties"]["q"] == {"type": "string"}
    assert strict["properties"]["r"] == {"$ref": "#/$defs/R"}


def test_strict_schema_keeps_descriptions_of_wrapped_parameters() -> None:
    strict = strict_schema(
        obj({"mode": {"type": "string", "enum": ["a", "b"], "description": "How."}})
    )
    mode = strict["properties"]["mode"]
    assert mode["description"] == "How."
    assert admits(None, mode, strict)
    assert admits("a", mode, strict)
    assert not admits("c", mode, strict)


def test_strict_schema_removes_default_and_unique_items_everywhere() -> None:
    schema = obj(
        {
            "limit": {"type": "integer", "default": 10},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "nested": obj({"x": {"type": "string", "default": "y"}}, ["x"], default={}),
            "r": {"$ref": "#/$defs/R"},
        },
        **{"$defs": {"R": obj({"z": {"type": "boolean", "default": False}}, ["z"])}},
    )
    strict = strict_schema(schema)
    for node in nodes(strict):
        assert "default" not in node
        assert "uniqueItems" not in node


def test_strict_schema_leaves_properties_named_like_keywords_alone() -> None:
    schema = obj(
        {
            "default": {"type": "string"},
            "title": {"type": "string"},
            "type": {"type": "string"},
        },
        ["type"],
    )
    strict = strict_schema(schema)
    assert list(strict["properties"]) == ["default", "title", "type"]
    assert strict["required"] == ["default", "title", "type"]
    assert strict["properties"]["type"] == {"type": "string"}
    assert strict["properties"]["default"] == {"type": ["string", "null"]}
    assert strict["properties"]["title"] == {"type": ["string", "null"]}


_OPEN_OBJECTS = [
    pytest.param({"type": "object", "additionalProperties": {"type": "string"}}, id="map"),
    pytest.param({"type": "object", "additionalProperties": True}, id="open"),
    pytest.param({"type": "object", "additionalProperties": {}}, id="map-of-any"),
    pytest.param({"type": "object"}, id="bare"),
    pytest.param({"type": "object", "properties": {}, "additionalProperties": True}, id="extra"),
]


@pytest.mark.parametrize("open_object", _OPEN_OBJECTS)
def test_strict_schema_refuses_a_required_free_form_object(open_object: Schema) -> None:
    with pytest.raises(NotStrictable):
        strict_schema(obj({"x": open_object}, ["x"]))
    with pytest.raises(NotStrictable):
        strict_schema(obj({"x": {"type": "array", "items": open_object}}, ["x"]))
    with pytest.raises(NotStrictable):
        strict_schema(obj({"r": {"$ref": "#/$defs/R"}}, ["r"], **{"$defs": {"R": open_object}}))


def test_strict_schema_refuses_an_open_root() -> None:
    with pytest.raises(NotStrictable):
        strict_schema(obj({"a": {"type": "string"}}, ["a"], additionalProperties=True))
    with pytest.raises(NotStrictable):
        strict_schema({"type": "object"})


@pytest.mark.parametrize("open_object", _OPEN_OBJECTS)
def test_strict_schema_refuses_an_optional_free_form_object(open_object: Schema) -> None:
    with pytest.raises(NotStrictable):
        strict_schema(obj({"x": open_object}))


def test_strict_schema_refuses_a_nullable_map() -> None:
    with pytest.raises(NotStrictable):
        strict_schema(
            obj({"x": {"type": ["object", "null"], "additionalProperties": {"type": "string"}}})
        )


def test_strict_schema_never_mutates_its_input() -> None:
    before = copy.deepcopy(SEARCH)
    strict_schema(SEARCH)
    assert before == SEARCH


def _check_strict_against(
    original: Schema, strict: Schema, root: Schema, strict_root: Schema
) -> None:
    """Each property keeps its meaning; optional ones also admit null, required ones not more."""
    assert list(strict["properties"]) == list(original["properties"])
    required = set(original.get("required", []))
    for name, child in original["properties"].items():
        result = strict["properties"][name]
        if name in required:
            assert admits(None, result, strict_root) == admits(None, child, root), name
        else:
            assert admits(None, result, strict_root), name
        if child.get("type") == "object":
            inner = result["anyOf"][0] if "anyOf" in result and "anyOf" not in child else result
            _check_strict_against(child, inner, root, strict_root)


@_SETTINGS
@given(object_schemas())
def test_strict_schema_of_any_declared_object_schema_is_closed_and_complete(schema: Schema) -> None:
    before = copy.deepcopy(schema)
    strict = strict_schema(schema)
    assert schema == before
    for node in nodes(strict):
        assert "default" not in node
        assert "uniqueItems" not in node
        if is_object(node):
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
    _check_strict_against(schema, strict, schema, strict)
    _check_strict_against(schema["$defs"]["Record"], strict["$defs"]["Record"], schema, strict)


# -- gemini_schema -------------------------------------------------------------------------------


def test_gemini_schema_removes_schema_and_title_keywords_at_every_level() -> None:
    schema = obj(
        {
            "title": {"type": "string", "title": "Title"},
            "mode": {"anyOf": [{"type": "string", "title": "Text"}, {"type": "null"}]},
            "rows": {"type": "array", "items": {"title": "Row", "type": "string"}},
            "r": {"$ref": "#/$defs/R"},
        },
        ["title"],
        **{
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Params",
            "$defs": {"R": obj({"a": {"type": "string", "title": "A"}}, title="R")},
        },
    )
    result = gemini_schema(schema)
    for node in nodes(result):
        assert "title" not in node
        assert "$schema" not in node
    assert list(result["properties"]) == ["title", "mode", "rows", "r"]
    assert result["properties"]["title"] == {"type": "string"}
    assert result["required"] == ["title"]
    assert result["$defs"]["R"]["properties"]["a"] == {"type": "string"}


def test_gemini_schema_turns_const_into_a_single_value_enum_at_every_level() -> None:
    schema = obj(
        {
            "kind": {"const": "search"},
            "either": {"anyOf": [{"const": 1}, {"type": "string", "const": "x"}]},
            "items": {"type": "array", "items": {"const": True}},
            "r": {"$ref": "#/$defs/R"},
        },
        **{"$defs": {"R": obj({"const": {"const": None}})}},
    )
    result = gemini_schema(schema)
    assert result["properties"]["kind"] == {"enum": ["search"]}
    assert result["properties"]["either"]["anyOf"] == [
        {"enum": [1]},
        {"type": "string", "enum": ["x"]},
    ]
    assert result["properties"]["items"]["items"] == {"enum": [True]}
    assert result["$defs"]["R"]["properties"] == {"const": {"enum": [None]}}


def test_gemini_schema_never_mutates_its_input() -> None:
    schema = obj({"k": {"const": "x", "title": "K"}}, title="T", **{"$schema": "s"})
    before = copy.deepcopy(schema)
    gemini_schema(schema)
    assert schema == before


_GEMINI_DROPS = ("$schema", "title")


def gemini_expected(node: Any) -> Any:
    """The spec of the Gemini rewrite, applied by rebuilding the tree."""
    if not isinstance(node, dict):
        return node
    result: Schema = {}
    for key, value in node.items():
        if key in _GEMINI_DROPS:
            continue
        if key == "const":
            result["enum"] = [value]
        elif key in _MAP_KEYWORDS and isinstance(value, dict):
            result[key] = {name: gemini_expected(child) for name, child in value.items()}
        elif key in _LIST_KEYWORDS and isinstance(value, list):
            result[key] = [gemini_expected(child) for child in value]
        elif key in _ONE_KEYWORDS:
            result[key] = gemini_expected(value)
        elif key not in result:
            result[key] = copy.deepcopy(value)
    return result


@_SETTINGS
@given(schema_trees())
def test_gemini_schema_rewrites_keywords_and_nothing_else(tree: Schema) -> None:
    before = copy.deepcopy(tree)
    assert gemini_schema(tree) == gemini_expected(tree)
    assert tree == before


# -- strip_optional_nulls ------------------------------------------------------------------------

RECORDS = obj(
    {
        "query": {"type": "string"},
        "limit": {"type": "integer"},
        "cursor": {"type": ["string", "null"]},
        "after": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "order": {"enum": ["asc", None]},
        "page": {"$ref": "#/$defs/Page"},
        "pages": {"type": "array", "items": {"$ref": "#/$defs/Page"}},
        "inline": obj({"x": {"type": "string"}, "y": {"type": "string"}}, ["x"]),
        "maybe_page": {"anyOf": [{"$ref": "#/$defs/Page"}, {"type": "null"}]},
    },
    ["query"],
    **{
        "$defs": {"Page": obj({"size": {"type": "integer"}, "token": {"type": "string"}}, ["size"])}
    },
)


def test_strip_optional_nulls_drops_null_for_an_optional_non_nullable_parameter() -> None:
    assert strip_optional_nulls({"query": "q", "limit": None}, RECORDS) == {"query": "q"}


def test_strip_optional_nulls_keeps_null_where_the_parameter_accepts_it() -> None:
    arguments = {"query": "q", "cursor": None, "after": None, "order": None}
    assert strip_optional_nulls(arguments, RECORDS) == arguments


def test_strip_optional_nulls_keeps_null_for_a_required_parameter() -> None:
    assert strip_optional_nulls({"query": None}, RECORDS) == {"query": None}


def test_strip_optional_nulls_leaves_undeclared_arguments_to_the_executor() -> None:
    assert strip_optional_nulls({"query": "q", "extra": None}, RECORDS) == {
        "query": "q",
        "extra": None,
    }


def test_strip_optional_nulls_cleans_records_referenced_through_defs() -> None:
    arguments = {"query": "q", "page": {"size": None, "token": None}}
    assert strip_optional_nulls(arguments, RECORDS) == {"query": "q", "page": {"size": None}}


def test_strip_optional_nulls_cleans_inline_records() -> None:
    arguments = {"query": "q", "inline": {"x": None, "y": None}}
    assert strip_optional_nulls(arguments, RECORDS) == {"query": "q", "inline": {"x": None}}


def test_strip_optional_nulls_cleans_lists_of_records() -> None:
    arguments = {"query": "q", "pages": [{"size": 1, "token": None}, {"size": 2, "token": "t"}, 3]}
    assert strip_optional_nulls(arguments, RECORDS) == {
        "query": "q",
        "pages": [{"size": 1}, {"size": 2, "token": "t"}, 3],
    }


def test_strip_optional_nulls_cleans_an_optional_record() -> None:
    arguments = {"query": "q", "maybe_page": {"size": 1, "token": None}}
    assert strip_optional_nulls(arguments, RECORDS) == {"query": "q", "maybe_page": {"size": 1}}


def test_strip_optional_nulls_never_mutates_its_arguments() -> None:
    arguments = {"query": "q", "limit": None, "page": {"size": 1, "token": None}}
    before = copy.deepcopy(arguments)
    strip_optional_nulls(arguments, RECORDS)
    assert arguments == before


def test_strip_optional_nulls_undoes_strict_mode_nulls_for_its_own_schema() -> None:
    strict = strict_schema(RECORDS)
    # What a model in strict mode sends to leave everything optional out.
    sent = dict.fromkeys(strict["properties"])
    sent["query"] = "q"
    sent["page"] = {"size": 1, "token": None}
    cleaned = strip_optional_nulls(sent, RECORDS)
    assert cleaned == {
        "query": "q",
        "cursor": None,
        "after": None,
        "order": None,
        "page": {"size": 1},
        "maybe_page": None,
    }


@_SETTINGS
@given(object_schemas())
def test_strip_optional_nulls_keeps_exactly_the_nulls_a_schema_admits(schema: Schema) -> None:
    sent = dict.fromkeys(schema["properties"])
    required = set(schema["required"])
    cleaned = strip_optional_nulls(sent, schema)
    expected = {
        name
        for name, child in schema["properties"].items()
        if name in required or admits(None, child, schema)
    }
    assert set(cleaned) == expected
    assert all(value is None for value in cleaned.values())
    assert sent == dict.fromkeys(schema["properties"])
