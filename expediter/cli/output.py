"""Printing for the command line: JSON documents, JSON lines and plain tables."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click

from expediter.core.records.text import truncate

__all__ = ["echo_json", "echo_table", "shorten", "warn"]


def echo_json(data: Any) -> None:
    """Print one JSON document."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def shorten(text: str, width: int) -> str:
    """Cut text to a width with an ellipsis."""
    return truncate(" ".join(text.split()), width, "…")


def event_text(event: Any, width: int) -> str:
    """One line for an event's table row: its error or reason, else its result as JSON."""
    text = event.error or event.reason
    return shorten(text or ("" if event.result is None else json.dumps(event.result)), width)


def echo_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print rows under headers, columns padded to their widest cell."""
    cells = [[str(cell) if cell is not None else "" for cell in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in cells:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    for row in [list(headers), *cells]:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def warn(message: str) -> None:
    """Print a warning on standard error."""
    click.echo(f"warning: {message}", err=True)


def stdout_is_terminal() -> bool:
    """Whether standard output is a terminal."""
    return sys.stdout.isatty()
