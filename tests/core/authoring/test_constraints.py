"""Constraints in ``Annotated`` metadata (``core/authoring/constraints.py``): pydantic's
``Field(ge=..., max_length=..., pattern=...)`` and annotated-types (``Ge``, ``Interval``,
``MinLen``...) become JSON Schema keywords the model sees and checks the host makes before the
function runs; metadata that cannot be honoured is refused (or warned about) at load time."""

import datetime
import inspect
import logging
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

import annotated_types as at
import pydantic
import pytest
from support.authoring import CTX, tool_with

import expediter
from expediter.core.authoring.tools import FunctionTool
from expediter.errors import ArgumentError, SchemaError


def _property(hint: Any) -> dict[str, Any]:
    tool = tool_with(hint)
    [action] = tool.get_actions_metadata()
    return dict(action.parameters["properties"]["value"])


def _run(tool: FunctionTool, value: Any) -> Any:
    return tool.execute_action(tool.name, {"value": value}, CTX)


def _error(hint: Any, value: Any) -> str:
    with pytest.raises(ArgumentError) as caught:
        _run(tool_with(hint), value)
    assert caught.value.parameter == "value"
    return caught.value.message


def _load_error(hint: Any, default: Any = inspect.Parameter.empty) -> str:
    with pytest.raises(SchemaError) as caught:
        _ = tool_with(hint, default).spec
    return str(caught.value)


# -- the schema -----------------------------------------------------------------------------------

