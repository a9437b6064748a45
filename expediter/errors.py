"""The exceptions expediter raises; every message says what to do next."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from expediter.hookspecs.tool import ToolError

__all__ = [
    "ActionNotFound",
    "ApprovalRequired",
    "ArgumentError",
    "ConfigError",
    "CredentialError",
    "DecisionRefused",
    "EgressBlocked",
    "ExpediterError",
    "IdentifierError",
    "InstanceNotFound",
    "LedgerError",
    "PluginLoadError",
    "SchemaError",
    "ToolConflict",
    "ToolNotFound",
    "UnknownProvider",
]


class ExpediterError(Exception):
    """Base class of every expediter error."""


class ToolNotFound(ExpediterError, LookupError):
    """No tool of that name is offered (not installed, disabled, failed to load, or in conflict)."""


class ToolConflict(ToolNotFound):
    """Several packs register the same tool name, so none of them is offered."""


class ActionNotFound(ExpediterError, LookupError):
    """The tool has no active action of that name."""


class ArgumentError(ExpediterError, ToolError):
    """The arguments for an action are malformed: wrong type, missing, or not declared."""

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        ToolError.__init__(self, message)
        self.parameter = parameter

    @classmethod
    def unknown(cls, owner: str, names: Sequence[str], expected: Iterable[str]) -> ArgumentError:
        """Arguments ``owner`` does not declare, named with the ones it expects."""
        listed = ", ".join(expected) or "none"
        noun = "argument" if len(names) == 1 else "arguments"
        from expediter.core.records.text import echo

        quoted = ", ".join(echo(name, 60) for name in names[:10])
        if len(names) > 10:
            quoted += f" and {len(names) - 10} more"
        return cls(f"{owner}: unknown {noun} {quoted} (expected: {listed})", parameter=names[0])


class SchemaError(ExpediterError, TypeError):
    """A tool's signature cannot be turned into a JSON Schema (an unsupported type hint)."""


class UnknownProvider(ExpediterError, ValueError):
    """The provider name is not one expediter speaks."""


class PluginLoadError(ExpediterError):
    """A tool pack could not be loaded (raised only with EXPEDITER_STRICT_PLUGINS=1)."""


class ApprovalRequired(ExpediterError):
    """The call needs a human's approval before it may run."""


class DecisionRefused(ExpediterError, PermissionError):
    """The host's ``authorize_decision`` hook refused this approver's decision on a call."""


class LedgerError(ExpediterError):
    """The ledger could not record or read a call."""


class EgressBlocked(ExpediterError):
    """An outbound request was refused by the egress guard (``expediter.core.netguard``).

    Its text is the generic message the model sees; ``reason`` says why (the address, the range
    or the rule) and ``detail`` adds what an operator can do about it, for the ledger, the logs
    and the command line only. ``address`` is the refused address, when an address was.
    """

    #: What the model is told, whatever the reason.
    MESSAGE = "blocked by egress policy"

    def __init__(self, reason: str, *, address: str | None = None) -> None:
        super().__init__(self.MESSAGE)
        self.reason = reason
        self.address = address

    def __reduce__(self) -> Any:
        return _egress_blocked, (type(self), self.reason, self.address)

    @property
    def hint(self) -> str | None:
        """How an operator allows the refused address (None when no address was refused)."""
        address = getattr(self, "address", None)
        return self.hint_for([address]) if isinstance(address, str) else None

    @property
    def detail(self) -> str:
        """The refusal as an operator reads it: the message, the reason and the hint."""
        reason = self.reason if isinstance(self.reason, str) else "(no reason given)"
        hint = self.hint
        return f"{self.MESSAGE}: {reason}" + (f"; {hint}" if hint else "")

    @staticmethod
    def hint_for(addresses: Iterable[str]) -> str:
        """How an operator allows these addresses: the ``--allow-network`` options that add
        an instance (``allow_networks`` of a stored one), or ``EXPEDITER_EGRESS_ALLOW``."""
        import json

        ranges = list(dict.fromkeys(_allow_range(address) for address in addresses))
        options = " ".join(f"--allow-network {item}" for item in ranges)
        config = json.dumps({"allow_networks": ranges})
        return (
            f"an operator can allow it with `{options}` when adding the instance (a stored "
            f"one: `expediter instances set ID --config '{config}'`), or for every instance "
            f"with EXPEDITER_EGRESS_ALLOW={','.join(ranges)}"
        )


