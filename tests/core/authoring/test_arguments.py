"""Binding a model's arguments to a tool's parameters (``core/arguments.py``), with clear errors."""

import asyncio
import datetime
import enum
from collections.abc import Callable
from typing import Annotated, Any, Literal

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.authoring import CTX, tool_with

import expediter
from expediter.core.authoring.arguments import ArgumentBinder, Parameter
from expediter.core.authoring.tools import FunctionTool, Toolbox
from expediter.errors import ArgumentError
from expediter.hookspecs.tool import CallContext, ToolError


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class StrColor(str, enum.Enum):  # noqa: UP042 (the classic mixin is the point)
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Address:
    street: str
    zip: str


@attrs.frozen
class Person:
    name: str
    address: Address


@attrs.frozen
class Tree:
    value: int
    children: list["Tree"] = attrs.Factory(list)


def _run(tool: FunctionTool, arguments: Any) -> Any:
    return tool.execute_action(tool.name, arguments, CTX)


def _error(tool: FunctionTool, arguments: Any) -> ArgumentError:
    with pytest.raises(ArgumentError) as caught:
        _run(tool, arguments)
    return caught.value


# -- wrong types ----------------------------------------------------------------------------------

WRONG = [
    pytest.param(int, "5", "expected integer, got string '5'", id="string-for-int"),
    pytest.param(str, 5, "expected string, got integer 5", id="int-for-str"),
    pytest.param(bool, "false", "expected boolean, got string 'false'", id="string-false-for-bool"),
    pytest.param(bool, 0, "expected boolean, got integer 0", id="zero-for-bool"),
    pytest.param(list[str], "abc", "expected array, got string 'abc'", id="string-for-list"),
    pytest.param(int, True, "expected integer, got boolean True", id="bool-for-int"),
    pytest.param(int, 1.5, "expected integer, got number 1.5", id="fraction-for-int"),
    pytest.param(float, True, "expected number, got boolean True", id="bool-for-float"),
    pytest.param(float, "1.5", "expected number, got string '1.5'", id="string-for-float"),
    pytest.param(str, None, "expected string, got null None", id="null-for-str"),
    pytest.param(list[int], {"a": 1}, "expected array, got object {'a': 1}", id="object-for-list"),
    pytest.param(dict[str, int], [1], "expected object, got array [1]", id="array-for-dict"),
    pytest.param(Address, "Main 1", "expected object, got string 'Main 1'", id="string-for-record"),
    pytest.param(
        Literal["a", "b"], "c", "expected one of 'a', 'b', got string 'c'", id="literal-outside"
    ),
    pytest.param(
        Literal[1, 2], True, "expected one of 1, 2, got boolean True", id="bool-for-int-literal"
    ),
    pytest.param(
        Color, "RED", "expected one of 'red', 'green', got string 'RED'", id="enum-name-not-value"
    ),
    pytest.param(
        Color, "blue", "expected one of 'red', 'green', got string 'blue'", id="enum-outside"
    ),
    pytest.param(int | None, "1", "expected integer or null, got string '1'", id="optional-wrong"),
    pytest.param(
        datetime.date,
        "29/02/2024",
        "expected an ISO 8601 date string, got string '29/02/2024'",
        id="bad-date",
    ),
    pytest.param(
        Annotated[int, "How many."], "5", "expected integer, got string '5'", id="annotated-int"
    ),
]


@pytest.mark.parametrize(("hint", "value", "problem"), WRONG)
def test_wrong_type_is_an_argument_error_naming_the_parameter(
    hint: Any, value: Any, problem: str
) -> None:
    error = _error(tool_with(hint), {"value": value})
    assert isinstance(error, ToolError)
    assert error.parameter == "value"
    assert error.message == f"probe: argument 'value': {problem}"
    assert str(error) == error.message


@pytest.mark.parametrize(("hint", "value", "problem"), WRONG)
def test_wrong_type_through_a_host_is_an_error_event(
    call_tool: Callable[..., expediter.CallEvent], hint: Any, value: Any, problem: str
) -> None:
    event = call_tool(tool_with(hint), "probe", {"value": value})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert event.error == f"probe: argument 'value': {problem}"
    assert event.result is None
    assert event.arguments == {"value": value}


