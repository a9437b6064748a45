"""The records a call travels in through the pipeline: its turn and its step."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, final

from expediter.core.authoring.conversion import NotJSON, to_json_value
from expediter.core.records.redaction import redact

if TYPE_CHECKING:
    from expediter.core.discovery.loading import LoadedTool
    from expediter.core.ledger import Attempt
    from expediter.core.records.calls import CallEvent, ToolCall
    from expediter.core.turns.toolset import OfferedAction
    from expediter.hookspecs.tool import Action, CallContext

__all__ = ["BareTurn", "Step", "Turn", "resume_request"]


class Turn(Protocol):
    """For whom a batch of calls runs, and how. A ``Toolset`` is one (a model's turn); a
    ``BareTurn`` stands for calls made without one (the operator's, and resumed calls)."""

    @property
    def user_id(self) -> str | None:
        """The user the calls are made for (the invoker)."""

    @property
    def headless(self) -> bool:
        """No human can be asked: calls needing approval run only when allowlisted."""

    @property
    def allowlist(self) -> frozenset[str]:
        """Instance ids or tool names that may run unasked in a headless turn."""

    @property
    def configs(self) -> Mapping[str, Mapping[str, Any]]:
        """The configuration of each configured instance, kept with a paused call."""

    @property
    def operator(self) -> bool:
        """The operator's own calls (``Host.call``): an approval prompt counts as given, a
        forced prompt or a denial still refuses the call."""

    def offered(self, name: str) -> OfferedAction | None:
        """The action offered under a name in this turn, or None."""
        ...

    def unknown_name(self, call: ToolCall) -> str:
        """The error for a call whose name does not resolve."""
        ...


@final
class BareTurn:
    """Calls made without a toolset: nothing is offered by name, the call names its tool."""

    __slots__ = ("allowlist", "configs", "headless", "operator", "user_id")

    def __init__(
        self, user_id: str | None = None, *, headless: bool = False, operator: bool = False
    ) -> None:
        self.user_id = user_id
        self.headless = headless
        self.operator = operator
        self.allowlist: frozenset[str] = frozenset()
        self.configs: Mapping[str, Mapping[str, Any]] = {}

    def offered(self, name: str) -> OfferedAction | None:
        """Nothing is offered by name."""
        return None

    def unknown_name(self, call: ToolCall) -> str:
        """What a call without a tool and action lacks."""
        return call.error or f"unknown function {call.name!r}"


@final
class Step:
    """One call on its way through the pipeline.

    A plain class whose defaults live on the class, so making one (once per call) sets only
    what every call has: the per-call turn budget (DESIGN section 9).
    """

    #: Set when the call ended (or paused) before running: the event to yield.
    final: CallEvent | None = None
    loaded: LoadedTool | None = None
    #: Built on first use (``Executor.context``).
    context: CallContext | None = None
    #: ``time.time()`` by which the call should finish, or None.
    deadline: float | None = None
    #: The action as the tool describes it.
    spec: Action | None = None
    #: The arguments the tool runs with (fixed values applied).
    run_arguments: Mapping[str, Any] | None = None
    attempt: Attempt | None = None
    redacted: Mapping[str, Any] | None = None
    #: ``time.perf_counter()`` when the tool started (None until it runs).
    started: float | None = None
    #: The ledger decision recorded when the call is proposed (e.g. ``operator``).
    decision: str | None = None
    reason: str | None = None

    def __init__(
        self, call: ToolCall, key: str, turn: Turn, message_id: str | None, run_id: str
    ) -> None:
        self.call = call
        self.key = key
        self.turn = turn
        self.message_id = message_id
        self.run_id = run_id
        self.tool = call.tool
        self.action = call.action

    @property
    def arguments(self) -> Mapping[str, Any]:
        """The arguments as the model (or the operator) gave them."""
        return self.call.arguments


def resume_request(step: Step, reason: str | None) -> dict[str, Any]:
    """What a paused call keeps in the ledger so any worker can resume it."""
    call = step.call
    request: dict[str, Any] = {
        "reason": reason,
        "call_id": call.call_id,
        "name": call.name,
        "instance_id": call.instance_id,
        "tool": call.tool,
        "action": call.action,
        "arguments": step.arguments,
        "extras": _json_extras(call.extras),
        "headless": step.turn.headless,
        "message_id": step.message_id,
        "run_id": step.run_id,
    }
    config = step.turn.configs.get(call.instance_id or "")
    if config is not None:
        request.update(_kept_config(config))
    return request


def _kept_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a paused call keeps of its instance's configuration: all of it, unless it holds
    secrets (never written to the ledger) or is not JSON; then only that it was withheld."""
    try:
        data = to_json_value(dict(config))
    except NotJSON:
        return {"config_withheld": True}
    if redact(data) != data:
        return {"config_withheld": True}
    return {"config": data}


def _json_extras(extras: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: base64.b64encode(value).decode() if isinstance(value, bytes | bytearray) else value
        for key, value in extras.items()
    }
