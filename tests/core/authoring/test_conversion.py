"""The strict cattrs converter (``core/conversion.py``): JSON types in, JSON data out."""

import dataclasses
import datetime
import enum
import math
from typing import Annotated, Any, Literal

import attrs
import cattrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from expediter.core.authoring.conversion import (
    NotJSON,
    TypeMismatch,
    converter,
    describe_type,
    json_type_name,
    to_json_value,
)


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class StrColor(str, enum.Enum):  # noqa: UP042 (the classic mixin is the point)
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mode(enum.StrEnum):
    FAST = "fast"
    SAFE = "safe"


@attrs.frozen
class Address:
    street: str
    zip: str
    country: str = "NL"


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


@attrs.frozen
class Reading:
    at: datetime.datetime
    level: Level
    color: Color
    tags: frozenset[str] = frozenset()
    where: Point | None = None


@attrs.frozen
class Report:
    at: datetime.datetime
    level: Level
    color: Color
    steps: tuple[str, ...] = ()
    where: Point | None = None


REJECTED = (TypeMismatch, cattrs.BaseValidationError)


# -- what the default converter would do, and this one must not -----------------------------------


@pytest.mark.parametrize(
    ("value", "hint"),
    [("5", int), (5, str), ("false", bool), ("abc", list[str]), (1.5, int)],
)
def test_default_cattrs_coerces_what_ours_refuses(value: Any, hint: Any) -> None:
    # The default converter coerces these silently; the project's converter must refuse them.
    cattrs.Converter().structure(value, hint)
    with pytest.raises(REJECTED):
        converter.structure(value, hint)


# -- accepted -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "hint", "expected"),
    [
        pytest.param("x", str, "x", id="str"),
        pytest.param("", str, "", id="empty-str"),
        pytest.param(5, int, 5, id="int"),
        pytest.param(5.0, int, 5, id="integral-float-as-int"),
        pytest.param(-3.0, int, -3, id="negative-integral-float"),
        pytest.param(3, float, 3.0, id="int-as-float"),
        pytest.param(2.5, float, 2.5, id="float"),
        pytest.param(True, bool, True, id="bool-true"),
        pytest.param(False, bool, False, id="bool-false"),
        pytest.param(None, type(None), None, id="null"),
        pytest.param(None, int | None, None, id="optional-null"),
        pytest.param(4, int | None, 4, id="optional-value"),
        pytest.param("x", int | str, "x", id="union-second-member"),
        pytest.param(True, int | bool, True, id="union-bool-not-taken-as-int"),
        pytest.param("a", Literal["a", "b"], "a", id="literal-str"),
        pytest.param(2, Literal[1, 2], 2, id="literal-int"),
        pytest.param("red", Color, Color.RED, id="enum-by-value"),
        pytest.param(Color.RED, Color, Color.RED, id="enum-member"),
        pytest.param([1, 2], list[int], [1, 2], id="list"),
        pytest.param((1, 2), list[int], [1, 2], id="tuple-as-list"),
        pytest.param([[1], []], list[list[int]], [[1], []], id="nested-list"),
        pytest.param([1, 2], tuple[int, ...], (1, 2), id="homogeneous-tuple"),
        pytest.param([1, "a"], tuple[int, str], (1, "a"), id="fixed-tuple"),
        pytest.param([1, 1, 2], set[int], {1, 2}, id="set"),
        pytest.param(["a"], frozenset[str], frozenset({"a"}), id="frozenset"),
        pytest.param({"a": 1}, dict[str, int], {"a": 1}, id="dict"),
        pytest.param({"a": [1.0]}, dict[str, list[int]], {"a": [1]}, id="dict-of-list"),
        pytest.param("2024-02-29", datetime.date, datetime.date(2024, 2, 29), id="date"),
        pytest.param(
            "2024-02-29T10:30:00+01:00",
            datetime.datetime,
            datetime.datetime(
                2024, 2, 29, 10, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=1))
            ),
            id="datetime-offset",
        ),
        pytest.param(
            "2024-02-29T10:30:00Z",
            datetime.datetime,
            datetime.datetime(2024, 2, 29, 10, 30, tzinfo=datetime.UTC),
            id="datetime-Z",
        ),
        pytest.param(
            {"street": "Main 1", "zip": "1000"},
            Address,
            Address("Main 1", "1000", "NL"),
            id="attrs-record",
        ),
        pytest.param({"x": 1}, Point, Point(1.0, 0.0), id="dataclass"),
        pytest.param(7, Annotated[int, "desc"], 7, id="annotated"),
        pytest.param({"any": object}, Any, {"any": object}, id="Any-passes-through"),
    ],
)
def test_structure_accepts_matching_json(value: Any, hint: Any, expected: Any) -> None:
    result = converter.structure(value, hint)
    assert result == expected
    assert type(result) is type(expected)


