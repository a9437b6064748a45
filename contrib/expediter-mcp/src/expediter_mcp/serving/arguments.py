"""Checking an MCP client's arguments against the action's JSON Schema before the call.

fastmcp validates the arguments of tools it built from a Python function, not of tools a
provider describes with a schema of their own, so the server checks them here: a call whose
arguments do not fit becomes a refused call that names the argument (and still gets its
ledger row, through the host's pipeline). Secret parameters are named, never echoed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

    from expediter.hookspecs.tool import Action

__all__ = ["ArgumentCheck"]

logger = logging.getLogger(__name__)

#: How many problems one error message lists before "and N more".
PROBLEMS_LISTED = 3
#: Characters of one problem's text kept (a value echoed back can be long).
PROBLEM_CHARS = 300
#: Validators kept (one per action version offered); the cache is cleared beyond this.
VALIDATORS_KEPT = 1024
#: Keywords whose messages name properties, never a value.
_NAMES_ONLY = frozenset({"required", "additionalProperties", "dependentRequired"})


class ArgumentCheck:
    """Validates arguments against each offered action's schema (validators cached per
    action version, as the host caches its schemas)."""

    def __init__(self) -> None:
        self._validators: dict[int, tuple[Action, Validator | None]] = {}

    def problem(
        self, name: str, action: Action, schema: Mapping[str, Any], arguments: Mapping[str, Any]
    ) -> str | None:
        """Why ``arguments`` do not fit ``schema`` (the schema offered as ``name``), or None."""
        validator = self._validator(action, schema)
        if validator is None:
            return None
        try:
            errors = sorted(validator.iter_errors(dict(arguments)), key=_order)
        except Exception as exc:  # a reference loop, an unresolvable $ref
            logger.warning(
                "the parameters schema of %s breaks the validator (%s): not checked here",
                action.name,
                type(exc).__name__,
            )
            return None
        if not errors:
            return None
        secret = action.secret_parameters
        listed = [_describe(error, secret) for error in errors[:PROBLEMS_LISTED]]
        more = len(errors) - len(listed)
        text = "; ".join(listed) + (f"; and {more} more" if more > 0 else "")
        return f"invalid arguments for {name}: {text}"

    def _validator(self, action: Action, schema: Mapping[str, Any]) -> Validator | None:
        cached = self._validators.get(id(action))
        if cached is not None and cached[0] is action:
            return cached[1]
        import referencing
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for

        document = dict(schema)
        kind = validator_for(document)
        validator: Validator | None
        try:
            kind.check_schema(document)
            # An empty registry: a $ref outside the schema (an MCP server's schema may have
            # one) is unresolvable, never fetched past the egress guard.
            validator = kind(document, registry=referencing.Registry())
        except SchemaError as exc:
            # The tool's own schema is broken: the pipeline's checks still apply.
            logger.warning("the parameters schema of %s is invalid: %s", action.name, exc.message)
            validator = None
        if len(self._validators) >= VALIDATORS_KEPT:
            self._validators.clear()
        self._validators[id(action)] = (action, validator)
        return validator


def _order(error: ValidationError) -> tuple[list[str], str]:
    return [str(part) for part in error.absolute_path], str(error.validator)


def _describe(error: ValidationError, secret: frozenset[str]) -> str:
    """One problem: the argument's path and what is wrong; with secret parameters in the
    action, what the schema wants instead of the value that was given."""
    path = [str(part) for part in error.absolute_path]
    if secret and error.validator not in _NAMES_ONLY:
        wanted = repr(error.validator_value)
        message = f"does not match the schema ({error.validator}: {wanted})"
    else:
        message = error.message
    if len(message) > PROBLEM_CHARS:
        message = message[: PROBLEM_CHARS - 3] + "..."
    if not path:
        return message  # "'text' is a required property", "... ('x' was unexpected)"
    return f"argument {'.'.join(path)!r}: {message}"