@pytest.mark.parametrize(
    ("hint", "value"),
    [
        pytest.param(StrColor, "purple", id="str-enum-outside"),
        pytest.param(Level, 7, id="int-enum-outside"),
        pytest.param(set[str], "abc", id="string-for-set"),
        pytest.param(tuple[str, str], "ab", id="string-for-pair"),
    ],
)
def test_value_outside_mixin_enum_or_string_for_set_is_refused(
    call_tool: Callable[..., expediter.CallEvent], hint: Any, value: Any
) -> None:
    event = call_tool(tool_with(hint), "probe", {"value": value})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert "argument 'value'" in (event.error or "")


@pytest.mark.parametrize(
    ("hint", "value", "member"),
    [(StrColor, "green", StrColor.GREEN), (Level, 2, Level.HIGH)],
    ids=["str-enum", "IntEnum"],
)
def test_mixin_enum_argument_arrives_as_the_member(hint: Any, value: Any, member: Any) -> None:
    assert _run(tool_with(hint), {"value": value}) is member


# -- accepted and converted -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "value", "expected"),
    [
        pytest.param(int, 3.0, 3, id="integral-float-as-int"),
        pytest.param(float, 3, 3.0, id="int-as-float"),
        pytest.param(Color, "green", Color.GREEN, id="enum-by-value"),
        pytest.param(Literal["a", 1], 1, 1, id="mixed-literal"),
        pytest.param(datetime.date, "2024-02-29", datetime.date(2024, 2, 29), id="date"),
        pytest.param(tuple[int, str], [1, "x"], (1, "x"), id="fixed-tuple"),
        pytest.param(set[int], [3, 3, 4], {3, 4}, id="set"),
        pytest.param(
            Person,
            {"name": "Ann", "address": {"street": "Main 1", "zip": "1000"}},
            Person("Ann", Address("Main 1", "1000")),
            id="nested-record",
        ),
        pytest.param(list[Address], [{"street": "s", "zip": "1"}], [Address("s", "1")], id="list"),
        pytest.param(Any, {"x": [1, None]}, {"x": [1, None]}, id="any"),
        pytest.param(int | None, None, None, id="explicit-null"),
    ],
)
def test_valid_argument_is_converted_to_the_annotated_type(
    hint: Any, value: Any, expected: Any
) -> None:
    result = _run(tool_with(hint), {"value": value})
    assert result == expected
    assert type(result) is type(expected)


def test_bool_is_not_accepted_as_int_but_integral_float_is() -> None:
    tool = tool_with(int)
    assert _error(tool, {"value": False}).parameter == "value"
    result = _run(tool, {"value": 2.0})
    assert result == 2
    assert type(result) is int


def test_omitted_optional_argument_gets_its_default() -> None:
    assert _run(tool_with(int, 10), {}) == 10


def test_null_for_a_non_optional_parameter_with_a_default_is_refused() -> None:
    error = _error(tool_with(int, 10), {"value": None})
    assert error.message == "probe: argument 'value': expected integer, got null None"


def test_arguments_are_not_mutated_by_binding() -> None:
    arguments = {"value": 2.0}
    _run(tool_with(int), arguments)
    assert arguments == {"value": 2.0}


# -- missing and unknown --------------------------------------------------------------------------


@expediter.tool
def paint(color: Literal["red", "green"], size: int, glossy: bool = False) -> str:
    return f"{size} {color}{' glossy' if glossy else ''}"


def test_missing_required_argument_is_named() -> None:
    error = _error(paint, {"color": "red"})
    assert error.parameter == "size"
    assert error.message == "paint: argument 'size': missing (it is required)"


def test_every_missing_argument_is_listed() -> None:
    error = _error(paint, {})
    assert error.parameter == "color"
    assert error.message == (
        "paint: argument 'color': missing (it is required); "
        "argument 'size': missing (it is required)"
    )


def test_unknown_argument_lists_the_expected_names() -> None:
    error = _error(paint, {"color": "red", "size": 1, "colour": "red"})
    assert error.parameter == "colour"
    assert error.message == "paint: unknown argument 'colour' (expected: color, size, glossy)"


