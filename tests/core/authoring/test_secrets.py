"""Secret parameters: ``Annotated[T, expediter.Secret]`` becomes ``"writeOnly": true`` and
``Action.secret_parameters``; argument errors never quote a secret's value (by that mark or by
a secret-looking name) and quote other values bounded."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import attrs
import pytest

import expediter
from expediter.core.authoring.schema import Secret, marks_secret
from expediter.core.authoring.tools import FunctionTool
from expediter.errors import ArgumentError
from expediter.hookspecs.tool import Action

PLANTED = "PLANTED-SECRET-7f3a"


@attrs.frozen
class Login:
    """Credentials for a site."""

    user: str
    code: Annotated[str, Secret]
    pin: str = ""


def _vault(
    password: str,
    note: Annotated[str, expediter.Secret],
    query: str,
    login: Login | None = None,
    maybe: Annotated[str, expediter.Secret] | None = None,
    keys: list[Annotated[str, expediter.Secret]] = (),  # type: ignore[assignment]
    hint: Annotated[str, expediter.Secret] = "a default that is never shown",
) -> str:
    """Keep things."""
    return "kept"


VAULT = FunctionTool(_vault, name="vault")


def _bind_error(tool: FunctionTool, arguments: dict[str, Any]) -> str:
    with pytest.raises(ArgumentError) as caught:
        tool.spec.binder.bind(arguments)
    return caught.value.message


# -- the schema --------------------------------------------------------------------------------


def test_secret_is_exported_from_the_package() -> None:
    assert expediter.Secret is Secret
    assert "Secret" in dir(expediter)


def test_a_secret_parameter_is_write_only_in_the_schema() -> None:
    properties = VAULT.spec.parameters["properties"]
    assert properties["note"] == {"type": "string", "writeOnly": True}
    assert properties["maybe"] == {"type": ["string", "null"], "writeOnly": True}
    assert properties["keys"]["writeOnly"] is True
    assert "writeOnly" not in properties["query"]
    assert "writeOnly" not in properties["password"]  # secret by its name, not marked


def test_a_secret_parameters_default_is_not_shown_to_the_model() -> None:
    hint = VAULT.spec.parameters["properties"]["hint"]
    assert "default" not in hint
    assert "hint" not in VAULT.spec.parameters["required"]


def test_a_secret_record_field_is_write_only_in_its_definition() -> None:
    login = VAULT.spec.parameters["$defs"]["Login"]
    assert login["properties"]["code"] == {"type": "string", "writeOnly": True}
    assert "writeOnly" not in login["properties"]["user"]


@pytest.mark.parametrize(
    ("hint", "secret"),
    [
        (Annotated[str, Secret], True),
        (Annotated[str, Secret()], True),
        (Annotated[str, "text", Secret], True),
        (Annotated[str, Secret] | None, True),
        (list[Annotated[str, Secret]], True),
        (dict[str, Annotated[int, Secret]], True),
        (Annotated[str, "text"], False),
        (str, False),
        (Login, False),  # a record's own fields say which of them are secret
    ],
)
def test_marks_secret_finds_the_marker_anywhere_outside_records(hint: Any, secret: bool) -> None:
    assert marks_secret(hint) is secret


# -- Action.secret_parameters ------------------------------------------------------------------


def test_an_actions_secret_parameters_are_its_write_only_properties() -> None:
    action = VAULT.spec.to_action()
    assert action.secret_parameters == {"note", "maybe", "keys", "hint", "code"}


def test_secret_parameters_are_not_part_of_the_actions_json_form() -> None:
    action = VAULT.spec.to_action()
    data = action.to_dict()
    assert "secret_parameters" not in data
    assert Action.from_dict(data).secret_parameters == action.secret_parameters


def test_a_hand_written_action_marks_a_property_write_only_itself() -> None:
    action = Action(
        "store",
        parameters={
            "type": "object",
            "properties": {"blob": {"type": "string", "writeOnly": True}, "name": {}},
        },
    )
    assert action.secret_parameters == {"blob"}
    assert Action("plain").secret_parameters == frozenset()


def test_secret_parameters_are_computed_once_per_action() -> None:
    action = VAULT.spec.to_action()
    assert action.secret_parameters is action.secret_parameters


# -- argument errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"password": 12345678}, "argument 'password': expected string, got integer"),
        ({"note": 12345678}, "argument 'note': expected string, got integer"),
        ({"maybe": 12345678}, "argument 'maybe': expected string or null, got integer"),
        ({"keys": ["a", 12345678]}, "argument 'keys[1]': expected string, got integer"),
        (
            {"login": {"user": "ann", "code": 12345678}},
            "argument 'login.code': expected string, got integer",
        ),
        (
            {"login": {"user": "ann", "pin": 12345678, "code": "c"}},
            "argument 'login.pin': expected string, got integer",
        ),
    ],
)
def test_an_error_never_quotes_the_value_of_a_secret(
    arguments: dict[str, Any], problem: str
) -> None:
    message = _bind_error(VAULT, {"password": "p", "note": "n", "query": "q", **arguments})
    assert message == f"vault: {problem}"
    assert "12345678" not in message


def test_an_error_quotes_an_ordinary_value_with_its_secret_fields_hidden() -> None:
    message = _bind_error(
        VAULT, {"password": "p", "note": "n", "query": {"token": PLANTED, "q": "cats"}}
    )
    assert message == (
        "vault: argument 'query': expected string, got object {'token': '***', 'q': 'cats'}"
    )


def test_an_error_quotes_an_ordinary_value_bounded_and_escaped() -> None:
    @expediter.tool
    def count(n: int) -> int:
        """Count."""
        return n

    message = _bind_error(count, {"n": "\x1b[2J" + "x" * 1000})
    assert message.startswith("count: argument 'n': expected integer, got string '\\x1b[2J")
    assert message.endswith(" ... [804 more characters]")  # 1004 characters, 200 shown
    assert len(message) < 300


def test_a_secret_field_of_a_plain_mapping_is_not_quoted() -> None:
    @expediter.tool
    def headers(values: dict[str, int]) -> int:
        """Count."""
        return len(values)

    message = _bind_error(headers, {"values": {"X-Auth-Token": PLANTED, "size": "big"}})
    assert PLANTED not in message
    assert "argument \"values['X-Auth-Token']\": expected integer, got string;" in message
    assert "argument \"values['size']\": expected integer, got string 'big'" in message


def test_through_a_host_the_event_and_error_never_show_a_secret(
    call_tool: Callable[..., expediter.CallEvent],
) -> None:
    event = call_tool(VAULT, "vault", {"password": 404040, "note": 505050, "query": "q"})
    assert event.error_type == "ArgumentError"
    assert event.error == (
        "vault: argument 'password': expected string, got integer; "
        "argument 'note': expected string, got integer"
    )


@pytest.mark.parametrize(
    ("provider", "strict"),
    [
        ("openai", False),
        ("openai", True),
        ("openai-responses", False),
        ("openai-responses", True),
        ("anthropic", False),
        ("anthropic", True),
        ("gemini", False),
    ],
)
def test_the_secret_mark_never_reaches_a_provider_schema(
    make_host: Any, provider: str, strict: bool
) -> None:
    @expediter.tool
    def login(user: str, password: Annotated[str, expediter.Secret]) -> str:
        """Log in."""
        return user

    host = make_host(login)
    schemas = host.toolset().schemas(provider, strict=strict)
    assert "writeOnly" not in json.dumps(schemas)
    assert "password" in json.dumps(schemas)
