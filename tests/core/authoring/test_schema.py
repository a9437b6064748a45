"""JSON Schema from type hints (``core/schema.py``), mostly through the authoring sugar."""

import dataclasses
import datetime
import enum
import inspect
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import attrs
import pytest

import expediter
from expediter.core.authoring.schema import json_default, schema_for, strip_annotated
from expediter.core.authoring.tools import Toolbox
from expediter.errors import SchemaError
from expediter.hookspecs.tool import Action, CallContext

# -- types used by the tests (module level, so string and recursive references resolve) ----------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Priority(enum.Enum):
    LOW = 1
    HIGH = 2


class Widget:
    """A plain class: not a record, so it has no JSON Schema."""


@attrs.frozen
class Address:
    """A postal address.

    Longer text that is not part of the schema description.
    """

    street: str
    zip: str
    country: str = "NL"


@attrs.frozen
class Person:
    name: str
    address: Address
    tags: list[str] = attrs.Factory(list)
    nickname: str | None = attrs.field(default=None, metadata={"description": "What friends say."})


@attrs.frozen
class Node:
    """A tree node."""

    value: int
    children: list["Node"] = attrs.Factory(list)


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0
    labels: list[str] = dataclasses.field(default_factory=lambda: ["origin"])


def _other_address_class() -> type:
    @attrs.frozen
    class Address:  # same __name__ as the module-level Address
        line: str

    return Address


OtherAddress = _other_address_class()


# -- helpers --------------------------------------------------------------------------------------


def _function_with(hint: Any, default: Any = inspect.Parameter.empty) -> Callable[..., Any]:
    """A function with one parameter ``value`` annotated with ``hint``."""

    def probe(value):  # type: ignore[no-untyped-def]
        """Probe one hint."""
        return value

    probe.__annotations__ = {"value": hint}
    if default is not inspect.Parameter.empty:
        probe.__defaults__ = (default,)
    return probe


def _tool_parameters(func: Callable[..., Any]) -> dict[str, Any]:
    tool = expediter.tool(func)
    [action] = tool.get_actions_metadata()
    assert action.parameters == tool.spec.parameters
    return dict(action.parameters)


def _toolbox_parameters(func: Callable[..., Any]) -> dict[str, Any]:
    def method(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[no-untyped-def]
        raise AssertionError("not called")

    # A method with the same signature as ``func`` plus ``self``.
    signature = inspect.signature(func)
    only = inspect.Parameter.POSITIONAL_ONLY
    kinds = [parameter.kind for parameter in signature.parameters.values()]
    self_kind = only if only in kinds else inspect.Parameter.POSITIONAL_OR_KEYWORD
    self_parameter = inspect.Parameter("self", self_kind)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_parameter, *signature.parameters.values()]
    )
    method.__annotations__ = dict(func.__annotations__)
    method.__doc__ = func.__doc__
    method.__name__ = func.__name__
    box = type("ProbeBox", (Toolbox,), {func.__name__: expediter.action(method)})
    [action] = box().get_actions_metadata(CallContext())
    return dict(action.parameters)


@pytest.fixture(params=["tool", "toolbox"])
def parameters_of(request: pytest.FixtureRequest) -> Callable[[Callable[..., Any]], dict[str, Any]]:
    """The parameters schema of a function as an ``@tool`` and as a ``Toolbox`` action."""
    return _tool_parameters if request.param == "tool" else _toolbox_parameters


def _one(prop: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"value": prop}}
    if required:
        schema["required"] = ["value"]
    schema["additionalProperties"] = False
    return schema


# -- every supported hint -------------------------------------------------------------------------

