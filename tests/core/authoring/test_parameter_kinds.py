"""Every parameter kind as an action (``core/authoring/tools.py``): positional-only parameters
and ``*args`` bound by position, ``**kwargs: T`` checked against T, names that cannot collide."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import expediter
from expediter.core.authoring.tools import FunctionTool, Toolbox
from expediter.errors import ArgumentError
from expediter.hookspecs.tool import CallContext

CTX = CallContext(user_id="u1")


def _run(tool: FunctionTool, arguments: dict[str, Any]) -> Any:
    return tool.execute_action(tool.name, arguments, CTX)


def _error(tool: FunctionTool, arguments: dict[str, Any]) -> ArgumentError:
    with pytest.raises(ArgumentError) as caught:
        _run(tool, arguments)
    return caught.value


@expediter.tool
def everything(
    a: int,
    b: str = "b",
    /,
    c: float = 1.5,
    *rest: int,
    d: bool,
    ctx: CallContext,
    **more: int,
) -> dict[str, Any]:
    """Every kind of parameter at once.

    Args:
        a: Positional-only, required.
        b: Positional-only, optional.
        c: Positional or keyword.
        *rest: Extra positional values.
        d: Keyword-only.
        **more: Extra named counts.
    """
    return {"a": a, "b": b, "c": c, "rest": rest, "d": d, "user": ctx.user_id, "more": more}


def test_schema_offers_every_kind_as_a_named_property() -> None:
    schema = everything.spec.parameters
    assert list(schema["properties"]) == ["a", "b", "c", "rest", "d"]
    assert schema["required"] == ["a", "d"]
    assert schema["properties"]["rest"] == {
        "type": "array",
        "items": {"type": "integer"},
        "description": "Extra positional values.",
        "default": [],
    }
    assert schema["properties"]["a"]["description"] == "Positional-only, required."
    assert schema["additionalProperties"] == {"type": "integer"}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param(
            {"a": 1, "d": True},
            {"a": 1, "b": "b", "c": 1.5, "rest": (), "d": True, "more": {}},
            id="required-only",
        ),
        pytest.param(
            {"a": 1, "b": "x", "c": 2, "rest": [7, 8], "d": False, "n": 3},
            {"a": 1, "b": "x", "c": 2.0, "rest": (7, 8), "d": False, "more": {"n": 3}},
            id="all",
        ),
        pytest.param(
            # Values for *args: the omitted parameters before it take their defaults.
            {"a": 1, "rest": [5], "d": True},
            {"a": 1, "b": "b", "c": 1.5, "rest": (5,), "d": True, "more": {}},
            id="rest-without-b-or-c",
        ),
        pytest.param(
            {"a": 1, "c": 3.0, "rest": [], "d": True, "m": 1.0},
            {"a": 1, "b": "b", "c": 3.0, "rest": (), "d": True, "more": {"m": 1}},
            id="empty-rest",
        ),
    ],
)
def test_positional_only_args_keyword_only_and_kwargs_bind_correctly(
    arguments: dict[str, Any], expected: dict[str, Any]
) -> None:
    result = _run(everything, arguments)
    assert result == {**expected, "user": "u1"}
    assert type(result["c"]) is float


def test_kwargs_values_are_checked_against_their_type() -> None:
    error = _error(everything, {"a": 1, "d": True, "n": "three", "m": 2})
    assert error.parameter == "n"
    assert "argument 'n': expected integer, got string 'three'" in error.message


def test_args_items_are_checked_against_their_type() -> None:
    error = _error(everything, {"a": 1, "d": True, "rest": [1, "x"]})
    assert error.parameter == "rest"
    assert "rest[1]" in error.message


@pytest.mark.parametrize("value", [5, "1,2", {"0": 1}, None])
def test_args_must_be_an_array(value: Any) -> None:
    error = _error(everything, {"a": 1, "d": True, "rest": value})
    assert error.parameter == "rest"


@pytest.mark.parametrize("name", ["ctx"])
def test_kwargs_key_naming_the_context_parameter_is_an_argument_error(name: str) -> None:
    error = _error(everything, {"a": 1, "d": True, name: 1})
    assert error.parameter == name
    assert "not accepted" in error.message


@pytest.mark.parametrize(
    ("arguments", "parameter"),
    [
        # The *args name is the array property, never a **kwargs entry.
        ({"a": 1, "d": True, "rest": 3}, "rest"),
        # A positional-only name is that parameter, never a **kwargs entry.
        ({"a": "1", "d": True}, "a"),
        ({"b": "x", "d": True}, "a"),
    ],
)
def test_kwargs_never_take_the_args_or_a_positional_only_name(
    arguments: dict[str, Any], parameter: str
) -> None:
    error = _error(everything, arguments)
    assert error.parameter == parameter


def test_a_hostile_kwargs_call_gives_a_bounded_error() -> None:
    arguments: dict[str, Any] = {"a": 1, "d": True}
    arguments.update({f"k{index}" + "x" * 5000: "bad" for index in range(1000)})
    error = _error(everything, arguments)
    assert len(error.message) < 8000
    assert "and 980 more" in error.message


class Calculator(Toolbox):
    @expediter.action
    def scale(self, factor: int, /, *values: float, round_to: int | None = None) -> list[float]:
        """Scale values.

        :param factor: What to multiply by.
        :param values: The values.
        :param round_to: Decimal places.
        """
        scaled = [factor * value for value in values]
        return [round(value, round_to) for value in scaled] if round_to is not None else scaled

    @expediter.action
    def label(self, /, **labels: str) -> dict[str, str]:
        return labels


def test_toolbox_method_with_positional_only_and_args_binds_after_self() -> None:
    box = Calculator()
    result = box.execute_action("scale", {"factor": 2, "values": [1, 2.5]}, CTX)
    assert result == [2.0, 5.0]
    assert box.execute_action("scale", {"factor": 3, "round_to": 0}, CTX) == []
    [scale, _] = box.get_actions_metadata(CTX)
    assert scale.parameters["properties"]["factor"]["description"] == "What to multiply by."


def test_toolbox_kwargs_key_self_is_an_argument_error_not_a_crash() -> None:
    box = Calculator()
    assert box.execute_action("label", {"colour": "red"}, CTX) == {"colour": "red"}
    with pytest.raises(ArgumentError, match="not accepted"):
        box.execute_action("label", {"self": "x"}, CTX)


def test_async_function_with_args_binds_positionally() -> None:
    @expediter.tool
    async def join(sep: str, /, *parts: str) -> str:
        await asyncio.sleep(0)
        return sep.join(parts)

    assert asyncio.run(_run(join, {"sep": "-", "parts": ["a", "b"]})) == "a-b"


def test_context_parameter_in_a_positional_slot_is_passed_by_position() -> None:
    @expediter.tool
    def who(ctx: CallContext, prefix: str, /, *names: str) -> str:
        return prefix + ",".join([str(ctx.user_id), *names])

    assert who.spec.parameters["properties"].keys() == {"prefix", "names"}
    assert _run(who, {"prefix": ">", "names": ["x"]}) == ">u1,x"


def test_through_a_host_errors_are_argument_errors(
    call_tool: Callable[..., expediter.CallEvent],
) -> None:
    event = call_tool(everything, "everything", {"a": 1, "d": True, "rest": [1, 2], "n": 4})
    assert event.status == "completed"
    assert event.result["rest"] == [1, 2]
    event = call_tool(everything, "everything", {"a": 1, "d": True, "ctx": "me"})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"


# -- property: binding agrees with calling the function directly -------------------------------

_VALUES = st.integers(-5, 5)


@settings(max_examples=150, deadline=None)
@given(
    a=_VALUES,
    b=st.none() | _VALUES,
    c=st.none() | _VALUES,
    rest=st.none() | st.lists(_VALUES, max_size=3),
    d=_VALUES,
    more=st.dictionaries(st.sampled_from(["x", "y", "zz"]), _VALUES, max_size=3),
)
def test_binding_matches_what_python_binds_for_the_same_call(
    a: int, b: int | None, c: int | None, rest: list[int] | None, d: int, more: dict[str, int]
) -> None:
    def shape(a: int, b: int = 10, /, c: int = 20, *rest: int, d: int, **more: int) -> Any:
        return inspect.getcallargs(shape, a, b, c, *rest, d=d, **more)

    @expediter.tool
    def probe(a: int, b: int = 10, /, c: int = 20, *rest: int, d: int, **more: int) -> Any:
        return {"a": a, "b": b, "c": c, "rest": rest, "d": d, "more": more}

    arguments: dict[str, Any] = {"a": a, "d": d, **more}
    if b is not None:
        arguments["b"] = b
    if c is not None:
        arguments["c"] = c
    if rest is not None:
        arguments["rest"] = rest
    expected = {
        "a": a,
        "b": 10 if b is None else b,
        "c": 20 if c is None else c,
        "rest": tuple(rest or ()),
        "d": d,
        "more": more,
    }
    assert _run(probe, arguments) == expected
    assert shape(a, expected["b"], expected["c"], *expected["rest"], d=d, **more) == expected


class Shelf(Toolbox):
    @expediter.action
    @staticmethod
    def pack(first: int, /, *more: int) -> list[int]:
        """Pack numbers (static)."""
        return [first, *more]

    @staticmethod
    @expediter.action
    def count(label: str) -> str:
        """Count (static, decorators the other way round)."""
        return label

    @expediter.action
    @classmethod
    def tag(cls, first: int, /, *more: int, **labels: str) -> list[Any]:
        """Tag numbers (class)."""
        return [cls.__name__, first, more, labels]


def test_staticmethod_and_classmethod_actions_keep_their_first_parameter() -> None:
    box = Shelf()
    assert list(Shelf.action_specs()["pack"].parameters["properties"]) == ["first", "more"]
    assert box.execute_action("pack", {"first": 1, "more": [2, 3]}, CTX) == [1, 2, 3]
    assert box.execute_action("count", {"label": "x"}, CTX) == "x"
    assert list(Shelf.action_specs()["tag"].parameters["properties"]) == ["first", "more"]
    result = box.execute_action("tag", {"first": 1, "more": [2], "k": "v"}, CTX)
    assert result == ["Shelf", 1, (2,), {"k": "v"}]


def test_classmethod_kwargs_key_cls_is_an_argument_error_not_a_crash() -> None:
    with pytest.raises(ArgumentError) as caught:
        Shelf().execute_action("tag", {"first": 1, "cls": "x"}, CTX)
    assert caught.value.parameter == "cls"
