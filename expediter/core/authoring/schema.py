"""Turn Python type hints into JSON Schema for an action's parameters."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, final

import attrs

from expediter.core.authoring.constraints import Metadata, is_field_info, read_metadata
from expediter.core.authoring.docstrings import parse_docstring
from expediter.core.authoring.pydantic_models import (
    OWNED_BY_PYDANTIC,
    is_base_model,
    is_v1_model,
    model_json_schema,
    renamed_references,
)
from expediter.errors import SchemaError

__all__ = [
    "REQUIRED",
    "Secret",
    "is_typed_dict",
    "json_default",
    "marks_secret",
    "object_fields",
    "schema_for",
    "strip_annotated",
]

_PRIMITIVES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
}
_SEQUENCES = (list, Sequence, typing.Sequence, typing.List)  # noqa: UP006
_SETS = (set, frozenset, typing.Set, typing.FrozenSet)  # noqa: UP006
_MAPPINGS = (dict, Mapping, typing.Mapping, typing.Dict)  # noqa: UP006
#: ``json_default`` found no JSON form for a default value.
_NO_JSON = object()
#: ``object_fields``: the field has no default (the model must give it).
REQUIRED = object()
#: ``object_fields``: the field has a default computed per instance (optional, not shown).
_COMPUTED = object()


@final
class Secret:
    """Marks a parameter (or a record field) secret: ``Annotated[str, expediter.Secret]``.

    Its schema property gets ``"writeOnly": true``; its value is hidden in events, the ledger
    and logs (``Action.secret_parameters``), and argument errors never quote it.
    """

    def __repr__(self) -> str:
        return "expediter.Secret"

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> Any:
        """Inside a pydantic model too, a secret field is ``"writeOnly": true``."""
        schema = handler(core_schema)
        schema["writeOnly"] = True
        return schema


def _is_secret_marker(item: Any) -> bool:
    return item is Secret or isinstance(item, Secret)


def marks_secret(hint: Any) -> bool:
    """Whether a hint carries ``Secret`` anywhere outside records (``Annotated[str, Secret]``,
    ``Annotated[str, Secret] | None``, ``list[Annotated[str, Secret]]``): then the whole value
    of the parameter is secret."""
    hint, metadata = strip_annotated(hint)
    if any(_is_secret_marker(item) for item in metadata):
        return True
    if typing.get_origin(hint) is typing.Literal:
        return False
    return any(marks_secret(arg) for arg in typing.get_args(hint) if arg is not Ellipsis)


def strip_annotated(hint: Any) -> tuple[Any, list[Any]]:
    """Return the bare type of a hint and the metadata of any ``Annotated`` around it."""
    metadata: list[Any] = []
    while typing.get_origin(hint) is typing.Annotated:
        metadata.extend(hint.__metadata__)
        hint = hint.__origin__
    return hint, metadata


def json_default(value: Any) -> Any:
    """Return a default value as JSON, or a sentinel when it has no JSON form."""
    if isinstance(value, enum.Enum):
        return json_default(value.value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        items = [json_default(item) for item in value]
        return _NO_JSON if any(item is _NO_JSON for item in items) else items
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        converted = {key: json_default(item) for key, item in value.items()}
        return _NO_JSON if any(item is _NO_JSON for item in converted.values()) else converted
    return _NO_JSON


def _with_default(schema: dict[str, Any], default: Any) -> dict[str, Any]:
    converted = json_default(default)
    if converted is not _NO_JSON:
        schema["default"] = converted
    return schema


def _annotate(schema: dict[str, Any], found: Metadata, where: str) -> dict[str, Any]:
    """Add what ``Annotated`` metadata says: description, constraint keywords, annotations."""
    if found.texts:
        schema["description"] = " ".join(found.texts)
    if found.keywords:
        variants = schema.get("anyOf") if "type" not in schema else None
        for target in variants if isinstance(variants, list) else [schema]:
            if target != {"type": "null"}:
                target.update(found.keywords)
    for key, value in found.annotations.items():
        converted = json_default(value)
        if converted is _NO_JSON:
            raise SchemaError(f"{where}: Field({key}=...) has no JSON form")
        schema[key] = converted
    extra = found.extra
    if callable(extra):
        try:
            extra(schema)
        except Exception as exc:
            raise SchemaError(f"{where}: Field(json_schema_extra=...) raised {exc!r}") from exc
    elif extra is not None:
        converted = json_default(extra)
        if not isinstance(converted, dict):
            raise SchemaError(
                f"{where}: Field(json_schema_extra=...) must be a JSON object or a callable"
            )
        schema.update(converted)
    return schema


def is_typed_dict(hint: Any) -> bool:
    """Whether a hint is a ``TypedDict`` class (``typing``'s or ``typing_extensions``')."""
    if typing.is_typeddict(hint):
        return True
    extensions = sys.modules.get("typing_extensions")
    return extensions is not None and bool(extensions.is_typeddict(hint))


#: ``TypedDict`` key qualifiers, unwrapped (``required`` comes from the class's keys).
_QUALIFIERS = frozenset({"Required", "NotRequired", "ReadOnly"})


def _unqualified(hint: Any) -> Any:
    bare, metadata = strip_annotated(hint)
    if getattr(typing.get_origin(bare), "_name", None) in _QUALIFIERS:
        inner = _unqualified(typing.get_args(bare)[0])
        return typing.Annotated[(inner, *metadata)] if metadata else inner
    return hint


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    kinds = {_PRIMITIVES[type(value)]["type"] for value in values if type(value) in _PRIMITIVES}
    schema: dict[str, Any] = {}
    if len(kinds) == 1:
        schema["type"] = kinds.pop()
    schema["enum"] = values
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if set(schema) == {"type"} and isinstance(schema["type"], str):
        return {"type": [schema["type"], "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def object_fields(cls: type) -> list[tuple[str, Any, Any, dict[str, Any]]]:
    """Return ``(name, type hint, default, metadata)`` for the fields of an attrs class, a
    dataclass or a ``TypedDict`` (whose keys that are not required are optional, unshown)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    if is_typed_dict(cls):
        required = cls.__required_keys__  # type: ignore[attr-defined]
        return [
            (name, _unqualified(hint), REQUIRED if name in required else _COMPUTED, {})
            for name, hint in hints.items()
        ]
    if attrs.has(cls):
        result = []
        for field in attrs.fields(cls):
            default = field.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = _COMPUTED if default.takes_self else default.factory()
            elif default is attrs.NOTHING:
                default = REQUIRED
            name = field.alias or field.name
            result.append((name, hints.get(field.name, Any), default, dict(field.metadata)))
        return result
    result = []
    for dc_field in dataclasses.fields(cls):
        if dc_field.default is not dataclasses.MISSING:
            default = dc_field.default
        elif dc_field.default_factory is not dataclasses.MISSING:
            default = dc_field.default_factory()
        else:
            default = REQUIRED
        metadata = dict(dc_field.metadata)
        result.append((dc_field.name, hints.get(dc_field.name, Any), default, metadata))
    return result