def test_several_unknown_arguments_are_all_named() -> None:
    error = _error(paint, {"a": 1, "b": 2, "color": "red", "size": 1})
    assert error.parameter == "a"
    assert error.message == "paint: unknown arguments 'a', 'b' (expected: color, size, glossy)"


def test_unknown_argument_for_a_tool_without_parameters() -> None:
    @expediter.tool
    def ping() -> str:
        return "pong"

    error = _error(ping, {"loud": True})
    assert "unknown argument 'loud' (expected: none)" in error.message


def test_unknown_argument_through_a_host_lists_the_expected_names(
    call_tool: Callable[..., expediter.CallEvent],
) -> None:
    event = call_tool(paint, "paint", {"color": "red", "size": 1, "colour": "red"})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert "unknown argument 'colour'" in (event.error or "")
    assert "expected: color, size, glossy" in (event.error or "")


def test_missing_argument_through_a_host(call_tool: Callable[..., expediter.CallEvent]) -> None:
    event = call_tool(paint, "paint", {"color": "red"})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert event.error == "paint: argument 'size': missing (it is required)"


def test_several_problems_are_reported_together() -> None:
    error = _error(paint, {"color": "blue", "size": "2"})
    assert error.parameter == "color"
    assert error.message == (
        "paint: argument 'color': expected one of 'red', 'green', got string 'blue'; "
        "argument 'size': expected integer, got string '2'"
    )


def test_context_parameter_cannot_be_supplied_by_the_model() -> None:
    @expediter.tool
    def whoami(ctx: CallContext) -> str | None:
        return ctx.user_id

    error = _error(whoami, {"ctx": {"user_id": "root"}})
    assert error.parameter == "ctx"
    assert "unknown argument 'ctx'" in error.message


# -- nested paths ---------------------------------------------------------------------------------


@expediter.tool
def survey(
    person: Person = Person("nobody", Address("", "")),
    numbers: list[int] = [],  # noqa: B006
    matrix: list[list[int]] = [],  # noqa: B006
    people: list[Person] = [],  # noqa: B006
    scores: dict[str, int] = {},  # noqa: B006
    pair: tuple[int, str] = (0, ""),
) -> str:
    return "ok"


@pytest.mark.parametrize(
    ("arguments", "parameter", "problem"),
    [
        pytest.param(
            {"person": {"name": "Ann", "address": {"street": "Main 1", "zip": 1000}}},
            "person",
            "argument 'person.address.zip': expected string, got integer 1000",
            id="nested-record-field",
        ),
        pytest.param(
            {"person": {"name": "Ann", "address": {"street": "Main 1"}}},
            "person",
            "argument 'person.address.zip': missing (it is required)",
            id="nested-record-missing",
        ),
        pytest.param(
            {"person": {"name": "Ann", "address": {"street": "s", "zip": "1", "floor": 2}}},
            "person",
            "argument 'person.address': unknown fields 'floor'",
            id="nested-record-extra",
        ),
        pytest.param(
            {"numbers": [1, "2", 3]},
            "numbers",
            "argument 'numbers[1]': expected integer, got string '2'",
            id="list-index",
        ),
        pytest.param(
            {"matrix": [[1], [2, True]]},
            "matrix",
            "argument 'matrix[1][1]': expected integer, got boolean True",
            id="nested-list-index",
        ),
        pytest.param(
            {"people": [{"name": 5, "address": {"street": "s", "zip": "1"}}]},
            "people",
            "argument 'people[0].name': expected string, got integer 5",
            id="record-in-list",
        ),
        pytest.param(
            {"scores": {"ann": 1, "bob": "2"}},
            "scores",
            "argument \"scores['bob']\": expected integer, got string '2'",
            id="dict-value",
        ),
        pytest.param(
            {"pair": ["1", "x"]},
            "pair",
            "argument 'pair[0]': expected integer, got string '1'",
            id="tuple-item",
        ),
    ],
)
def test_nested_error_has_a_path(arguments: dict[str, Any], parameter: str, problem: str) -> None:
    error = _error(survey, arguments)
    assert error.parameter == parameter
    assert error.message == f"survey: {problem}"


