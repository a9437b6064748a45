"""The executor: one path from a model's tool call to a result it can read and a ledger row.

For each call, in order: an unresolved name or malformed arguments become an error result that
says what was wrong; then the decision (fail closed); then the ledger's ``proposed``; then the
arguments (fixed values win, undeclared ones refused); then the tool through its relay (with
the host's wrappers and a deadline); then ``normalize_result``, sanitation and the three copies
of the result; then the ledger's ``executed``/``failed``; then the final event.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from expediter.core.authoring.conversion import NotJSON, to_json_value
from expediter.core.calls.results import (
    Outcome,
    clean_text,
    model_copy,
    outcome_of,
)
from expediter.core.records.calls import CallEvent, EventStatus, ToolCall, new_run_id
from expediter.core.records.redaction import redact
from expediter.core.turns.toolset import ToolInstance
from expediter.errors import ArgumentError, LedgerError
from expediter.hookspecs.tool import Action, CallContext, Decision, ToolResult

if TYPE_CHECKING:
    from expediter.core.discovery.loading import LoadedTool
    from expediter.core.host import Host
    from expediter.core.ledger import Attempt
    from expediter.core.turns.toolset import Toolset

__all__ = ["Executor", "combine_decisions"]

logger = logging.getLogger(__name__)

#: How many offered names an "unknown function" error lists before "and N more".
NAMES_LISTED = 30
#: The same unknown name this many times in a turn earns a directive to stop.
REPEATS_BEFORE_DIRECTIVE = 3
_CLIENT_SIDE = "client_side"
_ALLOW = Decision()


def combine_decisions(decisions: Iterable[Decision | None]) -> Decision:
    """Deny beats ask beats allow; any forced prompt stays forced; reasons are kept."""
    deny = ask = forced = False
    reasons: list[str] = []
    for decision in decisions:
        if decision is None:
            continue
        deny = deny or decision.deny
        ask = ask or decision.require_approval or decision.forced
        forced = forced or decision.forced
        if decision.reason and decision.verdict != "allow":
            reasons.append(decision.reason)
    return Decision(
        require_approval=ask, forced=forced, deny=deny, reason="; ".join(reasons) or None
    )


def _as_decision(value: Any) -> Decision | None:
    if value is None or isinstance(value, Decision):
        return value
    if isinstance(value, str) and value in ("allow", "ask", "deny"):
        return {"allow": Decision.allow, "ask": Decision.ask, "deny": Decision.denied}[value]()
    raise TypeError(f"a decision must be a Decision, 'allow', 'ask' or 'deny', not {value!r}")


@attrs.define
class _Step:
    """One call on its way through the turn."""

    call: ToolCall
    key: str
    tool: str | None
    action: str | None
    arguments: dict[str, Any]
    started: float
    #: Set when the call ended (or paused) before running: the event to yield.
    final: CallEvent | None = None
    loaded: LoadedTool | None = None
    context: CallContext | None = None
    run_arguments: dict[str, Any] | None = None
    attempt: Attempt | None = None
    redacted: Mapping[str, Any] | None = None


class Executor:
    """Runs the calls of one turn for a toolset."""

    def __init__(self, toolset: Toolset) -> None:
        self.toolset = toolset
        self.host: Host = toolset.host

    # -- the turn -----------------------------------------------------------------------------

    def run(
        self, calls: Iterable[ToolCall], message_id: str | None = None, run_id: str | None = None
    ) -> Iterator[CallEvent]:
        """Run the calls one after another; yield each call's event (one per call, in order).
        Observers (``on_call_event``) also see a ``pending`` event as each call starts."""
        run_id = run_id or new_run_id()
        for call in calls:
            step = self.start(call, message_id=message_id, run_id=run_id)
            if step.final is not None:
                yield self._emit(step.final)
                continue
            yield self.execute(step)

    async def arun(
        self, calls: Iterable[ToolCall], message_id: str | None = None, run_id: str | None = None
    ) -> AsyncIterator[CallEvent]:
        """Run the calls concurrently; yield their events in call order (one per call).
        Closing the iteration early cancels the calls still running."""
        run_id = run_id or new_run_id()
        steps = [self.start(call, message_id=message_id, run_id=run_id) for call in calls]
        tasks: dict[int, asyncio.Task[Any]] = {}
        for index, step in enumerate(steps):
            if step.final is None:
                tasks[index] = asyncio.ensure_future(self._ainvoke(step))
        finished: set[int] = set()
        try:
            for index in tasks:
                self._pending(steps[index])
            for index, step in enumerate(steps):
                if step.final is not None:
                    yield self._emit(step.final)
                    continue
                try:
                    value = await tasks[index]
                except asyncio.CancelledError as exc:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # the turn itself is being cancelled
                    # The tool raised CancelledError itself (e.g. it awaited a cancelled future).
                    event = self.finish(step, exc=exc)
                except Exception as exc:
                    event = self.finish(step, exc=_timeout(exc, self.host.call_timeout))
                else:
                    event = self.finish(step, value)
                finished.add(index)
                yield self._emit(event)
        finally:
            for index, task in tasks.items():
                if index not in finished:
                    task.cancel()
                    self.finish(steps[index], exc=asyncio.CancelledError("the turn was cancelled"))

    # -- one call -----------------------------------------------------------------------------

    def _key(self, call: ToolCall, message_id: str | None, run_id: str) -> str:
        return f"{message_id}:{call.call_id}" if message_id else f"{run_id}:{call.call_id}"

    def start(
        self, call: ToolCall, *, message_id: str | None, run_id: str, headless: bool | None = None
    ) -> _Step:
        """Everything before the tool runs: resolution, the decision, the ledger's proposal."""
        toolset = self.toolset
        headless = toolset.headless if headless is None else headless
        step = _Step(
            call=call,
            key=self._key(call, message_id, run_id),
            tool=call.tool,
            action=call.action,
            arguments=call.arguments,  # type: ignore[arg-type]
            started=time.perf_counter(),
        )
        ids = {"message_id": message_id, "run_id": run_id}
        if call.instance_id is None or call.action is None:
            return self._refuse(step, self._unknown_name(call), "ToolNotFound", ids)
        if call.error is not None:
            return self._refuse(step, call.error, "ArgumentError", ids)
        offered = toolset.offered(call.name)
        if offered is not None and offered.client:
            if headless:
                return self._deny(
                    step, "headless_denied", "client-side tools cannot run in a headless run", ids
                )
            return self._park(step, "requires_client_execution", _CLIENT_SIDE, None, ids)
        try:
            loaded = self.host.registry.load(
                call.tool or "", toolset.user_id, instance_id=call.instance_id
            )
        except Exception as exc:
            return self._refuse(step, str(exc), type(exc).__name__, ids)
        step.loaded = loaded
        step.context = self._context(step, loaded, message_id, run_id, headless)
        action = offered.action if offered is not None else self._action(loaded, call, step)
        if action is None:
            return self._refuse(
                step, f"tool {call.tool!r} has no action {call.action!r}", "ActionNotFound", ids
            )
        decision = self.decide(loaded, action, call, step.context)
        if decision.deny:
            return self._deny(step, "deny", decision.reason or "a policy denied the call", ids)
        if decision.require_approval:
            if headless:
                allowed = call.instance_id in toolset.allowlist or call.tool in toolset.allowlist
                if not allowed or decision.forced:
                    why = decision.reason or "the call needs approval"
                    detail = (
                        "the call needs a human's approval"
                        if decision.forced
                        else ("the tool is not allowlisted for headless runs")
                    )
                    return self._deny(step, "headless_denied", f"{detail}: {why}", ids)
            else:
                return self._park(step, "awaiting_approval", "ask", decision.reason, ids)
        return self._prepare(step, action, ids)

    def _prepare(self, step: _Step, action: Action, ids: Mapping[str, Any]) -> _Step:
        """The ledger's ``proposed`` (with a lease), then the final arguments."""
        if self.host.record_calls:
            try:
                step.attempt = self._begin(step, ids, lease=True)
            except LedgerError as exc:
                return self._fail_now(step, str(exc), "LedgerError")
            if step.attempt.created is False:
                step.attempt = None
                return self._fail_now(
                    step,
                    f"the ledger already has a call {step.key!r}; it was not run again",
                    "LedgerError",
                )
        return self._bind(step, action)

    def _bind(self, step: _Step, action: Action) -> _Step:
        """The arguments the tool runs with (see ``LoadedTool.arguments_for``)."""
        assert step.loaded is not None
        try:
            step.run_arguments = step.loaded.arguments_for(action, step.arguments)
        except ArgumentError as exc:
            return self._fail_now(step, exc.message, "ArgumentError")
        return step

    def _action(self, loaded: LoadedTool, call: ToolCall, step: _Step) -> Action | None:
        assert step.context is not None
        found = loaded.actions(step.context).get(call.action or "")
        return found if found is not None and found.active else None

    def _context(
        self,
        step: _Step,
        loaded: LoadedTool,
        message_id: str | None,
        run_id: str,
        headless: bool,
    ) -> CallContext:
        timeout = self.host.call_timeout
        return CallContext(
            user_id=self.toolset.user_id,
            owner_id=loaded.user_id,
            instance_id=loaded.instance_id,
            tool=step.tool,
            run_id=run_id,
            message_id=message_id,
            call_id=step.call.call_id,
            headless=headless,
            deadline=None if timeout is None else time.time() + timeout,
            secret_resolver=self.host._secret,
        )

    def decide(
        self, loaded: LoadedTool, action: Action, call: ToolCall, context: CallContext
    ) -> Decision:
        """The live decision: the action's flag, the tool's ``preview_decision`` and every
        ``tool_call_policy``. Any exception means a forced prompt (fail closed)."""
        preview = loaded.has_hook("preview_decision")
        policies = self.host._has_hook("tool_call_policy")
        if not (action.require_approval or preview or policies):
            return _ALLOW  # nobody to ask: the common case, decided without a call
        decisions: list[Decision | None] = []
        if action.require_approval:
            decisions.append(Decision.ask("the action requires approval"))
        try:
            if preview:
                answer = loaded.relay.hook.preview_decision(
                    action=action.name, arguments=dict(call.arguments), context=context
                )
                decisions.append(_as_decision(answer))
            if policies:
                answers = self.host.plugin_manager.hook.tool_call_policy(
                    call=call, action=action, context=context
                )
                decisions.extend(_as_decision(answer) for answer in answers)
        except Exception as exc:
            logger.error("deciding on %s failed; approval required", call.name, exc_info=exc)
            return Decision.ask(
                f"the decision could not be made ({type(exc).__name__}: {exc})", forced=True
            )
        return combine_decisions(decisions)

    def execute(self, step: _Step) -> CallEvent:
        """Run a prepared call here and now (an async tool on the background loop, within the
        deadline) and return its final event."""
        self._pending(step)
        try:
            value = self._invoke(step)
            if hasattr(value, "__await__"):
                value = self.host._background_loop().run(value, self.host.call_timeout)
        except Exception as exc:
            return self._emit(self.finish(step, exc=_timeout(exc, self.host.call_timeout)))
        return self._emit(self.finish(step, value))

    def _invoke(self, step: _Step) -> Any:
        assert step.loaded is not None
        return step.loaded.call(
            action=step.action, arguments=step.run_arguments, context=step.context
        )

    async def _ainvoke(self, step: _Step) -> Any:
        """Run the tool: sync tools in a thread, async ones on this loop, within the deadline.
        A call that times out or is cancelled has its context's ``cancel_event`` set, so a
        thread still running can see ``context.is_cancelled()`` and stop."""
        timeout = self.host.call_timeout
        assert step.loaded is not None
        assert step.context is not None
        cancel = step.context.cancel_event
        if cancel is None:
            cancel = threading.Event()
            step.context = attrs.evolve(step.context, cancel_event=cancel)
        try:
            if step.loaded.is_async(step.action or ""):
                value = self._invoke(step)
            else:
                value = await asyncio.wait_for(asyncio.to_thread(self._invoke, step), timeout)
            if hasattr(value, "__await__"):
                value = await asyncio.wait_for(value, timeout)
        except BaseException:
            cancel.set()
            raise
        return value

    # -- endings ------------------------------------------------------------------------------

    def finish(self, step: _Step, value: Any = None, exc: BaseException | None = None) -> CallEvent:
        """Normalize the result, record it, and build the final event."""
        outcome = self._outcome(step, value, exc)
        event = self._event(
            step,
            "completed" if outcome.ok else "error",
            result=outcome.value,
            error=outcome.error,
            error_type=outcome.error_type,
        )
        if step.attempt is not None:
            try:
                self.host.ledger.finish(
                    step.attempt,
                    ok=outcome.ok,
                    result=outcome.value,
                    error=event.error,
                    duration_ms=event.duration_ms,
                )
            except Exception as problem:
                logger.error("the ledger could not record %s: %s", step.key, problem)
        return event

    def _outcome(self, step: _Step, value: Any, exc: BaseException | None) -> Outcome:
        if exc is None and self.host._has_hook("normalize_result"):
            try:
                normalized = self.host.plugin_manager.hook.normalize_result(
                    tool=step.tool, action=step.action, result=value
                )
                if isinstance(normalized, ToolResult):
                    value = normalized
            except Exception as problem:
                logger.error("normalize_result failed for %s", step.key, exc_info=problem)
        return outcome_of(value, exc, tool=step.tool, action=step.action, log=logger)

    def _begin(
        self, step: _Step, ids: Mapping[str, Any], *, lease: bool, reason: str | None = None
    ) -> Attempt:
        call = step.call
        request = None
        if not lease:
            request = {
                "reason": reason,
                "call_id": call.call_id,
                "name": call.name,
                "instance_id": call.instance_id,
                "tool": call.tool,
                "action": call.action,
                "arguments": step.arguments,
                "extras": _json_extras(call.extras),
                "headless": self.toolset.headless,
                **ids,
            }
            config = self.toolset.configs.get(call.instance_id or "")
            if config is not None:
                request.update(_kept_config(config))
        return self.host.ledger.begin(
            key=step.key,
            call_id=call.call_id,
            name=call.name,
            run_id=ids.get("run_id"),
            message_id=ids.get("message_id"),
            user_id=self.toolset.user_id,
            owner_id=step.loaded.user_id if step.loaded is not None else None,
            instance_id=call.instance_id,
            tool=call.tool,
            action=call.action,
            arguments=step.arguments,
            request=request,
            lease=lease,
        )

    def _record_outright(
        self, step: _Step, ids: Mapping[str, Any], status: str, decision: str | None, reason: str
    ) -> None:
        """A call that never runs: propose it, then move it to ``failed`` or ``denied``."""
        if not self.host.record_calls:
            return
        try:
            attempt = self._begin(step, ids, lease=False)
            if attempt.created is False:
                return
            if status == "failed":
                self.host.ledger.finish(attempt, ok=False, error=reason, duration_ms=0.0)
            else:
                self.host.ledger.decide(
                    step.key,
                    self.toolset.user_id,
                    expected="proposed",
                    status=status,
                    decision=decision,
                    reason=reason,
                )
        except Exception as exc:
            logger.error("the ledger could not record %s: %s", step.key, exc)

    def _refuse(self, step: _Step, message: str, error_type: str, ids: Mapping[str, Any]) -> _Step:
        self._record_outright(step, ids, "failed", None, message)
        step.final = self._event(step, "error", error=message, error_type=error_type)
        return step

    def _fail_now(self, step: _Step, message: str, error_type: str) -> _Step:
        if step.attempt is not None:
            try:
                self.host.ledger.finish(step.attempt, ok=False, error=message, duration_ms=0.0)
            except Exception as exc:
                logger.error("the ledger could not record %s: %s", step.key, exc)
            step.attempt = None
        step.final = self._event(step, "error", error=message, error_type=error_type)
        return step

    def _deny(self, step: _Step, decision: str, reason: str, ids: Mapping[str, Any]) -> _Step:
        self._record_outright(step, ids, "denied", decision, reason)
        step.final = self._event(step, "denied", error=reason, error_type="Denied", reason=reason)
        return step

    def _park(
        self,
        step: _Step,
        status: EventStatus,
        decision: str,
        reason: str | None,
        ids: Mapping[str, Any],
    ) -> _Step:
        """Pause a call: persisted as ``awaiting_approval`` so any worker can resume it."""
        if self.host.record_calls:
            try:
                attempt = self._begin(step, ids, lease=False, reason=reason)
                if attempt.created is not False:
                    self.host.ledger.decide(
                        step.key,
                        self.toolset.user_id,
                        expected="proposed",
                        status="awaiting_approval",
                        decision=decision,
                        reason=reason,
                    )
            except LedgerError as exc:
                return self._fail_now(step, str(exc), "LedgerError")
        step.final = self._event(step, status, reason=reason)
        return step

    def _unknown_name(self, call: ToolCall) -> str:
        counts = self.toolset._unresolved
        counts[call.name] = counts.get(call.name, 0) + 1
        names = self.toolset.name_map.names
        listed = ", ".join(names[:NAMES_LISTED]) or "none"
        if len(names) > NAMES_LISTED:
            listed += f", and {len(names) - NAMES_LISTED} more"
        if counts[call.name] >= REPEATS_BEFORE_DIRECTIVE:
            return (
                f"there is no function {call.name!r}, and this is attempt "
                f"{counts[call.name]}. Stop calling {call.name!r}; use one of: {listed}"
            )
        message = f"unknown function {call.name!r}: it was not offered. Available: {listed}"
        if call.error and "unknown function name" not in call.error:
            message += f" ({call.error})"
        return message

    # -- events -------------------------------------------------------------------------------

    def _event(
        self,
        step: _Step,
        status: EventStatus,
        *,
        result: Any = None,
        error: str | None = None,
        error_type: str | None = None,
        reason: str | None = None,
    ) -> CallEvent:
        final = status not in ("pending", "awaiting_approval", "requires_client_execution")
        content = None
        if status == "completed":
            content = model_copy(result, self.host.model_result_chars)
        return CallEvent(
            status=status,
            key=step.key,
            call_id=step.call.call_id,
            name=step.call.name,
            tool=step.tool,
            action=step.action,
            arguments=_redacted(step),
            result=result,
            error=None if error is None else clean_text(error),
            error_type=error_type,
            duration_ms=(
                int((time.perf_counter() - step.started) * 1_000_000) / 1000 if final else None
            ),
            instance_id=step.call.instance_id,
            user_id=self.toolset.user_id,
            reason=None if reason is None else clean_text(reason),
            content=content,
        )

    def _emit(self, event: CallEvent) -> CallEvent:
        self.host._observe(event)
        return event

    def _pending(self, step: _Step) -> None:
        """Tell observers a call starts (built only when someone listens)."""
        if self.host._has_hook("on_call_event"):
            self.host._observe(self._event(step, "pending"))


