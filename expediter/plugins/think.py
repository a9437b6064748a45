"""A scratchpad where the model writes down its reasoning before it acts."""

from __future__ import annotations

from typing import Annotated

import expediter


@expediter.tool
def think(thought: Annotated[str, "Your reasoning, step by step."]) -> str:
    """Write down your reasoning before you act; nothing outside this call changes.

    Use it to plan several tool calls, check a result against the request, or work
    through a rule before applying it. The thought is returned unchanged.

    Args:
        thought: The reasoning to record.
    """
    return thought
