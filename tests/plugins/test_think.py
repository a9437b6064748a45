"""The built-in think tool."""

from __future__ import annotations

from expediter.plugins import think
from expediter.testing import ToolContract


class TestThinkContract(ToolContract):
    tool = think
    examples = {"think": {"thought": "First list the zones, then convert."}}
    require_examples = True


def test_think_returns_the_thought_unchanged(call_tool) -> None:
    event = call_tool(think, "think", {"thought": "  step 1\nstep 2  "})
    assert (event.status, event.result) == ("completed", "  step 1\nstep 2  ")


def test_think_requires_a_thought(call_tool) -> None:
    event = call_tool(think, "think", {})
    assert event.error_type == "ArgumentError"
    assert "'thought'" in (event.error or "")