SCHEMAS = [
    pytest.param(
        Annotated[int, pydantic.Field(ge=1, le=10, description="How many.")],
        {"type": "integer", "minimum": 1, "maximum": 10, "description": "How many."},
        id="Field-ge-le-description",
    ),
    pytest.param(
        Annotated[int, pydantic.Field(gt=0, lt=100, multiple_of=5)],
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100, "multipleOf": 5},
        id="Field-gt-lt-multiple_of",
    ),
    pytest.param(
        Annotated[str, pydantic.Field(min_length=2, max_length=5, pattern=r"^[a-z]+$")],
        {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
        id="Field-string",
    ),
    pytest.param(
        Annotated[float, at.Interval(gt=0, lt=1)],
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        id="Interval-open",
    ),
    pytest.param(
        Annotated[float, at.Interval(ge=0.5, le=2.5)],
        {"type": "number", "minimum": 0.5, "maximum": 2.5},
        id="Interval-closed",
    ),
    pytest.param(Annotated[int, at.Ge(3)], {"type": "integer", "minimum": 3}, id="Ge"),
    pytest.param(Annotated[int, at.Le(3)], {"type": "integer", "maximum": 3}, id="Le"),
    pytest.param(Annotated[float, at.Gt(0)], {"type": "number", "exclusiveMinimum": 0}, id="Gt"),
    pytest.param(Annotated[float, at.Lt(0)], {"type": "number", "exclusiveMaximum": 0}, id="Lt"),
    pytest.param(
        Annotated[float, at.MultipleOf(0.5)], {"type": "number", "multipleOf": 0.5}, id="MultipleOf"
    ),
    pytest.param(Annotated[str, at.MinLen(1)], {"type": "string", "minLength": 1}, id="MinLen-str"),
    pytest.param(Annotated[str, at.MaxLen(9)], {"type": "string", "maxLength": 9}, id="MaxLen-str"),
    pytest.param(
        Annotated[str, at.Len(2, 4)],
        {"type": "string", "minLength": 2, "maxLength": 4},
        id="Len-str",
    ),
    pytest.param(
        Annotated[list[str], at.MinLen(1)],
        {"type": "array", "items": {"type": "string"}, "minItems": 1},
        id="MinLen-list",
    ),
    pytest.param(
        Annotated[set[int], at.MaxLen(3)],
        {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 3},
        id="MaxLen-set",
    ),
    pytest.param(
        Annotated[dict[str, int], at.Len(1, 2)],
        {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "minProperties": 1,
            "maxProperties": 2,
        },
        id="Len-dict",
    ),
    pytest.param(
        list[Annotated[int, at.Ge(0)]],
        {"type": "array", "items": {"type": "integer", "minimum": 0}},
        id="items-Ge",
    ),
    pytest.param(
        Annotated[list[Annotated[str, pydantic.Field(max_length=3)]], pydantic.Field(min_length=1)],
        {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1},
        id="items-and-list",
    ),
    pytest.param(
        Annotated[int, at.Le(10)] | None,
        {"anyOf": [{"type": "integer", "maximum": 10}, {"type": "null"}]},
        id="Optional-of-constrained",
    ),
    pytest.param(
        Annotated[int | None, at.Le(10)],
        {"type": ["integer", "null"], "maximum": 10},
        id="constrained-Optional",
    ),
    pytest.param(
        Annotated[list[int] | None, at.MinLen(1)],
        {
            "anyOf": [
                {"type": "array", "items": {"type": "integer"}, "minItems": 1},
                {"type": "null"},
            ]
        },
        id="constrained-Optional-list",
    ),
    pytest.param(
        Annotated[int | float, at.Ge(0)],
        {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "number", "minimum": 0}]},
        id="constrained-number-union",
    ),
    pytest.param(
        pydantic.conint(ge=1, le=5), {"type": "integer", "minimum": 1, "maximum": 5}, id="conint"
    ),
    pytest.param(
        pydantic.constr(min_length=1, pattern="^a"),
        {"type": "string", "minLength": 1, "pattern": "^a"},
        id="constr",
    ),
    pytest.param(
        Annotated[str, pydantic.StringConstraints(max_length=8, pattern=r"\d")],
        {"type": "string", "maxLength": 8, "pattern": r"\d"},
        id="StringConstraints",
    ),
    pytest.param(
        Annotated[int, at.Ge(1), at.Ge(5), at.Le(9), at.Le(7)],
        {"type": "integer", "minimum": 5, "maximum": 7},
        id="repeated-bounds-keep-the-strictest",
    ),
    pytest.param(
        Annotated[int, at.doc("How many results.")],
        {"type": "integer", "description": "How many results."},
        id="doc",
    ),
    pytest.param(
        Annotated[
            int,
            pydantic.Field(
                title="Count",
                examples=[1, 2],
                deprecated=True,
                json_schema_extra={"x-unit": "items"},
            ),
        ],
        {
            "type": "integer",
            "title": "Count",
            "examples": [1, 2],
            "deprecated": True,
            "x-unit": "items",
        },
        id="Field-annotations",
    ),
    pytest.param(
        Annotated[str, expediter.Secret, at.MaxLen(4)],
        {"type": "string", "maxLength": 4, "writeOnly": True},
        id="Secret-and-MaxLen",
    ),
    pytest.param(
        Annotated[int, "Text.", 42, object()],
        {"type": "integer", "description": "Text."},
        id="unrelated-metadata-ignored-as-before",
    ),
    pytest.param(
        Annotated[int, "Annotated text.", pydantic.Field(description="Field text.")],
        {"type": "integer", "description": "Annotated text. Field text."},
        id="texts-and-Field-description",
    ),
]


@pytest.mark.parametrize(("hint", "expected"), SCHEMAS)
def test_constraint_metadata_becomes_json_schema_keywords(hint: Any, expected: Any) -> None:
    assert _property(hint) == expected


def test_a_callable_json_schema_extra_is_given_the_schema() -> None:
    def mark(schema: dict[str, Any]) -> None:
        schema["x-checked"] = schema["maximum"]

    hint = Annotated[int, pydantic.Field(le=4, json_schema_extra=mark)]
    assert _property(hint) == {"type": "integer", "maximum": 4, "x-checked": 4}


def test_constraints_on_args_and_kwargs_are_shown_and_checked() -> None:
    def tally(*scores: Annotated[int, at.Ge(0)], **bonus: Annotated[int, at.Le(5)]) -> int:
        return sum(scores) + sum(bonus.values())

    tool = expediter.tool(tally)
    [action] = tool.get_actions_metadata()
    assert action.parameters["properties"]["scores"]["items"] == {"type": "integer", "minimum": 0}
    assert action.parameters["additionalProperties"] == {"type": "integer", "maximum": 5}
    assert tool.execute_action("tally", {"scores": [1, 2], "extra": 5}, CTX) == 8
    with pytest.raises(ArgumentError, match=r"argument 'scores\[1\]': must be >= 0"):
        tool.execute_action("tally", {"scores": [1, -2]}, CTX)
    with pytest.raises(ArgumentError, match=r"argument 'extra': must be <= 5 \(maximum\), got 6"):
        tool.execute_action("tally", {"extra": 6}, CTX)


