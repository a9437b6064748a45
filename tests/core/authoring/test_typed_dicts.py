"""``TypedDict`` parameters: an object schema under ``$defs`` (``required`` from ``total``,
``Required`` and ``NotRequired``), and a dict with converted fields for the function."""

import datetime
import enum
from collections.abc import Callable
from typing import Annotated, Any, NotRequired, Required, TypedDict

import annotated_types as at
import pytest
from support.authoring import function_error, parameters_of, run_function

import expediter
from expediter.core.turns.providers.jsonschema import model_schema, strict_schema
from expediter.errors import SchemaError


class Genre(enum.Enum):
    DRAMA = "drama"
    COMEDY = "comedy"


class Credit(TypedDict):
    name: str
    role: str


class Movie(TypedDict):
    """A film."""

    title: str
    year: Annotated[int, at.Ge(1888)]
    genre: NotRequired[Genre]
    credits: NotRequired[list[Credit]]


class Filter(TypedDict, total=False):
    genre: Genre
    since: datetime.date
    query: Required[Annotated[str, "Words to look for."]]


class Tree(TypedDict):
    label: str
    children: list["Tree"]


class Login(TypedDict):
    user: str
    phrase: Annotated[str, expediter.Secret]


def add(movie: Movie) -> Movie:
    """Add a movie."""
    return movie


def search(filters: Filter) -> Filter:
    """Search."""
    return filters


def walk(tree: Tree) -> Tree:
    return tree


def login(login: Login) -> str:
    return login["user"]


# -- the schema -----------------------------------------------------------------------------------


def test_a_typed_dict_becomes_a_definition_with_required_keys() -> None:
    assert parameters_of(add) == {
        "type": "object",
        "properties": {"movie": {"$ref": "#/$defs/Movie"}},
        "required": ["movie"],
        "additionalProperties": False,
        "$defs": {
            "Movie": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "year": {"type": "integer", "minimum": 1888},
                    "genre": {"type": "string", "enum": ["drama", "comedy"]},
                    "credits": {"type": "array", "items": {"$ref": "#/$defs/Credit"}},
                },
                "required": ["title", "year"],
                "additionalProperties": False,
                "description": "A film.",
            },
            "Credit": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "role": {"type": "string"}},
                "required": ["name", "role"],
                "additionalProperties": False,
            },
        },
    }


def test_total_false_requires_only_the_required_keys() -> None:
    definition = parameters_of(search)["$defs"]["Filter"]
    assert definition["required"] == ["query"]
    assert definition["properties"] == {
        "genre": {"type": "string", "enum": ["drama", "comedy"]},
        "since": {"type": "string", "format": "date"},
        "query": {"type": "string", "description": "Words to look for."},
    }
    assert "description" not in definition  # TypedDict's own docstring is not the author's


def test_a_recursive_typed_dict_refers_to_itself() -> None:
    definition = parameters_of(walk)["$defs"]["Tree"]
    assert definition["properties"]["children"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Tree"},
    }


def test_a_secret_typed_dict_field_is_write_only_and_a_secret_name() -> None:
    [action] = expediter.tool(login).get_actions_metadata()
    assert action.parameters["$defs"]["Login"]["properties"]["phrase"] == {
        "type": "string",
        "writeOnly": True,
    }
    assert "phrase" in action.secret_parameters


def test_a_typed_dict_schema_passes_strict_mode() -> None:
    [action] = expediter.tool(add).get_actions_metadata()
    strict = strict_schema(model_schema(action))
    movie = strict["$defs"]["Movie"]
    assert movie["required"] == ["title", "year", "genre", "credits"]
    assert movie["properties"]["genre"] == {
        "anyOf": [{"type": "string", "enum": ["drama", "comedy"]}, {"type": "null"}]
    }


def test_an_unresolvable_forward_reference_in_a_typed_dict_is_a_schema_error() -> None:
    class Broken(TypedDict):
        item: "Missing"  # type: ignore[name-defined]  # noqa: F821

    def take(value: Broken) -> None:
        return None

    with pytest.raises(SchemaError) as caught:
        _ = expediter.tool(take).spec
    message = str(caught.value)
    assert "parameter 'value'" in message
    assert "Broken" in message
    assert "Missing" in message


