"""Recording a call in the ledger: its proposal, a refusal or denial that never ran, a pause,
its result, and a result that came late. A ledger that cannot take a write that is not the
proposal is logged, never raised: the call's event still goes out. Every text and value
written has the call's secrets hidden (``steps.call_secrets``), whoever wrote it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, final

from expediter.core.calls.steps import (
    Step,
    Withheld,
    call_secrets,
    delegated_from,
    hide_secrets,
    owner_of,
    recorded_arguments,
    resume_request,
)
from expediter.core.records.redaction import log_hidden
from expediter.core.records.text import echo

if TYPE_CHECKING:
    from expediter.core.calls.results import Outcome
    from expediter.core.ledger import Attempt, Ledger

__all__ = ["Recorder"]

logger = logging.getLogger(__name__)


@final
class Recorder:
    """Writes a call's rows (nothing when the host records no calls)."""

    def __init__(self, ledger: Callable[[], Ledger] | None, withheld: Withheld) -> None:
        #: Opens (once) and returns the ledger; None when calls are not recorded.
        self.ledger = ledger
        self.withheld = withheld

    def _ledger(self) -> Ledger:
        assert self.ledger is not None
        return self.ledger()

    def propose(
        self, step: Step, *, lease: bool, reason: str | None = None, paused: bool = False
    ) -> Attempt:
        """The ledger's ``proposed`` row (LedgerError when it cannot be recorded: the call must
        not run); a paused call keeps what another worker needs to resume it, its secret
        arguments only in this process (``withheld``)."""
        call = step.call
        request = None
        delegation = delegated_from(step)
        if delegation is not None:
            # The audit trail of owner authority: the row's delegated_from, and this line.
            logger.info(
                "call %s: %s uses tool instance %s of %s",
                echo(step.key),
                echo(step.turn.user_id),
                echo(call.instance_id),
                echo(delegation),
                extra={"key": step.key, "instance_id": call.instance_id, "owner_id": delegation},
            )
        if paused:
            request, withheld = resume_request(step, reason)
            if withheld:
                self.withheld.put(step.key, withheld)
        return self._ledger().begin(
            key=step.key,
            call_id=call.call_id,
            name=call.name,
            run_id=step.run_id,
            message_id=step.message_id,
            user_id=step.turn.user_id,
            owner_id=owner_of(step),
            instance_id=call.instance_id,
            tool=call.tool,
            action=call.action,
            arguments=recorded_arguments(step) if isinstance(step.arguments, Mapping) else None,
            request=request,
            lease=lease,
            decision=step.decision,
            reason=hide_secrets(step, step.reason),
            delegated_from=delegation,
        )

    def outright(self, step: Step, status: str, decision: str | None, reason: str) -> None:
        """A call that never runs: propose it, then move it to ``failed`` or ``denied``."""
        if self.ledger is None:
            return
        reason = hide_secrets(step, reason)
        try:
            attempt = self.propose(step, lease=False)
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
            self._not_recorded(step, exc)

    def park(self, step: Step, decision: str, reason: str | None) -> None:
        """Pause a call: ``awaiting_approval``, so any worker can resume it (LedgerError when
        it cannot be recorded)."""
        if self.ledger is None:
            return
        reason = hide_secrets(step, reason)
        attempt = self.propose(step, lease=False, reason=reason, paused=True)
        if attempt.created is not False:
            self._ledger().decide(
                step.key,
                step.turn.user_id,
                expected="proposed",
                status="awaiting_approval",
                decision=decision,
                reason=reason,
            )

    def finish(
        self, step: Step, ok: bool, result: Any, error: str | None, duration_ms: float | None
    ) -> None:
        """How the call's attempt ended: ``executed`` or ``failed``."""
        assert step.attempt is not None
        if call_secrets(step):
            result, error = hide_secrets(step, (result, error))
        try:
            self._ledger().finish(
                step.attempt, ok=ok, result=result, error=error, duration_ms=duration_ms
            )
        except Exception as problem:
            self._not_recorded(step, problem)

    @staticmethod
    def _not_recorded(step: Step, problem: Exception) -> None:
        """Log a write the ledger refused (its message may quote what was written)."""
        log_hidden(
            logger,
            logging.ERROR,
            "the ledger could not record %s: %s",
            echo(step.key),
            problem,
            secrets=call_secrets(step),
        )

    def late(self, step: Step, outcome: Outcome) -> None:
        """A result that came after the call was reported failed: recorded on its row, marked
        late."""
        attempt = step.attempt
        if attempt is None or self.ledger is None:
            return
        if not outcome.ok:  # the row says failed already
            logger.warning("call %s failed after it was reported failed", echo(step.key))
            return
        attempt.status = "failed"
        took = None if step.started is None else (time.perf_counter() - step.started) * 1000
        self.finish(
            step,
            outcome.ok,
            outcome.value,
            outcome.detail or outcome.error,
            took and round(took, 3),
        )
        logger.warning("call %s finished after it was reported failed", echo(step.key))