def test_nested_error_path_through_a_host(call_tool: Callable[..., expediter.CallEvent]) -> None:
    event = call_tool(
        survey, "survey", {"person": {"name": "Ann", "address": {"street": "s", "zip": 1}}}
    )
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert "'person.address.zip'" in (event.error or "")


def test_nested_error_inside_an_optional_record_keeps_its_path() -> None:
    @expediter.tool
    def ship(to: Address | None = None) -> None:
        return None

    error = _error(ship, {"to": {"street": "Main 1", "zip": 1000}})
    assert error.parameter == "to"
    assert error.message.endswith(": argument 'to.zip': expected string, got integer 1000")


def test_fixed_tuple_of_the_wrong_length_is_refused() -> None:
    error = _error(survey, {"pair": [1]})
    assert error.parameter == "pair"
    assert error.message.startswith("survey: argument 'pair': ")


# -- non-object arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "kind"), [([1, 2], "list"), ("size=1", "str"), (None, "NoneType"), (3, "int")]
)
def test_arguments_that_are_not_an_object_are_refused(arguments: Any, kind: str) -> None:
    error = _error(paint, arguments)
    assert error.parameter is None
    assert error.message == f"arguments for paint must be a JSON object, got {kind}"


@pytest.mark.parametrize("arguments", [[1, 2], "size=1", 3])
def test_arguments_that_are_not_an_object_through_a_host(
    call_tool: Callable[..., expediter.CallEvent], arguments: Any
) -> None:
    event = call_tool(paint, "paint", arguments)
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert "must be a JSON object" in (event.error or "")


# -- **kwargs -------------------------------------------------------------------------------------


@expediter.tool
def label(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "extra": extra}


def test_var_keyword_receives_undeclared_arguments_unconverted() -> None:
    assert _run(label, {"name": "a", "x": 1, "nested": {"y": [2.0]}}) == {
        "name": "a",
        "extra": {"x": 1, "nested": {"y": [2.0]}},
    }


def test_var_keyword_still_validates_declared_arguments() -> None:
    error = _error(label, {"name": 5, "x": 1})
    assert error.parameter == "name"
    assert error.message == "label: argument 'name': expected string, got integer 5"


def test_var_keyword_extras_pass_through_a_host(
    call_tool: Callable[..., expediter.CallEvent],
) -> None:
    event = call_tool(label, "label", {"name": "a", "colour": "red"})
    assert event.status == "completed"
    assert event.result == {"name": "a", "extra": {"colour": "red"}}


# -- through a host the exception never escapes ---------------------------------------------------


class Shop(Toolbox):
    @expediter.action
    def order(self, sku: str, qty: int = 1) -> dict[str, Any]:
        return {"sku": sku, "qty": qty}

    @expediter.action
    async def reserve(self, sku: str, until: datetime.date) -> str:
        await asyncio.sleep(0)
        return f"{sku} until {until.isoformat()}"


@pytest.mark.parametrize("action", ["order", "reserve"])
def test_bad_arguments_to_sync_and_async_actions_give_error_events(
    make_host: Callable[..., expediter.Host], action: str
) -> None:
    host = make_host(Shop)
    event = host.call("shop", action, {"sku": 42})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert "argument 'sku': expected string, got integer 42" in (event.error or "")

    async def through_acall() -> expediter.CallEvent:
        return await host.acall("shop", action, {"sku": 42})

    event = asyncio.run(through_acall())
    assert event.status == "error"
    assert event.error_type == "ArgumentError"


def test_valid_arguments_to_a_toolbox_action_are_converted(
    make_host: Callable[..., expediter.Host],
) -> None:
    host = make_host(Shop)
    event = host.call("shop", "reserve", {"sku": "A", "until": "2024-02-29"})
    assert event.status == "completed"
    assert event.result == "A until 2024-02-29"
    assert host.call("shop", "order", {"sku": "A", "qty": 2.0}).result == {"sku": "A", "qty": 2}


# -- the binder itself ----------------------------------------------------------------------------


def test_binder_returns_declared_and_extra_arguments() -> None:
    binder = ArgumentBinder(
        "demo",
        [Parameter("count", int), Parameter("label", str | None, None)],
        allow_extra=True,
    )
    # Omitted optional arguments are left out, so the function's own defaults apply.
    assert binder.bind({"count": 1.0, "other": "x"}) == ({"count": 1}, {"other": "x"})


