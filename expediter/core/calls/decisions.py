"""Decisions on a call: what the tool's ``preview_decision`` and the host's policies answered,
combined so that deny beats ask beats allow."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from expediter.hookspecs.tool import Decision

__all__ = ["ALLOW", "as_decision", "combine_decisions"]

#: The decision when nobody objects.
ALLOW = Decision()


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
    reason = "; ".join(reasons) or None
    if deny:
        return Decision.denied(reason)
    if ask:
        return Decision.ask(reason, forced=forced)
    return ALLOW


def as_decision(value: Any) -> Decision | None:
    """A hook's answer as a Decision: a Decision, None, or one of 'allow', 'ask', 'deny'."""
    if value is None or isinstance(value, Decision):
        return value
    if isinstance(value, str) and value in ("allow", "ask", "deny"):
        return {"allow": Decision.allow, "ask": Decision.ask, "deny": Decision.denied}[value]()
    raise TypeError(f"a decision must be a Decision, 'allow', 'ask' or 'deny', not {value!r}")
