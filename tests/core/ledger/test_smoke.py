"""The ledger records a call on both databases (the detailed tests live beside this file)."""

from __future__ import annotations

from expediter.core.ledger import Ledger


def test_a_call_goes_from_proposed_to_executed(ledger: Ledger) -> None:
    attempt = ledger.begin(key="run:1", call_id="1", user_id="ann", tool="t", action="a")
    assert attempt.created is True
    assert ledger.get("run:1").status == "proposed"
    assert ledger.finish(attempt, ok=True, result={"x": 1}, duration_ms=2.0) is True
    row = ledger.get("run:1")
    assert (row.status, row.result, row.user_id) == ("executed", {"x": 1}, "ann")
