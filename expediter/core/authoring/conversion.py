"""The cattrs converter: strict structuring of model arguments, JSON unstructuring of results.

The default cattrs converter coerces (``int("5")``, ``bool("false") is True``, ``list("abc")``);
a model's arguments must instead match the JSON Schema it was shown, so every hook here checks
the JSON type first and only widens losslessly (integer to number, ``1.0`` to ``1``).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import attrs
import cattrs
from cattrs.cols import (
    is_mapping,
    is_sequence,
    list_structure_factory,
    mapping_structure_factory,
)
from cattrs.gen import make_dict_structure_fn

from expediter.core.authoring.constraints import ConstraintViolation, read_metadata
from expediter.core.authoring.pydantic_models import is_base_model, model_validator
from expediter.core.authoring.schema import is_typed_dict, strip_annotated
from expediter.core.records.limits import INT_DIGITS, LARGEST_INT, SMALLEST_INT
from expediter.core.records.redaction import redact
from expediter.core.records.text import CONTROL, echo

__all__ = [
    "TypeMismatch",
    "argument_hook",
    "converter",
    "describe_type",
    "json_type_name",
    "structure_hook",
    "to_json_value",
]


class TypeMismatch(TypeError):
    """A value's JSON type does not match the parameter's type.

    Its message names the types only (``expected string, got integer``): the value may be a
    secret. ``shown()`` adds the value, bounded, for parameters that are not secret.
    """

    def __init__(self, message: str, value: Any = None, *, has_value: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.value = value
        self.has_value = has_value

    def shown(self, secret_names: AbstractSet[str] = frozenset()) -> str:
        """The message with the offending value quoted (escaped, at most ~200 characters;
        values under secret names inside it hidden)."""
        if not self.has_value:
            return self.message
        return f"{self.message} {echo(redact(self.value, secret_names))}"


def json_type_name(value: Any) -> str:
    """Name a value's JSON type the way the schema does (``string``, ``integer``, ``array``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def describe_type(hint: Any) -> str:
    """Name a type hint in JSON Schema words for an error message."""
    hint, _ = strip_annotated(hint)
    names = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    if hint in names:
        return names[hint]
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return "one of " + ", ".join(_show(value) for value in typing.get_args(hint))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(_show(member.value) for member in hint)
    if origin is typing.Union or origin is types.UnionType:
        return " or ".join(describe_type(arg) for arg in typing.get_args(hint))
    if hint in (datetime.datetime, datetime.date):
        return f"an ISO 8601 {hint.__name__} string"
    if _is_array(hint):
        return "array"
    if is_mapping(hint) or (isinstance(hint, type) and (attrs.has(hint) or _is_dataclass(hint))):
        return "object"
    if is_base_model(hint):
        return "object"
    return getattr(hint, "__name__", repr(hint))


