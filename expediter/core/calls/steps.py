"""The records a call travels in through the pipeline: its turn and its step."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, final

from expediter.core.authoring.conversion import NotJSON, to_json_value
from expediter.core.records.redaction import redact

if TYPE_CHECKING:
    from expediter.core.discovery.loading import LoadedTool
    from expediter.core.ledger import Attempt
    from expediter.core.records.calls import CallEvent, ToolCall
    from expediter.core.turns.toolset import Toolset
    from expediter.hookspecs.tool import Action, CallContext

__all__ = ["Step", "Turn", "resume_request"]


@final
class Turn:
    """For whom a batch of calls runs, and how: headless or not, what may run unasked."""

    __slots__ = ("allowlist", "configs", "headless", "operator", "toolset", "user_id")

    def __init__(
        self,
        user_id: str | None = None,
        *,
        headless: bool = False,
        allowlist: frozenset[str] = frozenset(),
        configs: Mapping[str, Mapping[str, Any]] | None = None,
        operator: bool = False,
        toolset: Toolset | None = None,
    ) -> None:
        self.user_id = user_id
        self.headless = headless
        self.allowlist = allowlist
        #: The configuration of each configured instance, kept with a paused call.
        self.configs: Mapping[str, Mapping[str, Any]] = configs or {}
        #: The operator's own call (``Host.call``): an approval prompt counts as given, a
        #: forced prompt or a denial still refuses it.
        self.operator = operator
        #: The toolset whose names the calls use (None for direct calls).
        self.toolset = toolset

    @classmethod
    def of(cls, toolset: Toolset) -> Turn:
        """The turn of a toolset's calls."""
        return cls(
            toolset.user_id,
            headless=toolset.headless,
            allowlist=toolset.allowlist,
            configs=toolset.configs,
            toolset=toolset,
        )


@final
class Step:
    """One call on its way through the pipeline (a plain slotted class: one per call)."""

    __slots__ = (
        "action",
        "attempt",
        "call",
        "context",
        "deadline",
        "decision",
        "final",
        "key",
        "loaded",
        "message_id",
        "reason",
        "redacted",
        "run_arguments",
        "run_id",
        "spec",
        "started",
        "tool",
        "turn",
    )

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
        #: Set when the call ended (or paused) before running: the event to yield.
        self.final: CallEvent | None = None
        self.loaded: LoadedTool | None = None
        #: Built on first use (``Executor.context``).
        self.context: CallContext | None = None
        #: ``time.time()`` by which the call should finish, or None.
        self.deadline: float | None = None
        #: The action as the tool describes it.
        self.spec: Action | None = None
        #: The arguments the tool runs with (fixed values applied).
        self.run_arguments: dict[str, Any] | None = None
        self.attempt: Attempt | None = None
        self.redacted: Mapping[str, Any] | None = None
        #: ``time.perf_counter()`` when the tool started (None until it runs).
        self.started: float | None = None
        #: The ledger decision recorded when the call is proposed (e.g. ``operator``).
        self.decision: str | None = None
        self.reason: str | None = None

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