def test_field_description_wins_over_the_docstring() -> None:
    def pick(n: Annotated[int, pydantic.Field(le=3, description="From Field.")]) -> int:
        """Pick.

        Args:
            n: From the docstring.
        """
        return n

    [action] = expediter.tool(pick).get_actions_metadata()
    assert action.parameters["properties"]["n"]["description"] == "From Field."


def test_constraints_on_record_fields_reach_the_definition() -> None:
    import attrs

    @attrs.frozen
    class Page:
        size: Annotated[int, at.Interval(ge=1, le=50)] = 10

    def browse(page: Page) -> int:
        return page.size

    [action] = expediter.tool(browse).get_actions_metadata()
    assert action.parameters["$defs"]["Page"]["properties"]["size"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 50,
        "default": 10,
    }


# -- validation -----------------------------------------------------------------------------------

VIOLATIONS = [
    pytest.param(
        Annotated[int, pydantic.Field(le=10)], 1000, "must be <= 10 (maximum), got 1000", id="le"
    ),
    pytest.param(Annotated[int, at.Ge(1)], 0, "must be >= 1 (minimum), got 0", id="ge"),
    pytest.param(
        Annotated[float, at.Interval(gt=0, lt=1)],
        0,
        "must be > 0 (exclusiveMinimum), got 0.0",
        id="gt",
    ),
    pytest.param(
        Annotated[float, at.Interval(gt=0, lt=1)],
        1,
        "must be < 1 (exclusiveMaximum), got 1.0",
        id="lt",
    ),
    pytest.param(
        Annotated[int, at.MultipleOf(5)], 7, "must be a multiple of 5 (multipleOf), got 7", id="mo"
    ),
    pytest.param(
        Annotated[str, at.MinLen(3)],
        "ab",
        "must have at least 3 characters (minLength), got 2",
        id="minLength",
    ),
    pytest.param(
        Annotated[str, pydantic.Field(max_length=2)],
        "abc",
        "must have at most 2 characters (maxLength), got 3",
        id="maxLength",
    ),
    pytest.param(
        Annotated[str, pydantic.Field(pattern=r"^[a-z]+$")],
        "ABC",
        "must match the pattern '^[a-z]+$' (pattern), got 'ABC'",
        id="pattern",
    ),
    pytest.param(
        Annotated[list[int], at.MinLen(1)],
        [],
        "must have at least 1 item (minItems), got 0",
        id="minItems",
    ),
    pytest.param(
        Annotated[dict[str, int], at.MaxLen(1)],
        {"a": 1, "b": 2},
        "must have at most 1 property (maxProperties), got 2",
        id="maxProperties",
    ),
    pytest.param(
        Annotated[int | None, at.Le(10)], 11, "must be <= 10 (maximum), got 11", id="in-Optional"
    ),
    pytest.param(
        Annotated[int, at.Le(10)] | None, 11, "must be <= 10 (maximum), got 11", id="Optional-of"
    ),
    pytest.param(
        Annotated[int, at.Le(10)] | str,
        11,
        "must be <= 10 (maximum), got 11",
        id="union-member-says-why",
    ),
    pytest.param(pydantic.conint(ge=1, le=5), 6, "must be <= 5 (maximum), got 6", id="conint"),
]


@pytest.mark.parametrize(("hint", "value", "problem"), VIOLATIONS)
def test_a_value_breaking_a_constraint_is_an_argument_error(
    hint: Any, value: Any, problem: str
) -> None:
    assert _error(hint, value) == f"probe: argument 'value': {problem}"


