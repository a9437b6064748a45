"""Read a docstring's summary and per-argument descriptions, in Google, Sphinx/reST, NumPy (or
epydoc) style, with ``docstring-parser``."""

from __future__ import annotations

import functools
import inspect
import re
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from docstring_parser import Docstring as Parsed

__all__ = ["Docstring", "parse_docstring"]

#: Longer docstrings are read up to here (the parsers' patterns are not linear on every input).
_LIMIT = 32_000
#: Meta entries that describe an argument (``:param x:``, ``Args:``, NumPy's ``Other
#: Parameters``); ``attribute`` and the rest are not arguments.
_ARGUMENT_KEYS = frozenset(
    {"param", "parameter", "arg", "argument", "key", "keyword", "other_param"}
)
#: Google style's section names (any case): the argument sections, then the others, which
#: end the summary and an argument section but describe no argument.
_GOOGLE_ARGUMENTS = (
    "Args",
    "Arguments",
    "Parameters",
    "Params",
    "Keyword Args",
    "Keyword Arguments",
)
_GOOGLE_OTHERS = (
    "Attributes",
    "Example",
    "Examples",
    "Exceptions",
    "Methods",
    "Note",
    "Notes",
    "Other Parameters",
    "Raises",
    "References",
    "Return",
    "Returns",
    "See Also",
    "Todo",
    "Warning",
    "Warnings",
    "Yield",
    "Yields",
)
_GOOGLE_TITLE = re.compile(
    r"^(?:" + "|".join(_GOOGLE_ARGUMENTS + _GOOGLE_OTHERS) + r"):\s*$", re.IGNORECASE
)


@attrs.frozen
class Docstring:
    """The parts of a docstring that become schema descriptions."""

    summary: str = ""
    arguments: dict[str, str] = attrs.field(factory=dict)


def _join(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _first_paragraph(text: str) -> str:
    return _join(text.strip().split("\n\n", 1)[0]) if text.strip() else ""


def _clean(doc: str) -> str:
    """``inspect.cleandoc``, except that a docstring opening with a Google section header
    (``\"\"\"Args:``) keeps its entries indented under it (cleandoc dedents them to the
    header's column when nothing else is at that column)."""
    text = inspect.cleandoc(doc[:_LIMIT])
    first, _, rest = text.partition("\n")
    if _GOOGLE_TITLE.match(first) and rest:
        lines = rest.splitlines()
        if not any(line[:1].strip() and _GOOGLE_TITLE.match(line) for line in lines):
            text = (
                first + "\n" + "\n".join("    " + line if line.strip() else line for line in lines)
            )
    return text


def parse_docstring(doc: str | None) -> Docstring:
    """Return the summary (first paragraph) and the per-argument descriptions of a docstring
    in any of the common styles."""
    if not doc or not doc.strip():
        return Docstring()
    text = _clean(doc)
    if ":" not in text and "@" not in text and "---" not in text:
        # No style can have a section here: the summary is all there is (and the parser, a
        # 50 ms import, is not needed; Toolbox classes read their docstrings at definition).
        return Docstring(summary=_first_paragraph(text))
    parsed = _best_parse("\n" + text)  # the leading newline keeps cleandoc from re-indenting
    if parsed is None:
        return Docstring(summary=_first_paragraph(text))
    return Docstring(summary=_summary(parsed), arguments=_arguments(parsed))


def _summary(parsed: Parsed) -> str:
    short = parsed.short_description or ""
    long = parsed.long_description or ""
    if parsed.blank_after_short_description or not long:
        return _first_paragraph(short)
    return _first_paragraph(short + "\n" + long)


def _arguments(parsed: Parsed) -> dict[str, str]:
    arguments: dict[str, str] = {}
    for param in parsed.params:
        if not param.args or param.args[0] not in _ARGUMENT_KEYS:
            continue
        description = _join(param.description or "")
        # NumPy documents several at once (``x, y : int``); ``*args`` is named ``args``.
        for name in (part.strip().lstrip("*") for part in param.arg_name.split(",")):
            if name.isidentifier():
                arguments[name] = description
    return arguments


def _best_parse(text: str) -> Parsed | None:
    """The parse, among the styles, that finds the most arguments (then the most sections;
    Google first on a tie)."""
    from docstring_parser import epydoc, numpydoc, rest

    best: Parsed | None = None
    best_score = (-1, -1)
    for parse, marker in (
        (_google().parse, ""),
        (rest.parse, ":"),
        (numpydoc.parse, ""),
        (epydoc.parse, "@"),
    ):
        try:
            parsed = parse(text)
        except Exception:  # a style that does not fit this docstring
            if not marker:
                continue
            try:
                parsed = parse(_without_malformed_fields(text, marker, parse))
            except Exception:
                continue
        found = sum(
            1 for param in parsed.params if param.args[:1] and param.args[0] in _ARGUMENT_KEYS
        )
        score = (found, len(parsed.meta))
        if score > best_score:
            best, best_score = parsed, score
    return best


def _without_malformed_fields(text: str, marker: str, parse: Any) -> str:
    """``text`` with each field its parser refuses (``:param:`` without a name, a field cut
    off by the length limit) renamed to a field that describes no argument: one bad field
    makes these parsers drop every other one."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if not line.startswith(marker):
            continue
        try:
            # A field line without its closing colon would take one from a later line.
            well_formed = ":" in line[1:] and parse(line) is not None
        except Exception:
            well_formed = False
        if not well_formed:
            lines[index] = f"{marker}malformed: {line[1:]}"
    return "\n".join(lines)


@functools.cache
def _google() -> Any:
    """A Google-style parser that knows every section name, in any case (built once)."""
    from docstring_parser.google import GoogleParser, Section, SectionType

    sections: list[Any] = []
    for titles, key in ((_GOOGLE_ARGUMENTS, "param"), (_GOOGLE_OTHERS, "other")):
        kind = SectionType.MULTIPLE if key == "param" else SectionType.SINGULAR
        for title in titles:
            spellings = (title, title.lower(), title.upper(), title.capitalize())
            sections.extend(Section(spelling, key, kind) for spelling in dict.fromkeys(spellings))
    return GoogleParser(sections)
