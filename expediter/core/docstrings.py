"""Read a Google-style docstring: its summary and the per-argument descriptions under ``Args:``."""

from __future__ import annotations

import inspect
import re

import attrs

__all__ = ["Docstring", "parse_docstring"]

_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG_SECTIONS = frozenset({"args", "arguments", "parameters", "params", "keyword args"})
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
    while index < len(lines) and lines[index].strip() and not _SECTION.match(lines[index]):
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
        header = _SECTION.match(line)
        if header and indent == 0:
            section = header.group(1).strip().lower()
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