def test_n_1000_for_a_field_le_10_never_reaches_the_function(
    call_tool: Callable[..., expediter.CallEvent],
) -> None:
    calls: list[int] = []

    @expediter.tool
    def top(n: Annotated[int, pydantic.Field(ge=1, le=10)] = 3) -> list[int]:
        """The top results."""
        calls.append(n)
        return list(range(n))

    event = call_tool(top, "top", {"n": 1000})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert event.error == "top: argument 'n': must be <= 10 (maximum), got 1000"
    assert calls == []
    assert call_tool(top, "top", {"n": 10}).result == list(range(10))
    assert call_tool(top, "top", {}).result == [0, 1, 2]


def test_an_item_breaking_its_constraint_is_named_by_its_index() -> None:
    message = _error(list[Annotated[int, at.Ge(0)]], [1, -2, 3])
    assert message == "probe: argument 'value[1]': must be >= 0 (minimum), got -2"


def test_a_record_field_breaking_its_constraint_is_named_by_its_path() -> None:
    import attrs

    @attrs.frozen
    class Page:
        size: Annotated[int, pydantic.Field(le=50)]

    message = _error(Page, {"size": 51})
    assert message == "probe: argument 'value.size': must be <= 50 (maximum), got 51"


@pytest.mark.parametrize(
    ("hint", "value"),
    [
        (Annotated[int, pydantic.Field(ge=1, le=10)], 10),
        (Annotated[float, at.Interval(gt=0, lt=1)], 0.5),
        (Annotated[float, at.MultipleOf(0.1)], 0.3),
        (Annotated[str, pydantic.Field(min_length=2, max_length=5, pattern="b")], "abc"),
        (Annotated[list[int], at.Len(1, 2)], [1, 2]),
        (Annotated[int | None, at.Le(10)], None),
        (list[Annotated[int, at.Ge(0)]], [0, 5]),
    ],
)
def test_a_value_within_its_constraints_arrives_converted(hint: Any, value: Any) -> None:
    assert _run(tool_with(hint), value) == value


def test_a_secret_breaking_a_constraint_is_not_quoted() -> None:
    for hint, value in [
        (Annotated[str, expediter.Secret, pydantic.Field(pattern="^sk-")], "hunter2-secret"),
        (Annotated[str, expediter.Secret, at.MaxLen(4)], "hunter2-secret"),
    ]:
        message = _error(hint, value)
        assert "hunter2" not in message
        assert "14" not in message  # not even its length
        assert message.startswith("probe: argument 'value': must ")


def test_a_secret_looking_field_breaking_a_constraint_is_not_quoted() -> None:
    import attrs

    @attrs.frozen
    class Login:
        user: str
        password: Annotated[str, at.MinLen(12)]

    message = _error(Login, {"user": "ann", "password": "hunter2"})
    assert (
        message == "probe: argument 'value.password': must have at least 12 characters (minLength)"
    )