def test_integral_float_becomes_a_real_int() -> None:
    result = converter.structure(7.0, int)
    assert result == 7
    assert type(result) is int


def test_nested_record_with_enums_dates_and_sets() -> None:
    reading = converter.structure(
        {
            "at": "2024-01-01T00:00:00",
            "level": 2,
            "color": "green",
            "tags": ["a", "b"],
            "where": {"x": 1.5},
        },
        Reading,
    )
    assert reading == Reading(
        at=datetime.datetime(2024, 1, 1),
        level=Level.HIGH,
        color=Color.GREEN,
        tags=frozenset({"a", "b"}),
        where=Point(1.5, 0.0),
    )


# -- rejected -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        pytest.param(5, str, id="int-for-str"),
        pytest.param(None, str, id="null-for-str"),
        pytest.param(["a"], str, id="list-for-str"),
        pytest.param("5", int, id="str-for-int"),
        pytest.param(True, int, id="bool-for-int"),
        pytest.param(1.5, int, id="fraction-for-int"),
        pytest.param(None, int, id="null-for-int"),
        pytest.param("1.5", float, id="str-for-float"),
        pytest.param(True, float, id="bool-for-float"),
        pytest.param("false", bool, id="str-false-for-bool"),
        pytest.param("true", bool, id="str-true-for-bool"),
        pytest.param(0, bool, id="zero-for-bool"),
        pytest.param(1, bool, id="one-for-bool"),
        pytest.param(0, type(None), id="zero-for-null"),
        pytest.param("abc", list[str], id="str-for-list"),
        pytest.param({"a": 1}, list[str], id="object-for-list"),
        pytest.param("abc", tuple[str, ...], id="str-for-tuple"),
        pytest.param([1, 2, 3], tuple[int, int], id="long-fixed-tuple"),
        pytest.param([1], tuple[int, int], id="short-fixed-tuple"),
        pytest.param([1, 2], dict[str, int], id="list-for-dict"),
        pytest.param("x", dict[str, int], id="str-for-dict"),
        pytest.param({"a": "1"}, dict[str, int], id="bad-dict-value"),
        pytest.param(["1"], list[int], id="bad-list-element"),
        pytest.param("c", Literal["a", "b"], id="literal-outside"),
        pytest.param(True, Literal[1, 2], id="bool-for-int-literal"),
        pytest.param("RED", Color, id="enum-name-not-value"),
        pytest.param("blue", Color, id="enum-outside"),
        pytest.param(1.5, int | None, id="optional-wrong"),
        pytest.param([1], int | str, id="union-wrong"),
        pytest.param("x", Address, id="str-for-record"),
        pytest.param({"street": "s"}, Address, id="record-missing-field"),
        pytest.param({"street": "s", "zip": "1", "floor": 2}, Address, id="record-extra-field"),
        pytest.param({"street": "s", "zip": 1}, Address, id="record-bad-field"),
        pytest.param({"x": "1"}, Point, id="dataclass-bad-field"),
        pytest.param({"x": 1, "z": 2}, Point, id="dataclass-extra-field"),
        pytest.param("not a date", datetime.date, id="bad-date"),
        pytest.param("2024-02-29T10:00:00", datetime.date, id="datetime-for-date"),
        pytest.param(20240229, datetime.date, id="int-for-date"),
        pytest.param(1700000000, datetime.datetime, id="timestamp-for-datetime"),
    ],
)
def test_structure_rejects_mismatched_json(value: Any, hint: Any) -> None:
    with pytest.raises(REJECTED):
        converter.structure(value, hint)


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        pytest.param("purple", StrColor, id="str-enum-outside"),
        pytest.param(5, Level, id="int-enum-outside"),
        pytest.param("slow", Mode, id="StrEnum-outside"),
        pytest.param("abc", set[str], id="str-for-set"),
        pytest.param("abc", frozenset[str], id="str-for-frozenset"),
        pytest.param("ab", tuple[str, str], id="str-for-fixed-tuple"),
        pytest.param({"a": 1}, set[str], id="object-for-set"),
    ],
)
def test_structure_rejects_mismatched_json_for_mixin_enums_sets_and_tuples(
    value: Any, hint: Any
) -> None:
    with pytest.raises(REJECTED):
        converter.structure(value, hint)