def _timeout(exc: BaseException, timeout: float | None) -> BaseException:
    if isinstance(exc, TimeoutError):
        return TimeoutError(f"the tool did not finish within {timeout} s and was cancelled")
    return exc


def _redacted(step: _Step) -> Mapping[str, Any]:
    if step.redacted is None:
        redacted = redact(step.arguments)
        step.redacted = redacted if isinstance(redacted, Mapping) else {}
    return step.redacted


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


class Resumer:
    """Decides a paused call from any process: approve, deny, or take a client's result."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def _row(self, key: str) -> Any:
        row = self.host.ledger.get(key)
        if row is None:
            raise LedgerError(f"the ledger has no call {key!r}")
        if row.status != "awaiting_approval":
            raise LedgerError(f"call {key!r} is {row.status}, not waiting for a decision")
        if not isinstance(row.request, Mapping):
            raise LedgerError(f"call {key!r} has no resume data (recorded before approvals?)")
        return row

    def _setup(self, row: Any) -> tuple[Executor, _Step]:
        request = row.request
        toolset = self.host.toolset(user_id=row.user_id, headless=bool(request.get("headless")))
        executor = Executor(toolset)
        call = ToolCall(
            call_id=request["call_id"],
            name=request["name"],
            arguments=request.get("arguments") or {},
            instance_id=request.get("instance_id"),
            tool=request.get("tool"),
            action=request.get("action"),
            extras=request.get("extras") or {},
        )
        step = _Step(
            call=call,
            key=row.key,
            tool=call.tool,
            action=call.action,
            arguments=dict(call.arguments),
            started=time.perf_counter(),
        )
        return executor, step

    def _load(
        self, row: Any, step: _Step, instances: Iterable[ToolInstance | Mapping[str, Any]]
    ) -> LoadedTool | None:
        """The call's tool instance, configured as when the call was made; None when its
        configuration was withheld from the ledger and neither ``instances`` nor this
        process has it."""
        registry = self.host.registry
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
            return registry.load(tool, row.user_id, instance_id=instance_id, config=instance.config)
        request = row.request
        if request.get("config") is not None:
            return registry.load(
                tool, row.user_id, instance_id=instance_id, config=request["config"]
            )
        if request.get("config_withheld") and not registry.is_loaded(
            tool, row.user_id, instance_id=instance_id
        ):
            return None
        return registry.load(tool, row.user_id, instance_id=instance_id)

    def _decide(self, row: Any, status: str, approver: str | None, reason: str | None) -> Attempt:
        """Record a human's decision; raise LedgerError when another worker decided first."""
        attempt = self.host.ledger.decide(
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
        approver: str | None,
        reason: str | None,
        instances: Iterable[ToolInstance | Mapping[str, Any]] = (),
    ) -> CallEvent:
        """Approve (run it now, here) or deny a call waiting for approval."""
        row = self._row(key)
        if row.decision == _CLIENT_SIDE:
            raise LedgerError(
                f"call {key!r} waits for the application's result: use submit_client_result"
            )
        executor, step = self._setup(row)
        request = row.request
        ids = {"message_id": request.get("message_id"), "run_id": request.get("run_id")}
        loaded = self._load(row, step, instances)
        if loaded is None and approved:
            raise LedgerError(
                f"call {key!r} runs on tool instance {step.call.instance_id!r}, whose "
                "configuration holds secrets and was not recorded: resume it with "
                f"instances=[ToolInstance(tool={step.tool!r}, "
                f"instance_id={step.call.instance_id!r}, config=...)]"
            )
        action = None
        denial = None
        if loaded is not None:
            step.loaded = loaded
            step.context = executor._context(
                step, loaded, ids["message_id"], ids["run_id"] or "", bool(request.get("headless"))
            )
            action = executor._action(loaded, step.call, step)
            if action is None:
                denial = f"tool {step.tool!r} no longer offers {step.action!r}"
            else:
                live = executor.decide(loaded, action, step.call, step.context)
                if live.deny:
                    denial = live.reason or "a policy denies the call now"
        if not approved or denial is not None:
            why = denial or reason or "no reason given"
            who = approver or "the approver"
            message = why if denial is not None else f"denied by {who}: {why}"
            self._decide(row, "denied", approver, message)
            return executor._emit(
                executor._event(step, "denied", error=message, error_type="Denied", reason=message)
            )
        step.attempt = self._decide(row, "approved", approver, reason)
        assert action is not None
        executor._bind(step, action)
        if step.final is not None:
            return executor._emit(step.final)
        return executor.execute(step)

    def submit(self, key: str, result: Any) -> CallEvent:
        """Record the result of a client-side call the application ran itself."""
        row = self._row(key)
        if row.decision != _CLIENT_SIDE:
            raise LedgerError(f"call {key!r} is not a client-side call: approve or deny it")
        executor, step = self._setup(row)
        attempt = self.host.ledger.decide(
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
        return executor._emit(executor.finish(step, result))