# -- refused or warned at load time ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "names"),
    [
        pytest.param(
            Annotated[int, pydantic.Field(ge=5, le=1)], ["contradict", "5", "1"], id="ge>le"
        ),
        pytest.param(Annotated[float, at.Gt(1), at.Lt(1)], ["contradict"], id="gt==lt"),
        pytest.param(Annotated[int, at.Ge(2), at.Lt(2)], ["contradict"], id="ge==lt"),
        pytest.param(Annotated[str, at.MinLen(5), at.MaxLen(2)], ["contradict"], id="min>max"),
        pytest.param(Annotated[int, at.MultipleOf(0)], ["multipleOf", "positive"], id="mo=0"),
        pytest.param(Annotated[str, at.MinLen(-1)], ["minLength", "non-negative"], id="neg-len"),
        pytest.param(Annotated[float, at.Ge(float("inf"))], ["minimum", "finite"], id="inf"),
        pytest.param(Annotated[int, at.Ge("1")], ["minimum", "number"], id="string-bound"),
        pytest.param(Annotated[str, at.Ge(1)], ["Ge", "numbers", "str"], id="Ge-on-str"),
        pytest.param(Annotated[int, at.MinLen(1)], ["MinLen", "int"], id="MinLen-on-int"),
        pytest.param(Annotated[bool, at.Ge(0)], ["Ge", "bool"], id="Ge-on-bool"),
        pytest.param(Annotated[int | str, at.Ge(0)], ["Ge"], id="Ge-on-mixed-union"),
        pytest.param(Annotated[datetime.date, at.Ge(0)], ["Ge", "date"], id="Ge-on-date"),
        pytest.param(Annotated[Literal["a"], at.MinLen(1)], ["MinLen"], id="MinLen-on-Literal"),
        pytest.param(
            Annotated[list[int], pydantic.Field(pattern="x")], ["pattern"], id="pattern-on-list"
        ),
        pytest.param(Annotated[str, pydantic.Field(pattern="(")], ["pattern", "("], id="bad-regex"),
        pytest.param(Annotated[str, at.Predicate(str.islower)], ["Predicate"], id="Predicate"),
        pytest.param(at.LowerCase[str], ["Predicate"], id="LowerCase"),
        pytest.param(Annotated[str, at.Timezone(None)], ["Timezone"], id="Timezone"),
        pytest.param(Annotated[float, at.Unit("m")], ["Unit"], id="Unit"),
        pytest.param(Annotated[str, pydantic.Field(alias="q")], ["alias"], id="Field-alias"),
        pytest.param(Annotated[int, pydantic.Field(default=3)], ["default"], id="Field-default"),
        pytest.param(
            Annotated[str, pydantic.AfterValidator(str.strip)], ["AfterValidator"], id="validator"
        ),
        pytest.param(
            Annotated[str, pydantic.StringConstraints(to_upper=True)], ["to_upper"], id="to_upper"
        ),
        pytest.param(
            Annotated[float, pydantic.Field(max_digits=3)], ["max_digits"], id="max_digits"
        ),
        pytest.param(
            Annotated[int, pydantic.Field(json_schema_extra={"x": object()})],
            ["json_schema_extra"],
            id="extra-not-json",
        ),
    ],
)
def test_metadata_that_cannot_be_honoured_fails_the_load_naming_it(
    hint: Any, names: list[str]
) -> None:
    message = _load_error(hint)
    assert message.startswith("probe: parameter 'value'")
    for name in names:
        assert name in message


def test_a_pydantic_field_as_the_default_is_refused_with_the_way_to_write_it() -> None:
    message = _load_error(int, pydantic.Field(default=3, le=5))
    assert "parameter 'value'" in message
    assert "a pydantic Field as the default" in message
    assert "value: Annotated[T, Field(...)] = <default>" in message


def test_refused_metadata_in_a_record_field_names_the_field() -> None:
    import attrs

    @attrs.frozen
    class Shout:
        text: Annotated[str, at.Predicate(str.isupper)]

    message = _load_error(Shout)
    assert "Shout.text" in message
    assert "Predicate" in message


def test_a_tool_with_refused_metadata_is_a_pack_error_not_an_offered_tool(
    make_host: Callable[..., expediter.Host],
) -> None:
    @expediter.tool
    def shout(text: Annotated[str, at.Predicate(str.isupper)]) -> str:
        return text

    host = make_host(shout)
    assert host.catalogue(include_internal=True) == []
    [pack] = host.packs
    assert pack.error is not None
    assert "parameter 'text'" in pack.error
    assert "Predicate" in pack.error


def test_field_strict_false_is_warned_about_at_load(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="expediter.core.authoring.constraints"):
        schema = _property(Annotated[int, pydantic.Field(strict=False, le=3)])
    assert schema == {"type": "integer", "maximum": 3}
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "parameter 'value'" in record.getMessage()
    assert "strict=False" in record.getMessage()
    # Strict anyway: "3" is not an integer.
    assert _error(Annotated[int, pydantic.Field(strict=False)], "3").endswith(
        "expected integer, got string '3'"
    )


def test_field_strict_true_and_allow_inf_nan_false_are_honoured_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        tool = tool_with(Annotated[float, pydantic.Field(strict=True, allow_inf_nan=False)])
        _ = tool.spec
    assert caplog.records == []
    with pytest.raises(ArgumentError, match=re.escape("must be a finite number")):
        _run(tool, float("inf"))
    assert _run(tool, 1.5) == 1.5
