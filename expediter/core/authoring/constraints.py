"""What ``Annotated`` metadata says about a parameter: texts, pydantic's ``Field`` and the
annotated-types constraints (``Ge``, ``Interval``, ``MinLen``...), as JSON Schema keywords for the
model and as a check the host makes before the function runs.

Neither pydantic nor annotated-types is imported here: an object of theirs exists only once its
author imported the library, so it is recognised through ``sys.modules`` (a tool with plain
types never loads them). Metadata of theirs that cannot be honoured is refused when the tool
loads (a ``SchemaError`` naming it), never dropped.
"""

from __future__ import annotations

import collections.abc
import logging
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Literal

import attrs

from expediter.core.records.text import echo
from expediter.errors import SchemaError

__all__ = ["ConstraintViolation", "Metadata", "is_field_info", "read_metadata"]

logger = logging.getLogger(__name__)

#: What a constraint applies to: the JSON type of the values it checks.
Kind = Literal["number", "string", "array", "object"]


class ConstraintViolation(ValueError):
    """A value of the right type that breaks a constraint (``must be <= 10 (maximum)``).

    ``message`` never quotes the value (it may be a secret); ``shown()`` may (bounded).
    """

    def __init__(self, message: str, shown: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self._shown = shown

    def shown(self, secret_names: AbstractSet[str] = frozenset()) -> str:
        """The message with the offending value (or its length) added."""
        return self.message if self._shown is None else self._shown


@attrs.frozen
class Metadata:
    """What one ``Annotated`` hint's metadata says about its values."""

    #: Descriptions, in order (plain strings, ``Field(description=...)``, ``doc(...)``).
    texts: tuple[str, ...] = ()
    #: JSON Schema constraint keywords for the type (``minimum``, ``maxLength``, ``minItems``...).
    keywords: Mapping[str, Any] = attrs.field(factory=dict)
    #: Annotation keywords from ``Field``: ``title``, ``examples``, ``deprecated``.
    annotations: Mapping[str, Any] = attrs.field(factory=dict)
    #: ``Field(json_schema_extra=...)``: a dict merged into the schema, or a callable given it.
    extra: Any = None
    #: ``allow_inf_nan=False``: infinities and NaN are refused.
    finite: bool = False

    def check(self) -> Callable[[Any], None] | None:
        """A function raising ConstraintViolation for a converted value that breaks a
        constraint (None passes: it belongs to an ``Optional``), or None when there are none."""
        rules = [_rule(keyword, bound) for keyword, bound in self.keywords.items()]
        if self.finite:
            rules.append((_is_finite, "must be a finite number", echo))
        if not rules:
            return None

        def check(value: Any) -> None:
            if value is None:
                return
            for test, text, got in rules:
                if not test(value):
                    raise ConstraintViolation(text, f"{text}, got {got(value)}")

        return check


_Rule = tuple[Callable[[Any], bool], str, Callable[[Any], str]]
_UNITS = {
    "Length": ("character", "characters"),
    "Items": ("item", "items"),
    "Properties": ("property", "properties"),
}


def _rule(keyword: str, bound: Any) -> _Rule:
    """How one keyword is checked, what it says when broken, and how the value is shown."""
    if keyword == "minimum":
        return (lambda value: value >= bound), f"must be >= {bound!r} (minimum)", echo
    if keyword == "exclusiveMinimum":
        return (lambda value: value > bound), f"must be > {bound!r} (exclusiveMinimum)", echo
    if keyword == "maximum":
        return (lambda value: value <= bound), f"must be <= {bound!r} (maximum)", echo
    if keyword == "exclusiveMaximum":
        return (lambda value: value < bound), f"must be < {bound!r} (exclusiveMaximum)", echo
    if keyword == "multipleOf":
        return (
            (lambda value: _is_multiple(value, bound)),
            f"must be a multiple of {bound!r} (multipleOf)",
            echo,
        )
    if keyword == "pattern":
        compiled = re.compile(bound)
        return (
            (lambda value: compiled.search(value) is not None),
            f"must match the pattern {echo(bound)} (pattern)",
            echo,
        )
    unit = _UNITS[keyword[3:]][0 if bound == 1 else 1]
    if keyword.startswith("min"):
        return (
            (lambda value: len(value) >= bound),
            f"must have at least {bound} {unit} ({keyword})",
            lambda value: str(len(value)),
        )
    return (
        (lambda value: len(value) <= bound),
        f"must have at most {bound} {unit} ({keyword})",
        lambda value: str(len(value)),
    )


def _is_multiple(value: Any, factor: Any) -> bool:
    if isinstance(value, int) and isinstance(factor, int):
        return value % factor == 0
    quotient = value / factor
    return math.isfinite(quotient) and abs(quotient - round(quotient)) <= 1e-9 * max(
        1.0, abs(quotient)
    )


def _is_finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def is_field_info(value: Any) -> bool:
    """Whether a value is a pydantic ``FieldInfo`` (what ``pydantic.Field(...)`` returns)."""
    fields = sys.modules.get("pydantic.fields")
    return fields is not None and isinstance(value, fields.FieldInfo)


def read_metadata(bare: Any, metadata: Sequence[Any], where: str, *, warn: bool = True) -> Metadata:
    """Read an ``Annotated`` hint's metadata for values of type ``bare``; raise SchemaError
    for what cannot be honoured (and, with ``warn``, log what is honoured only in part)."""
    reader = _Reader(where, warn)
    for item in metadata:
        reader.read(item)
    return reader.finish(bare)


#: ``Field`` options honoured besides the constraints (which pydantic keeps in ``metadata``).
_FIELD_OPTIONS = frozenset({"description", "title", "examples", "deprecated", "json_schema_extra"})
#: ``Field`` options pydantic turns into ``metadata`` items (read from there).
_CONSTRAINT_OPTIONS = frozenset(
    {"gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern", "strict"}
    | {"allow_inf_nan", "max_digits", "decimal_places", "union_mode", "coerce_numbers_to_str"}
)
_SUPPORTED = (
    "supported: description, title, examples, deprecated, json_schema_extra, and the "
    "constraints gt, ge, lt, le, multiple_of, min_length, max_length, pattern, strict=True, "
    "allow_inf_nan"
)
_INSTEAD = (
    "check the value in the function (raise expediter.ToolError), or take a pydantic "
    "BaseModel parameter, which pydantic validates itself"
)
#: annotated-types' bound classes: their attribute, and the keyword it becomes.
_BOUNDS = {
    "Gt": ("gt", "exclusiveMinimum"),
    "Ge": ("ge", "minimum"),
    "Lt": ("lt", "exclusiveMaximum"),
    "Le": ("le", "maximum"),
}


class _Reader:
    """Collects what a hint's metadata items say, refusing what cannot be honoured."""

    def __init__(self, where: str, warn: bool) -> None:
        self.where = where
        self.warn = warn
        self.texts: list[str] = []
        #: ``(source, keyword, bound)`` for each constraint, kind-independent keywords
        #: (``minimum``, ``minLength`` for any length, ``pattern``).
        self.constraints: list[tuple[str, str, Any]] = []
        self.annotations: dict[str, Any] = {}
        self.extra: Any = None
        self.finite = False

    def read(self, item: Any) -> None:
        if isinstance(item, str):
            if item.strip():
                self.texts.append(item.strip())
            return
        module = type(item).__module__ or ""
        if module in ("typing_extensions", "annotated_types", "typing") and isinstance(
            getattr(item, "documentation", None), str
        ):
            if item.documentation.strip():
                self.texts.append(item.documentation.strip())
            return
        if is_field_info(item):
            self._field(item)
            return
        if getattr(item, "__is_annotated_types_grouped_metadata__", False) is True:
            for part in typing.cast(Iterable[Any], item):
                self.read(part)
            return
        if module.split(".")[0] == "pydantic":  # some subclass annotated-types' classes
            self._pydantic(item)
            return
        known = sys.modules.get("annotated_types")
        if known is not None and isinstance(item, known.BaseMetadata):
            self._annotated_type(item)
        # Anything else is not ours to read (expediter.Secret, a framework's own marker).

    def _refuse(self, what: str) -> typing.NoReturn:
        raise SchemaError(f"{self.where}: {what}")

    def _annotated_type(self, item: Any) -> None:
        name = type(item).__name__
        if name in _BOUNDS:
            attribute, keyword = _BOUNDS[name]
            self._bound(repr(item), keyword, getattr(item, attribute))
        elif name == "MultipleOf":
            self._bound(repr(item), "multipleOf", item.multiple_of, positive=True)
        elif name in ("MinLen", "MaxLen"):
            attribute = "min_length" if name == "MinLen" else "max_length"
            self._length(repr(item), f"{attribute[:3]}Length", getattr(item, attribute))
        else:
            self._refuse(
                f"{item!r} cannot be expressed in JSON Schema, so the model would never see "
                f"it; {_INSTEAD}"
            )

    def _bound(self, source: str, keyword: str, bound: Any, *, positive: bool = False) -> None:
        if isinstance(bound, bool) or not isinstance(bound, int | float):
            self._refuse(f"{source}: {keyword} must be a number, not {type(bound).__name__}")
        if not math.isfinite(bound):
            self._refuse(f"{source}: {keyword} must be a finite number (JSON has no {bound!r})")
        if positive and bound <= 0:
            self._refuse(f"{source}: {keyword} must be positive")
        self.constraints.append((source, keyword, bound))

    def _length(self, source: str, keyword: str, bound: Any) -> None:
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
            self._refuse(f"{source}: {keyword} must be a non-negative integer")
        self.constraints.append((source, keyword, bound))

    def _pattern(self, source: str, pattern: Any) -> None:
        text = getattr(pattern, "pattern", pattern)
        if not isinstance(text, str):
            self._refuse(f"{source}: pattern must be a string")
        try:
            re.compile(text)
        except re.error as exc:
            self._refuse(f"{source}: pattern {echo(text)} is not a regular expression ({exc})")
        self.constraints.append((source, "pattern", text))

    def _strict(self, strict: Any) -> None:
        if strict is False and self.warn:
            logger.warning(
                "%s: strict=False is not honoured: arguments are always checked strictly "
                "against the schema",
                self.where,
                extra={"where": self.where},
            )

    def _field(self, field: Any) -> None:
        options = _set_options(field)
        if options & {"default", "default_factory"}:
            self._refuse(
                "a default inside Annotated[..., Field(...)] is not supported: give it as the "
                "parameter's default (name: Annotated[T, Field(...)] = default)"
            )
        refused = sorted(options - _FIELD_OPTIONS - {"alias_priority"})
        if refused:
            self._refuse(
                f"pydantic Field option(s) {', '.join(refused)} cannot be honoured for a tool "
                f"argument ({_SUPPORTED})"
            )
        if isinstance(field.description, str) and field.description.strip():
            self.texts.append(field.description.strip())
        if field.title is not None:
            self.annotations["title"] = field.title
        if field.examples is not None:
            self.annotations["examples"] = field.examples
        if field.deprecated is not None and field.deprecated is not False:
            self.annotations["deprecated"] = True
        if field.json_schema_extra is not None:
            self.extra = field.json_schema_extra
        for item in field.metadata:
            self.read(item)

    def _pydantic(self, item: Any) -> None:
        name = type(item).__name__
        if name == "Strict":
            self._strict(item.strict)
        elif name == "AllowInfNan":
            self.finite = self.finite or item.allow_inf_nan is False
        elif name == "_PydanticGeneralMetadata":
            for key, value in vars(item).items():
                if value is None:
                    continue
                if key == "pattern":
                    self._pattern(f"pattern={value!r}", value)
                elif key == "strict":
                    self._strict(value)
                elif key == "allow_inf_nan":
                    self.finite = self.finite or value is False
                else:
                    self._refuse(
                        f"pydantic option {key}={value!r} cannot be honoured for a tool argument "
                        f"({_SUPPORTED})"
                    )
        else:
            self._refuse(
                f"pydantic's {name} cannot be honoured for a tool argument: expediter checks "
                f"arguments itself, against the JSON Schema; {_INSTEAD}"
            )

    def finish(self, bare: Any) -> Metadata:
        kind = _kind(bare, self.constraints, self.where)
        keywords: dict[str, Any] = {}
        for _, keyword, bound in self.constraints:
            if keyword in ("minLength", "maxLength"):
                keyword = keyword[:3] + _LENGTH[typing.cast(Kind, kind)]
            if keyword not in keywords:
                keywords[keyword] = bound
            elif keyword.startswith(("min", "exclusiveMin")):  # several: the strictest holds
                keywords[keyword] = max(keywords[keyword], bound)
            elif keyword.startswith(("max", "exclusiveMax")):
                keywords[keyword] = min(keywords[keyword], bound)
            elif keywords[keyword] != bound:  # multipleOf, pattern
                self._refuse(f"two different {keyword} constraints; JSON Schema has room for one")
        _refuse_contradictions(keywords, self.where)
        return Metadata(
            texts=tuple(self.texts),
            keywords=keywords,
            annotations=self.annotations,
            extra=self.extra,
            finite=self.finite,
        )


#: A length constraint's keyword suffix for each kind of value.
_LENGTH: dict[Kind, str] = {"string": "Length", "array": "Items", "object": "Properties"}


def _kind(bare: Any, constraints: list[tuple[str, str, Any]], where: str) -> Kind | None:
    """The one kind of value the constraints check, refusing any they do not apply to."""
    if not constraints:
        return None
    kinds = _kinds(bare)
    only = next(iter(kinds)) if len(kinds) == 1 else None
    for source, keyword, _ in constraints:
        if keyword == "pattern":
            allowed, words = frozenset({"string"}), "strings"
        elif keyword in ("minLength", "maxLength"):
            allowed, words = frozenset(_LENGTH), "strings, arrays and objects"
        else:
            allowed, words = frozenset({"number"}), "numbers"
        if only not in allowed:
            raise SchemaError(f"{where}: {source} applies to {words} only, not to {_name(bare)}")
    return typing.cast(Kind, only)


_ARRAYS: tuple[Any, ...] = (
    list,
    tuple,
    set,
    frozenset,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Set,
    collections.abc.MutableSet,
)
_OBJECTS: tuple[Any, ...] = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _kinds(bare: Any) -> set[str]:
    """The kinds of the values a (bare) type converts to; ``null`` left out."""
    while typing.get_origin(bare) is typing.Annotated:
        bare = bare.__origin__
    origin = typing.get_origin(bare)
    if origin is typing.Union or origin is types.UnionType:
        found: set[str] = set()
        for member in typing.get_args(bare):
            if member is not type(None):
                found |= _kinds(member)
        return found
    if bare is bool:
        return {"boolean"}
    if bare in (int, float):
        return {"number"}
    if bare is str:
        return {"string"}
    if bare in _ARRAYS or origin in _ARRAYS:
        return {"array"}
    if bare in _OBJECTS or origin in _OBJECTS:
        return {"object"}
    return {f"other {_name(bare)}"}


def _name(hint: Any) -> str:
    name = getattr(hint, "__name__", None)
    return name if isinstance(name, str) and typing.get_origin(hint) is None else repr(hint)


def _refuse_contradictions(keywords: Mapping[str, Any], where: str) -> None:
    """Refuse bounds no value can meet (``ge=5, le=1``): a tool nobody can call is a bug."""
    lower = _tightest(keywords, "minimum", "exclusiveMinimum", max)
    upper = _tightest(keywords, "maximum", "exclusiveMaximum", min)
    if lower is not None and upper is not None:
        (low, low_open), (high, high_open) = lower, upper
        if low > high or (low == high and (low_open or high_open)):
            raise SchemaError(
                f"{where}: the constraints contradict each other: no value is "
                f"{'>' if low_open else '>='} {low!r} and {'<' if high_open else '<='} {high!r}"
            )
    for suffix in _LENGTH.values():
        least, most = keywords.get(f"min{suffix}"), keywords.get(f"max{suffix}")
        if least is not None and most is not None and least > most:
            raise SchemaError(
                f"{where}: the constraints contradict each other: min{suffix} {least} is more "
                f"than max{suffix} {most}"
            )


def _tightest(
    keywords: Mapping[str, Any], closed: str, open_: str, pick: Callable[..., Any]
) -> tuple[Any, bool] | None:
    """The bound that decides (``minimum`` or ``exclusiveMinimum``), and whether it is open."""
    bounds = [(keywords[closed], False)] if closed in keywords else []
    if open_ in keywords:
        bounds.append((keywords[open_], True))
    if not bounds:
        return None
    value = pick(bound for bound, _ in bounds)
    return value, any(bound == value and is_open for bound, is_open in bounds)


def _set_options(field: Any) -> set[str]:
    """The public options a ``FieldInfo`` was given (those differing from a bare ``Field()``)."""
    fields = sys.modules["pydantic.fields"]
    blank = fields.Field()
    names = [
        name
        for klass in type(field).__mro__
        for name in getattr(klass, "__slots__", ())
        if not name.startswith("_") and name not in ("annotation", "metadata")
    ]
    if not names:  # a pydantic without slots on FieldInfo: what it says it was given
        given = set(getattr(field, "_attributes_set", None) or ())
        return given - _CONSTRAINT_OPTIONS - {"annotation"}
    found = set()
    for name in names:
        try:
            differs = bool(getattr(field, name, None) != getattr(blank, name, None))
        except Exception:
            differs = True
        if differs:
            found.add(name)
    return found