def test_a_forward_reference_resolved_from_the_module_works() -> None:
    # ``Early`` refers by name to ``Later``, defined after it.
    assert parameters_of(_early)["$defs"]["Early"]["properties"]["later"] == {
        "$ref": "#/$defs/Later"
    }
    assert run_function(_early, {"value": {"later": {"n": 2}}}) == {"later": {"n": 2}}


class Early(TypedDict):
    later: "Later"


class Later(TypedDict):
    n: int


def _early(value: Early) -> Early:
    return value


# -- validation -----------------------------------------------------------------------------------


def test_a_typed_dict_argument_arrives_as_a_dict_with_converted_fields() -> None:
    received = run_function(
        search, {"filters": {"query": "noir", "genre": "drama", "since": "2020-01-31"}}
    )
    assert received == {"query": "noir", "genre": Genre.DRAMA, "since": datetime.date(2020, 1, 31)}
    assert type(received) is dict


def test_optional_keys_may_be_left_out() -> None:
    assert run_function(add, {"movie": {"title": "M", "year": 1931}}) == {
        "title": "M",
        "year": 1931,
    }


@pytest.mark.parametrize(
    ("movie", "problem"),
    [
        pytest.param(
            {"title": "M", "year": "1931"},
            "argument 'movie.year': expected integer, got string '1931'",
            id="wrong-type",
        ),
        pytest.param(
            {"title": "M", "year": 1800},
            "argument 'movie.year': must be >= 1888 (minimum), got 1800",
            id="constraint",
        ),
        pytest.param(
            {"year": 1931}, "argument 'movie.title': missing (it is required)", id="missing"
        ),
        pytest.param(
            {"title": "M", "year": 1931, "rating": 5},
            "argument 'movie': unknown fields 'rating'",
            id="extra-key",
        ),
        pytest.param(
            {"title": "M", "year": 1931, "credits": [{"name": "F"}]},
            "argument 'movie.credits[0].role': missing (it is required)",
            id="nested-missing",
        ),
        pytest.param(
            "M (1931)", "argument 'movie': expected object, got string 'M (1931)'", id="str"
        ),
    ],
)
def test_a_bad_typed_dict_argument_is_an_argument_error_naming_the_path(
    movie: Any, problem: str
) -> None:
    assert function_error(add, {"movie": movie}) == f"add: {problem}"


def test_a_recursive_typed_dict_argument_is_checked_at_every_depth() -> None:
    tree = {"label": "a", "children": [{"label": "b", "children": []}]}
    assert run_function(walk, {"tree": tree}) == tree
    bad = {"label": "a", "children": [{"label": 2, "children": []}]}
    assert function_error(walk, {"tree": bad}) == (
        "walk: argument 'tree.children[0].label': expected string, got integer 2"
    )


def test_a_typing_extensions_typed_dict_with_read_only_keys_works() -> None:
    import typing_extensions as te

    class Settings(te.TypedDict, total=False):
        level: te.Required[te.ReadOnly[Annotated[int, at.Le(3)]]]
        name: te.NotRequired[te.ReadOnly[str]]

    def apply(settings: Settings) -> Settings:
        return settings

    definition = parameters_of(apply)["$defs"]["Settings"]
    assert definition["required"] == ["level"]
    assert definition["properties"] == {
        "level": {"type": "integer", "maximum": 3},
        "name": {"type": "string"},
    }
    assert run_function(apply, {"settings": {"level": 2, "name": "x"}}) == {"level": 2, "name": "x"}
    assert function_error(apply, {"settings": {"level": 4}}) == (
        "apply: argument 'settings.level': must be <= 3 (maximum), got 4"
    )


def test_a_secret_typed_dict_field_is_never_quoted_in_an_error() -> None:
    message = function_error(login, {"login": {"user": "ann", "phrase": 12345678}})
    assert message == "login: argument 'login.phrase': expected string, got integer"


def test_through_a_host_the_typed_dict_tool_runs(
    call_tool: Callable[..., expediter.CallEvent],
) -> None:
    event = call_tool(expediter.tool(add), "add", {"movie": {"title": "M", "year": 1931}})
    assert event.status == "completed"
    assert event.result == {"title": "M", "year": 1931}