HINTS = [
    pytest.param(str, {"type": "string"}, id="str"),
    pytest.param(int, {"type": "integer"}, id="int"),
    pytest.param(float, {"type": "number"}, id="float"),
    pytest.param(bool, {"type": "boolean"}, id="bool"),
    pytest.param(None, {"type": "null"}, id="None"),
    pytest.param(type(None), {"type": "null"}, id="NoneType"),
    pytest.param(Optional[int], {"type": ["integer", "null"]}, id="Optional[int]"),  # noqa: UP045
    pytest.param(str | None, {"type": ["string", "null"]}, id="str|None"),
    pytest.param(
        Literal["metric", "imperial"],
        {"type": "string", "enum": ["metric", "imperial"]},
        id="Literal-str",
    ),
    pytest.param(Literal[1, 2, 3], {"type": "integer", "enum": [1, 2, 3]}, id="Literal-int"),
    pytest.param(Literal["auto", 0], {"enum": ["auto", 0]}, id="Literal-mixed"),
    pytest.param(
        Literal["a", "b"] | None,
        {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
        id="Literal|None",
    ),
    pytest.param(Color, {"type": "string", "enum": ["red", "green"]}, id="Enum-str-values"),
    pytest.param(Priority, {"type": "integer", "enum": [1, 2]}, id="Enum-int-values"),
    pytest.param(list[str], {"type": "array", "items": {"type": "string"}}, id="list[str]"),
    pytest.param(
        list[list[int]],
        {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        id="list[list[int]]",
    ),
    pytest.param(list, {"type": "array", "items": {}}, id="bare-list"),
    pytest.param(Sequence[int], {"type": "array", "items": {"type": "integer"}}, id="Sequence"),
    pytest.param(
        typing.List[float],  # noqa: UP006
        {"type": "array", "items": {"type": "number"}},
        id="typing.List",
    ),
    pytest.param(
        dict[str, int],
        {"type": "object", "additionalProperties": {"type": "integer"}},
        id="dict[str,int]",
    ),
    pytest.param(
        dict[str, list[str]],
        {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        id="dict[str,list]",
    ),
    pytest.param(dict, {"type": "object", "additionalProperties": {}}, id="bare-dict"),
    pytest.param(
        tuple[int, ...], {"type": "array", "items": {"type": "integer"}}, id="tuple[int,...]"
    ),
    pytest.param(
        tuple[float, float],
        {
            "type": "array",
            "prefixItems": [{"type": "number"}, {"type": "number"}],
            "minItems": 2,
            "maxItems": 2,
        },
        id="tuple[float,float]",
    ),
    pytest.param(
        tuple[str, int, bool],
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}],
            "minItems": 3,
            "maxItems": 3,
        },
        id="tuple[str,int,bool]",
    ),
    pytest.param(
        set[str],
        {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        id="set[str]",
    ),
    pytest.param(
        frozenset[int],
        {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
        id="frozenset[int]",
    ),
    pytest.param(datetime.datetime, {"type": "string", "format": "date-time"}, id="datetime"),
    pytest.param(datetime.date, {"type": "string", "format": "date"}, id="date"),
    pytest.param(Any, {}, id="Any"),
    pytest.param(int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}, id="int|str"),
    pytest.param(
        Annotated[int, "How many results."],
        {"type": "integer", "description": "How many results."},
        id="Annotated",
    ),
    pytest.param(
        Annotated[int, "First part.", "Second part."],
        {"type": "integer", "description": "First part. Second part."},
        id="Annotated-two-texts",
    ),
    pytest.param(
        Annotated[int, 42, "  Padded.  ", "   "],
        {"type": "integer", "description": "Padded."},
        id="Annotated-non-text-metadata-ignored",
    ),
    pytest.param(
        Annotated[int | None, "Maybe a number."],
        {"type": ["integer", "null"], "description": "Maybe a number."},
        id="Annotated-Optional",
    ),
    pytest.param(
        list[Annotated[str, "One tag."]],
        {"type": "array", "items": {"type": "string", "description": "One tag."}},
        id="list-of-Annotated",
    ),
]


@pytest.mark.parametrize(("hint", "expected"), HINTS)
def test_hint_gives_exact_property_schema(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]], hint: Any, expected: Any
) -> None:
    assert parameters_of(_function_with(hint)) == _one(expected)