def _is_dataclass(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _mismatch(value: Any, hint: Any) -> TypeMismatch:
    expected = describe_type(hint)
    return TypeMismatch(f"expected {expected}, got {json_type_name(value)}", value, has_value=True)


def _structure_str(value: Any, hint: Any) -> str:
    if isinstance(value, str):
        return value
    raise _mismatch(value, str)


def _structure_int(value: Any, hint: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _mismatch(value, int)


def _structure_float(value: Any, hint: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _mismatch(value, float)


def _structure_bool(value: Any, hint: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _mismatch(value, bool)


def _structure_none(value: Any, hint: Any) -> None:
    if value is None:
        return None
    raise _mismatch(value, type(None))


def _structure_datetime(value: Any, hint: Any) -> Any:
    if isinstance(value, hint):
        return value
    if isinstance(value, str):
        try:
            return hint.fromisoformat(value)
        except ValueError:
            pass
    raise _mismatch(value, hint)


def _structure_any(value: Any, hint: Any) -> Any:
    return value


def _enums_first(hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Route ``str``/``int`` Enums (which cattrs dispatches by their str/int base) to the Enum."""

    def structure(value: Any, hint: Any) -> Any:
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _enum_factory(hint)(value, hint)
        return hook(value, hint)

    return structure


def _literal_factory(hint: Any) -> Callable[[Any, Any], Any]:
    allowed = typing.get_args(hint)

    def structure(value: Any, _: Any) -> Any:
        for candidate in allowed:
            if value == candidate and type(value) is type(candidate):
                return candidate
            if isinstance(candidate, enum.Enum) and value == candidate.value:
                return candidate
        raise _mismatch(value, hint)

    return structure


@functools.cache
def _enum_factory(hint: Any) -> Callable[[Any, Any], Any]:
    by_value = {(type(member.value), member.value): member for member in hint}

    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, hint):
            return value
        member = by_value.get((type(value), value))
        if member is None:
            raise _mismatch(value, hint)
        return member

    return structure


def _is_array(hint: Any) -> bool:
    if hint in (list, tuple, set, frozenset):
        return True
    return is_sequence(hint) or typing.get_origin(hint) in (tuple, set, frozenset)


def _is_literal(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Literal,)


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _union_factory(hint: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    members = [member for member in typing.get_args(hint) if member is not type(None)]
    nullable = len(members) != len(typing.get_args(hint))
    if len(members) == 1:
        # Optional[T]: T's own hook, so a nested error keeps its path.
        inner = conv.get_structure_hook(members[0])
        only = members[0]

        def structure_optional(value: Any, _: Any) -> Any:
            if value is None:
                return None
            try:
                return inner(value, only)
            except TypeMismatch:
                raise _mismatch(value, hint) from None

        return structure_optional

    def structure(value: Any, _: Any) -> Any:
        if value is None and nullable:
            return None
        # The member of the value's own JSON type first: ``int | float`` keeps 1 an int
        # (``int | float == float | int``, so the declared order cannot be relied on).
        exact = [member for member in members if member is type(value)]
        refused: ConstraintViolation | None = None
        for member in exact + [member for member in members if member not in exact]:
            try:
                return conv.structure(value, member)
            except ConstraintViolation as exc:
                # The right type, out of bounds: that says more than "expected A or B".
                refused = refused or exc
            except Exception:
                continue
        if refused is not None:
            raise refused
        raise _mismatch(value, hint)

    return structure


def _sequence_factory(hint: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    origin = typing.get_origin(hint) or hint
    args = typing.get_args(hint)
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        from cattrs.gen import make_hetero_tuple_structure_fn

        inner = make_hetero_tuple_structure_fn(hint, conv)

        def structure_tuple(value: Any, t: Any) -> Any:
            if not isinstance(value, list | tuple):
                raise _mismatch(value, hint)
            if len(value) != len(args):
                raise TypeMismatch(f"expected an array of {len(args)} items, got {len(value)}")
            return inner(value, t)

        return structure_tuple
    element = args[0] if args else Any
    as_list = list_structure_factory(list[element], conv)  # type: ignore[valid-type]
    if origin in (set, frozenset) or origin is typing.AbstractSet:
        accepted: tuple[type, ...] = (list, tuple, set, frozenset)
        finish: Callable[[list[Any]], Any] = frozenset if origin is frozenset else set
    else:
        accepted = (list, tuple)
        finish = tuple if origin is tuple else list

    def structure(value: Any, t: Any) -> Any:
        if not isinstance(value, accepted):
            raise _mismatch(value, hint)
        return finish(as_list(list(typing.cast(list[Any], value)), list))

    return structure


def _mapping_factory(hint: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    inner = mapping_structure_factory(hint, conv)

    def structure(value: Any, t: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _mismatch(value, hint)
        return inner(value, t)

    return structure


def _record_factory(hint: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    if attrs.has(hint):
        attrs.resolve_types(hint)  # string annotations, e.g. recursive ``list["Tree"]``
    # Aliases: the schema shows a private attrs field ``_value`` as ``value``.
    inner = make_dict_structure_fn(
        hint, conv, _cattrs_forbid_extra_keys=True, _cattrs_use_alias=True
    )

    def structure(value: Any, t: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _mismatch(value, hint)
        return inner(value, t)

    return structure


def _annotated_factory(hint: Any) -> Callable[[Any, Any], Any]:
    """``Annotated[T, ...]``: T's hook, then the metadata's constraint check (if any)."""
    bare, metadata = strip_annotated(hint)
    inner = structure_hook(bare)
    check = read_metadata(bare, metadata, repr(hint), warn=False).check()
    if check is None:
        return lambda value, _: inner(value, bare)

    def structure(value: Any, _: Any) -> Any:
        result = inner(value, bare)
        check(result)
        return result

    return structure


def _typed_dict_factory(hint: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    from cattrs.gen.typeddicts import make_dict_structure_fn as make_typed_dict_fn

    inner = make_typed_dict_fn(hint, conv)

    def structure(value: Any, t: Any) -> Any:
        if not isinstance(value, Mapping):
            raise _mismatch(value, hint)
        return inner(typing.cast(dict[str, Any], value), t)

    return structure


def _is_annotated(hint: Any) -> bool:
    return typing.get_origin(hint) is typing.Annotated


def _is_read_only(hint: Any) -> bool:
    """``ReadOnly[T]``, a TypedDict key qualifier cattrs does not unwrap itself."""
    return getattr(typing.get_origin(hint), "_name", None) == "ReadOnly"


def _read_only_factory(hint: Any) -> Callable[[Any, Any], Any]:
    inner = typing.get_args(hint)[0]
    hook = structure_hook(inner)
    return lambda value, _: hook(value, inner)


def _model_factory(hint: Any) -> Callable[[Any, Any], Any]:
    validate = model_validator(hint)

    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, hint):
            return value
        if not isinstance(value, Mapping):
            raise _mismatch(value, hint)
        return validate(value)

    return structure


def _build() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    simple: dict[Any, Callable[[Any, Any], Any]] = {
        str: _structure_str,
        int: _structure_int,
        float: _structure_float,
        bool: _structure_bool,
        type(None): _structure_none,
        datetime.datetime: _structure_datetime,
        datetime.date: _structure_datetime,
    }
    for hint, hook in simple.items():
        conv.register_structure_hook(hint, _enums_first(hook))
    conv.register_structure_hook_func(lambda t: t is object, _structure_any)
    conv.register_structure_hook_factory(_is_literal, _literal_factory)
    conv.register_structure_hook_factory(
        lambda t: isinstance(t, type) and issubclass(t, enum.Enum), _enum_factory
    )
    conv.register_structure_hook_factory(_is_union, _union_factory)
    conv.register_structure_hook_factory(_is_array, _sequence_factory)
    conv.register_structure_hook_factory(lambda t: is_mapping(t) or t is dict, _mapping_factory)
    conv.register_structure_hook_factory(
        lambda t: isinstance(t, type) and (attrs.has(t) or dataclasses.is_dataclass(t)),
        _record_factory,
    )
    # After the mapping factory: a TypedDict is a Mapping too (the last registered wins).
    conv.register_structure_hook_factory(is_typed_dict, _typed_dict_factory)
    conv.register_structure_hook_factory(is_base_model, _model_factory)
    conv.register_structure_hook_factory(_is_annotated, _annotated_factory)
    conv.register_structure_hook_factory(_is_read_only, _read_only_factory)
    conv.register_unstructure_hook_factory(
        is_base_model, lambda _: lambda model: model.model_dump(mode="json")
    )
    conv.register_unstructure_hook(datetime.datetime, datetime.datetime.isoformat)
    conv.register_unstructure_hook(datetime.date, datetime.date.isoformat)
    conv.register_unstructure_hook(set, lambda value: [conv.unstructure(v) for v in value])
    conv.register_unstructure_hook(frozenset, lambda value: [conv.unstructure(v) for v in value])
    return conv


converter = _build()

_PRIMITIVE_HOOKS: dict[Any, Callable[[Any, Any], Any]] = {
    str: _structure_str,
    int: _structure_int,
    float: _structure_float,
    bool: _structure_bool,
}


def structure_hook(hint: Any) -> Callable[[Any, Any], Any]:
    """The converter's hook for a type (the strict primitive hooks directly, for speed)."""
    return _PRIMITIVE_HOOKS.get(hint) or converter.get_structure_hook(hint)


def argument_hook(hint: Any) -> tuple[Callable[[Any, Any], Any], Any]:
    """The hook for a parameter's hint and the type to call it with: the bare type's own hook
    unless ``Annotated`` metadata adds a check (no wrapper per call for a mere description)."""
    bare, metadata = strip_annotated(hint)
    if metadata and read_metadata(bare, metadata, repr(hint), warn=False).check() is not None:
        return converter.get_structure_hook(hint), hint
    return structure_hook(bare), bare


class NotJSON(TypeError):
    """A tool returned a value with no JSON form."""


#: Python refuses to turn longer integers into text (``sys.get_int_max_str_digits``).


#: Where a value sits in a result, kept as a chain ``(parent, part)`` and written out only for
#: an error or a note (formatting every element's path would cost more than the check).
_Path = tuple[Any, Any] | None


def _where(path: _Path) -> str:
    parts: list[str] = []
    while path is not None:
        path, part = path
        parts.append(f"[{part}]" if isinstance(part, int) else f".{str(part)[:40]}")
    return "the result" + "".join(reversed(parts))


def _check_json(value: Any, path: _Path, notes: list[str] | None, clean: bool) -> Any:
    kind = type(value)
    if kind is str:
        return value.translate(CONTROL) if clean and not value.isprintable() else value
    if value is None or kind is bool:
        return value
    if kind is int:
        if not SMALLEST_INT < value < LARGEST_INT:
            raise NotJSON(f"{_where(path)} is an integer of more than {INT_DIGITS} digits")
        return value
    if kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            if notes is None:
                raise NotJSON(f"{_where(path)} is {value!r}, which JSON cannot represent")
            notes.append(f"{_where(path)} was {value!r}, which JSON cannot represent: sent as null")
            return None
        return value
    if kind is list or isinstance(value, list | tuple | set | frozenset):
        return [_check_json(item, (path, index), notes, clean) for index, item in enumerate(value)]
    if kind is dict or isinstance(value, Mapping):
        result = {}
        for key, item in value.items():
            if type(key) is not str:
                key = _key(key, path)
            if clean and not key.isprintable():
                key = key.translate(CONTROL)
            result[key] = _check_json(item, (path, key), notes, clean)
        return result
    # Anything else (attrs records, dataclasses, enums, dates, str or int subclasses): its
    # converter form, checked the same way.
    unstructured = converter.unstructure(value)
    if unstructured is not value and type(unstructured) is not kind:
        return _check_json(unstructured, path, notes, clean)
    if isinstance(value, str):
        return _check_json(str.__str__(value), path, notes, clean)
    if isinstance(value, int) and not isinstance(value, bool):
        return _check_json(int.__index__(value), path, notes, clean)
    if isinstance(value, float):
        return _check_json(float.__float__(value), path, notes, clean)
    raise NotJSON(f"{_where(path)} is a {kind.__name__}, which has no JSON form")


def _key(key: Any, path: _Path) -> str:
    """A mapping key as text: an enum key becomes its value; other keys have no JSON form."""
    found = converter.unstructure(key)
    if isinstance(found, str):
        return str.__str__(found)
    raise NotJSON(f"{_where(path)} has a non-string key of type {type(key).__name__}")


def to_json_value(value: Any, notes: list[str] | None = None, *, clean: bool = False) -> Any:
    """Return a tool's result as plain JSON data (attrs records, enums, dates converted), in
    one walk.

    Non-finite floats are refused (NotJSON), or, given a ``notes`` list, become null with a
    note appended saying where. With ``clean``, every string (keys too) also loses NUL and
    control characters and has lone surrogates replaced (``records.text.sanitize``)."""
    return _check_json(value, None, notes, clean)
