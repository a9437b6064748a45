"""Calls decided elsewhere: approve, deny, or take a client's result for a paused call from any
process, and read back a call's current event (``host.outcome``, ``host.wait``).

Built on the executor's public steps: a resumed call is prepared, decided again, bound,
executed and finished exactly as a call in a turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, final

from expediter.core.calls.executor import CLIENT_SIDE, Executor
from expediter.core.calls.results import model_copy
from expediter.core.calls.steps import BareTurn, Step, hide_secrets
from expediter.core.records.calls import CallEvent, ToolCall
from expediter.core.records.statuses import EVENT_STATUS_OF, CallStatus, EventStatus
from expediter.core.turns.toolset import ToolInstance
from expediter.errors import DecisionRefused, InstanceNotFound, LedgerError, ToolNotFound

if TYPE_CHECKING:
    from expediter.core.discovery.loading import LoadedTool, LoadedTools
    from expediter.core.ledger import Attempt, Ledger, LedgerRow

__all__ = ["Approvals", "event_of"]


def event_of(row: LedgerRow, model_result_chars: int) -> CallEvent:
    """A call's current event, rebuilt from its ledger row (with the model's copy of its
    result, so ``result_messages`` can give it back to the model)."""
    status: EventStatus = EVENT_STATUS_OF.get(row.status, CallStatus.ERROR).value
    if status == "awaiting_approval" and row.decision == CLIENT_SIDE:
        status = "requires_client_execution"
    error_type = None
    if status == "error":
        error_type = "Abandoned" if row.status == "abandoned" else "ToolError"
    elif status == "denied":
        error_type = "Denied"
    request = row.request if isinstance(row.request, Mapping) else {}
    arguments = row.arguments if isinstance(row.arguments, Mapping) else {}
    return CallEvent(
        status=status,
        key=row.key,
        call_id=row.call_id,
        name=row.name or request.get("name") or row.action or "",
        tool=row.tool,
        action=row.action,
        arguments=arguments,
        result=row.result,
        error=row.error,
        error_type=error_type,
        duration_ms=row.duration_ms,
        instance_id=row.instance_id,
        user_id=row.user_id,
        owner_id=row.owner_id,
        reason=row.decision_reason or request.get("reason"),
        content=model_copy(row.result, model_result_chars) if status == "completed" else None,
    )


@final
class Approvals:
    """Decides paused calls and reads calls back from the ledger."""

    def __init__(
        self,
        executor: Executor,
        loaded_tools: LoadedTools,
        ledger: Callable[[], Ledger],
        model_result_chars: int,
        *,
        stored: Callable[[str, str | None], ToolInstance] | None = None,
    ) -> None:
        self.executor = executor
        self.loaded_tools = loaded_tools
        self._ledger = ledger
        self.model_result_chars = model_result_chars
        #: Resolves a stored instance by id for a user (InstanceNotFound when it was removed
        #: or switched off).
        self._stored = stored

    # -- reading back -------------------------------------------------------------------------

    def outcome(self, key: str) -> CallEvent:
        """The call's current event (``awaiting_approval`` while it waits); LedgerError for an
        unknown key."""
        row = self._ledger().get(key)
        if row is None:
            raise LedgerError(f"the ledger has no call {key!r}")
        return event_of(row, self.model_result_chars)

    def wait(self, keys: Iterable[str], timeout: float | None) -> dict[str, CallEvent]:
        """The events of the keys that are final, once all are or at the timeout (whichever
        comes first); never raises for a timeout."""
        wanted = list(dict.fromkeys(keys))
        rows = self._ledger().wait(wanted, timeout)
        return {key: event_of(rows[key], self.model_result_chars) for key in wanted if key in rows}

    # -- deciding -----------------------------------------------------------------------------

    def _row(self, key: str) -> LedgerRow:
        row = self._ledger().get(key)
        if row is None:
            raise LedgerError(f"the ledger has no call {key!r}")
        if row.status != "awaiting_approval":
            raise LedgerError(f"call {key!r} is {row.status}, not waiting for a decision")
        if not isinstance(row.request, Mapping):
            raise LedgerError(f"call {key!r} has no resume data (recorded before approvals?)")
        return row

    def _step(self, row: LedgerRow) -> Step:
        request = row.request
        arguments = request.get("arguments") or {}
        withheld = request.get("withheld")
        if withheld:
            kept = self.executor.withheld.get(row.key)
            if kept is not None:
                arguments = {**arguments, **kept}
        call = ToolCall(
            call_id=request["call_id"],
            name=request["name"],
            arguments=arguments,
            instance_id=request.get("instance_id"),
            tool=request.get("tool"),
            action=request.get("action"),
            extras=request.get("extras") or {},
        )
        turn = BareTurn(row.user_id, headless=bool(request.get("headless")))
        step = Step(call, row.key, turn, request.get("message_id"), request.get("run_id") or "")
        return step

    def _load(
        self, row: LedgerRow, step: Step, instances: Iterable[ToolInstance | Mapping[str, Any]]
    ) -> LoadedTool | None:
        """The call's tool instance, configured as when the call was made; None when its
        configuration was withheld from the ledger and neither ``instances`` nor this
        process has it."""
        loaded_tools = self.loaded_tools
        tool, instance_id = step.tool or "", step.call.instance_id
        for value in instances:
            instance = ToolInstance.coerce(value)
            if (instance.instance_id or instance.tool) != instance_id:
                continue
            if instance.tool != tool:
                raise LedgerError(
                    f"instance {instance_id!r} is a {instance.tool!r} tool, but call "
                    f"{row.key!r} was made to {tool!r}"
                )
            return loaded_tools.load(
                tool, row.user_id, instance_id=instance_id, config=instance.snapshot
            )
        request = row.request
        if request.get("stored_instance") and instance_id is not None:
            if self._stored is None:
                raise InstanceNotFound(f"tool instance {instance_id!r} cannot be loaded here")
            binding = self._stored(instance_id, row.user_id)
            if binding.tool != tool:
                raise InstanceNotFound(f"tool instance {instance_id!r} is no longer a {tool!r}")
            turn = step.turn
            assert isinstance(turn, BareTurn)  # a resumed call's (see _step)
            turn.bindings[instance_id] = binding
            return loaded_tools.load(
                tool,
                row.user_id,
                instance_id=instance_id,
                config=binding.snapshot,
                owner_id=binding.owner_id,
            )
        if request.get("config") is not None:
            return loaded_tools.load(
                tool, row.user_id, instance_id=instance_id, config=request["config"]
            )
        if request.get("config_withheld"):
            return loaded_tools.latest(tool, row.user_id, instance_id=instance_id)
        return loaded_tools.load(tool, row.user_id, instance_id=instance_id)

    def _decide(
        self, row: LedgerRow, status: str, approver: str | None, reason: str | None
    ) -> Attempt:
        """Record a human's decision; raise LedgerError when another worker decided first."""
        attempt = self._ledger().decide(
            row.key,
            row.user_id,
            expected="awaiting_approval",
            status=status,
            decision=status,
            decided_by=approver,
            reason=reason,
        )
        if attempt is None:
            raise LedgerError(f"call {row.key!r} was decided by someone else first")
        return attempt

    def resume(
        self,
        key: str,
        approved: bool,
        approver: str | None = None,
        reason: str | None = None,
        instances: Iterable[ToolInstance | Mapping[str, Any]] = (),
    ) -> CallEvent:
        """Approve (run it now, here) or deny a call waiting for approval. The live decision is
        asked again before an approved call runs, and a denial it gives wins. A denial needs no
        tool: a call can be denied where its tool is not installed."""
        row = self._row(key)
        if row.decision == CLIENT_SIDE:
            raise LedgerError(
                f"call {key!r} waits for the application's result: use submit_client_result"
            )
        step = self._step(row)
        executor = self.executor
        if not executor.hooks.authorize(key, step.call, approver, approved):
            raise DecisionRefused(
                f"{approver or 'an anonymous approver'} may not "
                f"{'approve' if approved else 'deny'} call {key!r} (authorize_decision said no)"
            )
        if not approved:
            # The model is told why, never who: the approver's identity stays in the ledger.
            message = f"denied by the approver: {reason or 'no reason given'}"
            return self._deny(row, step, approver, message)
        try:
            loaded = self._load(row, step, instances)
        except InstanceNotFound as exc:
            # Never run with credentials that were removed or switched off meanwhile.
            return self._deny(row, step, approver, f"the tool instance is unavailable: {exc}")
        except ToolNotFound as exc:
            raise LedgerError(
                f"call {key!r} cannot run here: {exc}. Install the pack that provides "
                f"{step.tool!r} (or add its tools directory with --tools-dir or "
                "EXPEDITER_TOOLS_PATH) and approve it again, or deny it: a denial needs no tool"
            ) from exc
        if loaded is None:
            raise LedgerError(
                f"call {key!r} runs on tool instance {step.call.instance_id!r}, whose "
                "configuration holds secrets and was not recorded: resume it with "
                f"instances=[ToolInstance(tool={step.tool!r}, "
                f"instance_id={step.call.instance_id!r}, config=...)]"
            )
        withheld = row.request.get("withheld")
        if withheld and executor.withheld.get(key) is None:
            names = ", ".join(str(name) for name in withheld)
            raise LedgerError(
                f"call {key!r} has secret arguments ({names}) that were never written to the "
                "ledger: it can be approved only in the process that paused it, which no "
                "longer holds them here. Deny it, and let the model make the call again"
            )
        executor.prepare(step, loaded=loaded)
        if step.spec is None:
            return self._deny(
                row, step, approver, f"tool {step.tool!r} no longer offers {step.action!r}"
            )
        live = executor.decide(step)
        if live.deny:
            return self._deny(row, step, approver, live.reason or "a policy denies the call now")
        step.attempt = self._decide(row, "approved", approver, reason)
        executor.withheld.forget(key)
        executor.bind(step)
        if step.final is not None:
            return executor.emit(step.final)
        return executor.execute(step)

    def _deny(self, row: LedgerRow, step: Step, approver: str | None, message: str) -> CallEvent:
        message = hide_secrets(step, message)  # it may quote a policy or a tool's error
        self._decide(row, "denied", approver, message)
        self.executor.withheld.forget(row.key)
        event = self.executor.event(
            step, "denied", error=message, error_type="Denied", reason=message
        )
        return self.executor.emit(event)

    def submit(self, key: str, result: Any) -> CallEvent:
        """Record the result of a client-side call the application ran itself."""
        row = self._row(key)
        if row.decision != CLIENT_SIDE:
            raise LedgerError(f"call {key!r} is not a client-side call: approve or deny it")
        step = self._step(row)
        attempt = self._ledger().decide(
            key,
            row.user_id,
            expected="awaiting_approval",
            status="approved",
            decision="client_result",
            decided_by="client",
        )
        if attempt is None:
            raise LedgerError(f"the result of call {key!r} was submitted already")
        step.attempt = attempt
        step.started = time.perf_counter()
        return self.executor.emit(self.executor.finish(step, result))