def test_unannotated_parameter_accepts_anything(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]],
) -> None:
    def probe(value, count: int):  # type: ignore[no-untyped-def]
        return value

    assert parameters_of(probe) == {
        "type": "object",
        "properties": {"value": {}, "count": {"type": "integer"}},
        "required": ["value", "count"],
        "additionalProperties": False,
    }


def test_function_without_parameters_has_empty_object_schema(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]],
) -> None:
    def ping() -> str:
        return "pong"

    assert parameters_of(ping) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_toolbox_action_and_tool_give_the_same_schema_for_one_signature() -> None:
    def search(
        query: Annotated[str, "Words to look for."],
        limit: int = 10,
        units: Literal["metric", "imperial"] = "metric",
        near: Address | None = None,
    ) -> list[str]:
        return []

    expected = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to look for."},
            "limit": {"type": "integer", "default": 10},
            "units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
            "near": {
                "anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}],
                "default": None,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "zip": {"type": "string"},
                    "country": {"type": "string", "default": "NL"},
                },
                "required": ["street", "zip"],
                "additionalProperties": False,
                "description": "A postal address.",
            }
        },
    }
    assert _tool_parameters(search) == expected
    assert _toolbox_parameters(search) == expected


# -- dict keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize("hint", [dict[int, str], dict[bool, int], typing.Mapping[float, str]])
def test_mapping_with_non_string_keys_is_a_schema_error(hint: Any) -> None:
    tool = expediter.tool(_function_with(hint))
    with pytest.raises(SchemaError, match=r"parameter 'value': mapping keys must be str for JSON"):
        _ = tool.spec


def test_mapping_with_annotated_string_keys_is_fine() -> None:
    hint = dict[Annotated[str, "A user id."], int]
    assert _tool_parameters(_function_with(hint)) == _one(
        {"type": "object", "additionalProperties": {"type": "integer"}}
    )


# -- records --------------------------------------------------------------------------------------

ADDRESS_DEF = {
    "type": "object",
    "properties": {
        "street": {"type": "string"},
        "zip": {"type": "string"},
        "country": {"type": "string", "default": "NL"},
    },
    "required": ["street", "zip"],
    "additionalProperties": False,
    "description": "A postal address.",
}


def test_attrs_class_becomes_a_ref_to_defs_with_required_fields_and_defaults(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]],
) -> None:
    def ship(to: Address) -> str:
        return to.street

    assert parameters_of(ship) == {
        "type": "object",
        "properties": {"to": {"$ref": "#/$defs/Address"}},
        "required": ["to"],
        "additionalProperties": False,
        "$defs": {"Address": ADDRESS_DEF},
    }


def test_nested_records_each_get_one_definition() -> None:
    def register(person: Person, backup: Address | None = None) -> None:
        return None

    schema = _tool_parameters(register)
    assert schema["properties"] == {
        "person": {"$ref": "#/$defs/Person"},
        "backup": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
    }
    assert schema["$defs"] == {
        "Person": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/Address"},
                "tags": {"type": "array", "items": {"type": "string"}, "default": []},
                "nickname": {
                    "type": ["string", "null"],
                    "description": "What friends say.",
                    "default": None,
                },
            },
            "required": ["name", "address"],
            "additionalProperties": False,
        },
        "Address": ADDRESS_DEF,
    }


def test_recursive_record_refers_to_itself() -> None:
    # Built with schema_for: a tool taking Node trips a converter bug (see test_arguments).
    schema = schema_for([("tree", Node, inspect.Parameter.empty, None)], where="walk")
    assert schema["properties"] == {"tree": {"$ref": "#/$defs/Node"}}
    assert schema["$defs"] == {
        "Node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "default": []},
            },
            "required": ["value"],
            "additionalProperties": False,
            "description": "A tree node.",
        }
    }


def test_list_of_records_refers_to_the_definition() -> None:
    def mail(recipients: list[Address]) -> None:
        return None

    schema = _tool_parameters(mail)
    assert schema["properties"]["recipients"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Address"},
    }
    assert schema["$defs"] == {"Address": ADDRESS_DEF}


