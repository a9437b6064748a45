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

Nothing a call holds or does escapes it: what the model sent is checked once (``intake``), a
tool's deadline runs from when it starts (``deadlines``), what the ledger is told goes through
``recording``, and a failure inside expediter becomes that call's error, never the turn's.
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

from expediter.core.calls.deadlines import Deadlines
from expediter.core.calls.decisions import ALLOW, as_decision, combine_decisions
from expediter.core.calls.intake import FLAT, KEY_ID_CHARS, argument_problem, call_key, key_prefix
from expediter.core.calls.recording import Recorder
from expediter.core.calls.results import (
    ToolExit,
    clean_text,
    exception_text,
    model_copy,
    outcome_from_exception,
    outcome_of,
)
from expediter.core.calls.steps import (
    Step,
    Turn,
    Withheld,
    call_secrets,
    owner_of,
    recorded_arguments,
)
from expediter.core.records.calls import CallEvent, EventStatus, ToolCall, new_run_id
from expediter.core.records.limits import LARGEST_INT, SMALLEST_INT
from expediter.core.records.redaction import config_secrets, hide_values, log_hidden
from expediter.core.records.statuses import PAUSED_EVENT_STATUSES
from expediter.core.records.text import echo
from expediter.errors import ArgumentError, LedgerError
from expediter.hookspecs.tool import CallContext, Decision, ToolResult

if TYPE_CHECKING:
    from expediter.core.calls.eventloop import BackgroundLoop
    from expediter.core.calls.results import Outcome
    from expediter.core.discovery.catalogue import ToolInfo
    from expediter.core.discovery.hooks import HostHooks
    from expediter.core.discovery.loading import LoadedTool, LoadedTools
    from expediter.core.ledger import Ledger
    from expediter.core.turns.toolset import OfferedAction

__all__ = ["CLIENT_SIDE", "OPERATOR", "Executor"]

logger = logging.getLogger(__name__)

#: The ledger ``decision`` of a call the application runs itself (waiting for its result).
CLIENT_SIDE = "client_side"
#: The ledger ``decision`` of an operator's direct call that would otherwise have asked.
OPERATOR = "operator"
#: Results that are JSON as they are and need no cleaning.
_PLAIN = frozenset({int, bool, type(None)})


