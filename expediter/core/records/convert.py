"""Records to and from their JSON forms: one cattrs converter for every record's ``to_dict``
and ``from_dict``.

A record class states its JSON form with ``@json_form`` (key order, computed keys, per-field
hooks); the converter turns that into cattrs' generated functions the first time a record of
the class is converted. Importing cattrs costs ~12-15 ms beyond attrs, so nothing here imports
it until the first conversion: ``expediter --help`` never does. (The one reader that bypasses
it, for its budget, is ``Catalogue.from_dict``: see ``core.discovery.catalogue``.)

Structuring is lenient, as a reader of our own JSON and of tool authors' dicts should be:
values are taken as JSON gave them (no ``str()``/``int()`` coercion), booleans are ``bool()``-ed,
a missing key takes the field's default, and a missing optional (``X | None``) field without a
default is None. (Model arguments are structured strictly, by ``core.authoring.conversion``.)
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

if TYPE_CHECKING:
    import cattrs

__all__ = ["json_form", "json_value", "structure", "unstructure"]

T = TypeVar("T")
Hook = Callable[[Any], Any]
StructureHook = Callable[[Any, Any], Any]


@attrs.frozen
class _Form:
    """How one record class looks as JSON (see ``json_form``)."""

    keys: tuple[str, ...] | None = None
    computed: Mapping[str, Hook] = attrs.field(factory=dict)
    dump: Mapping[str, Hook] = attrs.field(factory=dict)
    load: Mapping[str, Hook] = attrs.field(factory=dict)
    rename: Mapping[str, str] = attrs.field(factory=dict)


_PLAIN = _Form()
_FORMS: dict[type, _Form] = {}


def json_form(
    *,
    keys: Sequence[str] | None = None,
    computed: Mapping[str, Hook] | None = None,
    dump: Mapping[str, Hook] | None = None,
    load: Mapping[str, Hook] | None = None,
    rename: Mapping[str, str] | None = None,
) -> Callable[[type[T]], type[T]]:
    """Declare an attrs record's JSON form, as a class decorator.

    ``keys``: the form's keys in order (fields left out are not written); default: every
    field in declaration order, then the computed keys. ``computed``: extra keys written from
    the record (read-only: ignored when structuring). ``dump``/``load``: per-field functions
    from the field's value to its JSON and back. ``rename``: field name to JSON key.
    """
    form = _Form(
        keys=None if keys is None else tuple(keys),
        computed=dict(computed or {}),
        dump=dict(dump or {}),
        load=dict(load or {}),
        rename=dict(rename or {}),
    )

    def register(cls: type[T]) -> type[T]:
        _FORMS[cls] = form
        return cls

    return register


def unstructure(record: Any) -> dict[str, Any]:
    """A record as its JSON form (a dict of plain JSON data)."""
    return _converter().unstructure(record)  # type: ignore[no-any-return]


def structure(data: Mapping[str, Any], cls: type[T]) -> T:
    """Build a record of ``cls`` from its JSON form."""
    return _converter().structure(data, cls)


def json_value(value: Any) -> Any:
    """Any value as plain JSON data: records by their forms, tuples and sets as lists, bytes as
    base64 text, everything else as it is."""
    return _converter().unstructure(value)


# -- the converter, built on first use --------------------------------------------------------


@functools.cache
def _converter() -> cattrs.Converter:
    import cattrs

    converter = cattrs.Converter(detailed_validation=False)
    # Unstructuring: ``Any`` fields are written as they are (as a hand-written ``to_dict``
    # would); tuples and sets become lists; bytes become base64 text.
    converter.register_unstructure_hook_func(lambda hint: hint is Any, _identity)
    converter.register_unstructure_hook_factory(_is_collection, _collection_unstructure_factory)
    converter.register_unstructure_hook(bytes, _base64)
    converter.register_unstructure_hook(bytearray, _base64)
    # Structuring: take JSON's values as they are (no coercion); booleans by truth.
    for hint in (str, int, float):
        converter.register_structure_hook(hint, _as_is)
    converter.register_structure_hook(bool, _truth)
    converter.register_structure_hook_func(_is_literal, _as_is)
    converter.register_structure_hook_factory(_is_optional, _optional_structure_factory)
    converter.register_structure_hook_factory(_is_tuple, _tuple_structure_factory)
    converter.register_unstructure_hook_factory(attrs.has, _record_unstructure_factory)
    converter.register_structure_hook_factory(attrs.has, _record_structure_factory)
    return converter


def _identity(value: Any) -> Any:
    return value


def _as_is(value: Any, _: Any) -> Any:
    return value


def _truth(value: Any, _: Any) -> bool:
    return bool(value)


def _base64(value: bytes | bytearray) -> str:
    import base64

    return base64.b64encode(value).decode("ascii")


_COLLECTIONS = (tuple, set, frozenset, collections.abc.Set, collections.abc.MutableSet)


def _is_literal(hint: Any) -> bool:
    return typing.get_origin(hint) is typing.Literal


def _is_collection(hint: Any) -> bool:
    return hint in _COLLECTIONS or typing.get_origin(hint) in _COLLECTIONS


def _collection_unstructure_factory(hint: Any, converter: cattrs.Converter) -> Hook:
    args = typing.get_args(hint)
    if not args or args == ((),):  # bare ``tuple``, ``set``: the items' own classes decide
        return lambda value: [converter.unstructure(item) for item in value]
    if typing.get_origin(hint) is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        hooks = [converter.get_unstructure_hook(arg) for arg in args]
        return lambda value: [hook(item) for hook, item in zip(hooks, value, strict=True)]
    from cattrs.fns import identity

    item_hook = converter.get_unstructure_hook(args[0])
    if item_hook is _identity or item_hook is identity:
        return list
    return lambda value: [item_hook(item) for item in value]


def _is_optional(hint: Any) -> bool:
    args = typing.get_args(hint)
    return (
        typing.get_origin(hint) in (typing.Union, types.UnionType)
        and len(args) == 2
        and type(None) in args
    )


def _optional_structure_factory(hint: Any, converter: cattrs.Converter) -> StructureHook:
    (inner,) = (arg for arg in typing.get_args(hint) if arg is not type(None))
    hook = converter.get_structure_hook(inner)
    if hook is _as_is:
        return _as_is
    return lambda value, _: None if value is None else hook(value, inner)


def _is_tuple(hint: Any) -> bool:
    return hint is tuple or typing.get_origin(hint) is tuple


def _tuple_structure_factory(hint: Any, converter: cattrs.Converter) -> StructureHook:
    """Tuples from JSON arrays (cattrs' own tuple hook dispatches on every item: slower)."""
    args = typing.get_args(hint)
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        item = args[0] if args else Any
        hook = converter.get_structure_hook(item)
        if hook is _as_is or item is Any:
            return lambda value, _: tuple(value)
        return lambda value, _: tuple([hook(each, item) for each in value])
    hooks = [(converter.get_structure_hook(arg), arg) for arg in args]
    return lambda value, _: tuple(
        [hook(each, arg) for (hook, arg), each in zip(hooks, value, strict=True)]
    )


def _resolved(cls: type) -> tuple[attrs.Attribute[Any], ...]:
    attrs.resolve_types(cls)  # string annotations (``from __future__ import annotations``)
    return tuple(field for field in attrs.fields(cls) if field.init)


def _record_unstructure_factory(cls: type, converter: cattrs.Converter) -> Hook:
    from cattrs.gen import make_dict_unstructure_fn_from_attrs, override

    form = _FORMS.get(cls, _PLAIN)
    fields = _resolved(cls)
    key_of = {field.name: form.rename.get(field.name, field.name) for field in fields}
    keys = form.keys or (*key_of.values(), *form.computed)
    by_key = {key: field for field in fields if (key := key_of[field.name]) in keys}
    chosen = [by_key[key] for key in keys if key in by_key]
    overrides: dict[str, Any] = {
        field.name: override(rename=key_of[field.name], unstruct_hook=form.dump.get(field.name))
        for field in chosen
    }
    write: Hook = make_dict_unstructure_fn_from_attrs(
        chosen, cls, converter, _cattrs_use_linecache=False, **overrides
    )
    computed = tuple(form.computed.items())
    if not computed:
        return write
    # Computed keys are added after the fields; reorder only when one comes before a field.
    in_order = keys == (*(key_of[field.name] for field in chosen), *form.computed)

    def unstructure(record: Any) -> dict[str, Any]:
        data = write(record)
        for key, compute in computed:
            data[key] = compute(record)
        return data if in_order else {key: data[key] for key in keys}

    return unstructure


def _record_structure_factory(cls: type, converter: cattrs.Converter) -> Callable[..., Any]:
    from cattrs.gen import make_dict_structure_fn, override

    form = _FORMS.get(cls, _PLAIN)
    overrides: dict[str, Any] = {}
    nullable = []
    for field in _resolved(cls):
        load = form.load.get(field.name)
        overrides[field.name] = override(
            rename=form.rename.get(field.name),
            struct_hook=None if load is None else _ignoring_type(load),
        )
        if field.default is attrs.NOTHING and _admits_none(field.type):
            nullable.append(form.rename.get(field.name, field.name))
    read: Callable[[Mapping[str, Any], Any], Any] = make_dict_structure_fn(
        cls, converter, _cattrs_use_linecache=False, **overrides
    )
    if not nullable:
        return read
    # A missing key of an optional (``X | None``) field without a default reads as None.

    def structure(data: Mapping[str, Any], hint: Any) -> Any:
        missing = [key for key in nullable if key not in data]
        return read({**dict.fromkeys(missing, None), **data} if missing else data, hint)

    return structure


def _admits_none(hint: Any) -> bool:
    return hint is None or hint is type(None) or type(None) in typing.get_args(hint)


def _ignoring_type(load: Hook) -> Callable[[Any, Any], Any]:
    return lambda value, _: load(value)