def test_two_record_classes_with_the_same_name_get_distinct_definitions() -> None:
    assert OtherAddress.__name__ == Address.__name__

    def move(home: Address, office: OtherAddress, also_home: Address) -> None:  # type: ignore[valid-type]
        return None

    schema = _tool_parameters(move)
    assert schema["properties"] == {
        "home": {"$ref": "#/$defs/Address"},
        "office": {"$ref": "#/$defs/Address2"},
        "also_home": {"$ref": "#/$defs/Address"},
    }
    assert schema["$defs"] == {
        "Address": ADDRESS_DEF,
        "Address2": {
            "type": "object",
            "properties": {"line": {"type": "string"}},
            "required": ["line"],
            "additionalProperties": False,
        },
    }


def test_dataclass_becomes_a_definition_without_its_generated_docstring(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]],
) -> None:
    def plot(at: Point) -> None:
        return None

    assert parameters_of(plot)["$defs"] == {
        "Point": {
            "type": "object",
            "properties": {
                "x": {"type": "number"},
                "y": {"type": "number", "default": 0.0},
                "labels": {"type": "array", "items": {"type": "string"}, "default": ["origin"]},
            },
            "required": ["x"],
            "additionalProperties": False,
        }
    }


def test_annotated_description_on_a_record_parameter_sits_next_to_the_ref() -> None:
    def ship(to: Annotated[Address, "Where the parcel goes."]) -> None:
        return None

    assert _tool_parameters(ship)["properties"]["to"] == {
        "$ref": "#/$defs/Address",
        "description": "Where the parcel goes.",
    }


def test_attrs_field_is_named_by_its_alias() -> None:
    @attrs.frozen
    class Secretive:
        _token: str

    def use(s: Secretive) -> None:
        return None

    definition = _tool_parameters(use)["$defs"]["Secretive"]
    assert definition["properties"] == {"token": {"type": "string"}}
    assert definition["required"] == ["token"]


def test_attrs_field_with_self_referencing_factory_is_optional() -> None:
    @attrs.frozen
    class Range:
        start: int = 0
        end: int = attrs.field(default=attrs.Factory(lambda self: self.start + 1, takes_self=True))

    def use(r: Range) -> None:
        return None

    definition = _tool_parameters(use)["$defs"]["Range"]
    assert "required" not in definition
    assert definition["properties"]["end"] == {"type": "integer"}


def test_unsupported_field_in_a_record_names_the_record_and_field() -> None:
    @attrs.frozen
    class Holder:
        widget: Widget

    def hold(h: Holder) -> None:
        return None

    with pytest.raises(
        SchemaError, match=r"parameter 'h' -> Holder\.widget: unsupported type hint"
    ):
        _ = expediter.tool(hold).spec


# -- defaults and required ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "default", "expected"),
    [
        pytest.param(int, 3, {"type": "integer", "default": 3}, id="int"),
        pytest.param(float, 0.5, {"type": "number", "default": 0.5}, id="float"),
        pytest.param(bool, False, {"type": "boolean", "default": False}, id="bool"),
        pytest.param(str, "", {"type": "string", "default": ""}, id="empty-str"),
        pytest.param(str | None, None, {"type": ["string", "null"], "default": None}, id="None"),
        pytest.param(
            Color,
            Color.GREEN,
            {"type": "string", "enum": ["red", "green"], "default": "green"},
            id="enum-by-value",
        ),
        pytest.param(
            Priority,
            Priority.HIGH,
            {"type": "integer", "enum": [1, 2], "default": 2},
            id="enum-int",
        ),
        pytest.param(
            datetime.date,
            datetime.date(2024, 2, 29),
            {"type": "string", "format": "date", "default": "2024-02-29"},
            id="date",
        ),
        pytest.param(
            datetime.datetime,
            datetime.datetime(2024, 2, 29, 13, 30),
            {"type": "string", "format": "date-time", "default": "2024-02-29T13:30:00"},
            id="datetime",
        ),
        pytest.param(
            tuple[str, ...],
            ("a", "b"),
            {"type": "array", "items": {"type": "string"}, "default": ["a", "b"]},
            id="tuple-as-list",
        ),
        pytest.param(
            dict[str, Color],
            {"x": Color.RED},
            {
                "type": "object",
                "additionalProperties": {"type": "string", "enum": ["red", "green"]},
                "default": {"x": "red"},
            },
            id="dict-of-enum",
        ),
    ],
)
def test_default_appears_in_json_form(hint: Any, default: Any, expected: Any) -> None:
    assert _tool_parameters(_function_with(hint, default)) == _one(expected, required=False)