def _def_name(cls: type, owners: dict[str, object]) -> str:
    name = cls.__name__
    suffix = 2
    while name in owners and owners[name] is not cls:
        name = f"{cls.__name__}{suffix}"
        suffix += 1
    owners[name] = cls
    return name


class _Builder:
    """Builds one schema, collecting the ``$defs`` its record types need."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        #: Who each definition's name belongs to: a record class, or pydantic.
        self.owners: dict[str, object] = {}
        #: The definition name of each pydantic model already adopted.
        self.models: dict[type, str] = {}

    def build(self, hint: Any, where: str) -> dict[str, Any]:
        hint, metadata = strip_annotated(hint)
        schema = self._bare(hint, where)
        if not metadata:
            return schema
        return _annotate(schema, read_metadata(hint, metadata, where), where)

    def _bare(self, hint: Any, where: str) -> dict[str, Any]:
        if hint is Any or hint is typing.Any or hint is object:
            return {}
        if hint in _PRIMITIVES:
            return dict(_PRIMITIVES[hint])
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin is typing.Literal:
            values = [json_default(value) for value in args]
            return _enum_schema(values)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _enum_schema([json_default(member.value) for member in hint])
        if origin is typing.Union or origin is types.UnionType:
            members = [arg for arg in args if arg is not type(None)]
            nullable = len(members) != len(args)
            if len(members) == 1:
                schema = self.build(members[0], where)
                return _nullable(schema) if nullable else schema
            variants = [self.build(member, where) for member in members]
            return {"anyOf": variants + ([{"type": "null"}] if nullable else [])}
        if origin in _SEQUENCES or hint in (list, tuple):
            item = self.build(args[0], where) if args else {}
            return {"type": "array", "items": item}
        if origin in _SETS or hint in (set, frozenset):
            item = self.build(args[0], where) if args else {}
            return {"type": "array", "items": item, "uniqueItems": True}
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.build(args[0], where)}
            items = [self.build(arg, where) for arg in args]
            return {
                "type": "array",
                "prefixItems": items,
                "minItems": len(items),
                "maxItems": len(items),
            }
        if origin in _MAPPINGS or hint is dict:
            if args and strip_annotated(args[0])[0] is not str:
                raise SchemaError(f"{where}: mapping keys must be str for JSON, not {args[0]!r}")
            value = self.build(args[1], where) if args else {}
            return {"type": "object", "additionalProperties": value}
        if isinstance(hint, type) and (attrs.has(hint) or dataclasses.is_dataclass(hint)):
            return self._record(hint, where)
        if is_typed_dict(hint):
            return self._record(hint, where)
        if is_base_model(hint):
            return self._model(hint, where)
        if is_v1_model(hint):
            raise SchemaError(
                f"{where}: {hint.__name__} is a pydantic v1 model (pydantic.v1.BaseModel); "
                "use a pydantic v2 BaseModel"
            )
        raise SchemaError(
            f"{where}: unsupported type hint {hint!r}; use str, int, float, bool, None, Literal, "
            "an Enum, list[T], dict[str, T], an attrs class or a dataclass (or a TypedDict, a "
            "pydantic BaseModel)"
        )

    def _model(self, cls: type, where: str) -> dict[str, Any]:
        """A pydantic model: pydantic's own schema, its definitions adopted into ``$defs``."""
        known = self.models.get(cls)
        if known is None:
            schema = model_json_schema(cls, where)
            defs = dict(schema.pop("$defs", None) or {})
            reference = schema.get("$ref")
            if set(schema) == {"$ref"} and isinstance(reference, str):
                top = reference.removeprefix("#/$defs/")  # recursive: pydantic refers to it
            else:
                top = cls.__name__
                while top in defs:
                    top += "_"
                defs[top] = schema
            known = self._adopt(defs)[top]
            self.models[cls] = known
        return {"$ref": f"#/$defs/{known}"}

    def _adopt(self, defs: dict[str, Any]) -> dict[str, str]:
        """Add one pydantic schema's definitions; a name taken by a different definition
        (a record's, another model's) gets a number. Returns each old name's new one."""
        names = {name: name for name in defs}
        changed = True
        while changed:  # renaming one changes those referring to it: until nothing clashes
            changed = False
            for name, body in defs.items():
                taken = self.defs.get(names[name])
                if taken is None or taken == renamed_references(body, names):
                    continue
                suffix = 2
                while f"{name}{suffix}" in self.defs or f"{name}{suffix}" in names.values():
                    suffix += 1
                names[name] = f"{name}{suffix}"
                changed = True
        for name, body in defs.items():
            self.defs[names[name]] = renamed_references(body, names)
            self.owners.setdefault(names[name], OWNED_BY_PYDANTIC)
        return names

    def _record(self, cls: type, where: str) -> dict[str, Any]:
        name = _def_name(cls, self.owners)
        ref = {"$ref": f"#/$defs/{name}"}
        if name in self.defs:
            return ref
        self.defs[name] = {}  # placeholder so recursive records terminate
        properties: dict[str, Any] = {}
        required: list[str] = []
        try:
            fields = object_fields(cls)
        except Exception as exc:  # an unresolvable forward reference, most often
            raise SchemaError(
                f"{where}: cannot resolve the type hints of {cls.__name__} ({exc})"
            ) from exc
        for field_name, hint, default, metadata in fields:
            prop = self.build(hint, f"{where} -> {cls.__name__}.{field_name}")
            if isinstance(metadata.get("description"), str):
                prop.setdefault("description", metadata["description"])
            secret = marks_secret(hint)
            if secret:
                prop["writeOnly"] = True
            if default is REQUIRED:
                required.append(field_name)
            elif not secret:  # a secret's default is not shown to the model either
                _with_default(prop, default)
            properties[field_name] = prop
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        summary = parse_docstring(cls.__doc__).summary
        if summary and not summary.startswith(f"{cls.__name__}("):  # dataclass's generated doc
            schema["description"] = summary
        self.defs[name] = schema
        return ref


