"""The executor: the one path from a tool call to a result and a ledger row.

Every call runs through it: a model's calls in a turn (``toolset.run``/``arun``), the
operator's direct calls (``Host.call``/``acall``, ``expediter call``) and resumed calls
(``calls.approvals``). For each call, in order: an unresolved name or malformed arguments
become an error result that says what was wrong; then the decision (fail closed); then the
ledger's ``proposed``; then the arguments (fixed values win, undeclared ones refused); then the
tool through its relay (with the host's wrappers and a deadline); then ``normalize_result``,
sanitation and the three copies of the result; then the ledger's ``executed``/``failed``; then
the final event. Its public steps (``begin``, ``prepare``, ``decide``, ``bind``, ``execute``,
``finish``) are what approvals builds on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, final

import attrs

from expediter.core.calls.decisions import ALLOW, as_decision, combine_decisions
from expediter.core.calls.results import clean_text, model_copy, outcome_of
from expediter.core.calls.steps import Step, Turn, resume_request
from expediter.core.records.calls import CallEvent, EventStatus, ToolCall, new_run_id
from expediter.core.records.redaction import redact
from expediter.core.records.statuses import PAUSED_EVENT_STATUSES
from expediter.errors import ArgumentError, LedgerError
from expediter.hookspecs.tool import CallContext, Decision, ToolResult

if TYPE_CHECKING:
    from expediter.core.calls.eventloop import BackgroundLoop
    from expediter.core.calls.results import Outcome
    from expediter.core.discovery.hooks import HostHooks
    from expediter.core.discovery.loading import LoadedTool, LoadedTools
    from expediter.core.ledger import Attempt, Ledger
    from expediter.core.turns.toolset import OfferedAction

__all__ = ["CLIENT_SIDE", "OPERATOR", "Executor"]

logger = logging.getLogger(__name__)

#: The ledger ``decision`` of a call the application runs itself (waiting for its result).
CLIENT_SIDE = "client_side"
#: The ledger ``decision`` of an operator's direct call that would otherwise have asked.
OPERATOR = "operator"
#: Results that are JSON as they are and need no cleaning.
_PLAIN = frozenset({int, bool, type(None)})


@final
class Executor:
    """Runs calls: one pipeline for turns, direct calls and resumed calls."""

    def __init__(
        self,
        *,
        loaded_tools: LoadedTools,
        hooks: HostHooks,
        ledger: Callable[[], Ledger] | None,
        loop: Callable[[], BackgroundLoop],
        call_timeout: float | None,
        model_result_chars: int,
    ) -> None:
        self.loaded_tools = loaded_tools
        self.hooks = hooks
        #: Opens (once) and returns the ledger; None when calls are not recorded.
        self.ledger = ledger
        self._loop = loop
        #: Each call must finish within this many seconds (None: no deadline).
        self.call_timeout = call_timeout
        #: The model's copy of a result is cut to this many characters.
        self.model_result_chars = model_result_chars

    # Which host hooks are implemented, asked once (the host's plugins are fixed once it is
    # built): plain attributes after the first call, read several times per call (the turn
    # budget).
    @functools.cached_property
    def _observed(self) -> bool:
        return self.hooks.has_hook("on_call_event")

    @functools.cached_property
    def _normalizes(self) -> bool:
        return self.hooks.has_hook("normalize_result")

    @functools.cached_property
    def _policies(self) -> bool:
        return self.hooks.has_hook("tool_call_policy")

    # -- turns ----------------------------------------------------------------------------------

    def run(
        self,
        turn: Turn,
        calls: Iterable[ToolCall],
        message_id: str | None = None,
        run_id: str | None = None,
    ) -> Iterator[CallEvent]:
        """Run the calls one after another; yield each call's event (one per call, in order).
        Observers (``on_call_event``) also see a ``pending`` event as each call starts."""
        run_id = run_id or new_run_id()
        for call in calls:
            step = self.begin(turn, call, message_id=message_id, run_id=run_id)
            if step.final is not None:
                yield self.emit(step.final)
                continue
            yield self.execute(step)

    async def arun(
        self,
        turn: Turn,
        calls: Iterable[ToolCall],
        message_id: str | None = None,
        run_id: str | None = None,
    ) -> AsyncIterator[CallEvent]:
        """Run the calls concurrently; yield their events in call order (one per call).
        Closing the iteration early cancels the calls still running."""
        run_id = run_id or new_run_id()
        steps = [self.begin(turn, call, message_id=message_id, run_id=run_id) for call in calls]
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
                    yield self.emit(step.final)
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
                    event = self.finish(step, exc=self._timeout(exc))
                else:
                    event = self.finish(step, value)
                finished.add(index)
                yield self.emit(event)
        finally:
            for index, task in tasks.items():
                if index not in finished:
                    task.cancel()
                    self.finish(steps[index], exc=asyncio.CancelledError("the turn was cancelled"))

    # -- one call, before it runs ---------------------------------------------------------------

    def begin(self, turn: Turn, call: ToolCall, *, message_id: str | None, run_id: str) -> Step:
        """Everything before the tool runs: resolution, the decision, the ledger's proposal,
        the arguments. A step with ``final`` set ended (or paused) here."""
        key = f"{message_id}:{call.call_id}" if message_id else f"{run_id}:{call.call_id}"
        step = Step(call, key, turn, message_id, run_id)
        if call.instance_id is None or call.action is None:
            return self._refuse(step, turn.unknown_name(call), "ToolNotFound")
        if call.error is not None:
            return self._refuse(step, call.error, "ArgumentError")
        arguments = call.arguments
        if type(arguments) is not dict and not isinstance(arguments, Mapping):
            return self._refuse(
                step,
                f"arguments for {call.tool}.{call.action} must be a JSON object, "
                f"got {type(call.arguments).__name__}",
                "ArgumentError",
            )
        offered = turn.offered(call.name)
        if offered is not None and offered.client:
            if turn.headless:
                return self._deny(
                    step, "headless_denied", "client-side tools cannot run in a headless run"
                )
            return self._park(step, "requires_client_execution", CLIENT_SIDE, None)
        try:
            self.prepare(step, offered)
        except Exception as exc:
            return self._refuse(step, str(exc), type(exc).__name__)
        if step.spec is None:
            return self._refuse(step, self._no_action(step), "ActionNotFound")
        return self.admit(step, self.decide(step))

    def prepare(
        self,
        step: Step,
        offered: OfferedAction | None = None,
        loaded: LoadedTool | None = None,
    ) -> Step:
        """Load the call's tool instance (unless given), build its context and find the
        action (``step.spec`` stays None when the tool has no such active action)."""
        call = step.call
        if loaded is None:
            loaded = self.loaded_tools.load(
                call.tool or "",
                step.turn.user_id,
                instance_id=call.instance_id,
                config=step.turn.configs.get(call.instance_id or ""),
            )
        step.loaded = loaded
        timeout = self.call_timeout
        step.deadline = None if timeout is None else time.time() + timeout
        if offered is not None:
            step.spec = offered.action
        else:
            actions = loaded.known_actions
            if actions is None:
                actions = loaded.actions(self.context(step))
            found = actions.get(step.action or "")
            step.spec = found if found is not None and found.active else None
        return step

    def context(self, step: Step) -> CallContext:
        """The call's context, built on first use (a tool that reads none never pays for it)."""
        context = step.context
        if context is None:
            loaded = step.loaded
            assert loaded is not None
            context = step.context = CallContext(
                user_id=step.turn.user_id,
                owner_id=loaded.user_id,
                instance_id=loaded.instance_id,
                tool=step.tool,
                run_id=step.run_id,
                message_id=step.message_id,
                call_id=step.call.call_id,
                headless=step.turn.headless,
                deadline=step.deadline,
                secret_resolver=self.hooks.secret,
            )
        return context

    def _no_action(self, step: Step) -> str:
        available = "none"
        if step.loaded is not None:
            try:
                names = [n for n, a in step.loaded.actions(self.context(step)).items() if a.active]
                available = ", ".join(names) or "none"
            except Exception:
                logger.debug("listing the actions of %s failed", step.tool, exc_info=True)
        return f"tool {step.tool!r} has no action {step.action!r} (available: {available})"

    def decide(self, step: Step) -> Decision:
        """The live decision: the action's flag, the tool's ``preview_decision`` and every
        ``tool_call_policy``. Any exception means a forced prompt (fail closed)."""
        loaded, action = step.loaded, step.spec
        assert loaded is not None
        assert action is not None
        preview = loaded.has_hook("preview_decision")
        policies = self._policies
        if not (action.require_approval or preview or policies):
            return ALLOW  # nobody to ask: the common case, decided without a call
        context = self.context(step)
        decisions: list[Decision | None] = []
        if action.require_approval:
            decisions.append(Decision.ask("the action requires approval"))
        try:
            if preview:
                answer = loaded.relay.hook.preview_decision(
                    action=action.name, arguments=dict(step.arguments), context=context
                )
                decisions.append(as_decision(answer))
            if policies:
                answers = self.hooks.policies(step.call, action, context)
                decisions.extend(as_decision(answer) for answer in answers)
        except Exception as exc:
            logger.error("deciding on %s failed; approval required", step.call.name, exc_info=exc)
            return Decision.ask(
                f"the decision could not be made ({type(exc).__name__}: {exc})", forced=True
            )
        return combine_decisions(decisions)

    def admit(self, step: Step, decision: Decision) -> Step:
        """Act on the decision: deny, pause for approval, or propose the call and bind its
        arguments so it can run."""
        turn = step.turn
        call = step.call
        if decision.deny:
            return self._deny(step, "deny", decision.reason or "a policy denied the call")
        if decision.require_approval:
            why = decision.reason or "the call needs approval"
            if turn.operator:
                if decision.forced:
                    return self._deny(
                        step, "forced", f"the call needs a human's approval in a turn: {why}"
                    )
                step.decision, step.reason = OPERATOR, why
            elif turn.headless:
                allowed = call.instance_id in turn.allowlist or call.tool in turn.allowlist
                if not allowed or decision.forced:
                    detail = (
                        "the call needs a human's approval"
                        if decision.forced
                        else "the tool is not allowlisted for headless runs"
                    )
                    return self._deny(step, "headless_denied", f"{detail}: {why}")
            else:
                return self._park(step, "awaiting_approval", "ask", decision.reason)
        if self.ledger is not None:
            try:
                step.attempt = self._propose(step, lease=True)
            except LedgerError as exc:
                return self._fail_now(step, str(exc), "LedgerError")
            if step.attempt.created is False:
                step.attempt = None
                return self._fail_now(
                    step,
                    f"the ledger already has a call {step.key!r}; it was not run again",
                    "LedgerError",
                )
        return self.bind(step)

    def bind(self, step: Step) -> Step:
        """The arguments the tool runs with (see ``LoadedTool.arguments_for``)."""
        assert step.loaded is not None
        assert step.spec is not None
        try:
            step.run_arguments = step.loaded.arguments_for(step.spec, step.arguments)
        except ArgumentError as exc:
            return self._fail_now(step, exc.message, "ArgumentError")
        return step

    # -- running ----------------------------------------------------------------------------------

    def execute(self, step: Step) -> CallEvent:
        """Run a prepared call here and now and return its final event.

        A sync tool runs in the caller's thread (a thread hop costs more than the whole call):
        it sees its deadline through ``context.is_cancelled()``, and a result that comes after
        the deadline is recorded as an overrun. An async tool runs on the host's background
        loop and is cancelled at the deadline.
        """
        self._pending(step)
        try:
            value = self._invoke(step)
            if hasattr(value, "__await__"):
                value = self._loop().run(value, self.call_timeout)
            else:
                overrun = self._overrun(step)
                if overrun is not None:
                    return self.emit(self.finish(step, value, overrun))
        except Exception as exc:
            return self.emit(self.finish(step, exc=self._timeout(exc)))
        return self.emit(self.finish(step, value))

    async def aexecute(self, step: Step) -> CallEvent:
        """Async ``execute`` on the caller's loop: sync tools in a thread, both within the
        deadline."""
        self._pending(step)
        try:
            value = await self._ainvoke(step)
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                self.finish(step, exc=asyncio.CancelledError("the call was cancelled"))
                raise
            return self.emit(self.finish(step, exc=exc))
        except Exception as exc:
            return self.emit(self.finish(step, exc=self._timeout(exc)))
        return self.emit(self.finish(step, value))

    def _invoke(self, step: Step) -> Any:
        loaded = step.loaded
        assert loaded is not None
        context = step.context
        if context is None and loaded.wants_context(step.action or ""):
            context = self.context(step)
        step.started = time.perf_counter()
        return loaded.call(action=step.action, arguments=step.run_arguments, context=context)

    async def _ainvoke(self, step: Step) -> Any:
        """Run the tool: sync tools in a thread, async ones on this loop, within the deadline.
        A call that times out or is cancelled has its context's ``cancel_event`` set, so a
        thread still running can see ``context.is_cancelled()`` and stop."""
        timeout = self.call_timeout
        assert step.loaded is not None
        context = self.context(step)
        cancel = context.cancel_event
        if cancel is None:
            cancel = threading.Event()
            step.context = attrs.evolve(context, cancel_event=cancel)
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

    def _overrun(self, step: Step) -> TimeoutError | None:
        """A sync tool that finished after its deadline (it could only be asked to stop)."""
        deadline = step.deadline
        if deadline is None or time.time() <= deadline:
            return None
        took = 0.0 if step.started is None else time.perf_counter() - step.started
        return TimeoutError(
            f"the tool overran its deadline of {self.call_timeout} s (it took {took:.1f} s); "
            "its result was recorded but not used"
        )

    def _timeout(self, exc: BaseException) -> BaseException:
        if isinstance(exc, TimeoutError) and not str(exc):
            return TimeoutError(
                f"the tool did not finish within {self.call_timeout} s and was cancelled"
            )
        return exc

    # -- endings ----------------------------------------------------------------------------------

    def finish(self, step: Step, value: Any = None, exc: BaseException | None = None) -> CallEvent:
        """Normalize the result, record it, and build the final event."""
        if exc is None and type(value) in _PLAIN and not self._normalizes:
            # Nothing to normalize or clean: skips building an Outcome (the turn budget).
            ok, result = True, value
            event = self.event(step, "completed", result=value)
        else:
            outcome = self._outcome(step, value, exc)
            ok, result = outcome.ok, outcome.value
            event = self.event(
                step,
                "completed" if ok else "error",
                result=result,
                error=outcome.error,
                error_type=outcome.error_type,
            )
        if step.attempt is not None:
            try:
                self._ledger().finish(
                    step.attempt,
                    ok=ok,
                    result=result,
                    error=event.error,
                    duration_ms=event.duration_ms,
                )
            except Exception as problem:
                logger.error("the ledger could not record %s: %s", step.key, problem)
        return event

    def _outcome(self, step: Step, value: Any, exc: BaseException | None) -> Outcome:
        if isinstance(exc, TimeoutError) and value is not None:
            # An overrun keeps what the tool returned in the ledger copy.
            outcome = outcome_of(None, exc, tool=step.tool, action=step.action, log=logger)
            kept = outcome_of(value, None, tool=step.tool, action=step.action, log=logger)
            return attrs.evolve(outcome, value=kept.value)
        if exc is None and self.hooks.has_hook("normalize_result"):
            try:
                normalized = self.hooks.normalize(step.tool, step.action, value)
                if isinstance(normalized, ToolResult):
                    value = normalized
            except Exception as problem:
                logger.error("normalize_result failed for %s", step.key, exc_info=problem)
        return outcome_of(value, exc, tool=step.tool, action=step.action, log=logger)

    def _ledger(self) -> Ledger:
        assert self.ledger is not None
        return self.ledger()

    def _propose(self, step: Step, *, lease: bool, reason: str | None = None) -> Attempt:
        """The ledger's ``proposed`` row; a paused call (no lease) keeps what another worker
        needs to resume it."""
        call = step.call
        turn = step.turn
        request = None if lease else resume_request(step, reason)
        return self._ledger().begin(
            key=step.key,
            call_id=call.call_id,
            name=call.name,
            run_id=step.run_id,
            message_id=step.message_id,
            user_id=turn.user_id,
            owner_id=step.loaded.user_id if step.loaded is not None else None,
            instance_id=call.instance_id,
            tool=call.tool,
            action=call.action,
            arguments=step.arguments if isinstance(step.arguments, Mapping) else None,
            request=request,
            lease=lease,
            decision=step.decision,
            reason=step.reason,
        )

    def _record_outright(self, step: Step, status: str, decision: str | None, reason: str) -> None:
        """A call that never runs: propose it, then move it to ``failed`` or ``denied``."""
        if self.ledger is None:
            return
        try:
            attempt = self._propose(step, lease=False)
            if attempt.created is False:
                return
            if status == "failed":
                self._ledger().finish(attempt, ok=False, error=reason, duration_ms=0.0)
            else:
                self._ledger().decide(
                    step.key,
                    step.turn.user_id,
                    expected="proposed",
                    status=status,
                    decision=decision,
                    reason=reason,
                )
        except Exception as exc:
            logger.error("the ledger could not record %s: %s", step.key, exc)

    def _refuse(self, step: Step, message: str, error_type: str) -> Step:
        self._record_outright(step, "failed", None, message)
        step.final = self.event(step, "error", error=message, error_type=error_type)
        return step

    def _fail_now(self, step: Step, message: str, error_type: str) -> Step:
        if step.attempt is not None:
            try:
                self._ledger().finish(step.attempt, ok=False, error=message, duration_ms=0.0)
            except Exception as exc:
                logger.error("the ledger could not record %s: %s", step.key, exc)
            step.attempt = None
        step.final = self.event(step, "error", error=message, error_type=error_type)
        return step

    def _deny(self, step: Step, decision: str, reason: str) -> Step:
        self._record_outright(step, "denied", decision, reason)
        step.final = self.event(step, "denied", error=reason, error_type="Denied", reason=reason)
        return step

    def _park(self, step: Step, status: EventStatus, decision: str, reason: str | None) -> Step:
        """Pause a call: persisted as ``awaiting_approval`` so any worker can resume it."""
        if self.ledger is not None:
            try:
                attempt = self._propose(step, lease=False, reason=reason)
                if attempt.created is not False:
                    self._ledger().decide(
                        step.key,
                        step.turn.user_id,
                        expected="proposed",
                        status="awaiting_approval",
                        decision=decision,
                        reason=reason,
                    )
            except LedgerError as exc:
                return self._fail_now(step, str(exc), "LedgerError")
        step.final = self.event(step, status, reason=reason)
        return step

    # -- events -----------------------------------------------------------------------------------

    def event(
        self,
        step: Step,
        status: EventStatus,
        *,
        result: Any = None,
        error: str | None = None,
        error_type: str | None = None,
        reason: str | None = None,
    ) -> CallEvent:
        """The event of a step: final ones carry how long the tool ran (0 if it never did)."""
        duration_ms = None
        if status not in PAUSED_EVENT_STATUSES:
            started = step.started
            duration_ms = (
                0.0 if started is None else int((time.perf_counter() - started) * 1e6) / 1000
            )
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
            duration_ms=duration_ms,
            instance_id=step.call.instance_id,
            user_id=step.turn.user_id,
            owner_id=None if step.loaded is None else step.loaded.user_id,
            reason=None if reason is None else clean_text(reason),
            content=(
                model_copy(result, self.model_result_chars) if status == "completed" else None
            ),
        )

    def emit(self, event: CallEvent) -> CallEvent:
        """Tell the observers about a final (or paused) event, and return it."""
        if self._observed:
            self.hooks.notify(event)
        return event

    def _pending(self, step: Step) -> None:
        """Tell observers a call starts (built only when someone listens)."""
        if self._observed:
            self.hooks.notify(self.event(step, "pending"))


def _redacted(step: Step) -> Mapping[str, Any]:
    if step.redacted is None:
        arguments = step.arguments
        if type(arguments) is not dict and not isinstance(arguments, Mapping):
            step.redacted = {}
        else:
            step.redacted = redact(arguments)
    return step.redacted
