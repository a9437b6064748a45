"""A stored tool instance's configuration checked against the tool's ``config_requirements``:
unknown fields, types, choices, ``depends_on``, required fields, and secrets kept out of errors."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expediter.core.instances.validation import (
    ValidConfig,
    relevant,
    secret_field_names,
    validate_config,
)
from expediter.errors import ArgumentError, ConfigError
from expediter.hookspecs.tool import ConfigField

SECRET = "sk-live-5ecr3t-DO-NOT-SHOW"

WEATHER = (
    ConfigField(
        "api_key",
        label="API key",
        description="Your key from weather.example.",
        required=True,
        secret=True,
    ),
    ConfigField("units", enum=("metric", "imperial"), default="metric"),
    ConfigField("auth", enum=("none", "bearer", "basic"), default="none"),
    ConfigField("token", secret=True, required=True, depends_on={"auth": "bearer"}),
    ConfigField("user", required=True, depends_on={"auth": ["basic", "digest"]}),
    ConfigField("retries", type="integer"),
    ConfigField("timeout", type="number"),
    ConfigField("verbose", type="boolean"),
    ConfigField("headers", type="object"),
    ConfigField("hosts", type="array"),
)


def _refused(config: dict[Any, Any], fields: Any = WEATHER, **kwargs: Any) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        validate_config("weather", fields, config, **kwargs)
    return caught.value


# Configurations that each fail, with a secret given alongside (or as the failing value).
FAILING: list[tuple[dict[Any, Any], str | None]] = [
    ({"api_key": SECRET, "x": 1}, "x"),
    ({"api_key": SECRET, "retries": "three"}, "retries"),
    ({"api_key": SECRET, "units": "kelvin"}, "units"),
    ({"api_key": SECRET, "token": SECRET}, "token"),
    ({"api_key": SECRET, "auth": "bearer"}, "token"),
    ({"api_key": 12345}, "api_key"),
    ({"api_key": [SECRET]}, "api_key"),
    ({"api_key": {"k": SECRET}}, "api_key"),
    ({"api_key": SECRET, "auth": "bearer", "token": {SECRET: 1}}, "token"),
    ({"api_key": SECRET, 7: SECRET}, None),
    ({"api_key": "k", "units": SECRET}, "units"),
]


def test_a_valid_configuration_is_split_into_plain_and_secret_values() -> None:
    valid = validate_config(
        "weather", WEATHER, {"api_key": SECRET, "units": "imperial", "retries": 3, "timeout": 2.5}
    )
    assert valid == ValidConfig(
        plain={"units": "imperial", "retries": 3, "timeout": 2.5}, secrets={"api_key": SECRET}
    )


def test_unknown_field_is_refused_naming_it() -> None:
    error = _refused({"api_key": SECRET, "x": 1})
    assert error.parameter == "x"
    assert "tool 'weather' has no configuration field 'x' (fields: api_key, units," in str(error)


def test_several_unknown_fields_are_named_together() -> None:
    error = _refused({"api_key": SECRET, "x": 1, "y": 2})
    assert error.parameter == "x"
    assert "no configuration fields 'x', 'y'" in str(error)


def test_a_tool_without_fields_refuses_any_configuration() -> None:
    error = _refused({"anything": 1}, fields=())
    assert "tool 'weather' takes no configuration" in str(error)
    assert error.parameter == "anything"


def test_a_tool_without_fields_accepts_an_empty_configuration() -> None:
    assert validate_config("weather", (), {}) == ValidConfig(plain={}, secrets={})


def test_field_names_are_matched_exactly() -> None:
    error = _refused({"API_KEY": SECRET})
    assert error.parameter == "API_KEY"


def test_configuration_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(ConfigError, match="must be an object"):
        validate_config("weather", WEATHER, [("api_key", SECRET)])  # type: ignore[arg-type]


def test_non_string_field_names_are_refused() -> None:
    error = _refused({"api_key": SECRET, 7: "x"})
    assert "field names must be strings" in str(error)


def test_config_error_is_an_argument_error() -> None:
    assert isinstance(_refused({"x": 1}), ArgumentError)


@pytest.mark.parametrize(
    ("field_type", "value"),
    [
        ("string", "text"),
        ("integer", 3),
        ("integer", -(10**30)),
        ("number", 3),
        ("number", 2.5),
        ("boolean", False),
        ("object", {"a": [1]}),
        ("array", [1, "two"]),
    ],
)
def test_values_of_the_declared_type_are_accepted(field_type: Any, value: Any) -> None:
    fields = [ConfigField("f", type=field_type)]
    assert validate_config("t", fields, {"f": value}).plain == {"f": value}


@pytest.mark.parametrize(
    ("field_type", "value"),
    [
        ("string", 3),
        ("integer", True),
        ("integer", 2.0),
        ("integer", "3"),
        ("number", False),
        ("number", math.nan),
        ("number", math.inf),
        ("number", "1.5"),
        ("boolean", 1),
        ("boolean", "true"),
        ("object", [1]),
        ("object", {1: "a"}),
        ("array", "abc"),
        ("array", {"a": 1}),
    ],
)
def test_values_of_another_type_are_refused_naming_the_field(field_type: Any, value: Any) -> None:
    error = _refused({"f": value}, fields=[ConfigField("f", type=field_type)])
    assert error.parameter == "f"
    assert "configuration field 'f' must be" in str(error)


def test_a_tuple_array_is_returned_as_a_list_and_a_mapping_as_a_dict() -> None:
    from types import MappingProxyType

    fields = [ConfigField("hosts", type="array"), ConfigField("headers", type="object")]
    valid = validate_config(
        "t", fields, {"hosts": ("a", "b"), "headers": MappingProxyType({"k": "v"})}
    )
    assert valid.plain == {"hosts": ["a", "b"], "headers": {"k": "v"}}
    assert type(valid.plain["hosts"]) is list
    assert type(valid.plain["headers"]) is dict


HEADERS = (
    ConfigField(
        "headers",
        type="object",
        refused_keys=("Host", "cookie"),
        credential_keys_to="secret_headers",
    ),
    ConfigField("secret_headers", type="object", secret=True, refused_keys=("Host", "cookie")),
)


@pytest.mark.parametrize("field", ["headers", "secret_headers"])
@pytest.mark.parametrize("key", ["Host", "host", "COOKIE"])
def test_a_refused_key_is_refused_in_any_case_without_its_value(field: str, key: str) -> None:
    error = _refused({field: {"Accept": "a", key: SECRET}}, fields=HEADERS)
    assert error.parameter == field
    assert f"cannot hold {key!r}" in str(error)
    assert SECRET not in str(error)


@pytest.mark.parametrize("key", ["Authorization", "X-Api-Key", "x-auth-token", "api_key"])
def test_a_credential_key_in_a_plain_field_names_the_secret_field(key: str) -> None:
    error = _refused({"headers": {key: SECRET}}, fields=HEADERS)
    assert error.parameter == "headers"
    assert repr(key) in str(error)
    assert "the secret field 'secret_headers'" in str(error)
    assert SECRET not in str(error)


def test_credential_keys_are_kept_where_the_field_sends_them() -> None:
    config = {"headers": {"Accept": "json", "X-Tokens-Left": "3"}}
    config["secret_headers"] = {"Authorization": SECRET}
    valid = validate_config("t", HEADERS, config)
    assert valid.plain == {"headers": {"Accept": "json", "X-Tokens-Left": "3"}}
    assert valid.secrets == {"secret_headers": {"Authorization": SECRET}}
    # A field that declares nothing takes any key, as before.
    assert validate_config("weather", WEATHER, {"api_key": SECRET, "headers": {"Host": "h"}})


def test_none_means_not_given_and_is_dropped() -> None:
    valid = validate_config("weather", WEATHER, {"api_key": SECRET, "units": None, "token": None})
    assert valid.plain == {}
    assert valid.secrets == {"api_key": SECRET}


def test_non_secret_wrong_type_echoes_the_value_bounded() -> None:
    error = _refused({"api_key": SECRET, "retries": "x" * 5000})
    assert "'xxx" in str(error)
    assert len(str(error)) < 400


def test_a_value_outside_the_enum_is_refused_listing_the_choices() -> None:
    error = _refused({"api_key": SECRET, "units": "kelvin"})
    assert error.parameter == "units"
    assert "'metric', 'imperial'" in str(error)
    assert "'kelvin'" in str(error)


def test_enum_keeps_booleans_apart_from_numbers() -> None:
    fields = [ConfigField("level", type="integer", enum=(0, 1))]
    assert validate_config("t", fields, {"level": 1}).plain == {"level": 1}
    assert _refused({"level": True}, fields=fields).parameter == "level"


def test_a_secret_outside_its_enum_is_refused_without_listing_anything() -> None:
    fields = [ConfigField("region_key", secret=True, enum=("key-eu", "key-us"))]
    error = _refused({"region_key": SECRET}, fields=fields)
    assert error.parameter == "region_key"
    assert "key-eu" not in str(error)
    assert "not one of its allowed values" in str(error)


def test_a_field_given_where_it_does_not_apply_is_refused() -> None:
    error = _refused({"api_key": SECRET, "auth": "none", "token": SECRET})
    assert error.parameter == "token"
    assert "field 'token' applies only when auth is 'bearer'" in str(error)


def test_depends_on_uses_the_named_fields_default() -> None:
    # auth defaults to "none", so token does not apply until auth is set to "bearer".
    assert _refused({"api_key": SECRET, "token": SECRET}).parameter == "token"
    valid = validate_config(
        "weather", WEATHER, {"api_key": SECRET, "auth": "bearer", "token": SECRET}
    )
    assert valid.secrets == {"api_key": SECRET, "token": SECRET}


def test_depends_on_list_means_any_of() -> None:
    for auth in ("basic", "digest"):
        fields = [*WEATHER[:2], ConfigField("auth"), *WEATHER[3:]]
        valid = validate_config("weather", fields, {"api_key": SECRET, "auth": auth, "user": "ann"})
        assert valid.plain == {"auth": auth, "user": "ann"}
    error = _refused({"api_key": SECRET, "user": "ann"})
    assert "field 'user' applies only when auth is one of 'basic', 'digest'" in str(error)


def test_depends_on_needs_every_named_field_to_match() -> None:
    fields = [
        ConfigField("a", default="x"),
        ConfigField("b", default="y"),
        ConfigField("c", depends_on={"a": "x", "b": "z"}),
    ]
    assert not relevant(fields[2], {}, fields)
    assert relevant(fields[2], {"b": "z"}, fields)
    assert "a is 'x' and b is 'z'" in str(_refused({"c": "v"}, fields=fields))


def test_a_default_of_a_field_that_does_not_apply_does_not_switch_on_its_dependents() -> None:
    fields = [
        ConfigField("auth", default="none"),
        ConfigField("token_type", default="jwt", depends_on={"auth": "bearer"}),
        ConfigField("audience", required=True, depends_on={"token_type": "jwt"}),
    ]
    assert validate_config("t", fields, {}) == ValidConfig(plain={}, secrets={})
    assert _refused({"auth": "bearer"}, fields=fields).parameter == "audience"


def test_a_cycle_of_depends_on_ends() -> None:
    fields = [
        ConfigField("a", depends_on={"b": 1}, type="integer"),
        ConfigField("b", depends_on={"a": 1}, type="integer"),
    ]
    assert relevant(fields[0], {"a": 1, "b": 1}, fields)
    assert not relevant(fields[0], {}, fields)


def test_relevant_without_depends_on_is_always_true() -> None:
    assert relevant(WEATHER[0], {}, WEATHER)


def test_a_missing_required_field_is_named_with_its_label_and_description() -> None:
    error = _refused({"units": "metric"})
    assert error.parameter == "api_key"
    assert str(error) == (
        "tool 'weather' needs configuration field 'api_key' (API key): "
        "Your key from weather.example."
    )


def test_a_long_description_is_left_out_of_the_missing_field_message() -> None:
    fields = [ConfigField("k", required=True, description="d" * 500)]
    assert str(_refused({}, fields=fields)) == "tool 'weather' needs configuration field 'k'"


@pytest.mark.parametrize("empty", [None, ""])
def test_an_empty_required_string_counts_as_missing(empty: Any) -> None:
    assert _refused({"api_key": empty}).parameter == "api_key"


def test_a_required_field_with_a_default_need_not_be_given() -> None:
    fields = [ConfigField("units", required=True, default="metric")]
    assert validate_config("t", fields, {}) == ValidConfig(plain={}, secrets={})


def test_a_required_field_that_does_not_apply_is_not_required() -> None:
    valid = validate_config("weather", WEATHER, {"api_key": SECRET, "auth": "none"})
    assert valid.plain == {"auth": "none"}


def test_a_required_field_that_applies_must_be_given() -> None:
    error = _refused({"api_key": SECRET, "auth": "bearer"})
    assert error.parameter == "token"
    assert "needs configuration field 'token'" in str(error)


def test_required_secret_is_satisfied_by_a_stored_secret() -> None:
    valid = validate_config("weather", WEATHER, {"units": "metric"}, stored_secrets={"api_key"})
    assert valid == ValidConfig(plain={"units": "metric"}, secrets={})


def test_a_stored_secret_does_not_satisfy_a_plain_required_field() -> None:
    fields = [ConfigField("user", required=True)]
    assert _refused({}, fields=fields, stored_secrets={"user"}).parameter == "user"


def test_defaults_are_not_written_into_the_result() -> None:
    valid = validate_config("weather", WEATHER, {"api_key": SECRET})
    assert valid.plain == {}
    assert "units" not in valid.plain
    assert "auth" not in valid.plain


def test_the_given_configuration_is_not_modified() -> None:
    config: dict[str, Any] = {"api_key": SECRET, "hosts": ("a",), "units": None}
    validate_config("weather", WEATHER, config)
    assert config == {"api_key": SECRET, "hosts": ("a",), "units": None}


def test_fields_given_as_dicts_are_accepted() -> None:
    fields = [field.to_dict() for field in WEATHER]
    valid = validate_config("weather", fields, {"api_key": SECRET, "auth": "bearer", "token": "t"})
    assert valid.secrets == {"api_key": SECRET, "token": "t"}
    assert _refused({"units": "metric"}, fields=fields).parameter == "api_key"
    assert secret_field_names(fields) == {"api_key", "token"}


def test_secret_field_names_lists_the_secret_fields() -> None:
    assert secret_field_names(WEATHER) == frozenset({"api_key", "token"})
    assert secret_field_names([]) == frozenset()


@pytest.mark.parametrize(("config", "parameter"), FAILING)
def test_secret_value_never_appears_in_errors(
    config: dict[Any, Any], parameter: str | None
) -> None:
    fields = [
        *WEATHER[:1],
        ConfigField("units", enum=("metric", "imperial"), secret=True),
        *WEATHER[2:],
    ]
    error = _refused(config, fields=fields if parameter == "units" else WEATHER)
    assert error.parameter == parameter
    assert SECRET not in str(error)
    assert "5ecr3t" not in str(error)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_NAMES = [field.name for field in WEATHER]
_FIELDS = {field.name: field for field in WEATHER}
# Values of each declared type, drawn as often as any JSON value, so that examples pass too.
_TYPED: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(max_size=8),
    "integer": st.integers(),
    "number": st.integers() | st.floats(),
    "boolean": st.booleans(),
    "object": st.dictionaries(st.text(max_size=4), _JSON, max_size=3),
    "array": st.lists(_JSON, max_size=3),
}
_SECRETS = secret_field_names(WEATHER)


@st.composite
def _configs(draw: st.DrawFn) -> dict[str, Any]:
    config: dict[str, Any] = {}
    value: Any
    names = draw(st.lists(st.sampled_from(_NAMES), unique=True, max_size=len(_NAMES)))
    # An unknown or wrongly cased name now and then, so most examples reach the other rules.
    names += {3: ["x"], 6: ["API_KEY"]}.get(draw(st.integers(0, 9)), [])
    for name in names:
        if name in _SECRETS:
            value = draw(st.sampled_from([SECRET] * 4 + [None, "", [SECRET], {"k": SECRET}, 1]))
        elif name == "auth":
            value = draw(st.sampled_from(["none", "bearer", "basic", "digest", None]) | _JSON)
        elif name in _FIELDS:
            field = _FIELDS[name]
            choices = st.sampled_from(field.enum) if field.enum else _TYPED[field.type]
            value = draw(choices | _JSON)
        else:
            value = draw(_JSON)
        config[name] = value
    return config


@settings(max_examples=400)
@given(_configs(), st.sets(st.sampled_from(sorted(_SECRETS))))
def test_random_configs_either_validate_or_raise_config_error(
    config: dict[str, Any], stored: set[str]
) -> None:
    refused: ConfigError | None = None
    try:
        valid = validate_config("weather", WEATHER, config, stored_secrets=stored)
    except ConfigError as error:
        refused = error
    if refused is not None:
        assert SECRET not in str(refused)
        return
    names = {field.name for field in WEATHER}
    assert set(valid.plain) | set(valid.secrets) <= names
    assert set(valid.secrets) == {name for name in _SECRETS if config.get(name) is not None}
    assert _SECRETS.isdisjoint(valid.plain)
    given_values = {name: value for name, value in config.items() if value is not None}
    assert {**valid.plain, **valid.secrets} == given_values