@pytest.mark.parametrize(
    ("value", "hint", "member"),
    [
        pytest.param("green", StrColor, StrColor.GREEN, id="str-enum"),
        pytest.param(2, Level, Level.HIGH, id="IntEnum"),
        pytest.param("safe", Mode, Mode.SAFE, id="StrEnum"),
    ],
)
def test_mixin_enum_value_becomes_the_member(value: Any, hint: Any, member: Any) -> None:
    assert converter.structure(value, hint) is member


@pytest.mark.parametrize(
    ("value", "hint", "message"),
    [
        ("5", int, "expected integer, got string '5'"),
        (True, int, "expected integer, got boolean True"),
        (1.5, int, "expected integer, got number 1.5"),
        (5, str, "expected string, got integer 5"),
        (None, str, "expected string, got null None"),
        ("false", bool, "expected boolean, got string 'false'"),
        ("abc", list[int], "expected array, got string 'abc'"),
        ([1], dict[str, int], "expected object, got array [1]"),
        ("x", Address, "expected object, got string 'x'"),
        ("c", Literal["a", "b"], "expected one of 'a', 'b', got string 'c'"),
        ("blue", Color, "expected one of 'red', 'green', got string 'blue'"),
        (1.5, int | None, "expected integer or null, got number 1.5"),
        ("nope", datetime.date, "expected an ISO 8601 date string, got string 'nope'"),
        (
            "x" * 260,
            int,
            "expected integer, got string '" + "x" * 200 + "' ... [60 more characters]",
        ),
    ],
)
def test_type_mismatch_message_names_expected_and_actual(
    value: Any, hint: Any, message: str
) -> None:
    with pytest.raises(TypeMismatch) as caught:
        converter.structure(value, hint)
    assert caught.value.shown() == message
    # The exception's own text names the types only: the value may be a secret.
    expected, _, got = message.partition(", got ")
    assert str(caught.value) == f"{expected}, got {got.split(' ', 1)[0]}"


# -- naming types and values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "name"),
    [
        (str, "string"),
        (int, "integer"),
        (float, "number"),
        (bool, "boolean"),
        (type(None), "null"),
        (Annotated[int, "x"], "integer"),
        (Literal["a", 1], "one of 'a', 1"),
        (Color, "one of 'red', 'green'"),
        (int | None, "integer or null"),
        (datetime.datetime, "an ISO 8601 datetime string"),
        (datetime.date, "an ISO 8601 date string"),
        (list[int], "array"),
        (tuple[int, ...], "array"),
        (dict[str, int], "object"),
        (Address, "object"),
        (Point, "object"),
    ],
)
def test_describe_type_uses_json_schema_words(hint: Any, name: str) -> None:
    assert describe_type(hint) == name


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "boolean"),
        (1, "integer"),
        (1.0, "number"),
        ("", "string"),
        ([], "array"),
        ((), "array"),
        ({}, "object"),
        (object(), "object"),
        (b"x", "bytes"),
    ],
)
def test_json_type_name(value: Any, name: str) -> None:
    assert json_type_name(value) == name