@pytest.mark.parametrize(
    "default",
    [object(), Widget(), {1: "a"}, [object()], Address("s", "1")],
    ids=["object", "instance", "int-keys", "list-of-object", "record"],
)
def test_default_without_json_form_is_left_out_but_keeps_parameter_optional(default: Any) -> None:
    assert _tool_parameters(_function_with(Any, default)) == _one({}, required=False)


def test_required_lists_exactly_the_parameters_without_defaults(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]],
) -> None:
    def book(
        room: str,
        nights: int,
        *,
        guest: str,
        breakfast: bool = False,
        note: str | None = None,
    ) -> None:
        return None

    schema = parameters_of(book)
    assert schema["required"] == ["room", "nights", "guest"]
    assert list(schema["properties"]) == ["room", "nights", "guest", "breakfast", "note"]


def test_optional_type_without_default_is_still_required() -> None:
    def find(name: str | None) -> None:
        return None

    assert _tool_parameters(find)["required"] == ["name"]


def test_no_required_key_when_every_parameter_has_a_default() -> None:
    def greet(name: str = "world") -> str:
        return name

    assert "required" not in _tool_parameters(greet)


# -- CallContext, **kwargs, *args, positional-only ------------------------------------------------


@pytest.mark.parametrize(
    "hint",
    [
        CallContext,
        Optional[CallContext],  # noqa: UP045
        CallContext | None,
        Annotated[CallContext, "the call"],
    ],
    ids=["CallContext", "Optional", "union-None", "Annotated"],
)
def test_call_context_parameter_is_hidden_from_the_schema(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]], hint: Any
) -> None:
    def whoami(ctx, verbose: bool = False) -> str:  # type: ignore[no-untyped-def]
        return ""

    whoami.__annotations__["ctx"] = hint
    assert parameters_of(whoami) == {
        "type": "object",
        "properties": {"verbose": {"type": "boolean", "default": False}},
        "additionalProperties": False,
    }


def test_context_with_default_none_is_hidden_and_not_required() -> None:
    def whoami(query: str, ctx: CallContext | None = None) -> str:
        return query

    assert _tool_parameters(whoami) == {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
        "additionalProperties": False,
    }


def test_union_of_context_and_another_type_is_a_normal_parameter() -> None:
    def odd(value: CallContext | int) -> None:
        return None

    with pytest.raises(SchemaError, match="parameter 'value'"):
        _ = expediter.tool(odd).spec


def test_var_keyword_allows_additional_properties(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]],
) -> None:
    def tag(name: str, **extra: Any) -> dict[str, Any]:
        return extra

    assert parameters_of(tag) == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": True,
    }


def test_var_keyword_keeps_its_value_type(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]],
) -> None:
    def tally(name: str, **counts: int) -> int:
        return sum(counts.values())

    assert parameters_of(tally) == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": {"type": "integer"},
    }


def test_var_keyword_value_type_may_be_a_record_or_annotated() -> None:
    def book(**slots: Annotated[Address | None, "Where."]) -> None:
        return None

    schema = _tool_parameters(book)
    assert schema["additionalProperties"] == {
        "anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}],
        "description": "Where.",
    }
    assert schema["$defs"] == {"Address": ADDRESS_DEF}


def test_secret_var_keyword_is_a_schema_error() -> None:
    def login(**tokens: Annotated[str, expediter.Secret]) -> None:
        return None

    with pytest.raises(SchemaError, match=r"\*\*tokens cannot be Secret"):
        _ = expediter.tool(login).spec