def test_binder_handles_parameter_names_that_clash_with_python_or_cattrs() -> None:
    names = ["self", "cls", "type", "p0", "__class__", "_cattrs_x"]
    binder = ArgumentBinder("demo", [Parameter(name, int) for name in names], allow_extra=False)
    declared, extra = binder.bind({name: index for index, name in enumerate(names)})
    assert declared == {name: index for index, name in enumerate(names)}
    assert extra == {}
    error_binder = ArgumentBinder("demo", [Parameter("p1", int)], allow_extra=False)
    with pytest.raises(ArgumentError) as caught:
        error_binder.bind({"p1": "x"})
    assert caught.value.parameter == "p1"


def test_parameter_is_required_without_a_default() -> None:
    assert Parameter("a", int).required
    assert not Parameter("a", int, 0).required
    assert not Parameter("a", int | None, None).required


# -- known bugs -----------------------------------------------------------------------------------


def test_required_keyword_only_parameter_after_a_defaulted_one() -> None:
    @expediter.tool
    def book(room: str, nights: int = 1, *, guest: str) -> str:
        return f"{guest}:{room}:{nights}"

    assert book.spec.parameters["required"] == ["room", "guest"]
    assert _run(book, {"room": "12", "guest": "Ann"}) == "Ann:12:1"


def test_private_attrs_field_is_accepted_by_the_name_the_schema_shows() -> None:
    @attrs.frozen
    class Token:
        _value: str

    @expediter.tool
    def use(token: Token) -> str:
        return token._value

    assert use.spec.parameters["$defs"]["Token"]["properties"] == {"value": {"type": "string"}}
    assert _run(use, {"token": {"value": "abc"}}) == "abc"


def test_recursive_attrs_record_with_string_annotation_is_accepted() -> None:
    @expediter.tool
    def depth(tree: Tree) -> int:
        return 1 + max((depth(child) for child in tree.children), default=0)

    tree = {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}
    assert _run(depth, {"tree": tree}) == 3


def test_object_typed_parameter_accepts_any_value() -> None:
    assert _run(tool_with(object), {"value": [1, "a"]}) == [1, "a"]


def test_argument_error_names_the_action_the_model_called() -> None:
    @expediter.tool(name="forecast")
    def get_forecast(days: int) -> str:
        return ""

    error = _error(get_forecast, {"days": "3"})
    assert error.message == "forecast: argument 'days': expected integer, got string '3'"


# -- properties -----------------------------------------------------------------------------------

INT_TOOL = tool_with(int)
FLOAT_TOOL = tool_with(float)
TEXT_TOOL = tool_with(str)


@given(st.integers())
def test_any_int_argument_round_trips(number: int) -> None:
    result = _run(INT_TOOL, {"value": number})
    assert result == number
    assert type(result) is int


@given(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**60), 2**60))
def test_any_number_argument_arrives_as_float(number: float) -> None:
    result = _run(FLOAT_TOOL, {"value": number})
    assert result == float(number)
    assert type(result) is float


@given(st.text() | st.booleans() | st.none() | st.lists(st.integers(), max_size=2))
def test_non_numbers_are_refused_for_int(value: Any) -> None:
    with pytest.raises(ArgumentError):
        _run(INT_TOOL, {"value": value})


@given(st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.integers(), min_size=1))
def test_undeclared_names_are_always_reported(extra: dict[str, int]) -> None:
    unknown = [name for name in extra if name != "value"]
    if not unknown:
        return
    error = _error(TEXT_TOOL, {"value": "x", **extra})
    assert error.parameter == unknown[0]
    assert all(repr(name) in error.message for name in unknown[:10])
    if len(unknown) > 10:  # bounded: a model may send thousands
        assert f"and {len(unknown) - 10} more" in error.message
    assert "(expected: value)" in error.message


def test_an_undeclared_name_is_echoed_bounded() -> None:
    error = _error(TEXT_TOOL, {"value": "x", "n" * 100_000: 1})
    assert len(error.message) < 300
    assert "more characters" in error.message