def schema_for(
    parameters: Sequence[tuple[str, Any, Any, str | None]],
    *,
    where: str,
    allow_extra: bool = False,
    extra_hint: Any = Any,
) -> dict[str, Any]:
    """Return an object schema for ``(name, hint, default, description)`` parameters.

    A parameter whose default is ``inspect.Parameter.empty`` is required; one marked
    ``Secret`` is ``"writeOnly": true``. With ``allow_extra``, undeclared keys are accepted,
    their values of type ``extra_hint`` (a ``**kwargs: T`` annotation; ``Any``: any value).
    """
    import inspect

    builder = _Builder()
    extra: bool | dict[str, Any] = allow_extra
    if allow_extra and strip_annotated(extra_hint)[0] not in (Any, typing.Any, object):
        extra = builder.build(extra_hint, f"{where}: the values of **kwargs")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, hint, default, description in parameters:
        if is_field_info(default):
            raise SchemaError(
                f"{where}: parameter {name!r}: a pydantic Field as the default is not supported: "
                f"write `{name}: Annotated[T, Field(...)] = <default>`"
            )
        prop = builder.build(hint, f"{where}: parameter {name!r}")
        if description and "description" not in prop:
            prop["description"] = description
        secret = marks_secret(hint)
        if secret:
            # JSON Schema's word for a value that is never read back: hidden once recorded.
            prop["writeOnly"] = True
        if default is inspect.Parameter.empty:
            required.append(name)
        elif not secret:  # a secret's default is not shown to the model either
            _with_default(prop, default)
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = extra
    if builder.defs:
        schema["$defs"] = builder.defs
    return schema