# -- results to JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, None, id="null"),
        pytest.param({"a": [1, 2.5, "x", True, None]}, {"a": [1, 2.5, "x", True, None]}, id="json"),
        pytest.param((1, 2), [1, 2], id="tuple"),
        pytest.param({3}, [3], id="set"),
        pytest.param(frozenset({"a"}), ["a"], id="frozenset"),
        pytest.param(Color.GREEN, "green", id="enum"),
        pytest.param(Level.HIGH, 2, id="int-enum"),
        pytest.param(datetime.date(2024, 1, 2), "2024-01-02", id="date"),
        pytest.param(
            datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
            "2024-01-02T03:04:05+00:00",
            id="datetime",
        ),
        pytest.param(
            Address("Main 1", "1000"),
            {"street": "Main 1", "zip": "1000", "country": "NL"},
            id="attrs",
        ),
        pytest.param(Point(1.0), {"x": 1.0, "y": 0.0}, id="dataclass"),
        pytest.param(
            Report(datetime.datetime(2024, 1, 1), Level.LOW, Color.RED, ("a",), Point(2.0)),
            {
                "at": "2024-01-01T00:00:00",
                "level": 1,
                "color": "red",
                "steps": ["a"],
                "where": {"x": 2.0, "y": 0.0},
            },
            id="nested-record",
        ),
        pytest.param(
            {"items": [Address("a", "1")]},
            {"items": [{"street": "a", "zip": "1", "country": "NL"}]},
            id="records-in-dict",
        ),
    ],
)
def test_to_json_value_converts_records_enums_dates_and_collections(
    value: Any, expected: Any
) -> None:
    assert to_json_value(value) == expected


def test_record_with_set_fields_becomes_json_lists() -> None:
    @attrs.frozen
    class Labels:
        names: set[str]
        ids: frozenset[int]

    assert to_json_value(Labels({"a"}, frozenset({1}))) == {"names": ["a"], "ids": [1]}


def test_record_with_tuple_and_list_fields_becomes_json_lists() -> None:
    @attrs.frozen
    class Path:
        steps: tuple[int, ...]
        names: list[str]

    assert to_json_value(Path((1, 2), ["a"])) == {"steps": [1, 2], "names": ["a"]}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(object(), "the result is a object, which has no JSON form", id="object"),
        pytest.param(b"raw", "the result is a bytes, which has no JSON form", id="bytes"),
        pytest.param(math.nan, "the result is nan, which JSON cannot represent", id="nan"),
        pytest.param(
            [1, math.inf], "the result[1] is inf, which JSON cannot represent", id="inf-in-list"
        ),
        pytest.param({1: "a"}, "the result has a non-string key of type int", id="int-key"),
        pytest.param(
            {"a": {"b": object()}}, "the result.a.b is a object, which has no JSON form", id="deep"
        ),
    ],
)
def test_to_json_value_refuses_values_without_json_form(value: Any, message: str) -> None:
    with pytest.raises(NotJSON) as caught:
        to_json_value(value)
    assert str(caught.value) == message


# -- properties -----------------------------------------------------------------------------------


@given(st.integers())
def test_any_int_round_trips(number: int) -> None:
    result = converter.structure(number, int)
    assert result == number
    assert type(result) is int


@given(st.integers(min_value=-(2**53), max_value=2**53))
def test_integral_float_is_accepted_as_the_same_int(number: int) -> None:
    assert converter.structure(float(number), int) == number


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer()))
def test_fractional_float_is_never_an_int(number: float) -> None:
    with pytest.raises(TypeMismatch):
        converter.structure(number, int)


@given(st.one_of(st.integers(), st.floats(allow_nan=False)))
def test_any_number_is_accepted_as_float(number: float) -> None:
    result = converter.structure(number, float)
    assert result == float(number)
    assert type(result) is float


@given(st.one_of(st.text(), st.booleans(), st.none(), st.lists(st.integers(), max_size=3)))
def test_non_numbers_are_never_ints(value: Any) -> None:
    with pytest.raises(TypeMismatch):
        converter.structure(value, int)


@given(st.text())
def test_any_text_round_trips_and_is_never_a_bool_or_list(text: str) -> None:
    assert converter.structure(text, str) == text
    with pytest.raises(TypeMismatch):
        converter.structure(text, bool)
    with pytest.raises(TypeMismatch):
        converter.structure(text, list[str])


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(_JSON)
def test_json_data_is_returned_unchanged(value: Any) -> None:
    assert to_json_value(value) == value


@given(st.lists(st.integers(), max_size=10))
def test_list_of_ints_round_trips(values: list[int]) -> None:
    assert converter.structure(values, list[int]) == values
    assert converter.structure(values, tuple[int, ...]) == tuple(values)
    assert converter.structure(values, set[int]) == set(values)
