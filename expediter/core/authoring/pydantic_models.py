"""pydantic ``BaseModel`` parameters: pydantic's own JSON Schema, and pydantic's validation with
its errors turned into argument errors that never quote a secret.

pydantic is never imported here at module level: a model class exists only once its author
imported pydantic, so it is recognised through ``sys.modules`` (a tool with plain types never
loads it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

from cattrs.errors import AttributeValidationNote, ClassValidationError

from expediter.core.authoring.constraints import ConstraintViolation
from expediter.core.records.redaction import hide_values, is_secret_name, write_only_names
from expediter.core.records.text import ECHO_LIMIT, clean_text, echo, truncate
from expediter.errors import SchemaError

__all__ = [
    "OWNED_BY_PYDANTIC",
    "is_base_model",
    "is_v1_model",
    "model_json_schema",
    "model_validator",
    "renamed_references",
]

#: The owner of a ``$defs`` name adopted from a pydantic schema (not a record class).
OWNED_BY_PYDANTIC = object()
#: At most this many of a validation error's problems are reported.
_MOST_PROBLEMS = 100
_REFERENCE_PREFIX = "#/$defs/"


def _is_subclass(hint: Any, module: str, name: str) -> bool:
    loaded = sys.modules.get(module)
    if loaded is None or not isinstance(hint, type):
        return False
    base = getattr(loaded, name, None)
    return isinstance(base, type) and issubclass(hint, base)


def is_base_model(hint: Any) -> bool:
    """Whether a hint is a pydantic (v2) ``BaseModel`` subclass."""
    return _is_subclass(hint, "pydantic.main", "BaseModel") and hasattr(hint, "model_json_schema")


def is_v1_model(hint: Any) -> bool:
    """Whether a hint is a pydantic v1 model (``pydantic.v1.BaseModel``), which is refused."""
    return _is_subclass(hint, "pydantic.v1.main", "BaseModel")


def model_json_schema(cls: Any, where: str) -> dict[str, Any]:
    """pydantic's JSON Schema for a model (validation mode), its definitions under ``$defs``."""
    try:
        schema = cls.model_json_schema(ref_template=_REFERENCE_PREFIX + "{model}")
    except Exception as exc:
        reason = truncate(clean_text(f"{type(exc).__name__}: {exc}"), 400)
        raise SchemaError(
            f"{where}: pydantic cannot make a JSON Schema for {cls.__name__} ({reason}); "
            "fix the model so that its model_json_schema() works"
        ) from exc
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: {cls.__name__}.model_json_schema() did not return a dict")
    return schema


def renamed_references(node: Any, names: Mapping[str, str]) -> Any:
    """A schema with its ``#/$defs/OLD`` references pointing at ``names[OLD]`` (itself when
    nothing is renamed)."""
    if all(old == new for old, new in names.items()):
        return node
    if isinstance(node, dict):
        result = {key: renamed_references(value, names) for key, value in node.items()}
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith(_REFERENCE_PREFIX):
            old = reference.removeprefix(_REFERENCE_PREFIX)
            result["$ref"] = _REFERENCE_PREFIX + names.get(old, old)
        return result
    if isinstance(node, list):
        return [renamed_references(value, names) for value in node]
    return node


def model_validator(cls: Any) -> Callable[[Mapping[str, Any]], Any]:
    """A function validating a JSON object into a model instance, pydantic's errors raised as
    a cattrs ``ClassValidationError`` whose problems name their paths."""
    from pydantic_core import ValidationError  # loaded already: the model class exists

    hidden: list[frozenset[str]] = []

    def secret_names() -> frozenset[str]:
        """The model's write-only field names (``Secret``, ``SecretStr``), found once."""
        if not hidden:
            try:
                hidden.append(write_only_names(cls.model_json_schema()))
            except Exception:
                hidden.append(frozenset())
        return hidden[0]

    def validate(value: Mapping[str, Any]) -> Any:
        try:
            # The arguments are JSON: pydantic's JSON mode parses dates, UUIDs and the like
            # as the schema says, and strict mode refuses "5" for an integer as the rest of
            # expediter does.
            text = json.dumps(value)
        except (TypeError, ValueError):
            text = None
        try:
            if text is None:
                return cls.model_validate(value, strict=True)
            return cls.model_validate_json(text, strict=True)
        except ValidationError as exc:
            raise _invalid(exc, cls, value, secret_names()) from None
        except Exception as exc:  # a validator's own exception, which pydantic lets through
            reason = truncate(clean_text(f"{type(exc).__name__}: {exc}"), ECHO_LIMIT)
            secrets = _secret_values(value, secret_names())
            raise ConstraintViolation(
                f"invalid ({type(exc).__name__})", f"invalid ({hide_values(reason, secrets)})"
            ) from None

    return validate


def _invalid(exc: Any, cls: type, value: Any, secret_names: frozenset[str]) -> ClassValidationError:
    """pydantic's errors as leaves of a cattrs error (one per problem, noted with its path),
    each with a hidden form (the error type only) and a shown one with secrets masked out."""
    secrets = _secret_values(value, secret_names)
    problems: list[Exception] = []
    for error in exc.errors(include_url=False, include_context=False)[:_MOST_PROBLEMS]:
        kind = clean_text(str(error.get("type", "invalid")))[:60]
        if kind == "missing":
            problem = ConstraintViolation("missing (it is required)")
        else:
            shown = truncate(clean_text(str(error.get("msg", ""))), ECHO_LIMIT)
            given = error.get("input")
            if given is None or isinstance(given, str | int | float | bool):
                shown += f", got {echo(given)}"
            problem = ConstraintViolation(f"invalid ({kind})", hide_values(shown, secrets))
        path = _path(error.get("loc", ()))
        if path:
            note = AttributeValidationNote(f"Structuring {cls.__name__} @ {path}", path, None)
            problem.__notes__ = [note]
        problems.append(problem)
    return ClassValidationError(f"While structuring {cls.__name__}", problems, cls)


def _path(loc: Any) -> str:
    """A pydantic error location as a path (``items[0].qty``), each name bounded."""
    parts: list[str] = []
    for part in loc if isinstance(loc, tuple | list) else ():
        if isinstance(part, int) and not isinstance(part, bool):
            parts.append(f"[{part}]")
        else:
            # " @ " separates a message from its path in cattrs' lines: not inside a name.
            name = truncate(clean_text(str(part)), 40).replace(" @ ", " at ")
            parts.append(f".{name}" if parts else name)
    return "".join(parts)


def _secret_values(value: Any, secret_names: frozenset[str]) -> frozenset[str]:
    """The texts of every value under a secret name (write-only, or secret-looking), at any
    depth: what a message quoting them must mask."""
    found: set[str] = set()
    pending: list[tuple[Any, bool]] = [(value, False)]
    while pending:
        item, secret = pending.pop()
        if isinstance(item, Mapping):
            for key, child in item.items():
                inner = secret or (
                    isinstance(key, str) and (key in secret_names or is_secret_name(key))
                )
                pending.append((child, inner))
        elif isinstance(item, list | tuple):
            pending.extend((child, secret) for child in item)
        elif secret and item is not None:
            text = str(item)
            if text:
                found.update({text, repr(item)})
    return frozenset(found)
