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


class CredentialError(ExpediterError):
    """Stored credentials cannot be encrypted or decrypted: no key is configured
    (``EXPEDITER_SECRET_KEYS``), a key is an example value, or a blob was tampered with, is
    another owner's, or names a key that is not configured."""
