"""Read a Google-style docstring: its summary and the per-argument descriptions under ``Args:``."""

from __future__ import annotations

import inspect
import re

import attrs

__all__ = ["Docstring", "parse_docstring"]

_ARG_SECTIONS = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
)
# Only Google style's own section names start a section; "Search by one of:" is prose.
_SECTIONS = _ARG_SECTIONS | {
    "attributes",
    "example",
    "examples",
    "note",
    "notes",
    "other parameters",
    "raises",
    "exceptions",
    "references",
    "return",
    "returns",
    "see also",
    "todo",
    "warning",
    "warnings",
    "yield",
    "yields",
    "methods",
}
_SECTION = re.compile(r"^(?P<name>[A-Za-z][A-Za-z ]*):\s*$")


def _section(line: str) -> str | None:
    match = _SECTION.match(line)
    if match is None:
        return None
    name = match.group("name").strip().lower()
    return name if name in _SECTIONS else None


# "name: text", "name (type): text", "*args: text", "**kwargs (dict): text"
_ARG_LINE = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)$")


@attrs.frozen
class Docstring:
    """The parts of a docstring that become schema descriptions."""

    summary: str = ""
    arguments: dict[str, str] = attrs.field(factory=dict)


def _join(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines if line.strip())


def parse_docstring(doc: str | None) -> Docstring:
    """Return the summary (first paragraph) and the ``Args:`` descriptions of a docstring."""
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()

    summary: list[str] = []
    index = 0
    while index < len(lines) and lines[index].strip() and _section(lines[index]) is None:
        summary.append(lines[index])
        index += 1

    arguments: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    base_indent = 0
    for line in lines[index:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        header = _section(line) if indent == 0 else None
        if header is not None:
            section = header
            current = None
            base_indent = 0
            continue
        if section not in _ARG_SECTIONS:
            continue
        match = _ARG_LINE.match(line.strip())
        if match and (current is None or indent <= base_indent):
            current = match.group("name")
            base_indent = indent
            arguments[current] = match.group("text").strip()
        elif current is not None:
            arguments[current] = _join([arguments[current], line])
    return Docstring(summary=_join(summary), arguments=arguments)