#: A call's fields that name things: text (or None) by the time the ledger sees them.
_CALL_TEXTS = ("call_id", "name", "tool", "action", "instance_id")
_TEXTS = frozenset({str, type(None)})


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
        storage: Callable[[Step], Any] | None = None,
        egress_allow: tuple[str, ...] = (),
        tokens: Callable[[Step], Any] | None = None,
        tool_info: Callable[[str], ToolInfo] | None = None,
    ) -> None:
        self.loaded_tools = loaded_tools
        #: What the catalogue knows of a tool (its declared secret fields, for a configuration
        #: whose tool could not be loaded); None: only secret-looking names are known.
        self.tool_info = tool_info
        self.hooks = hooks
        #: Opens (once) and returns the ledger; None when calls are not recorded.
        self.ledger = ledger
        self._loop = loop
        #: Each call must finish within this many seconds (None: no deadline).
        self.call_timeout = call_timeout
        self.deadlines = Deadlines(call_timeout, self._record_late)
        #: The model's copy of a result is cut to this many characters.
        self.model_result_chars = model_result_chars
        #: Secret arguments of calls paused by this process (never written to the ledger).
        self.withheld = Withheld()
        #: Makes a call's ``CallContext.storage`` (None: the host keeps no data).
        self.storage = storage
        #: Makes a call's ``CallContext.tokens`` (None: the host keeps no data).
        self.tokens = tokens
        self.recorder = Recorder(ledger, self.withheld)
        #: The operator's extra egress ranges, passed to every tool (``CallContext``).
        self.egress_allow = egress_allow

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
        Observers (``on_call_event``) also see a ``pending`` event as each call starts.

        Nothing a call does stops the turn: a failure inside expediter or a hook becomes that
        call's error. ``KeyboardInterrupt`` still stops it, once the running call's row is
        finished as ``failed`` ("interrupted")."""
        run_id = run_id or new_run_id()
        prefix = key_prefix(message_id, run_id)
        seen: dict[str, int] = {}
        for call in calls:
            call_id = call.call_id
            if type(call_id) is str and len(call_id) <= KEY_ID_CHARS and call_id not in seen:
                seen[call_id] = 1  # the common case, without a call (the turn budget)
                key = prefix + call_id
            else:
                key = call_key(call, prefix, seen)
            step = self.begin(turn, call, message_id=message_id, run_id=run_id, key=key)
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
        Closing the iteration early cancels the calls still running; a call that has not
        started by then never starts, and one that had already ended is recorded as it
        ended."""
        run_id = run_id or new_run_id()
        prefix = key_prefix(message_id, run_id)
        seen: dict[str, int] = {}
        steps = [
            self.begin(
                turn,
                call,
                message_id=message_id,
                run_id=run_id,
                key=call_key(call, prefix, seen),
            )
            for call in calls
        ]
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
                except ToolExit as exc:
                    finished.add(index)
                    event = self._exited(step, exc)
                except Exception as exc:
                    event = self.finish(step, exc=self.deadlines.explain(exc))
                else:
                    event = self.finish(step, value, self.deadlines.overrun(step))
                finished.add(index)
                yield self.emit(event)
        finally:
            interrupted: ToolExit | None = None
            for index, task in tasks.items():
                if index in finished:
                    continue
                step = steps[index]
                if task.done() and not task.cancelled():
                    # It ended before the turn was closed: its row says how (the ledger never
                    # says "cancelled" of a call that ran), and its exception is retrieved.
                    ended = task.exception()
                    if ended is None:
                        self.finish(step, task.result(), self.deadlines.overrun(step))
                    elif isinstance(ended, ToolExit):
                        self.finish(step, exc=ended)
                        if ended.interrupted and interrupted is None:
                            interrupted = ended
                    else:
                        self.finish(step, exc=self.deadlines.explain(ended))
                    continue
                task.cancel()
                self.deadlines.abandon(step)  # a thread that has not started it never will
                self.finish(
                    step,
                    exc=asyncio.CancelledError(
                        "the turn was cancelled"
                        if step.started is not None
                        else "the turn was cancelled before the call started; it was not run"
                    ),
                )
            if interrupted is not None:
                raise KeyboardInterrupt from interrupted.original

    # -- one call, before it runs ---------------------------------------------------------------

    def begin(
        self,
        turn: Turn,
        call: ToolCall,
        *,
        message_id: str | None,
        run_id: str,
        key: str | None = None,
    ) -> Step:
        """Everything before the tool runs: resolution, the decision, the ledger's proposal,
        the arguments. A step with ``final`` set ended (or paused) here. Never raises for
        what the call holds: a failure here is the call's error event (and its row)."""
        step = Step(
            call,
            key or call_key(call, key_prefix(message_id, run_id), None),
            turn,
            message_id,
            run_id,
        )
        try:
            return self._begin(step)
        except Exception as exc:
            log_hidden(
                logger,
                logging.ERROR,
                "preparing call %s failed",
                echo(step.key),
                secrets=call_secrets(step),
                exc=exc,
            )
            message = f"expediter could not run the call: {type(exc).__name__}: " + echo(
                exception_text(exc)
            )
            if step.attempt is not None:
                return self._fail_now(step, message, "InternalError")
            return self._refuse(step, message, "InternalError")

    def _begin(self, step: Step) -> Step:
        call, turn = step.call, step.turn
        names = (call.call_id, call.name, call.tool, call.action, call.instance_id)
        if not _TEXTS.issuperset(map(type, names)):  # one check for the common call
            odd = {f: v for f, v in zip(_CALL_TEXTS, names, strict=True) if type(v) not in _TEXTS}
            # An application's hand-built call naming things with other values: a str subclass
            # is the text it holds; anything else is refused, and recorded as its quoted form
            # (no database driver binds a dict).
            texts: dict[str, Any] = {
                f: str.__str__(v) if isinstance(v, str) else echo(v) for f, v in odd.items()
            }
            call = step.call = attrs.evolve(call, **texts)
            wrong = [f"{f} ({type(v).__name__})" for f, v in odd.items() if not isinstance(v, str)]
            if wrong:
                return self._refuse(
                    step, "the call's names must be text, not: " + ", ".join(wrong), "InvalidCall"
                )
        if call.instance_id is None or call.action is None:
            return self._refuse(step, turn.unknown_name(call), "ToolNotFound")
        if call.error is not None:
            return self._refuse(step, call.error, "ArgumentError")
        arguments = call.arguments
        if type(arguments) is not dict and not isinstance(arguments, Mapping):
            return self._refuse(
                step,
                f"arguments for {echo(call.tool)}.{echo(call.action)} must be a JSON object, "
                f"got {type(call.arguments).__name__}",
                "ArgumentError",
            )
        if not FLAT.issuperset(map(type, arguments.values())):
            problem = argument_problem(arguments)
            if problem is not None:
                if "levels deep" in problem:
                    step.redacted = {"(arguments)": "not recorded: " + problem}
                return self._refuse(step, problem, "ArgumentError")
        offered = turn.offered(call.name)
        if offered is None:
            if turn.by_name:
                return self._refuse(step, turn.unknown_name(call), "ToolNotFound")
        elif offered.instance_id != call.instance_id or offered.action.name != call.action:
            if (
                offered.default
                and call.instance_id == offered.tool
                and offered.action.name == call.action
            ):
                # A call built by hand naming a default tool by its tool name (as before
                # default tools had instance ids): the default instance it means.
                call = step.call = attrs.evolve(call, instance_id=offered.instance_id)
            else:
                # The executor decides on the action it runs: a call whose tool or action is
                # not the one offered under its name would run one action under another's
                # decision.
                return self._refuse(
                    step,
                    f"the call names {echo(call.name)}, which is "
                    f"{offered.tool}.{offered.action.name}, but asks for "
                    f"{echo(call.tool)}.{echo(call.action)}: refused",
                    "InvalidCall",
                )
        if offered is not None and offered.client:
            if turn.headless:
                return self._deny(
                    step, "headless_denied", "client-side tools cannot run in a headless run"
                )
            return self._park(step, "requires_client_execution", CLIENT_SIDE, None)
        try:
            self.prepare(step, offered)
        except Exception as exc:
            # The ledger row gets what only the operator may read (e.g. the egress guard's
            # reason when a remote tool's listing was refused), as for a call that ran.
            detail = outcome_from_exception(exc).detail
            return self._refuse(step, str(exc), type(exc).__name__, detail)
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
            binding = step.turn.bindings.get(call.instance_id or "")
            if binding is None:
                loaded = self.loaded_tools.load(
                    call.tool or "", step.turn.user_id, instance_id=call.instance_id
                )
            else:
                try:
                    loaded = self.loaded_tools.load(
                        call.tool or "",
                        step.turn.user_id,
                        instance_id=call.instance_id,
                        config=binding.snapshot,
                        owner_id=binding.owner_id,
                        digest=binding.config_digest
                        if binding.snapshot is not binding.config
                        else None,
                    )
                except Exception:
                    # A tool that cannot be made from its configuration may say why by quoting
                    # it: its secrets are hidden from that error as a loaded tool's are.
                    step.config_secrets = self.config_secrets(call.tool, binding.snapshot)
                    step.secrets = None
                    raise
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
        step.secrets = None  # its tool and action are known: so are its secrets
        return step

    def config_secrets(self, tool: str | None, config: Mapping[str, Any] | None) -> frozenset[str]:
        """The secret texts of a configuration of ``tool``: its declared secret fields (as the
        catalogue knows them) and its secret-looking ones."""
        fields: tuple[Any, ...] = ()
        if config and self.tool_info is not None and tool:
            try:
                fields = self.tool_info(tool).config
            except Exception as exc:  # a tool that is gone: its secret-looking fields only
                logger.debug("the configuration fields of %s are unknown: %s", tool, exc)
        return config_secrets(config, fields)

    def context(self, step: Step) -> CallContext:
        """The call's context, built on first use (a tool that reads none never pays for it)."""
        context = step.context
        if context is None:
            loaded = step.loaded
            assert loaded is not None
            context = step.context = CallContext(
                user_id=step.turn.user_id,
                owner_id=owner_of(step),
                instance_id=loaded.instance_id,
                tool=step.tool,
                run_id=step.run_id,
                message_id=step.message_id,
                call_id=step.call.call_id,
                headless=step.turn.headless,
                deadline=step.deadline,
                storage=None if self.storage is None else self.storage(step),
                tokens=None if self.tokens is None else self.tokens(step),
                secret_resolver=self.hooks.secret,
                secrets=loaded.secrets,
                egress_allow=self.egress_allow,
            )
        return context

    def _no_action(self, step: Step) -> str:
        available = "none"
        if step.loaded is not None:
            try:
                names = [n for n, a in step.loaded.actions(self.context(step)).items() if a.active]
                available = ", ".join(names) or "none"
            except Exception as exc:
                log_hidden(
                    logger,
                    logging.DEBUG,
                    "listing the actions of %s failed",
                    step.tool,
                    secrets=call_secrets(step),
                    exc=exc,
                )
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
            log_hidden(
                logger,
                logging.ERROR,
                "deciding on %s failed; approval required",
                step.call.name,
                secrets=call_secrets(step),
                exc=exc,
            )
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
                step.attempt = self.recorder.propose(step, lease=True)
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
        the deadline is recorded as an overrun (``arun`` is the way to bound sync tools). An
        async tool runs on the host's background loop; its deadline starts when it starts
        there, and at the deadline it is cancelled and reported failed (a result it still
        produces is recorded as late).
        """
        self._pending(step)
        try:
            value = self._invoke(step)
            if hasattr(value, "__await__"):
                value = self._loop().run(self.deadlines.bounded(step, value))
            overrun = self.deadlines.overrun(step)
            if overrun is not None:
                return self.emit(self.finish(step, value, overrun))
        except ToolExit as exc:
            return self.emit(self._exited(step, exc))
        except SystemExit as exc:
            return self.emit(self.finish(step, exc=exc))
        except KeyboardInterrupt:
            self.deadlines.abandon(step)
            self.finish(step, exc=KeyboardInterrupt())
            raise
        except Exception as exc:
            return self.emit(self.finish(step, exc=self.deadlines.explain(exc)))
        return self.emit(self.finish(step, value))

    async def aexecute(self, step: Step) -> CallEvent:
        """Async ``execute``: sync tools in a thread, async ones on the host's loop, both within
        the deadline."""
        self._pending(step)
        try:
            value = await self._ainvoke(step)
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                self.finish(step, exc=asyncio.CancelledError("the call was cancelled"))
                raise
            return self.emit(self.finish(step, exc=exc))
        except ToolExit as exc:
            return self.emit(self._exited(step, exc))
        except Exception as exc:
            return self.emit(self.finish(step, exc=self.deadlines.explain(exc)))
        return self.emit(self.finish(step, value, self.deadlines.overrun(step)))

    def _exited(self, step: Step, exc: ToolExit) -> CallEvent:
        """A tool raised ``SystemExit`` (an error result) or ``KeyboardInterrupt`` (the call's
        row is finished, then the program stops)."""
        event = self.finish(step, exc=exc)
        if exc.interrupted:
            raise KeyboardInterrupt from exc.original
        return event

    def _invoke(self, step: Step) -> Any:
        loaded = step.loaded
        assert loaded is not None
        context = step.context
        if context is None and loaded.wants_context(step.action or ""):
            context = self.context(step)
        step.started = time.perf_counter()
        try:
            return loaded.call(action=step.action, arguments=step.run_arguments, context=context)
        finally:
            step.ended = time.perf_counter()  # an awaitable's end is set where it is awaited

    async def _ainvoke(self, step: Step) -> Any:
        """Run the tool: sync tools in one of the host's threads, async ones on the host's loop
        (never on the caller's, whose shutdown would wait for them). The deadline starts
        when the tool starts (waiting for a free thread does not count); a call cancelled
        before its thread picked it up never starts. A call that times out or is cancelled
        has its context's ``cancel_event`` set, so a thread still running can see
        ``context.is_cancelled()`` and stop."""
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
                value = await self.deadlines.in_thread(step, self._invoke, self._loop().threads)
            if hasattr(value, "__await__"):
                # On the host's loop, as in ``execute``: at the deadline this caller is told
                # at once, and a tool that ignores its cancellation keeps running there, not
                # on the caller's loop (whose shutdown would wait for it).
                value = await self._loop().arun(self.deadlines.bounded(step, value))
        except BaseException:
            cancel.set()
            raise
        return value

    def _record_late(self, step: Step, value: Any, exc: BaseException | None) -> None:
        """Record a result that came after its call was reported failed (marked late)."""
        try:
            self.recorder.late(step, self._outcome(step, value, exc))
        except Exception as problem:
            log_hidden(
                logger,
                logging.ERROR,
                "the late result of %s: %s",
                echo(step.key),
                problem,
                secrets=call_secrets(step),
            )

    # -- endings ----------------------------------------------------------------------------------

    def finish(self, step: Step, value: Any = None, exc: BaseException | None = None) -> CallEvent:
        """Normalize the result, record it, and build the final event (the call's secrets
        hidden from both: ``event`` and the recorder hide them)."""
        if (
            exc is None
            and type(value) in _PLAIN
            and not self._normalizes
            and (type(value) is not int or SMALLEST_INT < value < LARGEST_INT)
        ):
            # Nothing to normalize, clean or hide: skips building an Outcome (the turn budget).
            ok, detail = True, None
            event = self.event(step, "completed", result=value)
        else:
            outcome = self._outcome(step, value, exc)
            ok, detail = outcome.ok, outcome.detail
            event = self.event(
                step,
                "completed" if ok else "error",
                result=outcome.value,
                error=outcome.error,
                error_type=outcome.error_type,
                note=outcome.note,
            )
        if step.attempt is not None:
            recorded = event.error if detail is None else clean_text(detail)
            self.recorder.finish(step, ok, event.result, recorded, event.duration_ms)
        if step.unsettled:
            self.deadlines.settle(step)
        return event

    def _outcome(self, step: Step, value: Any, exc: BaseException | None) -> Outcome:
        """The outcome of what the tool returned or raised (its texts not hidden yet: the
        event and the recorder hide them; what is logged here is hidden here)."""
        secrets = call_secrets(step)
        of = functools.partial(
            outcome_of, tool=step.tool, action=step.action, log=logger, secrets=secrets
        )
        if isinstance(exc, TimeoutError) and value is not None:
            # An overrun keeps what the tool returned in the ledger copy.
            return attrs.evolve(of(None, exc), value=of(value, None).value)
        if exc is None and self.hooks.has_hook("normalize_result"):
            try:
                normalized = self.hooks.normalize(step.tool, step.action, value)
                if isinstance(normalized, ToolResult):
                    value = normalized
            except Exception as problem:
                log_hidden(
                    logger,
                    logging.ERROR,
                    "normalize_result failed for %s",
                    step.key,
                    secrets=secrets,
                    exc=problem,
                )
        return of(value, exc)

    def _refuse(self, step: Step, message: str, error_type: str, detail: str | None = None) -> Step:
        """A call that never runs; the ledger row gets ``detail`` (what the operator may
        read, e.g. the egress guard's reason) when there is one, else ``message``."""
        self.recorder.outright(step, "failed", None, detail or message)
        step.final = self.event(step, "error", error=message, error_type=error_type)
        return step

    def _fail_now(self, step: Step, message: str, error_type: str) -> Step:
        if step.attempt is not None:
            self.recorder.finish(step, False, None, message, 0.0)
            step.attempt = None
        step.final = self.event(step, "error", error=message, error_type=error_type)
        return step

    def _deny(self, step: Step, decision: str, reason: str) -> Step:
        self.recorder.outright(step, "denied", decision, reason)
        step.final = self.event(step, "denied", error=reason, error_type="Denied", reason=reason)
        return step

    def _park(self, step: Step, status: EventStatus, decision: str, reason: str | None) -> Step:
        """Pause a call: persisted as ``awaiting_approval`` so any worker can resume it."""
        try:
            self.recorder.park(step, decision, reason)
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
        note: str | None = None,
    ) -> CallEvent:
        """The event of a step: final ones carry how long the tool ran (0 if it never did).
        Every text and value in it has the call's secrets hidden (``call_secrets``)."""
        arguments = recorded_arguments(step)  # first: it knows the common call's secrets fast
        secrets = step.secrets
        if secrets is None:
            secrets = call_secrets(step)
        if secrets:
            # A tool that echoes its credentials, or an error quoting a secret argument, never
            # shows them to anyone.
            result, error, reason, note = hide_values((result, error, reason, note), secrets)
        duration_ms = None
        if status not in PAUSED_EVENT_STATUSES:
            started = step.started
            duration_ms = (
                0.0
                if started is None
                else int(((step.ended or time.perf_counter()) - started) * 1e6) / 1000
            )
        return CallEvent(
            status=status,
            key=step.key,
            call_id=step.call.call_id,
            name=step.call.name,
            tool=step.tool,
            action=step.action,
            arguments=arguments,
            result=result,
            error=None if error is None else clean_text(error),
            error_type=error_type,
            duration_ms=duration_ms,
            instance_id=step.call.instance_id,
            user_id=step.turn.user_id,
            owner_id=owner_of(step),
            reason=None if reason is None else clean_text(reason),
            note=note,
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
