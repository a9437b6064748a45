"""A tool instance's configuration checked against the tool's ``config_requirements``.

The check splits the configuration into plain values (stored as JSON, shown in listings) and
secret values (encrypted, never shown). It changes nothing else: defaults are not filled in,
because the tool applies its own; they only count for ``depends_on`` and ``required``. An error
never repeats a secret field's value, and repeats other values only through ``echo``. An object
field's keys are checked as the field declares: ``refused_keys`` are refused, and a plain field
with ``credential_keys_to`` refuses keys named like credentials (``is_secret_name``), naming the
secret field they belong in.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

from expediter.core.records.redaction import is_secret_name
from expediter.core.records.text import clean_text, echo
from expediter.errors import ConfigError
from expediter.hookspecs.tool import ConfigField

__all__ = [
    "FieldSpec",
    "ValidConfig",
    "check_operator_fields",
    "relevant",
    "secret_field_names",
    "validate_config",
]

#: A field as ``config_requirements`` may return it: the record, or its JSON form.
FieldSpec = ConfigField | Mapping[str, Any]

# Characters of a value, a name or a declared choice repeated in an error message.
_NAME_LIMIT = 60
_VALUE_LIMIT = 80
# A field's description is added to a "needs field" message only when it is at most this long.
_DESCRIPTION_LIMIT = 160
# Names listed in one message before "and N more".
_LISTED = 10

_KINDS: dict[str, str] = {
    "string": "a string",
    "integer": "an integer",
    "number": "a finite number",
    "boolean": "true or false",
    "object": "an object (a mapping with string keys)",
    "array": "an array",
}


@attrs.frozen
class ValidConfig:
    """A configuration split for storage."""

    #: The non-secret fields given (stored as JSON, shown in listings).
    plain: dict[str, Any]
    #: The secret fields given (encrypted before storage, never shown).
    secrets: dict[str, Any]


def validate_config(
    tool: str,
    fields: Sequence[FieldSpec],
    config: Mapping[str, Any],
    *,
    stored_secrets: Collection[str] = (),
) -> ValidConfig:
    """Check ``config`` (plain and secret values together) against the tool's fields;
    ConfigError naming the field when it does not fit."""
    declared = _by_name(fields)
    owner = f"tool {echo(tool, _NAME_LIMIT)}"
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"{owner}: the configuration must be an object mapping field names to values, "
            f"not {type(config).__name__}"
        )
    _check_names(owner, declared, config)
    plain: dict[str, Any] = {}
    secrets: dict[str, Any] = {}
    for field in declared.values():
        value = config.get(field.name)
        if value is None:
            _check_present(owner, field, config, declared, stored_secrets)
            continue
        if not _applies(field, config, declared, frozenset()):
            raise ConfigError(
                f"{owner}: configuration field {field.name!r} applies only when "
                f"{_condition(field)}; leave it out or change "
                f"{', '.join(field.depends_on or ())}",
                parameter=field.name,
            )
        value = _typed(owner, field, value)
        _check_choice(owner, field, value)
        _check_keys(owner, field, value)
        if _missing(field, value):
            _check_present(owner, field, config, declared, stored_secrets)
        (secrets if field.secret else plain)[field.name] = value
    return ValidConfig(plain=plain, secrets=secrets)


def check_operator_fields(
    tool: str,
    fields: Sequence[FieldSpec],
    config: Mapping[str, Any],
    stored: Mapping[str, Any] | None = None,
) -> None:
    """ConfigError when ``config`` sets or changes a field only the operator may set
    (``ConfigField.operator_only``); ``stored`` is the configuration an update starts from."""
    for name, field in _by_name(fields).items():
        if not field.operator_only or name not in config:
            continue
        value = config[name]
        if stored is not None and _same(value, stored.get(name)):
            continue
        if stored is None and value is None:
            continue
        raise ConfigError(
            f"tool {echo(tool, _NAME_LIMIT)}: configuration field {name!r} may be set only by "
            "the operator (the expediter command line, or the instance API with operator=True)",
            parameter=name,
        )


def relevant(field: ConfigField, config: Mapping[str, Any], fields: Sequence[FieldSpec]) -> bool:
    """Whether a field applies given the other values (its ``depends_on``)."""
    return _applies(field, config, _by_name(fields), frozenset())


def secret_field_names(fields: Sequence[FieldSpec]) -> frozenset[str]:
    """The names of the fields declared ``secret=True``."""
    return frozenset(name for name, field in _by_name(fields).items() if field.secret)


def _by_name(fields: Sequence[FieldSpec]) -> dict[str, ConfigField]:
    """The fields by name, in declared order (a repeated name keeps its first declaration)."""
    declared: dict[str, ConfigField] = {}
    for item in fields:
        field = ConfigField.coerce(item)
        declared.setdefault(field.name, field)
    return declared


def _check_names(
    owner: str, declared: Mapping[str, ConfigField], config: Mapping[str, Any]
) -> None:
    for key in config:
        if not isinstance(key, str):
            raise ConfigError(
                f"{owner}: configuration field names must be strings, not "
                f"{type(key).__name__} ({echo(key, _NAME_LIMIT)})"
            )
    unknown = [key for key in config if key not in declared]
    if not unknown:
        return
    quoted = ", ".join(echo(key, _NAME_LIMIT) for key in unknown[:_LISTED])
    if len(unknown) > _LISTED:
        quoted += f" and {len(unknown) - _LISTED} more"
    if not declared:
        raise ConfigError(
            f"{owner} takes no configuration (given: {quoted}); leave the configuration empty",
            parameter=unknown[0],
        )
    noun = "field" if len(unknown) == 1 else "fields"
    raise ConfigError(
        f"{owner} has no configuration {noun} {quoted} (fields: {', '.join(declared)})",
        parameter=unknown[0],
    )


def _typed(owner: str, field: ConfigField, value: Any) -> Any:
    """The value in its stored form (an object as a dict, an array as a list), or ConfigError."""
    kind = field.type
    fits = (
        (kind == "string" and isinstance(value, str))
        or (kind == "integer" and isinstance(value, int) and not isinstance(value, bool))
        or (kind == "number" and _is_number(value))
        or (kind == "boolean" and isinstance(value, bool))
        or (
            kind == "object"
            and isinstance(value, Mapping)
            and all(isinstance(k, str) for k in value)
        )
        or (kind == "array" and isinstance(value, list | tuple))
    )
    if not fits:
        given = type(value).__name__
        if not field.secret:
            given += f" ({echo(value, _VALUE_LIMIT)})"
        raise ConfigError(
            f"{owner}: configuration field {field.name!r} must be "
            f"{_KINDS.get(kind, repr(kind))}, not {given}",
            parameter=field.name,
        )
    if kind == "object":
        return dict(value)
    if kind == "array":
        return list(value)
    return value


def _check_keys(owner: str, field: ConfigField, value: Any) -> None:
    """ConfigError for a key the object field refuses (``refused_keys``), or for a key named
    like a credential in a plain field that sends credentials elsewhere (``credential_keys_to``).
    Only the key is repeated, never its value."""
    if field.type != "object" or not (field.refused_keys or field.credential_keys_to):
        return
    refused = {key.lower() for key in field.refused_keys}
    for key in value:
        if key.lower() in refused:
            listed = ", ".join(sorted(refused))
            raise ConfigError(
                f"{owner}: configuration field {field.name!r} cannot hold "
                f"{echo(key, _NAME_LIMIT)} (it refuses {listed}); remove it "
                f"(the field's description in `expediter tools show` says why)",
                parameter=field.name,
            )
        if field.credential_keys_to and not field.secret and is_secret_name(key):
            raise ConfigError(
                f"{owner}: {echo(key, _NAME_LIMIT)} in configuration field {field.name!r} "
                f"names a credential, and that field is stored and listed in clear: put it in "
                f"the secret field {field.credential_keys_to!r} instead",
                parameter=field.name,
            )


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int)


def _check_choice(owner: str, field: ConfigField, value: Any) -> None:
    if field.enum is None or any(_same(value, option) for option in field.enum):
        return
    if field.secret:
        raise ConfigError(
            f"{owner}: configuration field {field.name!r} is not one of its allowed values",
            parameter=field.name,
        )
    raise ConfigError(
        f"{owner}: configuration field {field.name!r} must be one of {_choices(field.enum)}, "
        f"not {echo(value, _VALUE_LIMIT)}",
        parameter=field.name,
    )


def _check_present(
    owner: str,
    field: ConfigField,
    config: Mapping[str, Any],
    declared: Mapping[str, ConfigField],
    stored_secrets: Collection[str],
) -> None:
    """ConfigError when a required, applicable field has no value, default or stored secret."""
    if not field.required or not _missing(field, field.default):
        return
    if field.secret and field.name in stored_secrets:
        return
    if not _applies(field, config, declared, frozenset()):
        return
    message = f"{owner} needs configuration field {field.name!r}"
    if field.label:
        message += f" ({clean_text(field.label)})"
    description = clean_text(field.description.strip())
    if description and len(description) <= _DESCRIPTION_LIMIT:
        message += f": {description}"
    raise ConfigError(message, parameter=field.name)


def _missing(field: ConfigField, value: Any) -> bool:
    return value is None or (field.type == "string" and value == "")


def _applies(
    field: ConfigField,
    config: Mapping[str, Any],
    declared: Mapping[str, ConfigField],
    seen: frozenset[str],
) -> bool:
    """Whether every field ``field`` depends on has a matching effective value. ``seen`` holds
    the fields already on the chain, so a cycle of ``depends_on`` ends."""
    if not field.depends_on:
        return True
    seen = seen | {field.name}
    return all(
        _matches(_effective(name, config, declared, seen), expected)
        for name, expected in field.depends_on.items()
    )


def _effective(
    name: str, config: Mapping[str, Any], declared: Mapping[str, ConfigField], seen: frozenset[str]
) -> Any:
    """The field's given value, else its default; None when it does not apply itself (so a
    default of an inapplicable field cannot switch on the fields depending on it)."""
    field = declared.get(name)
    if field is not None and name not in seen and not _applies(field, config, declared, seen):
        return None
    value = config.get(name)
    if value is None and field is not None:
        return field.default
    return value


def _matches(value: Any, expected: Any) -> bool:
    if isinstance(expected, list | tuple):
        return any(_same(value, option) for option in expected)
    return _same(value, expected)


def _same(value: Any, option: Any) -> bool:
    """Equality that keeps booleans apart from the numbers 0 and 1."""
    if isinstance(value, bool) or isinstance(option, bool):
        return isinstance(value, bool) and isinstance(option, bool) and value == option
    try:
        return bool(value == option)
    except Exception:
        return False


def _choices(options: Sequence[Any]) -> str:
    listed = ", ".join(echo(option, _NAME_LIMIT) for option in options[:_LISTED])
    if len(options) > _LISTED:
        listed += f" and {len(options) - _LISTED} more"
    return listed


def _condition(field: ConfigField) -> str:
    parts = []
    for name, expected in (field.depends_on or {}).items():
        if isinstance(expected, list | tuple):
            parts.append(f"{name} is one of {_choices(expected)}")
        else:
            parts.append(f"{name} is {echo(expected, _NAME_LIMIT)}")
    return " and ".join(parts)
