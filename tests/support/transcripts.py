"""Terminal transcripts, as ``expediter demo`` prints them and the docs quote them: each
``$ command`` line with the lines printed under it."""

from __future__ import annotations

import re

__all__ = ["columns", "sections"]


def sections(transcript: str, *, until_blank: bool = True) -> dict[str, list[str]]:
    """Each ``$ `` line's command and the lines under it: up to a blank line (the demo, whose
    prose follows a blank line), or with ``until_blank=False`` up to the next ``$ `` line (a
    quoted transcript, whose output may hold blank lines; trailing ones are dropped)."""
    found: dict[str, list[str]] = {}
    command: str | None = None
    for line in transcript.splitlines():
        if line.startswith("$ "):
            command = line[2:]
            found[command] = []
        elif command is not None and (line.strip() or not until_blank):
            found[command].append(line)
        else:
            command = None
    for lines in found.values():
        while lines and not lines[-1].strip():
            lines.pop()
    return found


def columns(header: str) -> list[str]:
    """A table line's cells (columns are two or more spaces apart)."""
    return re.split(r"\s{2,}", header.strip())