def test_var_positional_is_an_optional_array_property_named_after_it(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]],
) -> None:
    def add(*numbers: int) -> int:
        """Add numbers.

        Args:
            *numbers: The numbers to add.
        """
        return sum(numbers)

    assert parameters_of(add) == {
        "type": "object",
        "properties": {
            "numbers": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "The numbers to add.",
                "default": [],
            }
        },
        "additionalProperties": False,
    }


def test_unannotated_var_positional_takes_any_items() -> None:
    def collect(*things):  # type: ignore[no-untyped-def]
        return things

    assert _tool_parameters(collect)["properties"] == {
        "things": {"type": "array", "items": {}, "default": []}
    }


def test_positional_only_parameters_are_ordinary_named_properties(
    parameters_of: Callable[[Callable[..., Any]], dict[str, Any]],
) -> None:
    def power(base: int, exponent: int = 2, /, *, modulo: int | None = None) -> int:
        return pow(base, exponent, modulo)

    assert parameters_of(power) == {
        "type": "object",
        "properties": {
            "base": {"type": "integer"},
            "exponent": {"type": "integer", "default": 2},
            "modulo": {"type": ["integer", "null"], "default": None},
        },
        "required": ["base"],
        "additionalProperties": False,
    }


# -- unsupported hints ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hint",
    [Widget, bytes, Callable[[int], int], type[int], list[Widget], Widget | None, complex],
    ids=["plain-class", "bytes", "Callable", "type", "list-of-class", "optional-class", "complex"],
)
def test_unsupported_hint_is_a_schema_error_naming_the_parameter(hint: Any) -> None:
    def configure(mode: str, value):  # type: ignore[no-untyped-def]
        return None

    configure.__annotations__["value"] = hint
    with pytest.raises(SchemaError) as caught:
        _ = expediter.tool(configure).spec
    message = str(caught.value)
    assert "configure: parameter 'value'" in message
    assert "unsupported type hint" in message
    assert "list[T], dict[str, T], an attrs class or a dataclass" in message


def test_unresolvable_forward_reference_is_a_schema_error() -> None:
    def lookup(item: "DoesNotExist") -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(SchemaError, match="cannot resolve its type hints"):
        _ = expediter.tool(lookup).spec


def test_decorating_a_function_with_a_bad_hint_does_not_raise_until_the_schema_is_needed() -> None:
    def bad(w: Widget) -> None:
        return None

    tool = expediter.tool(bad)  # no error yet: the schema is built lazily
    with pytest.raises(SchemaError):
        tool.get_actions_metadata()


def test_tool_with_unsupported_hint_is_a_pack_error_not_an_offered_tool(
    make_host: Callable[..., expediter.Host],
) -> None:
    @expediter.tool
    def bad(w: Widget) -> None:
        return None

    host = make_host(bad)
    assert host.catalogue(include_internal=True) == []
    [pack] = host.packs
    assert pack.error is not None
    assert "parameter 'w'" in pack.error
    assert "unsupported type hint" in pack.error


# -- forward references with ``from __future__ import annotations`` -------------------------------

FORWARD_MODULE = '''
from __future__ import annotations

import attrs
import expediter


@expediter.tool
def place(order: Order, note: str | None = None, ctx: expediter.CallContext | None = None) -> dict:
    """Place an order."""
    return {"sku": order.sku, "qty": order.qty, "user": ctx.user_id if ctx else None}


@attrs.frozen
class Order:
    """One line of an order."""

    sku: str
    qty: int = 1
    next: Order | None = None
'''

FORWARD_TOOLBOX = """
from __future__ import annotations

import dataclasses

import expediter


class Shelf(expediter.Toolbox):
    @expediter.action
    def stock(self, item: Item, count: int = 1) -> dict:
        return {"name": item.name, "count": count}


@dataclasses.dataclass
class Item:  # defined after the method that names it
    name: str
"""