def _egress_blocked(kind: type[EgressBlocked], reason: str, address: str | None) -> EgressBlocked:
    """Unpickle a refusal (a subclass without ``address`` is made as it always was)."""
    return kind(reason) if address is None else kind(reason, address=address)


def _allow_range(address: str) -> str:
    """The narrowest range (CIDR) that allows ``address``: the address itself; an IPv4-mapped
    IPv6 address as its IPv4 form (the guard allows those by their IPv4 range)."""
    import ipaddress

    text = address.strip().strip("[]").split("%", 1)[0]
    try:
        parsed = ipaddress.ip_address(text)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return str(ipaddress.ip_network(parsed))


class ConfigError(ArgumentError):
    """A tool instance's configuration does not match the tool's ``config_requirements``
    (``parameter`` names the field)."""


class InstanceNotFound(ExpediterError, LookupError):
    """No stored tool instance has that id (or it belongs to another user)."""


class IdentifierError(ExpediterError, ValueError):
    """An id that cannot be stored exactly: a user's, an owner's, an instance's, or an
    instance's name holding NUL or a lone surrogate, longer than ``LIMIT`` characters, empty,
    or not a string. Ids are compared exactly as they are stored, so such an id is refused,
    never changed into one that may be somebody else's. ``what`` names the id ("user id")."""

    #: The most characters of an id kept exactly (the ledger's indexed keys: at most 4 UTF-8
    #: bytes each, well inside PostgreSQL's btree entry limit).
    LIMIT = 512

    def __init__(self, message: str, *, what: str = "id") -> None:
        super().__init__(message)
        self.what = what

    def __reduce__(self) -> Any:
        return _identifier_error, (type(self), str(self), self.what)

    @classmethod
    def check(cls, value: object, what: str = "user id", *, limit: int | None = LIMIT) -> str:
        """``value`` as it is stored and compared (a plain ``str``), or this error saying why
        neither database would keep it byte for byte (``limit``: the most characters; None
        for text that is no indexed id).

        Both keep any other character exactly, control characters included, so those are
        ids like any other: compared exactly, they cannot be taken for another user's.
        """
        if not isinstance(value, str):
            from expediter.core.records.text import echo

            raise cls(
                f"{what} {echo(value)} is not a string ({type(value).__name__}): an id is a "
                "string, compared exactly as given",
                what=what,
            )
        text = str.__str__(value)  # a str subclass's own equality never takes part
        if not text:
            raise cls(
                f"{what} '' is empty: the empty id would be taken for no id (None); give "
                "one with at least one character",
                what=what,
            )
        problem = _unstorable(text)
        remedy = "give one without it"
        if problem is None and limit is not None and len(text) > limit:
            problem = f"it has {len(text):,} characters, more than the {limit} kept"
            remedy = "give a shorter one"
        if problem is not None:
            from expediter.core.records.text import echo

            raise cls(
                f"{what} {echo(text, 60)} cannot be stored exactly: {problem}; ids are "
                f"compared exactly as stored, so it is refused rather than changed: {remedy}",
                what=what,
            )
        return text


def _unstorable(text: str) -> str | None:
    """What of a text neither database keeps: NUL (PostgreSQL refuses it), or a lone
    surrogate (no UTF-8 encoder takes one)."""
    if "\x00" in text:
        return "it holds NUL (U+0000)"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        point = ord(text[exc.start])
    else:
        return None
    # Python reads a byte that is not UTF-8 (of a command line, a file name) as U+DC80-U+DCFF.
    byte = point - 0xDC00
    became = f", what the undecodable byte 0x{byte:02X} becomes" if 0x80 <= byte <= 0xFF else ""
    return f"it holds a lone surrogate (U+{point:04X}{became}), which UTF-8 cannot encode"


def _identifier_error(kind: type[IdentifierError], message: str, what: str) -> IdentifierError:
    """Unpickle a refused id (its ``what`` kept)."""
    return kind(message, what=what)


class CredentialError(ExpediterError):
    """Stored credentials cannot be encrypted or decrypted: no key is configured
    (``EXPEDITER_SECRET_KEYS``), a key is an example value, or a blob was tampered with, is
    another owner's, or names a key that is not configured."""