def test_forward_references_under_future_annotations_resolve(
    tmp_path: Path, make_host: Callable[..., expediter.Host]
) -> None:
    (tmp_path / "orders.py").write_text(FORWARD_MODULE)
    host = make_host(tools_path=(tmp_path,))
    [info] = host.catalogue()
    [action] = info.actions
    assert action == Action(
        name="place",
        description="Place an order.",
        parameters={
            "type": "object",
            "properties": {
                "order": {"$ref": "#/$defs/Order"},
                "note": {"type": ["string", "null"], "default": None},
            },
            "required": ["order"],
            "additionalProperties": False,
            "$defs": {
                "Order": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "qty": {"type": "integer", "default": 1},
                        "next": {
                            "anyOf": [{"$ref": "#/$defs/Order"}, {"type": "null"}],
                            "default": None,
                        },
                    },
                    "required": ["sku"],
                    "additionalProperties": False,
                    "description": "One line of an order.",
                }
            },
        },
    )
    event = host.call("orders", "place", {"order": {"sku": "A-1", "qty": 2}}, user_id="ann")
    assert event.status == "completed"
    assert event.result == {"sku": "A-1", "qty": 2, "user": "ann"}


def test_forward_reference_in_a_toolbox_method_resolves_lazily(
    tmp_path: Path, make_host: Callable[..., expediter.Host]
) -> None:
    (tmp_path / "shelf.py").write_text(FORWARD_TOOLBOX)
    host = make_host(tools_path=(tmp_path,))
    [info] = host.catalogue()
    assert info.name == "shelf"
    assert info.actions[0].parameters == {
        "type": "object",
        "properties": {
            "item": {"$ref": "#/$defs/Item"},
            "count": {"type": "integer", "default": 1},
        },
        "required": ["item"],
        "additionalProperties": False,
        "$defs": {
            "Item": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
                "additionalProperties": False,
            }
        },
    }
    event = host.call("shelf", "stock", {"item": {"name": "nail"}, "count": 3})
    assert event.result == {"name": "nail", "count": 3}


# -- the building blocks --------------------------------------------------------------------------


def test_strip_annotated_collects_metadata_of_nested_annotations() -> None:
    hint = Annotated[Annotated[int, "inner"], "outer", 3]
    assert strip_annotated(hint) == (int, ["inner", "outer", 3])
    assert strip_annotated(list[int]) == (list[int], [])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, True),
        (7, 7),
        (1.5, 1.5),
        ("x", "x"),
        (Color.RED, "red"),
        (datetime.date(2020, 1, 2), "2020-01-02"),
        ((1, Color.GREEN), [1, "green"]),
        ({"a": [Priority.LOW]}, {"a": [1]}),
    ],
)
def test_json_default_converts_to_json_form(value: Any, expected: Any) -> None:
    assert json_default(value) == expected


def test_schema_for_builds_one_object_schema_from_parameter_tuples() -> None:
    schema = schema_for(
        [
            ("city", str, inspect.Parameter.empty, "The city."),
            ("units", Annotated[str, "Unit system."], "metric", "Ignored: Annotated wins."),
            ("home", Address, inspect.Parameter.empty, None),
        ],
        where="weather",
        allow_extra=True,
    )
    assert schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city."},
            "units": {"type": "string", "description": "Unit system.", "default": "metric"},
            "home": {"$ref": "#/$defs/Address"},
        },
        "required": ["city", "home"],
        "additionalProperties": True,
        "$defs": {"Address": ADDRESS_DEF},
    }


def test_object_hint_accepts_anything_in_the_schema() -> None:
    # Built with schema_for: a tool taking ``object`` trips a converter bug (see test_arguments).
    schema = schema_for([("value", object, inspect.Parameter.empty, None)], where="f")
    assert schema == _one({})


def test_schema_error_is_a_type_error_from_the_expediter_hierarchy() -> None:
    with pytest.raises(TypeError) as caught:
        schema_for([("w", Widget, inspect.Parameter.empty, None)], where="demo")
    assert isinstance(caught.value, SchemaError)
    assert isinstance(caught.value, expediter.errors.ExpediterError)
    assert str(caught.value).startswith("demo: parameter 'w': unsupported type hint")
